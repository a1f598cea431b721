"""Discovery's checkpoint on the store: pages, tokens and raw records, one transaction a page."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

from sqlmodel import col, select

from arcticqa.sources import RawRecord
from arcticqa.store import Store
from arcticqa.store.db import read_session
from arcticqa.store.tables import DiscoveryPage
from arcticqa.store.tables import RawRecord as RawRecordRow

__all__ = ["StoreCheckpoint"]


class StoreCheckpoint:
    """Implements :class:`arcticqa.stages.discover.DiscoveryCheckpoint` on ``discovery_page``."""

    source = "discovery"

    def __init__(self, store: Store, on_page: Callable[[], None] | None = None) -> None:
        self.store = store
        #: told after each page is recorded (the build starts the stages on its papers)
        self.on_page = on_page

    def _last(self, key: str) -> DiscoveryPage | None:
        pages = self.store.discovery_pages(self.source, key)
        return pages[-1] if pages else None

    def resume_token(self, key: str) -> str | None:
        last = self._last(key)
        return last.token_out if last is not None else None

    def pages_recorded(self, key: str) -> int:
        return len(self.store.discovery_pages(self.source, key))

    def is_done(self, key: str) -> bool:
        last = self._last(key)
        return last is not None and last.token_out is None

    def record_page(self, key: str, page_no: int, token_in: str | None, token_out: str | None,
                    records: list[RawRecord], fetched_at: datetime) -> None:
        rows = [RawRecordRow(source=r.origin, query=r.query, page=r.page, line=r.line, paper_id=r.paper_id,
                             fetched_at=r.fetched_at, payload=r.model_dump(mode="json")) for r in records]
        self.store.record_discovery_page(
            DiscoveryPage(source=self.source, query=key, page_no=page_no, token_in=token_in,
                          token_out=token_out, n_records=len(records), fetched_at=fetched_at), rows)
        if self.on_page is not None:
            self.on_page()

    def all_records(self) -> list[RawRecord]:
        """Every raw record ever discovered (all queries, all runs), in arrival order."""
        return list(self.iter_records())

    def iter_records(self, chunk: int = 1_000) -> Iterator[RawRecord]:
        """:meth:`all_records` read ``chunk`` rows at a time (one short read each, by id), so
        what is held is a chunk, not every record."""
        for _, record in self.iter_rows(chunk=chunk):
            yield record

    def iter_rows(self, after: int = 0, chunk: int = 1_000) -> Iterator[tuple[int, RawRecord]]:
        """The raw records stored after row id ``after``, in arrival order, with their row ids."""
        last = after
        while True:
            with read_session(self.store.engine) as s:
                rows = s.exec(select(RawRecordRow.id, RawRecordRow.payload).where(col(RawRecordRow.id) > last)
                              .order_by(col(RawRecordRow.id)).limit(chunk)).all()
            if not rows:
                return
            for row_id, payload in rows:
                last = int(row_id or 0)
                if payload:
                    yield last, RawRecord.model_validate(payload)
