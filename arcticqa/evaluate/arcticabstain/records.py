"""ArcticAbstain records: scored responses from any source — a live call, our store, published
ArcticQA v1 files, external runs.

Every report is computed from :class:`ResponseRecord` rows. Reading a published file
(``responses.csv`` or ``responses.jsonl``) re-derives each outcome from ``raw_response_text``
and the options the call showed, with the strict parser, and keeps the recorded outcome so
that disagreements can be reported (:func:`rederivation_disagreements`).

Response files are untrusted input: lines are size-capped before they are decoded, must be
strict UTF-8 JSON/CSV, may only carry known columns (:data:`RESPONSE_FIELDS`) with the right
types, and every problem is an :class:`~arcticqa.errors.InputError` naming file, line and field.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from arcticqa.config import EvalModel
from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, OUTCOMES, OptionKind, ShownOption, score_reply
from arcticqa.evaluate.arcticabstain.prompt import Call
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.options import normalise_option_text
from arcticqa.llm.chat import ChatOutcome
from arcticqa.release.jsonio import MAX_LINE_BYTES, identifier, iter_jsonl, shown

__all__ = [
    "RESPONSE_FIELDS",
    "ResponseRecord",
    "Disagreement",
    "load_published_responses",
    "record_from_published",
    "check_unique_cells",
    "rederivation_disagreements",
    "model_order",
    "store_row",
    "ROW_COLUMNS",
    "record_from_row",
    "record_from_external",
    "iter_published_rows",
]

_LETTERS = "ABCDE"
_REFUSAL_FINISH = {"refusal", "content_filter", "safety"}

#: the columns a response file may carry: the published ArcticQA v1 ``responses.csv`` header,
#: the JSONL ``options`` list, and the evaluator's own ``eval_response`` columns
RESPONSE_FIELDS = frozenset({
    "trial_id", "item_id", "model", "model_label", "condition", "trial", "option_A", "option_B", "option_C",
    "option_D", "option_E", "correct_letter", "gold_letter", "abstain_letter", "raw_response_text",
    "chosen_letter", "chosen_kind", "outcome", "valid", "invalid_cause", "finish_reason", "recorded_at_utc",
    "options", "run_id", "eval_set", "model_position", "api_model", "order_seed", "prompt_version",
    "prompt_sha256", "parser", "lenient_letter", "lenient_outcome", "cause", "usage", "latency_s",
    "attempts", "cost_usd", "error",
})
#: ids and labels copied into reports: no control characters
_IDENTIFIERS = ("item_id", "model", "model_label", "trial_id", "run_id", "eval_set")
#: fields that must be text (or absent/null) when present
_TEXT_FIELDS = ("item_id", "model", "model_label", "condition", "raw_response_text", "finish_reason",
                "outcome", "invalid_cause")


@dataclass(frozen=True)
class ResponseRecord:
    """One response of the design, scored. ``outcome`` is always the strict parser's."""

    model: str
    model_label: str
    item_id: str
    condition: str
    trial: int
    outcome: str
    lenient_outcome: str
    cause: str | None = None
    recorded_outcome: str | None = None
    recorded_cause: str | None = None
    raw_response_text: str | None = None
    #: the prompt variant that asked (``published`` unless a ``--variants`` run recorded it)
    variant: str = "published"

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.item_id, self.condition, self.trial)


@dataclass(frozen=True)
class Disagreement:
    """A published row whose re-derived outcome differs from the one it records."""

    line: int
    model: str
    item_id: str
    condition: str
    trial: int
    recorded: str | None
    derived: str
    recorded_cause: str | None
    derived_cause: str | None
    no_provider_answer: bool


def _failure_of(raw: str | None, finish_reason: str | None) -> Literal["infrastructure", "refusal"] | None:
    if (finish_reason or "").lower() in _REFUSAL_FINISH:
        return "refusal"
    if raw is None or (raw == "" and not finish_reason):
        # CSV cannot tell null from "": no text and no finish reason means no answer came back.
        return "infrastructure"
    return None


