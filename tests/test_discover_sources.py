"""Offline discovery sources (snapshot JSONL, S2 Datasets), keyword files, and deduplication."""

from __future__ import annotations

import asyncio
import gzip
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from arcticqa.errors import ConfigError, InputError
from arcticqa.papers import PaperRecord
from arcticqa.sources.records import RawRecord, resolve_local_pdf
from arcticqa.stages.discover import (
    DEFAULT_KEYWORDS_PATH,
    DiscoveryOptions,
    InMemoryCheckpoint,
    deduplicate,
    discover,
    family_id_for,
    is_preprint,
    load_queries,
    normalise_title,
    parse_source,
)


def _write_jsonl(path: Path, lines: list[Any]) -> Path:
    with path.open("wb") as fh:
        for line in lines:
            fh.write(line if isinstance(line, bytes) else json.dumps(line).encode())
            fh.write(b"\n")
    return path


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# ----------------------------------------------------------------------------- snapshot


def test_snapshot_bad_lines_become_rejected_records(tmp_path: Path) -> None:
    snap = _write_jsonl(tmp_path / "papers.jsonl", [
        {"paperId": "a", "title": "Arctic one", "localPdf": "pdfs/a.pdf"},
        b"{not json",
        b'{"paperId": "b", "title": "caf\xe9"}',  # Latin-1 byte: not UTF-8
        {"title": "no id"},
        {"paperId": "c", "year": "nineteen-ninety"},
        [1, 2, 3],
        b"",
        {"paperId": "a", "title": "Arctic one again"},
    ])
    result = _run(discover([], source=f"snapshot:{snap}", checkpoint=InMemoryCheckpoint()))
    by_line = {r.line: r for r in result.records}
    assert sorted(by_line) == [1, 2, 3, 4, 5, 6, 8]
    assert by_line[1].paper is not None and by_line[1].paper.localPdf == "pdfs/a.pdf"
    assert resolve_local_pdf(by_line[1]) == (tmp_path / "pdfs" / "a.pdf").resolve()
    for line, needle in [(2, "invalid JSON"), (3, "UTF-8"), (4, "paperId"), (5, "year"), (6, "list")]:
        rejection = by_line[line].rejection
        assert rejection is not None and rejection.rule_id == "discover.invalid_record"
        assert f"{snap.resolve()}:{line}" in rejection.message or f"{snap}:{line}" in rejection.message
        assert needle in rejection.message
    dedup = deduplicate(result.records)
    assert [r.paper_id for r in dedup.kept] == ["a"]
    assert dedup.duplicates[0].duplicate_of == "a" and dedup.duplicates[0].record.line == 8
    assert len(dedup.invalid) == 5


def test_snapshot_pages_through_checkpoint_and_resumes(tmp_path: Path) -> None:
    snap = _write_jsonl(tmp_path / "s.jsonl", [{"paperId": f"p{i}"} for i in range(5)])
    checkpoint = InMemoryCheckpoint()
    opts = DiscoveryOptions(page_size=2, max_pages=1)
    first = _run(discover([], source=f"snapshot:{snap}", checkpoint=checkpoint, options=opts))
    assert first.outcomes[0].status == "paused" and [r.paper_id for r in first.records] == ["p0", "p1"]
    rest = _run(discover([], source=f"snapshot:{snap}", checkpoint=checkpoint,
                         options=DiscoveryOptions(page_size=2)))
    assert [r.paper_id for r in rest.records] == ["p2", "p3", "p4"]
    assert [r.page for r in rest.records] == [2, 2, 3]
    stream = next(iter(checkpoint.streams.values()))
    assert [(p[0], p[1], p[2]) for p in stream.pages] == [
        (1, None, "line:3"), (2, "line:3", "line:5"), (3, "line:5", None)]
    again = _run(discover([], source=f"snapshot:{snap}", checkpoint=checkpoint))
    assert again.outcomes[0].status == "already_done" and again.records == []


def test_snapshot_relative_path_and_missing_file(tmp_path: Path) -> None:
    _write_jsonl(tmp_path / "rel.jsonl", [{"paperId": "x"}])
    result = _run(discover([], source="snapshot:rel.jsonl", checkpoint=InMemoryCheckpoint(),
                           options=DiscoveryOptions(base_dir=tmp_path)))
    assert [r.paper_id for r in result.records] == ["x"]
    assert result.records[0].origin == str((tmp_path / "rel.jsonl").resolve())
    with pytest.raises(InputError, match="snapshot file not found") as err:
        _run(discover([], source="snapshot:nope.jsonl", checkpoint=InMemoryCheckpoint(),
                      options=DiscoveryOptions(base_dir=tmp_path)))
    assert err.value.path and err.value.path.endswith("nope.jsonl")


