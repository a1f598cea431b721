"""Papers, their discovery checkpoint, extracted documents and spans, and accepted items.

Discovery writes papers and the raw records each page brought (one transaction a page, so an
interrupted discovery resumes at the next page); the build reads them back, with the newest
extracted document of a paper, the spans evidence cites, and the items accepted so far.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from arcticqa.evidence import Document
from arcticqa.papers import PaperRecord
from arcticqa.store.db import read_session, reconnecting, write_session
from arcticqa.store.tables import DiscoveryPage, DocumentRow, ItemRow, Paper, RawRecord, SpanRow

__all__ = ["PaperArchive"]

# Per-paper reads of the construct stage, as Core statements built once (see arcticqa.store.runs):
# an ORM session per read, and the document row's full text loaded only to be dropped, cost more
# than the queries themselves
_PAPER_T = Paper.__table__  # type: ignore[attr-defined]
_DOCUMENT_T = DocumentRow.__table__  # type: ignore[attr-defined]
_ITEM_T = ItemRow.__table__  # type: ignore[attr-defined]
_PAPER = select(_PAPER_T).where(_PAPER_T.c.paper_id == bindparam("paper_id"))
_RECORDS = select(_PAPER_T.c.paper_id, _PAPER_T.c.record).where(
    _PAPER_T.c.paper_id.in_(bindparam("papers", expanding=True)))
_SET_FAMILY = update(_PAPER_T).where(_PAPER_T.c.paper_id == bindparam("b_paper_id"))
_NEWEST_DOCUMENT = select(_DOCUMENT_T.c.payload).where(
    _DOCUMENT_T.c.paper_id == bindparam("paper_id")).order_by(_DOCUMENT_T.c.id.desc()).limit(1)
_FAMILY_ITEMS = select(_ITEM_T.c.item_id).where(_ITEM_T.c.family_id == bindparam("family_id")).order_by(
    _ITEM_T.c.item_id)


class PaperArchive:
    """Papers, discovery pages, documents, spans and items; a part of :class:`arcticqa.store.Store`."""

    engine: Engine

    @reconnecting
    def add_papers(self, papers: Iterable[tuple[PaperRecord, dict[str, Any]]]) -> int:
        """Insert papers not yet stored (``extra``: family_id, duplicate_of, source). Returns new count."""
        todo = list(papers)
        for attempt in range(3):
            new = 0
            try:
                with write_session(self.engine) as s:
                    existing = set(s.exec(select(Paper.paper_id)).all())
                    for record, extra in todo:
                        if record.paperId in existing:
                            continue
                        existing.add(record.paperId)
                        s.add(Paper(paper_id=record.paperId, doi=record.doi, title=record.title,
                                    year=record.year,
                                    record=record.model_dump(mode="json", exclude_none=True), **extra))
                        new += 1
                return new
            except IntegrityError:
                # PostgreSQL: another worker discovering the same source inserted some of these
                # papers after we read; read again (SQLite's BEGIN IMMEDIATE cannot get here)
                if attempt == 2:
                    raise
        return 0

    @reconnecting
    def papers_without_family(self) -> list[str]:
        """Kept papers (not duplicates) whose family is not written yet: a build stopped while its
        discovery ran left them (preprints' families are written once every record is in)."""
        with read_session(self.engine) as s:
            return list(s.exec(select(Paper.paper_id).where(col(Paper.family_id).is_(None),
                                                            col(Paper.duplicate_of).is_(None))).all())

    @reconnecting
    def set_families(self, family_of: dict[str, str]) -> None:
        """Write the papers' family ids (paper id → family id), once discovery has seen every record."""
        if not family_of:
            return
        with write_session(self.engine) as s:
            s.connection().execute(_SET_FAMILY, [{"b_paper_id": pid, "family_id": family}
                                                 for pid, family in family_of.items()])

    @reconnecting
    def add_raw_records(self, rows: Sequence[RawRecord]) -> None:
        with write_session(self.engine) as s:
            s.add_all(list(rows))

    @reconnecting
    def paper_ids(self, *, include_duplicates: bool = False) -> list[str]:
        with read_session(self.engine) as s:
            q = select(Paper.paper_id).order_by(Paper.paper_id)
            if not include_duplicates:
                q = q.where(col(Paper.duplicate_of).is_(None))
            return list(s.exec(q).all())

    @reconnecting
    def get_paper(self, paper_id: str) -> PaperRecord | None:
        with read_session(self.engine) as s:
            row = s.get(Paper, paper_id)
            return PaperRecord.model_validate(row.record) if row and row.record else None

    @reconnecting
    def get_papers(self, paper_ids: Sequence[str]) -> dict[str, PaperRecord]:
        """The records of the papers given that are stored (one query): paper id → record."""
        if not paper_ids:
            return {}
        with self.engine.connect() as conn:
            return {row.paper_id: PaperRecord.model_validate(row.record)
                    for row in conn.execute(_RECORDS, {"papers": list(paper_ids)}) if row.record}

    @reconnecting
    def paper_row(self, paper_id: str) -> Paper | None:
        with self.engine.connect() as conn:
            row = conn.execute(_PAPER, {"paper_id": paper_id}).first()
            return Paper(**row._mapping) if row is not None else None

    @reconnecting
    def get_document(self, paper_id: str) -> Document | None:
        """The newest successfully extracted document of a paper."""
        with self.engine.connect() as conn:
            payload = conn.execute(_NEWEST_DOCUMENT, {"paper_id": paper_id}).scalar()
            return Document.model_validate(payload) if payload else None

    @reconnecting
    def family_items(self, family_id: str) -> list[str]:
        """Item ids already accepted for a paper family."""
        with self.engine.connect() as conn:
            return list(conn.execute(_FAMILY_ITEMS, {"family_id": family_id}).scalars())

    @reconnecting
    def items(self) -> list[ItemRow]:
        with read_session(self.engine) as s:
            return list(s.exec(select(ItemRow).order_by(col(ItemRow.item_id))).all())

    # -- discovery checkpoint -------------------------------------------------------------------
    @reconnecting
    def discovery_pages(self, source: str, query: str) -> list[DiscoveryPage]:
        with read_session(self.engine) as s:
            return list(s.exec(select(DiscoveryPage).where(DiscoveryPage.source == source,
                                                           DiscoveryPage.query == query)
                               .order_by(col(DiscoveryPage.page_no))).all())

    @reconnecting
    def record_discovery_page(self, page: DiscoveryPage, raw: Sequence[RawRecord]) -> None:
        """Record a page with its raw records; a page another worker already recorded is skipped."""
        try:
            with write_session(self.engine) as s:
                s.add(page)
                s.add_all(list(raw))
        except IntegrityError:
            # (source, query, page_no) is unique: a concurrent build fetched the same page first,
            # and its rows (same page, same records) are already there
            pass


    @reconnecting
    def raw_records(self) -> list[RawRecord]:
        """Every raw record discovery ever stored (all sources and queries), in arrival order."""
        with read_session(self.engine) as s:
            return list(s.exec(select(RawRecord).order_by(col(RawRecord.id))).all())

    @reconnecting
    def papers(self, *, include_duplicates: bool = False) -> list[Paper]:
        """Every stored paper row, by paper id (duplicates of another paper only if asked)."""
        with read_session(self.engine) as s:
            q = select(Paper).order_by(Paper.paper_id)
            if not include_duplicates:
                q = q.where(col(Paper.duplicate_of).is_(None))
            return list(s.exec(q).all())

    @reconnecting
    def spans(self, span_ids: Iterable[str]) -> dict[str, SpanRow]:
        """The stored spans with these ids (span id → row); ids not stored are left out."""
        wanted = sorted(set(span_ids))
        if not wanted:
            return {}
        with read_session(self.engine) as s:
            return {r.span_id: r for r in s.exec(select(SpanRow).where(col(SpanRow.span_id).in_(wanted))).all()}
