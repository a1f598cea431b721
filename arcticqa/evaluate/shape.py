"""The one shape every evaluation protocol has, as inspect_ai shapes a Task.

Two layers:

- :class:`EvalProtocol` is what the CLI and the flows see: ``live`` (the planned calls of a run and
  the store row of each reply), ``score_external`` (an externally produced run), ``report_from_store``
  and ``report_from_published``, plus what a protocol decides for itself: its options
  (:attr:`~EvalProtocol.options_model`, a :class:`ProtocolOptions` model the CLI fills from
  ``-P KEY=VALUE``, as inspect_ai's ``-T`` fills a task's arguments), what ``--variants`` means
  (``resolve_variants``), the model-judged roles a run asks (``judge_roles``), the report after a run
  (``report_run``), a prompt-variants report (``report_variants_from_store``) and the inspect_ai task
  whose logs it scores (``inspect_task``). The CLI looks a protocol up in the registry
  (:mod:`arcticqa.evaluate.protocols`) and calls these, never a per-protocol branch or flag.
- :class:`ProtocolBase` implements that surface once, from hooks every bundled protocol supplies from
  its own subpackage, whose modules carry the same names (``items``, ``prompt``, ``parse``, ``records``,
  ``metrics``, ``report``): load items, plan the calls, turn a reply into a record and a store row, read
  a record back from a row or an external line, build, write and summarise the report. So there is one
  live path (through :func:`arcticqa.evaluate.runner.run_protocol`), one resume check, one reader of
  external responses (:func:`arcticqa.evaluate.external.external_lines`) and one reader of the store
  (:func:`arcticqa.evaluate.recorded.load_protocol_rows`).
"""

from __future__ import annotations

import types
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel, EvaluateSettings, Settings, did_you_mean
from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.external import CellGuard, ExternalLine, external_lines
from arcticqa.evaluate.recorded import load_protocol_rows
from arcticqa.evaluate.runner import LiveProtocol, ProtocolCall
from arcticqa.llm.chat import ChatOutcome
from arcticqa.llm.types import RoleClient

__all__ = ["EvalProtocol", "ProtocolBase", "ProtocolOptions", "OptionDoc", "ReportOptions", "RunOptions",
           "ReportSummary", "ScoredRecord", "DEFAULT_EVAL_SET", "COMMANDS"]

#: ``[evaluate] eval_set``'s default; external runs are scored against it
DEFAULT_EVAL_SET = "arcticqa"


#: the commands that take a protocol's options (``-P KEY=VALUE``)
COMMANDS: tuple[str, ...] = ("run", "report", "score")


class ProtocolOptions(BaseModel):
    """A protocol's own options, set with ``evaluate run|report|score -P KEY=VALUE`` as inspect_ai's
    ``-T`` sets a task's arguments. Each protocol subclasses it (:attr:`EvalProtocol.options_model`)
    with typed fields: a field's default is the protocol's default and its description is its help
    (``arcticqa evaluate protocols`` and the table in docs/evaluation.md are made from them).
    :attr:`RUN_ONLY` names the fields only a live run reads; the others concern the report, which
    ``evaluate run --out`` writes too."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: fields only ``evaluate run`` reads (``report`` and ``score`` refuse them)
    RUN_ONLY: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def of(cls, given: ProtocolOptions | None) -> Self:
        """``given`` as these options (None: every default)."""
        if given is None:
            return cls()
        if not isinstance(given, cls):
            raise ConfigError(f"{type(given).__name__} given where {cls.__name__} are expected")
        return given

    @classmethod
    def commands_of(cls, key: str) -> tuple[str, ...]:
        """The commands whose runs read option ``key``."""
        return ("run",) if key in cls.RUN_ONLY else COMMANDS

    @classmethod
    def from_pairs(cls, protocol: str, pairs: Mapping[str, str], *, command: str) -> Self:
        """Validate ``-P KEY=VALUE`` pairs given to ``evaluate <command> --protocol <protocol>``: an unknown
        key, a key the command does not read or a bad value is a :class:`ConfigError` (exit 2) naming
        the protocol, the key and the protocol's options."""
        known = list(cls.model_fields)
        allowed = f"options of {protocol}: {', '.join(known)}" if known else f"{protocol} has no options"
        for key in pairs:
            if key not in cls.model_fields:
                raise ConfigError(f"-P {key}: --protocol {protocol} has no option {key!r}"
                                  f"{did_you_mean(key, known)} ({allowed})")
            if command not in cls.commands_of(key):
                raise ConfigError(f"-P {key}: an option of --protocol {protocol} that only "
                                  f"{' and '.join(f'evaluate {c}' for c in cls.commands_of(key))} reads ({allowed})")
        try:
            return cls.model_validate(dict(pairs))
        except ValidationError as exc:
            first = exc.errors()[0]
            key = str(first["loc"][0]) if first["loc"] else "?"
            message = first["msg"].removeprefix("Value error, ")
            raise ConfigError(f"-P {key}={pairs.get(key, '')}: --protocol {protocol}: {message} ({allowed})") from None

    @classmethod
    def documented(cls) -> list[OptionDoc]:
        """Every option as the docs and ``evaluate protocols`` show it."""
        return [OptionDoc(key=key, value=_value_kind(spec.annotation), default=_shown(spec.default),
                          commands=cls.commands_of(key), help=spec.description or "")
                for key, spec in cls.model_fields.items()]


