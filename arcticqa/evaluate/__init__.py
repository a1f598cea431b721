"""The bundled abstention evaluator: four protocols of one shape, one runner, one store table.

- :mod:`arcticqa.evaluate.protocols` — the registry (:func:`get_protocol`, :func:`register_protocol`)
  of the protocol objects :data:`ARCTICABSTAIN`, :data:`ABSTAINQA`, :data:`KNOW2GUESS` and :data:`OPEN`,
  each a subpackage (``arcticabstain``, ``abstainqa``, ``know2guess``, ``open``) with the same modules:
  ``items``, ``prompt``, ``parse``, ``records``, ``metrics``, ``report`` (:mod:`arcticqa.evaluate.shape`);
  the subpackages import none of each other (an import-linter contract);
- shared machinery: :mod:`~arcticqa.evaluate.runner` (:func:`run_protocol`, the one live runner and
  resume check), :mod:`~arcticqa.evaluate.external` (the one reader of external responses),
  :mod:`~arcticqa.evaluate.recorded` (the ``eval_response`` rows), :mod:`~arcticqa.evaluate.stats`
  (bootstrap, sign-flip permutation, Holm), :mod:`~arcticqa.evaluate.coverage` (coverage–risk, λ sweep),
  :mod:`~arcticqa.evaluate.reportio`;
- protocol-neutral pieces the protocols share: :mod:`~arcticqa.evaluate.releaseitems` (a release's
  ``items.jsonl``), :mod:`~arcticqa.evaluate.options` (option texts, strict and lenient label parsers)
  and :mod:`~arcticqa.evaluate.promptfile` (prompt files, prompt variants, the chat of a call);
- views across protocols and runs: :mod:`~arcticqa.evaluate.exposure`, :mod:`~arcticqa.evaluate.itemaudit`
  and :mod:`~arcticqa.evaluate.policies` (built-in reference policies for the demo).

See ``docs/evaluation.md``.
"""

from __future__ import annotations

from arcticqa.evaluate.protocols import (
    ABSTAINQA,
    ARCTICABSTAIN,
    KNOW2GUESS,
    OPEN,
    PROTOCOLS,
    EvalProtocol,
    ReportOptions,
    ReportSummary,
    RunOptions,
    get_protocol,
    register_protocol,
)
from arcticqa.evaluate.runner import RunResult, run_protocol

__all__ = [
    "ARCTICABSTAIN", "ABSTAINQA", "KNOW2GUESS", "OPEN", "PROTOCOLS", "EvalProtocol", "ReportOptions", "ReportSummary",
    "RunOptions", "get_protocol", "register_protocol", "RunResult", "run_protocol",
]
