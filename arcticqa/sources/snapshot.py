"""Offline source ``snapshot:PATH``: a JSONL file of Semantic Scholar Graph-API paper records.

The file is read in pages of ``page_size`` lines so that it goes through the same checkpoint
(and the same provenance rows) as a live search; the page token is ``line:N``, the next line
to read. Bad lines (not UTF-8, not JSON, failing validation) become rejected raw records that
name the file and line; they never stop the read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.sources.records import INVALID_RECORD, RawRecord, SourcePage, parse_record

__all__ = ["read_snapshot_pages", "parse_line_token", "line_token"]


def line_token(next_line: int) -> str:
    return f"line:{next_line}"


def parse_line_token(token: str | None, *, path: Path) -> int:
    """The 1-based line a ``line:N`` token points at (1 when there is no token)."""
    if token is None:
        return 1
    prefix, _, number = token.partition(":")
    if prefix != "line" or not number.isdigit() or int(number) < 1:
        raise InputError(f"stored resume token {token!r} is not a 'line:N' token for this snapshot",
                         path=str(path))
    return int(number)


def _decode_line(raw: bytes, *, path: Path, lineno: int, query: str, page: int,
                 fetched_at: datetime) -> RawRecord | None:
    origin = str(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        rejection = INVALID_RECORD.reject(
            f"{path}:{lineno}: not valid UTF-8 (byte {exc.start} of the line)",
            origin=origin, line=lineno, field=None)
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=lineno,
                         rejection=rejection)
    text = text.strip().lstrip("\ufeff")
    if not text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        rejection = INVALID_RECORD.reject(
            f"{path}:{lineno}: invalid JSON: {exc.msg} (column {exc.colno})",
            origin=origin, line=lineno, field=None)
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=lineno,
                         rejection=rejection)
    return parse_record(obj, query=query, page=page, fetched_at=fetched_at, origin=origin,
                        line=lineno)


def read_snapshot_pages(path: Path, *, query: str, start_token: str | None, start_page: int,
                        page_size: int, clock: Callable[[], datetime]) -> Iterator[SourcePage]:
    """Yield the pages of ``path`` from ``start_token`` on; the last page has ``token_out=None``."""
    if not path.is_file():
        raise InputError("snapshot file not found", path=str(path))
    first_line = parse_line_token(start_token, path=path)
    page_no = start_page
    token_in = start_token
    records: list[RawRecord] = []
    lines_in_page = 0
    fetched_at = clock()
    with path.open("rb") as fh:
        lineno = 0
        for lineno, raw in enumerate(fh, start=1):
            if lineno < first_line:
                continue
            record = _decode_line(raw, path=path, lineno=lineno, query=query, page=page_no,
                                  fetched_at=fetched_at)
            if record is not None:
                records.append(record)
            lines_in_page += 1
            if lines_in_page >= page_size:
                token_out = line_token(lineno + 1)
                yield SourcePage(page=page_no, token_in=token_in, token_out=token_out,
                                 records=records)
                page_no, token_in, records, lines_in_page = page_no + 1, token_out, [], 0
                fetched_at = clock()
    # The final page may be empty (file length a multiple of page_size): it still marks "done".
    yield SourcePage(page=page_no, token_in=token_in, token_out=None, records=records)