def record_from_published(row: Mapping[str, Any], options: Sequence[ShownOption], *,
                          path: str, line: int) -> ResponseRecord:
    """Score one published row (already split into its shown options)."""
    for name in ("item_id", "model", "condition", "trial"):
        if row.get(name) in (None, ""):
            raise InputError("missing value", path=path, line=line, field=name)
    for name in _TEXT_FIELDS:
        if row.get(name) is not None and not isinstance(row[name], str):
            raise InputError(f"expected text, got {type(row[name]).__name__}", path=path, line=line, field=name)
    for name in _IDENTIFIERS:
        if row.get(name) is not None:
            identifier(row[name], path=path, line=line, field=name)
    if isinstance(row["trial"], bool | float) or not isinstance(row["trial"], int | str):
        raise InputError(f"trial must be an integer, not {shown(row['trial'])}", path=path, line=line,
                         field="trial")
    condition = str(row["condition"])
    if condition not in CONDITIONS:
        raise InputError(f"condition must be one of {', '.join(CONDITIONS)}, not {shown(condition)}",
                         path=path, line=line, field="condition")
    try:
        trial = int(row["trial"])
    except (TypeError, ValueError):  # a 5,000-digit trial is a ValueError too (int's digit limit)
        raise InputError(f"trial must be an integer, not {shown(row['trial'])}", path=path, line=line,
                         field="trial") from None
    raw = row.get("raw_response_text")
    raw = None if raw is None else str(raw)
    finish = row.get("finish_reason") or None
    kinds = {o.kind for o in options}
    if "abstain" not in kinds or (condition == "answer_present") != ("gold" in kinds):
        raise InputError(f"the options shown do not fit condition {condition}", path=path, line=line,
                         field="options")
    scored = score_reply(condition, options, raw, failure=_failure_of(raw, finish))
    recorded = row.get("outcome") or None
    if recorded is not None and recorded not in OUTCOMES:
        raise InputError(f"unknown outcome {shown(recorded)}", path=path, line=line, field="outcome")
    model = str(row["model"])
    return ResponseRecord(
        model=model, model_label=str(row.get("model_label") or model), item_id=str(row["item_id"]),
        condition=condition, trial=trial, outcome=scored.outcome, lenient_outcome=scored.lenient_outcome,
        cause=scored.cause, recorded_outcome=recorded, recorded_cause=row.get("invalid_cause") or None,
        raw_response_text=raw,
    )


def _csv_options(row: Mapping[str, Any], *, path: str, line: int) -> list[ShownOption]:
    gold, abstain = row.get("gold_letter") or None, row.get("abstain_letter") or None
    if abstain is None:
        raise InputError("missing value", path=path, line=line, field="abstain_letter")
    options = []
    for letter in _LETTERS:
        text = row.get(f"option_{letter}")
        if text is None:
            raise InputError("missing column", path=path, line=line, field=f"option_{letter}")
        kind: Literal["gold", "distractor", "abstain"] = (
            "gold" if letter == gold else "abstain" if letter == abstain else "distractor")
        options.append(ShownOption(letter, kind, text))
    return options


def _jsonl_options(row: Mapping[str, Any], *, path: str, line: int) -> list[ShownOption]:
    raw_options = row.get("options")
    if not isinstance(raw_options, list) or not raw_options:
        raise InputError("expected a list of shown options", path=path, line=line, field="options")
    options = []
    for i, o in enumerate(raw_options):
        if not isinstance(o, dict) or o.get("kind") not in ("gold", "distractor", "abstain") or not o.get("letter"):
            raise InputError("each option needs letter, kind (gold|distractor|abstain) and text",
                             path=path, line=line, field=f"options[{i}]")
        options.append(ShownOption(str(o["letter"]), o["kind"], str(o.get("text", "")),
                                   str(o.get("option_id", ""))))
    return options


def _unknown_field(fields: Iterable[str], *, path: str, line: int) -> None:
    extra = sorted(set(fields) - RESPONSE_FIELDS)
    if extra:
        raise InputError("unknown field (known: the v1 responses.csv columns, 'options' and the "
                         "evaluator's columns)", path=path, line=line, field=extra[0][:100])


class _BoundedLines:
    """The file's lines as text: each is refused when longer than MAX_LINE_BYTES (before it is
    held whole) or not UTF-8, naming its physical line; ``line`` is the last line read."""

    def __init__(self, handle: Any, path: str) -> None:
        self.handle, self.path, self.line = handle, path, 0

    def __iter__(self) -> Iterator[str]:
        while True:
            raw = self.handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            self.line += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"line is longer than {MAX_LINE_BYTES} bytes", path=self.path, line=self.line)
            if not raw.endswith(b"\n"):
                # a cut-off write: the last row would parse with its last cell cut short
                raise InputError("truncated line (no newline at end of file)", path=self.path, line=self.line)
            if self.line == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]  # the UTF-8 byte-order mark spreadsheet programs write
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"invalid UTF-8 at byte {exc.start}", path=self.path, line=self.line) from None