@pytest.mark.parametrize("spec", ["s3:foo", "snapshot:", "s2:extra", ""])
def test_bad_source_specs(spec: str) -> None:
    with pytest.raises(ConfigError):
        parse_source(spec)


# ----------------------------------------------------------------------------- S2 Datasets


def _gz_jsonl(path: Path, rows: list[Any]) -> None:
    with gzip.open(path, "wb") as fh:
        for row in rows:
            fh.write(row if isinstance(row, bytes) else json.dumps(row).encode())
            fh.write(b"\n")


def test_s2_datasets_join_and_field_mapping(tmp_path: Path) -> None:
    sha = "a" * 40
    _gz_jsonl(tmp_path / "papers-part0.jsonl.gz", [
        {"corpusid": 11, "url": f"https://www.semanticscholar.org/paper/{sha}",
         "externalids": {"DOI": "10.5194/TC-1-2020", "ArXiv": None}, "title": "Svalbard glaciers",
         "venue": "The Cryosphere", "year": 2020, "publicationdate": "2020-01-02",
         "publicationtypes": ["JournalArticle"], "isopenaccess": True,
         "journal": {"name": "The Cryosphere", "volume": "14"},
         "s2fieldsofstudy": [{"category": "Geology", "source": "external"},
                             {"category": "Environmental Science", "source": "s2-fos-model"}]},
        {"corpusid": 12, "title": "No url here", "year": 2019},
        {"title": "no corpus id"},
        b"\xff\xfe broken",
    ])
    _gz_jsonl(tmp_path / "abstracts-part0.jsonl.gz", [
        {"corpusid": 11, "abstract": "Glaciers on Svalbard are retreating.",
         "openaccessinfo": {"url": "https://tc.example/1.pdf", "status": "GOLD", "license": "CC-BY",
                            "externalids": {}}},
    ])
    result = _run(discover([], source=f"s2-datasets:{tmp_path}", checkpoint=InMemoryCheckpoint(),
                           options=DiscoveryOptions(page_size=3)))
    good = [r.paper for r in result.records if r.paper is not None]
    assert [p.paperId for p in good] == [sha, "CorpusId:12"]
    first = good[0]
    assert first.corpusId == 11 and first.doi == "10.5194/tc-1-2020"
    assert first.externalIds == {"DOI": "10.5194/TC-1-2020"}
    assert first.abstract == "Glaciers on Svalbard are retreating."
    assert first.openAccessPdf is not None and first.openAccessPdf.url == "https://tc.example/1.pdf"
    assert first.publicationTypes == ["JournalArticle"] and first.fieldsOfStudy == ["Geology"]
    assert first.publicationDate == "2020-01-02" and first.isOpenAccess is True
    assert good[1].abstract is None and good[1].openAccessPdf is None
    bad = [r for r in result.records if r.rejection is not None]
    assert [r.line for r in bad] == [3, 4]
    assert bad[0].rejection and bad[0].rejection.evidence["field"] == "corpusid"
    assert [r.page for r in result.records] == [1, 1, 1, 2]
    assert result.records[0].raw["corpusid"] == 11  # provenance keeps the Datasets row itself


def test_s2_datasets_missing_shards(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="papers"):
        _run(discover([], source=f"s2-datasets:{tmp_path}", checkpoint=InMemoryCheckpoint()))


# ----------------------------------------------------------------------------- keyword files


def test_shipped_keyword_file_loads() -> None:
    queries = load_queries()
    assert DEFAULT_KEYWORDS_PATH.name == "arctic.txt"
    assert len(queries) >= 10 and len(set(queries)) == len(queries)
    assert not any(q.startswith("#") for q in queries)


def test_keyword_file_comments_and_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "k.txt"
    path.write_text('# comment\n\nArctic + tundra\n  "sea ice"  \nArctic + tundra\n', encoding="utf-8")
    assert load_queries(path) == ["Arctic + tundra", '"sea ice"']


@pytest.mark.parametrize("content,line,needle", [
    (b'ok\n"sea ice\n', 2, "double quote"),
    (b"(Arctic | tundra\n", 1, "parentheses"),
    (b"fine\n\xff\n", 2, "UTF-8"),
])
def test_keyword_file_errors_name_the_line(tmp_path: Path, content: bytes, line: int, needle: str) -> None:
    path = tmp_path / "k.txt"
    path.write_bytes(content)
    with pytest.raises(InputError, match=needle) as err:
        load_queries(path)
    assert err.value.line == line and err.value.path == str(path)


def test_keyword_file_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_queries(tmp_path / "absent.txt")
    (tmp_path / "empty.txt").write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(InputError, match="no queries"):
        load_queries(tmp_path / "empty.txt")


# ----------------------------------------------------------------------------- dedup and families


