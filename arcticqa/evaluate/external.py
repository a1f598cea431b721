"""The one reader of externally produced responses (``evaluate score``): the fields every protocol shares.

Each response names a question, the raw reply and, optionally, the model, trial and finish reason;
a protocol adds its own fields (confidence, prompt variant, shown options) on top, read from
:attr:`ExternalLine.row` by its ``records.record_from_external``. One cell — (model, question,
variant, trial) — may be answered once per file.

Extension point: where the responses come from is a *reader* — a function from a file to
``(line, object)`` pairs, each object holding the fields above. ``jsonl`` (one JSON object a line) is
built in; :func:`register_reader` adds another source (an inspect_ai log, a provider's batch output)
without touching the protocols, whose scoring, cell check and report stay the same.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcticqa.config import did_you_mean
from arcticqa.errors import ConfigError, InputError
from arcticqa.release.jsonio import identifier, iter_jsonl, shown

__all__ = ["ExternalLine", "ResponseReader", "READERS", "register_reader", "external_lines", "CellGuard"]

_REFUSAL_FINISH = ("refusal", "content_filter", "safety")

#: a source of external responses: (line or record number, response object) for each response of a file
ResponseReader = Callable[[Path], Iterable[tuple[int, dict[str, Any]]]]


def _jsonl(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    return iter_jsonl(path, skip_blank=True)


#: the registered readers by name (``jsonl`` built in)
READERS: dict[str, ResponseReader] = {"jsonl": _jsonl}


def register_reader(name: str, reader: ResponseReader) -> ResponseReader:
    """Add a source of external responses under ``name`` (its objects carry the shared fields)."""
    READERS[name] = reader
    return reader


@dataclass(frozen=True)
class ExternalLine:
    path: str
    line: int
    question_id: str
    raw_response_text: str | None
    model: str
    model_label: str
    trial: int
    failure: str | None  # "refusal" when the provider's finish reason says it declined
    row: dict[str, Any]  # the whole line, for protocol-specific fields


def external_lines(path: Path | str, known: Collection[str], *, id_keys: tuple[str, ...] = ("question_id",),
                   reader: str = "jsonl") -> Iterator[ExternalLine]:
    """Every response of ``path`` with its shared fields checked; a named InputError otherwise."""
    path = Path(path)
    name = str(path)
    if reader not in READERS:
        raise ConfigError(f"unknown response reader {reader!r}{did_you_mean(reader, READERS)}; "
                          f"known: {', '.join(sorted(READERS))}")
    if not path.exists():
        raise InputError("file not found", path=name)
    for line_no, row in READERS[reader](path):
        qid = next((row[k] for k in id_keys if row.get(k)), None)
        if qid not in known:
            raise InputError(f"unknown question {shown(qid)}", path=name, line=line_no,
                             field=next((k for k in id_keys if k in row), id_keys[0]))
        if "raw_response_text" not in row:
            raise InputError("missing (use null when no answer came back)", path=name, line=line_no,
                             field="raw_response_text")
        raw = row["raw_response_text"]
        if raw is not None and not isinstance(raw, str):
            raise InputError("must be a string or null", path=name, line=line_no, field="raw_response_text")
        try:
            trial = int(row.get("trial", 1))
        except (TypeError, ValueError):
            raise InputError("must be an integer", path=name, line=line_no, field="trial") from None
        model = identifier(row.get("model") or "external", path=name, line=line_no, field="model")
        label = identifier(row.get("model_label") or model, path=name, line=line_no, field="model_label")
        finish = (row.get("finish_reason") or "").lower()
        yield ExternalLine(path=name, line=line_no, question_id=str(qid), raw_response_text=raw, model=model,
                           model_label=label, trial=trial,
                           failure="refusal" if finish in _REFUSAL_FINISH else None, row=row)


class CellGuard:
    """Refuses a second response for the same (model, question, variant, trial) in one file."""

    def __init__(self, path: Path | str) -> None:
        self.name = str(path)
        self._first: dict[tuple[str, str, str, int], int] = {}

    def check(self, cell: tuple[str, str, str, int], line: ExternalLine) -> None:
        first = self._first.setdefault(cell, line.line)
        if first != line.line:
            model, question, variant, trial = cell
            raise InputError(f"second response for model {model}, question {question}, variant {variant}, "
                             f"trial {trial} (first at line {first})", path=self.name, line=line.line)
