"""The one reader of externally produced responses (``evaluate score``): the fields every protocol shares.

Each line names a question, the raw reply and, optionally, the model, trial and finish reason;
a protocol adds its own fields (confidence, prompt variant) on top. One cell — (model, question,
variant, trial) — may be answered once per file.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcticqa.errors import InputError
from arcticqa.release.jsonio import identifier, iter_jsonl, shown

__all__ = ["ExternalLine", "external_lines", "CellGuard"]

_REFUSAL_FINISH = ("refusal", "content_filter", "safety")


@dataclass(frozen=True)
class ExternalLine:
    line: int
    question_id: str
    raw_response_text: str | None
    model: str
    model_label: str
    trial: int
    failure: str | None  # "refusal" when the provider's finish reason says it declined
    row: dict[str, Any]  # the whole line, for protocol-specific fields


def external_lines(path: Path | str, known: Collection[str], *,
                   id_keys: tuple[str, ...] = ("question_id",)) -> Iterator[ExternalLine]:
    """Every line of ``path`` with its shared fields checked; a named InputError otherwise."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(path, skip_blank=True):
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
        yield ExternalLine(line=line_no, question_id=str(qid), raw_response_text=raw, model=model,
                           model_label=label, trial=trial,
                           failure="refusal" if finish in _REFUSAL_FINISH else None, row=row)


class CellGuard:
    """Refuses a second response for the same (model, question, variant, trial) in one file."""

    def __init__(self, path: Path | str) -> None:
        self.name = str(path)
        self._first: dict[tuple[str, str, str, int], int] = {}

    def check(self, cell: tuple[str, str, str, int], line: ExternalLine, variant: str) -> None:
        first = self._first.setdefault(cell, line.line)
        if first != line.line:
            raise InputError(f"second response for model {line.model}, question {line.question_id}, "
                             f"variant {variant}, trial {line.trial} (first at line {first})",
                             path=self.name, line=line.line)