def _rec(paper_id: str, **fields: Any) -> RawRecord:
    raw = {"paperId": paper_id, **fields}
    return RawRecord(query="q", page=1, fetched_at=datetime(2026, 1, 1, tzinfo=UTC), origin="s2", raw=raw,
                     paper=PaperRecord.model_validate(raw))


def test_dedup_by_id_then_doi_then_title_year_transitively() -> None:
    title = "Sea ice thickness in the Fram Strait, 1990–2020"
    records = [
        _rec("A", title=title, year=2021, externalIds={"DOI": "10.1/X"}),
        _rec("A", title="changed"),  # same id
        _rec("B", title="Other words entirely", externalIds={"DOI": "10.1/x"}),  # same DOI, other case
        _rec("C", title="SEA ICE thickness in the Fram strait 1990-2020", year=2021),  # title+year
        _rec("D", title=title, year=2019),  # same title, other year: different paper
        _rec("E", title="Introduction", year=2021),
        _rec("F", title="Introduction", year=2021),  # too short a title to merge on
        _rec("G", externalIds={"DOI": "10.1/new"}),
        _rec("H", title="Other words entirely, repeated", externalIds={"DOI": "10.1/new"}),
    ]
    result = deduplicate(records)
    assert [r.paper_id for r in result.kept] == ["A", "D", "E", "F", "G"]
    assert [(d.record.paper_id, d.duplicate_of, d.matched_on) for d in result.duplicates] == [
        ("A", "A", "paper_id"), ("B", "A", "doi"), ("C", "A", "title_year"), ("H", "G", "doi")]
    assert set(result.family_of) == {"A", "D", "E", "F", "G"}
    assert len(set(result.family_of.values())) == 5


def test_preprint_and_published_version_form_one_family() -> None:
    title = "Rapid thaw of ice-rich permafrost on the Yamal Peninsula"
    records = [
        _rec("pre", title=title, year=2021, venue="arXiv.org", externalIds={"ArXiv": "2101.00001"}),
        _rec("pub", title=title + ".", year=2022, venue="Nature Geoscience",
             externalIds={"DOI": "10.1038/s41561-022-1"}),
        _rec("ess", title=title, year=2020, venue="", externalIds={"DOI": "10.1002/essoar.1050"}),
        _rec("alone", title="A different Arctic study of lake ice phenology", year=2022),
        _rec("old", title="Snow on sea ice in the central Arctic Ocean", year=2001,
             journal={"name": "EarthArXiv"}),
        _rec("new", title="Snow on sea ice in the central Arctic Ocean", year=2015,
             journal={"name": "JGR Oceans"}),
    ]
    result = deduplicate(records)
    fam = result.family_of
    assert fam["pre"] == fam["pub"] == fam["ess"] == family_id_for("pub")
    assert fam["alone"] == family_id_for("alone")
    # a preprint 14 years before the journal paper is not its version
    assert fam["old"] != fam["new"]
    assert sorted(len(v) for v in result.families().values()) == [1, 1, 1, 3]


def test_preprints_without_a_published_partner_share_a_family() -> None:
    title = "Methane seepage from the East Siberian Arctic Shelf"
    result = deduplicate([
        _rec("z-arxiv", title=title, year=2020, externalIds={"ArXiv": "2001.1"}),
        _rec("a-rs", title=title, year=2021, venue="Research Square",
             externalIds={"DOI": "10.21203/rs.3.rs-1/v1"}),
    ])
    assert result.family_of["z-arxiv"] == result.family_of["a-rs"] == family_id_for("a-rs")


def test_preprint_detection_and_title_normalisation() -> None:
    assert is_preprint(PaperRecord(paperId="1", externalIds={"DOI": "10.5194/tc-2020-123"}))
    assert not is_preprint(PaperRecord(paperId="2", externalIds={"DOI": "10.5194/tc-15-1-2021"}))
    assert is_preprint(PaperRecord(paperId="3", journal={"name": "bioRxiv"}))
    assert not is_preprint(PaperRecord(paperId="4", externalIds={"ArXiv": "1", "DOI": "10.1/j"}))
    assert normalise_title("  Über  Sea-Ice: (Arctic)! ") == "uber sea ice arctic"
    assert normalise_title(None) == ""


def test_same_year_preprint_and_journal_version_are_a_family_not_duplicates() -> None:
    title = "Atlantification of the Barents Sea observed from moorings"
    result = deduplicate([
        _rec("j", title=title, year=2023, venue="Ocean Science"),
        _rec("x", title=title, year=2023, venue="arXiv"),
        _rec("x2", title=title, year=2023, venue="arXiv.org"),  # same preprint twice
    ])
    assert [r.paper_id for r in result.kept] == ["j", "x"]
    assert [(d.record.paper_id, d.duplicate_of) for d in result.duplicates] == [("x2", "x")]
    assert result.family_of["x"] == result.family_of["j"]
