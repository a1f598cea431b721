"""Discovery's papers handed to the build page by page store what discovering first stores.

A build starts its stages on each discovery page's papers (``pipeline.stages._PaperFeed``): a
record's duplicate decision is final when it arrives, a preprint's family only once every record
is in. These tests feed pages through the store's checkpoint, as discovery does, and compare the
papers with what :func:`deduplicate` decides over all the records at once; and a build stopped
before the families were written leaves them to resume (``_add_discovered``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from arcticqa.papers import PaperRecord
from arcticqa.pipeline.discovery import StoreCheckpoint
from arcticqa.pipeline.runner import BuildContext
from arcticqa.pipeline.stages import _add_discovered, _PaperFeed
from arcticqa.sources import RawRecord
from arcticqa.stages.discover import deduplicate, family_id_for
from arcticqa.store.store import Store

TITLE = "Rapid thaw of ice-rich permafrost on the Yamal Peninsula"
AT = datetime(2026, 1, 1, tzinfo=UTC)


def _rec(paper_id: str, page: int, **fields: Any) -> RawRecord:
    raw = {"paperId": paper_id, "abstract": "Permafrost thaw on Yamal.", **fields}
    return RawRecord(query="q", page=page, fetched_at=AT, origin="s2", raw=raw, paper=PaperRecord.model_validate(raw))


#: the preprint arrives two pages before its published version; "again" is "alone" under another id
PAGES = [
    [_rec("pre", 1, title=TITLE, year=2021, venue="arXiv.org", externalIds={"ArXiv": "2101.00001"}),
     _rec("alone", 1, title="A different Arctic study of lake ice phenology", year=2022,
          externalIds={"DOI": "10.1/alone"})],
    [_rec("again", 2, title="Lake ice phenology, again", year=2022, externalIds={"DOI": "10.1/alone"})],
    [_rec("pub", 3, title=TITLE + ".", year=2022, venue="Nature Geoscience",
          externalIds={"DOI": "10.1038/s41561-022-1"})],
]


def _stored(store: Store) -> dict[str, tuple[str | None, str | None]]:
    return {p.paper_id: (p.family_id, p.duplicate_of) for p in store.papers(include_duplicates=True)}


def _record(checkpoint: StoreCheckpoint, pages: list[list[RawRecord]]) -> None:
    for n, page in enumerate(pages, start=1):
        checkpoint.record_page("q", n, None, None if n == len(PAGES) else f"t{n}", page, AT)


def test_papers_fed_page_by_page_are_stored_as_discovering_first_stores_them(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    handed: list[tuple[list[str], list[str]]] = []
    feed = _PaperFeed(cast(BuildContext, SimpleNamespace(store=store)),
                      lambda papers, unsettled: handed.append((papers, sorted(unsettled))))
    _record(feed.checkpoint, PAGES[:2])
    # the preprint waits for its family; the others have theirs at once, the duplicate none
    assert handed == [(["alone", "pre"], ["pre"])]
    assert _stored(store) == {"pre": (None, None), "alone": (family_id_for("alone"), None), "again": (None, "alone")}
    _record(feed.checkpoint, PAGES)  # page 3 (the first two are already recorded: skipped)
    summary = feed.finish("s2", records_this_run=4, complete=True, failed=[])
    assert handed[1:] == [(["pub"], [])]
    result = deduplicate([r for page in PAGES for r in page])
    assert _stored(store) == {pid: (result.family_of.get(pid), {d.record.paper_id: d.duplicate_of
                                                                for d in result.duplicates}.get(pid))
                              for pid in ("pre", "alone", "again", "pub")}
    assert _stored(store)["pre"][0] == family_id_for("pub")
    assert (summary["kept"], summary["duplicates"], summary["new_papers"]) == (3, 1, 4)


def test_families_a_stopped_discovery_left_unwritten_are_written_on_resume(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    ctx = cast(BuildContext, SimpleNamespace(store=store))
    feed = _PaperFeed(ctx, lambda papers, unsettled: None)
    _record(feed.checkpoint, PAGES)  # every page in, the build stopped before ``finish``
    assert store.papers_without_family() == ["pre"]
    _add_discovered(ctx, StoreCheckpoint(store), "s2", records_this_run=0, complete=True, failed=[])
    assert store.papers_without_family() == []
    assert _stored(store)["pre"][0] == family_id_for("pub")


def test_a_new_build_on_a_store_a_stopped_discovery_left_holds_and_settles_its_preprints(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    ctx = cast(BuildContext, SimpleNamespace(store=store))
    _record(_PaperFeed(ctx, lambda papers, unsettled: None).checkpoint, PAGES)  # stopped before ``finish``
    handed: list[tuple[list[str], list[str]]] = []
    feed = _PaperFeed(ctx, lambda papers, unsettled: handed.append((papers, sorted(unsettled))))
    assert handed == [([], ["pre"])]  # construct leaves it waiting until this discovery ends
    feed.finish("s2", records_this_run=0, complete=True, failed=[])
    assert store.papers_without_family() == []
    assert _stored(store)["pre"][0] == family_id_for("pub")
