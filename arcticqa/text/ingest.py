"""Attach a user's local PDFs (e.g. institutional access) to papers, via a CSV map.

The map has a header row with ``file`` and at least one of ``doi`` and ``paper_id``; each row
names a file relative to the PDF directory and the paper it belongs to. Every row is checked
(columns, file present, ``%PDF-`` header, no duplicate paper) before anything is copied, so a bad
map leaves the cache untouched; errors name the map file, line and field. A file name may not
leave the PDF directory: ``../``, absolute paths and symlinks pointing out are refused.
"""

from __future__ import annotations

import csv
from pathlib import Path

from pydantic import BaseModel

from arcticqa.errors import InputError
from arcticqa.text.fetch import store_pdf_file

__all__ = ["IngestedPdf", "ingest_pdfs", "read_pdf_map"]


class IngestedPdf(BaseModel):
    """One local PDF now in the cache, and the paper it belongs to (by DOI and/or paperId)."""

    file: str  # as written in the map
    source: str  # absolute path of the original
    doi: str | None = None
    paper_id: str | None = None
    sha256: str = ""
    bytes: int = 0
    path: str = ""  # the cached copy


def read_pdf_map(pdf_dir: Path, map_csv: Path) -> list[IngestedPdf]:
    """Parse and validate the map (no copying). Raises InputError naming file/line/field."""
    where = str(map_csv)
    root = pdf_dir.resolve()
    try:
        handle = map_csv.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise InputError(f"cannot read map: {exc.strerror or exc}", path=where) from exc
    with handle:
        reader = csv.DictReader(handle)
        fields = [f.strip().lower() for f in reader.fieldnames or []]
        if "file" not in fields:
            raise InputError("the header must have a 'file' column", path=where, line=1, field="file")
        if "doi" not in fields and "paper_id" not in fields:
            raise InputError("the header must have a 'doi' or a 'paper_id' column", path=where, line=1)
        reader.fieldnames = fields
        rows: list[IngestedPdf] = []
        seen: dict[str, int] = {}
        for row in reader:
            line = reader.line_num
            name = (row.get("file") or "").strip()
            doi = (row.get("doi") or "").strip().lower() or None
            paper_id = (row.get("paper_id") or "").strip() or None
            if not name:
                raise InputError("empty file name", path=where, line=line, field="file")
            if doi is None and paper_id is None:
                raise InputError("the row names neither a DOI nor a paperId", path=where, line=line,
                                 field="doi")
            if doi is not None and not doi.startswith("10."):
                raise InputError(f"{doi!r} is not a DOI (it must start with '10.')", path=where,
                                 line=line, field="doi")
            source = (pdf_dir / name).resolve()
            if not source.is_relative_to(root):  # resolve() has followed any symlink already
                raise InputError(f"{name!r} is outside the PDF directory {root}", path=where, line=line,
                                 field="file")
            try:
                with source.open("rb") as fh:
                    head = fh.read(1024)
            except OSError as exc:
                raise InputError(f"cannot read {source}: {exc.strerror or exc}", path=where, line=line,
                                 field="file") from exc
            if b"%PDF-" not in head:
                raise InputError(f"{source} is not a PDF (no %PDF- header)", path=where, line=line,
                                 field="file")
            key = f"doi:{doi}" if doi else f"id:{paper_id}"
            if key in seen:
                raise InputError(f"{key[key.index(':') + 1:]} already mapped on line {seen[key]}",
                                 path=where, line=line, field="doi" if doi else "paper_id")
            seen[key] = line
            rows.append(IngestedPdf(file=name, source=str(source), doi=doi, paper_id=paper_id))
    if not rows:
        raise InputError("the map has no rows", path=where, line=2)
    return rows


def ingest_pdfs(pdf_dir: Path, map_csv: Path, cache_dir: Path) -> list[IngestedPdf]:
    """Validate the whole map, then hash and copy each PDF into ``cache_dir`` (``<data_dir>/pdf``)."""
    if not pdf_dir.is_dir():
        raise InputError("not a directory", path=str(pdf_dir))
    rows = read_pdf_map(pdf_dir, map_csv)
    for row in rows:
        sha, size, path = store_pdf_file(Path(row.source), cache_dir)
        row.sha256, row.bytes, row.path = sha, size, str(path)
    return rows
