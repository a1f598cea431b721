"""The registry of evaluation protocols: ArcticAbstain, Abstain-QA, Know2Guess and the open-ended one.

Every protocol is one :class:`~arcticqa.evaluate.shape.EvalProtocol` object in its own subpackage
of :mod:`arcticqa.evaluate` (``arcticabstain``, ``abstainqa``, ``know2guess``, ``open``), whose modules carry
the same names (the shape is described in :mod:`arcticqa.evaluate.shape`). :func:`get_protocol`
finds one by name; :func:`register_protocol` adds another. :func:`options_table` is every protocol's
``-P`` options as the Markdown table docs/evaluation.md holds (a test keeps the two equal).
"""

from __future__ import annotations

from collections.abc import Iterable

from arcticqa.config import did_you_mean
from arcticqa.errors import ConfigError
from arcticqa.evaluate.abstainqa import ABSTAINQA
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.know2guess import KNOW2GUESS
from arcticqa.evaluate.open import OPEN
from arcticqa.evaluate.shape import (
    EvalProtocol,
    ProtocolBase,
    ProtocolOptions,
    ReportOptions,
    ReportSummary,
    RunOptions,
)

__all__ = ["EvalProtocol", "ProtocolBase", "ProtocolOptions", "ReportOptions", "RunOptions", "ReportSummary",
           "PROTOCOLS", "BUNDLED", "ARCTICABSTAIN", "ABSTAINQA", "KNOW2GUESS", "OPEN", "register_protocol",
           "get_protocol", "options_table"]

PROTOCOLS: dict[str, EvalProtocol] = {}

#: the protocols that ship with arcticqa, each a subpackage of arcticqa.evaluate of the same name
BUNDLED: tuple[EvalProtocol, ...] = (ARCTICABSTAIN, ABSTAINQA, KNOW2GUESS, OPEN)


def register_protocol(protocol: EvalProtocol) -> EvalProtocol:
    PROTOCOLS[protocol.name] = protocol
    return protocol


def get_protocol(name: str) -> EvalProtocol:
    """The registered protocol ``name`` (a :class:`ConfigError` naming the known ones otherwise)."""
    protocol = PROTOCOLS.get(name)
    if protocol is None:
        raise ConfigError(f"unknown protocol {name!r}{did_you_mean(name, PROTOCOLS)}; "
                          f"known: {', '.join(sorted(PROTOCOLS))}")
    return protocol


def options_table(protocols: Iterable[EvalProtocol] | None = None) -> str:
    """The Markdown table of every protocol's ``-P`` options (key, value, default, the commands that
    read it, what it does), from the options models; ``arcticqa evaluate protocols --markdown``."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = ["| protocol | `-P` option | value | default | read by | what it sets |",
            "| --- | --- | --- | --- | --- | --- |"]
    for protocol in (PROTOCOLS.values() if protocols is None else protocols):
        for option in protocol.options_model.documented():
            read_by = ", ".join(f"`{command}`" for command in option.commands)
            rows.append(f"| `{protocol.name}` | `{option.key}` | {option.value} | `{option.default}` | {read_by} | "
                        f"{cell(option.help)} |")
    return "\n".join(rows) + "\n"


for _protocol in BUNDLED:
    register_protocol(_protocol)