def _iter_csv_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], list[ShownOption]]]:
    name = str(path)
    with path.open("rb") as handle:
        lines = _BoundedLines(handle, name)
        # strict: an unterminated quote (a cut-off file) is an error, not a field that runs to EOF
        reader = csv.DictReader(lines, strict=True)
        try:
            fields = reader.fieldnames or []
            if not fields:
                raise InputError("empty file (no header row)", path=name, line=1)
            missing = {"item_id", "model", "condition", "trial", "raw_response_text"} - set(fields)
            if missing:
                raise InputError("missing column", path=name, line=1, field=sorted(missing)[0])
            _unknown_field(fields, path=name, line=1)
            if len(set(fields)) != len(fields):
                raise InputError("a column name occurs twice", path=name, line=1)
            for row in reader:
                if None in row:  # more cells than the header has columns
                    raise InputError("more values than columns", path=name, line=lines.line)
                if any(value is None for value in row.values()):  # DictReader fills a short row with None
                    raise InputError(f"fewer values than columns ({sum(v is not None for v in row.values())} "
                                     f"of {len(fields)})", path=name, line=lines.line)
                # lines.line is the physical line where the record ends (multi-line replies).
                yield lines.line, row, _csv_options(row, path=name, line=lines.line)
        except csv.Error as exc:
            raise InputError(f"malformed CSV: {exc}", path=name, line=lines.line) from None


def _iter_published_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], list[ShownOption]]]:
    if path.suffix == ".csv":
        yield from _iter_csv_rows(path)
        return
    name = str(path)
    for line_no, row in iter_jsonl(path, skip_blank=True):
        _unknown_field(row, path=name, line=line_no)
        yield line_no, row, _jsonl_options(row, path=name, line=line_no)


def iter_published_rows(path: Path) -> Iterator[tuple[int, dict[str, Any], list[ShownOption]]]:
    """(line, row, options as shown) of a published ``responses.csv``/``.jsonl``, each row checked
    as :func:`load_published_responses` checks it (the item audit reads the chosen option's text)."""
    return _iter_published_rows(path)


def load_published_responses(path: Path | str) -> tuple[list[ResponseRecord], list[int]]:
    """Read and re-score a published ``responses.csv``/``responses.jsonl``; also the line of each row."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", path=str(path))
    if path.suffix not in (".csv", ".jsonl"):
        raise InputError("expected a .csv or .jsonl responses file", path=str(path))
    records: list[ResponseRecord] = []
    lines: list[int] = []
    for line_no, row, options in _iter_published_rows(path):
        records.append(record_from_published(row, options, path=str(path), line=line_no))
        lines.append(line_no)
    if not records:
        raise InputError("no responses in file", path=str(path))
    check_unique_cells(records, lines, path=str(path))
    return records, lines


def check_unique_cells(records: Sequence[ResponseRecord], lines: Sequence[int] | None = None, *,
                       path: str | None = None) -> None:
    """A design cell (model, item, condition, trial) may hold only one response."""
    seen: dict[tuple[str, str, str, int], int] = {}
    for i, record in enumerate(records):
        line = lines[i] if lines is not None else i + 1
        first = seen.setdefault(record.cell, line)
        if first != line:
            raise InputError(f"second response for model {record.model}, item {record.item_id}, "
                             f"{record.condition}, trial {record.trial} (first at line {first})",
                             path=path, line=line)


def rederivation_disagreements(records: Sequence[ResponseRecord], lines: Sequence[int]) -> list[Disagreement]:
    """Rows whose strict re-derivation differs from the recorded outcome or cause."""
    found = []
    for record, line in zip(records, lines, strict=True):
        if record.recorded_outcome is None:
            continue
        cause_differs = record.recorded_cause is not None and record.recorded_cause != record.cause
        if record.recorded_outcome != record.outcome or cause_differs:
            found.append(Disagreement(
                line=line, model=record.model, item_id=record.item_id, condition=record.condition,
                trial=record.trial, recorded=record.recorded_outcome, derived=record.outcome,
                recorded_cause=record.recorded_cause, derived_cause=record.cause,
                no_provider_answer=record.raw_response_text in (None, "")))
    return found


def model_order(records: Iterable[ResponseRecord]) -> tuple[list[str], dict[str, str]]:
    """Models in order of first appearance, and each model's label."""
    labels: dict[str, str] = {}
    for record in records:
        labels.setdefault(record.model, record.model_label)
    return list(labels), labels


