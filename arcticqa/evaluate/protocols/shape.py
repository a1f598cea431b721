"""The one shape every evaluation protocol has, as inspect_ai shapes a Task.

A protocol is one object that knows its items loader and planned calls (:meth:`EvalProtocol.live`:
items, conditions or prompt variants, the prompt, and parse -> store row of each reply), and its
records, metrics, report and summary (:meth:`EvalProtocol.score_external` for an externally produced
run, :meth:`EvalProtocol.report_from_store` for a recorded one). The CLI and the flows hold no
per-protocol branches: they look a protocol up in the registry (:mod:`arcticqa.evaluate.protocols`)
and call these methods. The live calls all go through the one runner
(:func:`arcticqa.evaluate.runner.run_protocol`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from sqlalchemy.engine import Engine

from arcticqa.errors import ConfigError
from arcticqa.evaluate.records import load_protocol_details
from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["EvalProtocol", "DetailsProtocol", "ReportOptions", "RunOptions", "ReportSummary"]

_R = TypeVar("_R")


@dataclass(frozen=True)
class ReportOptions:
    """Report options; each protocol reads the ones that concern it."""

    figure: bool = True
    #: ArcticAbstain: bootstrap resamples, sign-flip permutation draws and their seed
    resamples: int = 10_000
    draws: int = 20_000
    seed: int = 7
    #: Abstain-QA verbal-confidence thresholds (an answer with confidence <= t becomes IDK/NOTA)
    thresholds: tuple[int, ...] = (0, 1, 2, 3, 4)
    #: Know2Guess cost-sensitive reliability: the score of a wrong answer is -wrong_penalty
    wrong_penalty: float = 1.0
    #: Know2Guess ECE bins
    bins: int = 10


@dataclass(frozen=True)
class RunOptions:
    """What a live run plans from: the items file, prompt variants (or prompt file) and trials."""

    items: Path
    trials: int
    eval_set: str
    #: prompt variants or prompt files; empty means the protocol's default
    variants: tuple[str, ...] = ()
    #: ArcticAbstain's prompt file ([evaluate] prompt); None means the bundled one
    prompt: Path | None = None
    #: Abstain-QA: also ask for a confidence 1-5
    verbal_confidence: bool = False


@dataclass(frozen=True)
class ReportSummary:
    """What the console shows of a written report: summary lines, then warnings, then where."""

    out_dir: Path
    lines: list[str]
    warnings: list[str] = field(default_factory=list)


class EvalProtocol(ABC):
    """One evaluation protocol: see the module docstring."""

    name: str
    summary: str

    @abstractmethod
    def live(self, options: RunOptions) -> LiveProtocol:
        """The planned calls of a live run and the store row of each finished call."""

    @abstractmethod
    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions) -> ReportSummary:
        """Score a JSONL of externally produced raw responses and write the report folder."""

    @abstractmethod
    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        """Write the report of the responses recorded in the store (of ``models`` only, when given;
        in that order when ``in_given_order``, else in recording order)."""

    def report_from_published(self, responses: Path, out: Path, options: ReportOptions, *,
                              models: Sequence[str] | None = None) -> ReportSummary:
        """Write the report of a published responses file (only ArcticAbstain publishes one)."""
        raise ConfigError(f"--protocol {self.name}: give --db; re-score response files with `evaluate score`")


class DetailsProtocol(EvalProtocol, Generic[_R]):
    """A protocol whose store rows carry their scored record in ``details`` (Abstain-QA, Know2Guess):
    external files and the store give the same records, and one report is written from them."""

    @abstractmethod
    def score_file(self, items: Path, responses: Path) -> Sequence[_R]:
        """The records of an external responses file."""

    @abstractmethod
    def record_from_details(self, details: dict[str, Any]) -> _R:
        """The record stored in one row's ``details``."""

    @abstractmethod
    def write_report(self, records: Sequence[_R], out: Path, options: ReportOptions, *,
                     source: str) -> ReportSummary:
        """Build the report of ``records`` and write its folder."""

    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions) -> ReportSummary:
        return self.write_report(self.score_file(items, responses), out, options, source=str(responses))

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        # Rows come in model-position order either way; ``in_given_order`` only matters to ArcticAbstain.
        details = load_protocol_details(engine, self.name, models=models)
        if not details:
            raise ConfigError(f"{source}: the store holds no {self.name} responses")
        return self.write_report([self.record_from_details(d) for d in details], out, options, source=source)
