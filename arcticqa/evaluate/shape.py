"""The one shape every evaluation protocol has, as inspect_ai shapes a Task.

Two layers:

- :class:`EvalProtocol` is what the CLI and the flows see: ``live`` (the planned calls of a run and
  the store row of each reply), ``score_external`` (an externally produced run), ``report_from_store``
  and ``report_from_published``. They look a protocol up in the registry
  (:mod:`arcticqa.evaluate.protocols`) and call these methods, never a per-protocol branch.
- :class:`ProtocolBase` implements that surface once, from hooks every bundled protocol supplies from
  its own subpackage, whose modules carry the same names (``items``, ``prompt``, ``parse``, ``records``,
  ``metrics``, ``report``): load items, plan the calls, turn a reply into a record and a store row, read
  a record back from a row or an external line, build, write and summarise the report. So there is one
  live path (through :func:`arcticqa.evaluate.runner.run_protocol`), one resume check, one reader of
  external responses (:func:`arcticqa.evaluate.external.external_lines`) and one reader of the store
  (:func:`arcticqa.evaluate.recorded.load_protocol_rows`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel
from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.external import CellGuard, ExternalLine, external_lines
from arcticqa.evaluate.recorded import load_protocol_rows
from arcticqa.evaluate.runner import LiveProtocol, ProtocolCall
from arcticqa.llm.chat import ChatOutcome
from arcticqa.llm.types import RoleClient

__all__ = ["EvalProtocol", "ProtocolBase", "ReportOptions", "RunOptions", "ReportSummary", "ScoredRecord",
           "DEFAULT_EVAL_SET"]

#: ``[evaluate] eval_set``'s default; external runs are scored against it
DEFAULT_EVAL_SET = "arcticqa"


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

    #: the items file; None when the items are handed to :meth:`EvalProtocol.live` in memory
    items: Path | None = None
    trials: int = 1
    eval_set: str = DEFAULT_EVAL_SET
    #: prompt variants or prompt files; empty means the protocol's default
    variants: tuple[str, ...] = ()
    #: ArcticAbstain's prompt file ([evaluate] prompt); None means the bundled one
    prompt: Path | None = None
    #: Abstain-QA: also ask for a confidence 1-5
    verbal_confidence: bool = False
    #: the open protocol: the role client that asks the verifier role about undecided replies
    #: (None: they stay undecided); the other protocols ignore it
    verifier: RoleClient | None = None


@dataclass(frozen=True)
class ReportSummary:
    """What the console shows of a written report: summary lines, then warnings, then where."""

    out_dir: Path
    lines: list[str]
    warnings: list[str] = field(default_factory=list)


class EvalProtocol(ABC):
    """One evaluation protocol as the CLI and the flows see it: see the module docstring."""

    name: str
    summary: str

    @abstractmethod
    def live(self, options: RunOptions, items: Sequence[Any] | None = None) -> LiveProtocol:
        """The planned calls of a live run and the store row of each finished call (``items`` in
        memory instead of ``options.items``, when given)."""

    @abstractmethod
    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions, *,
                       reader: str = "jsonl") -> ReportSummary:
        """Score a file of externally produced raw responses (read by the registered ``reader``,
        :mod:`arcticqa.evaluate.external`) and write the report folder."""

    @abstractmethod
    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        """Write the report of the responses recorded in the store (of ``models`` only, when given;
        in that order when ``in_given_order``, else in recording order)."""

    def report_from_published(self, responses: Path, out: Path, options: ReportOptions, *,
                              models: Sequence[str] | None = None) -> ReportSummary:
        """Write the report of a published responses file (only ArcticAbstain publishes one)."""
        raise ConfigError(f"--protocol {self.name}: give --db; re-score response files with `evaluate score`")


class ScoredRecord(Protocol):
    """What the shared machinery needs of a protocol's record: its cell in a run."""

    @property
    def cell(self) -> tuple[str, str, str, int]: ...  # (model, question, variant or condition, trial)


ItemT = TypeVar("ItemT")
CallT = TypeVar("CallT", bound=ProtocolCall)
RecordT = TypeVar("RecordT", bound=ScoredRecord)
ReportT = TypeVar("ReportT")


