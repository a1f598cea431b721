"""The registry of evaluation protocols: ArcticAbstain, Abstain-QA and Know2Guess.

Every protocol is one :class:`~arcticqa.evaluate.protocols.shape.EvalProtocol` object, in its own
module of this package (the shape is described in :mod:`arcticqa.evaluate.protocols.shape`).
:func:`get_protocol` finds one by name; :func:`register_protocol` adds another.
"""

from __future__ import annotations

from arcticqa.errors import ConfigError
from arcticqa.evaluate.protocols.abstainqa import ABSTAINQA
from arcticqa.evaluate.protocols.arcticabstain import ARCTICABSTAIN, score_arcticabstain
from arcticqa.evaluate.protocols.know2guess import KNOW2GUESS
from arcticqa.evaluate.protocols.shape import EvalProtocol, ReportOptions, ReportSummary, RunOptions

__all__ = ["EvalProtocol", "ReportOptions", "RunOptions", "ReportSummary", "PROTOCOLS", "register_protocol",
           "get_protocol", "score_arcticabstain"]

PROTOCOLS: dict[str, EvalProtocol] = {}


def register_protocol(protocol: EvalProtocol) -> EvalProtocol:
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str) -> EvalProtocol:
    """The registered protocol ``name`` (a :class:`ConfigError` naming the known ones otherwise)."""
    protocol = PROTOCOLS.get(name)
    if protocol is None:
        raise ConfigError(f"unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}")
    return protocol


for _protocol in (ARCTICABSTAIN, ABSTAINQA, KNOW2GUESS):
    register_protocol(_protocol)
