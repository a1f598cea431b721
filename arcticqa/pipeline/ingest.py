"""User-supplied PDFs (``arcticqa ingest-pdfs``) recorded as the papers' fetched full text.

Each attached PDF becomes a succeeded ``fetch_fulltext`` attempt whose payload has the shape the
fetch stage records, so the build's next stage (``extract_text``) reads it like a downloaded one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlmodel import select

from arcticqa.errors import InputError
from arcticqa.store import Store
from arcticqa.store.db import read_session
from arcticqa.store.runs import input_hash
from arcticqa.store.tables import FetchRow, Paper
from arcticqa.text.ingest import IngestedPdf

__all__ = ["attach_pdfs"]


def attach_pdfs(store: Store, ingested: Sequence[IngestedPdf]) -> list[str]:
    """Record ingested PDFs as their papers' fetched full text; returns the paper ids, in order.

    Papers are matched by paperId, else DOI; an unmatched row is an error naming it, and then
    nothing is attached.
    """
    with read_session(store.engine) as s:
        by_doi = {p.doi: p.paper_id for p in s.exec(select(Paper)).all() if p.doi}
        known = set(s.exec(select(Paper.paper_id)).all())
    targets: list[tuple[str, IngestedPdf]] = []
    for row in ingested:
        pid = row.paper_id if row.paper_id in known else by_doi.get((row.doi or "").lower())
        if pid is None:
            raise InputError(f"no paper in the store has paperId {row.paper_id!r} or DOI {row.doi!r}",
                             path=row.file, field="doi/paper_id")
        targets.append((pid, row))
    for pid, row in targets:
        payload: dict[str, Any] = {
            "status": "ok", "url": Path(row.source).as_uri(), "final_url": row.path, "sha256": row.sha256,
            "bytes": row.bytes, "license": None, "path": row.path, "message": "attached with arcticqa ingest-pdfs"}
        run = store.start_run(pid, "fetch_fulltext", "", input_hash=input_hash(payload))
        store.finish_run(run, status="succeeded", output=payload, evidence=[FetchRow(
            stage_run_id=0, paper_id=pid, status="ok", url=payload["url"], final_url=row.path,
            sha256=row.sha256, bytes=row.bytes, payload=payload)])
    return [pid for pid, _ in targets]