class ProtocolBase(EvalProtocol, Generic[ItemT, CallT, RecordT, ReportT]):
    """A protocol built from hooks (items, plan, parse → record → row, metrics, report, summary);
    the run, scoring and reporting paths are written once here."""

    #: the fields of an external line that may name its question (the first one present counts)
    question_id_fields: tuple[str, ...] = ("question_id",)
    #: the ``eval_response`` columns :meth:`record_from_row` reads
    row_columns: tuple[str, ...] = ("details",)

    # -- hooks ---------------------------------------------------------------------------------

    @abstractmethod
    def load_items(self, path: Path, *, eval_set: str) -> Sequence[ItemT]:
        """The items of ``path`` (a named InputError for the first bad line)."""

    @abstractmethod
    def item_id(self, item: ItemT) -> str:
        """The id external lines and store rows name the item by."""

    @abstractmethod
    def plan(self, items: Sequence[ItemT], options: RunOptions) -> Callable[[EvalModel], Sequence[CallT]]:
        """The calls of each model: items × conditions or prompt variants × trials."""

    @abstractmethod
    def store_row(self, call: CallT, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
        """Parse one reply into a record and return its ``eval_response`` columns (all but
        ``run_id`` and ``model_position``, which the runner knows)."""

    @abstractmethod
    def record_from_row(self, row: Mapping[str, Any]) -> RecordT:
        """The record of one store row (only :attr:`row_columns` are read)."""

    @abstractmethod
    def record_from_external(self, item: ItemT, line: ExternalLine) -> RecordT:
        """The record of one external line (its shared fields already checked)."""

    @abstractmethod
    def build_report(self, records: Sequence[RecordT], options: ReportOptions, *, source: str,
                     models: Sequence[str] | None = None) -> ReportT:
        """The metrics of ``records`` (models in the order of ``models`` when given)."""

    @abstractmethod
    def write_report(self, report: ReportT, out: Path, options: ReportOptions) -> Path:
        """Write the report folder (atomically); returns it."""

    @abstractmethod
    def report_summary(self, report: ReportT, out_dir: Path) -> ReportSummary:
        """The console lines (and warnings) of a written report."""

    # -- the shared paths ----------------------------------------------------------------------

    def live(self, options: RunOptions, items: Sequence[Any] | None = None) -> LiveProtocol:
        if items is None:
            if options.items is None:
                raise ConfigError("give --items or set [evaluate] items")
            items = self.load_items(options.items, eval_set=options.eval_set)
        planner = self.plan(items, options)

        def row(call: CallT, model: EvalModel, outcome: ChatOutcome, run_id: str, position: int) -> dict[str, Any]:
            return {"run_id": run_id, "model_position": position, **self.store_row(call, model, outcome)}

        return LiveProtocol(name=self.name, plan=planner, row=row)

    def read_external(self, items: Path, responses: Path, *, reader: str = "jsonl") -> list[RecordT]:
        """The records of an external responses file, through the one reader: every line's shared
        fields are checked there, each cell may be answered once per file."""
        by_id = {self.item_id(item): item for item in self.load_items(items, eval_set=DEFAULT_EVAL_SET)}
        cells = CellGuard(responses)
        records: list[RecordT] = []
        for line in external_lines(responses, by_id, id_keys=self.question_id_fields, reader=reader):
            record = self.record_from_external(by_id[line.question_id], line)
            cells.check(record.cell, line)
            records.append(record)
        if not records:
            raise InputError("no responses in file", path=str(responses))
        return records

    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions, *,
                       reader: str = "jsonl") -> ReportSummary:
        report = self.build_report(self.read_external(items, responses, reader=reader), options,
                                   source=str(responses))
        return self.report_summary(report, self.write_report(report, out, options))

    def records_from_store(self, engine: Engine, *, models: Sequence[str] | None = None,
                           run_id: str | None = None) -> list[RecordT]:
        """The records of this protocol's store rows (of ``models`` / ``run_id`` only, when given),
        in model-position order, then recording order."""
        rows = load_protocol_rows(engine, self.name, self.row_columns, models=models, run_id=run_id)
        return [self.record_from_row(r) for r in rows]

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        records = self.records_from_store(engine, models=models)
        if not records:
            of = f" of model(s) {', '.join(models)}" if models else ""
            raise ConfigError(f"{source}: the store holds no {self.name} responses{of}")
        report = self.build_report(records, options, source=source, models=models if in_given_order else None)
        return self.report_summary(report, self.write_report(report, out, options))