@dataclass(frozen=True)
class OptionDoc:
    """One protocol option as documented: its key, the kind of value, its default, the commands
    that read it and its help."""

    key: str
    value: str
    default: str
    commands: tuple[str, ...]
    help: str


def _value_kind(annotation: Any) -> str:
    if annotation is bool:
        return "true/false"
    if annotation is int:
        return "integer"
    if annotation is float:
        return "number"
    if annotation is str:
        return "text"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):  # an optional value: its default says what none means
        return " or ".join(_value_kind(a) for a in args if a is not type(None))
    if origin is tuple:
        return f"{_value_kind(args[0])}s separated by commas"
    return str(annotation)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class ReportOptions:
    """Report options: the figure, and the protocol's own options (None: its defaults)."""

    figure: bool = True
    protocol_options: ProtocolOptions | None = None


@dataclass(frozen=True)
class RunOptions:
    """What a live run plans from: the items file, prompt variants (or prompt file), trials and the
    protocol's own options."""

    #: the items file; None when the items are handed to :meth:`EvalProtocol.live` in memory
    items: Path | None = None
    trials: int = 1
    eval_set: str = DEFAULT_EVAL_SET
    #: prompt variants or prompt files; empty means the protocol's default
    variants: tuple[str, ...] = ()
    #: ArcticAbstain's prompt file ([evaluate] prompt); None means the bundled one
    prompt: Path | None = None
    #: the protocol's own options (None: its defaults)
    protocol_options: ProtocolOptions | None = None
    #: the role client that answers the roles :meth:`EvalProtocol.judge_roles` named (the open
    #: protocol's verifier); None: they are not asked
    roles: RoleClient | None = None


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
    #: the protocol's own options (``-P KEY=VALUE``)
    options_model: type[ProtocolOptions] = ProtocolOptions
    #: what ``evaluate run --variants`` takes for this protocol (``evaluate protocols`` shows it)
    variants_help: str = "prompt variant names or prompt files, separated by commas"
    #: the inspect_ai task whose logs ``evaluate score --from-inspect-log`` scores as this
    #: protocol's responses (None: the protocol has none)
    inspect_task: str | None = None

    def parse_options(self, pairs: Mapping[str, str], *, command: str) -> ProtocolOptions:
        """The protocol's options from ``-P KEY=VALUE`` pairs (a named ConfigError otherwise)."""
        return self.options_model.from_pairs(self.name, pairs, command=command)

    def resolve_variants(self, value: str, settings: EvaluateSettings) -> tuple[str, ...]:
        """``--variants``: the prompt variants (or prompt files) it names, in order, each once."""
        named = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
        if not named:
            raise ConfigError(f"--variants: give prompt variants of --protocol {self.name} separated by commas")
        return named

    def judge_roles(self, options: ProtocolOptions | None, settings: Settings) -> dict[str, str]:
        """The gateway roles a live run asks besides the models under evaluation (role -> ``[models]``
        name), each checked (defined, served over HTTP, key set); none by default."""
        return {}

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

    def report_variants_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                                   models: Sequence[str] | None = None) -> ReportSummary:
        """Write the prompt-robustness report of every prompt variant recorded in the store
        (``evaluate report --variants``); only ArcticAbstain has one."""
        raise ConfigError(f"--variants: --protocol {self.name} has no prompt-variants report (its report from "
                          "--db has a row per prompt variant); `arcticqa evaluate protocols` lists the protocols")

    def report_run(self, engine: Engine, out: Path, options: ReportOptions, run: RunOptions, *, source: str,
                   models: Sequence[str]) -> ReportSummary:
        """The report ``evaluate run --out`` writes after ``run``: the store's report of its models,
        in the run's order."""
        return self.report_from_store(engine, out, options, source=source, models=models, in_given_order=True)


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