def store_row(call: Call, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
    """Score one finished call and return its ``eval_response`` columns (the runner adds run id and
    position): the shown options, the strict outcome and the lenient reading beside it."""
    scored = score_reply(call.condition, call.options, outcome.text, failure=outcome.failure)
    # a variant's id and settings; the reference's rows leave the column SQL NULL, as before variants
    variant = {"details": call.variant_details} if call.variant_details is not None else {}
    correct = next(o.letter for o in call.options
                   if o.kind == ("gold" if call.condition == "answer_present" else "abstain"))
    return {
        "eval_set": call.eval_set, "model": model.label, "model_label": model.name,
        "api_model": model.model, "item_id": call.item.item_id, "condition": call.condition,
        "trial": call.trial, "order_seed": call.order_seed,
        "options": [asdict(o) for o in call.options], "correct_letter": correct,
        "prompt_version": call.prompt_version, "prompt_sha256": call.prompt_sha256,
        "raw_response_text": outcome.text, "chosen_letter": scored.chosen_letter,
        "chosen_kind": scored.chosen_kind, "parser": scored.parser, "lenient_letter": scored.lenient_letter,
        "outcome": scored.outcome, "lenient_outcome": scored.lenient_outcome, "cause": scored.cause,
        "finish_reason": outcome.finish_reason, "usage": outcome.usage, "latency_s": outcome.latency_s,
        "attempts": outcome.attempts, "cost_usd": outcome.cost_usd(model), "error": outcome.error, **variant,
    }


#: the ``eval_response`` columns a report record is read from (``details`` holds a prompt
#: variant's id and settings; it is empty for the published prompt)
ROW_COLUMNS = ("model", "model_label", "item_id", "condition", "trial", "outcome", "lenient_outcome", "cause",
               "raw_response_text", "details")


def record_from_row(row: Mapping[str, Any]) -> ResponseRecord:
    """The report record of one store row (its :data:`ROW_COLUMNS`)."""
    details = row.get("details") or {}
    return ResponseRecord(model=row["model"], model_label=row["model_label"], item_id=row["item_id"],
                          condition=row["condition"], trial=int(row["trial"]), outcome=row["outcome"],
                          lenient_outcome=row["lenient_outcome"], cause=row["cause"],
                          raw_response_text=row["raw_response_text"],
                          variant=str(details.get("variant") or "published"))


def _kind_index(item: EvalItem, abstain_text: str) -> dict[str, OptionKind]:
    index: dict[str, OptionKind] = {normalise_option_text(t): "distractor" for t in item.distractors}
    index[normalise_option_text(item.gold_answer)] = "gold"
    index[normalise_option_text(abstain_text)] = "abstain"
    return index


def _external_options(row: Mapping[str, Any], item: EvalItem, *, path: str, line: int) -> list[ShownOption]:
    raw = row.get("options")
    pairs: list[tuple[str, str, Any]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), str(v), None) for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, o in enumerate(raw):
            if not isinstance(o, dict) or "letter" not in o or "text" not in o:
                raise InputError("each option needs letter and text", path=path, line=line, field=f"options[{i}]")
            pairs.append((str(o["letter"]), str(o["text"]), o.get("kind")))
    else:
        raise InputError("expected the options as shown (a list or a letter -> text object)", path=path,
                         line=line, field="options")
    index = _kind_index(item, "I abstain from answering")
    options = []
    for letter, text, given in pairs:
        kind = given if given in ("gold", "distractor", "abstain") else index.get(normalise_option_text(text))
        if kind is None:
            raise InputError(f"option {letter} ({text[:60]!r}) is neither the gold answer, a distractor nor "
                             f"the abstain option of item {item.item_id}", path=path, line=line,
                             field="options")
        options.append(ShownOption(letter, kind, text))
    return options


def record_from_external(item: EvalItem, line: ExternalLine) -> ResponseRecord:
    """One external line: ``condition`` and the ``options`` as shown (``[{"letter", "text"[, "kind"]}]``
    or ``{"A": text, ...}``) on top of the shared fields; each option's kind is found by matching its
    text against the item (:func:`~arcticqa.evaluate.options.normalise_option_text`) unless given."""
    row = line.row
    if row.get("condition") not in CONDITIONS:
        raise InputError(f"condition must be one of {', '.join(CONDITIONS)}", path=line.path, line=line.line,
                         field="condition")
    confidence = row.get("confidence")
    if confidence is not None and not isinstance(confidence, int | float):
        raise InputError("must be a number", path=line.path, line=line.line, field="confidence")
    options = _external_options(row, item, path=line.path, line=line.line)
    published = {"item_id": line.question_id, "model": line.model, "model_label": row.get("model_label"),
                 "condition": row["condition"], "trial": row.get("trial", 1),
                 "raw_response_text": line.raw_response_text, "finish_reason": row.get("finish_reason")}
    return record_from_published(published, options, path=line.path, line=line.line)
