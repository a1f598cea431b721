"""Raw discovery records: what a source said about one paper, with where and when it said it.

Every source (the live S2 API, a snapshot JSONL, S2 Datasets files) yields :class:`RawRecord`
objects grouped in :class:`SourcePage` objects. A record that does not validate as a
:class:`~arcticqa.papers.PaperRecord` is still kept, carrying a ``discover.invalid_record``
rejection, so the store can show the user exactly which line or field was wrong.

``localPdf`` names a file on this machine, so it is trusted only from a file source and only
inside that file's folder: a record from the live API that carries one, or one whose path
escapes the folder (``../``, an absolute path elsewhere, a symlink pointing out), is rejected.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection, rule

__all__ = [
    "INVALID_RECORD",
    "RawRecord",
    "SourcePage",
    "parse_record",
    "resolve_local_pdf",
]

INVALID_RECORD = rule(
    "discover.invalid_record",
    "A source record is not a usable Semantic Scholar paper record (bad JSON, encoding or field)",
)


class RawRecord(BaseModel):
    """One record as a source delivered it, with its provenance."""

    query: str  # the search query, or the source spec for file sources
    page: int  # 1-based page number within the query
    fetched_at: datetime
    origin: str  # "s2", or the absolute path of the file the record came from
    line: int | None = None  # 1-based line number for file sources
    raw: dict[str, Any] = Field(default_factory=dict)  # as received ({} if not parseable)
    paper: PaperRecord | None = None
    rejection: Rejection | None = None

    @property
    def paper_id(self) -> str | None:
        return self.paper.paperId if self.paper is not None else None


class SourcePage(BaseModel):
    """One page of a source: the unit of persistence and of resumption."""

    page: int
    token_in: str | None
    token_out: str | None  # None: the query is exhausted
    records: list[RawRecord]
    total: int | None = None  # the source's own estimate of the result count, if any


def _first_error_field(exc: ValidationError) -> tuple[str, str]:
    first = exc.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "<record>"
    return loc, first["msg"]


def parse_record(raw: Any, *, query: str, page: int, fetched_at: datetime, origin: str,
                 line: int | None = None) -> RawRecord:
    """Validate one source record; a bad record becomes a rejected :class:`RawRecord`, not an error."""
    where = f"{origin}:{line}" if line is not None else origin
    if not isinstance(raw, dict):
        rejection = INVALID_RECORD.reject(
            f"{where}: record is a JSON {type(raw).__name__}, not an object",
            origin=origin, line=line, field=None)
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=line,
                         rejection=rejection)
    try:
        paper = PaperRecord.model_validate(raw)
    except ValidationError as exc:
        field, msg = _first_error_field(exc)
        rejection = INVALID_RECORD.reject(
            f"{where}: field '{field}': {msg}", origin=origin, line=line, field=field,
            paper_id=raw.get("paperId") if isinstance(raw.get("paperId"), str) else None)
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=line,
                         raw=raw, rejection=rejection)
    problem = _local_pdf_problem(paper.localPdf, origin)
    if problem is not None:
        rejection = INVALID_RECORD.reject(f"{where}: field 'localPdf': {problem}", origin=origin, line=line,
                                          field="localPdf", paper_id=paper.paperId)
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=line,
                         raw=raw, rejection=rejection)
    return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=line,
                     raw=raw, paper=paper)


def _local_pdf_problem(local_pdf: str | None, origin: str) -> str | None:
    """Why ``local_pdf`` may not be followed, or None when it stays inside the source's folder."""
    if not local_pdf:
        return None
    if origin == "s2":
        return "a record from the live API may not name a local file"
    base = Path(origin).parent.resolve()
    try:
        # resolve() follows symlinks, so a link inside the folder that points out is caught too
        target = (base / local_pdf).resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte
        return f"unusable path ({type(exc).__name__})"
    if not target.is_relative_to(base):
        return f"the path escapes the folder of {Path(origin).name} (it must stay inside {base})"
    return None


def resolve_local_pdf(record: RawRecord) -> Path | None:
    """The absolute path of a snapshot record's ``localPdf`` (stored relative to its JSONL file);
    None when there is none or it may not be followed (see :func:`parse_record`)."""
    if record.paper is None or not record.paper.localPdf:
        return None
    if _local_pdf_problem(record.paper.localPdf, record.origin) is not None:
        return None
    return (Path(record.origin).parent / record.paper.localPdf).resolve()
