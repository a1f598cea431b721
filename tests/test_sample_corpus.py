"""The bundled sample corpus: valid S2 records, reproducible PDFs, and the intended funnel mix.

The corpus is what ``make demo`` runs on, so these tests pin what each paper is for: which
branch of the funnel it demonstrates and the stage outcome that shows it. Stage modules are
imported inside the tests that need them (and skipped when absent) so the record and
reproducibility checks run even while other stages are being written.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from arcticqa.demo.corpus import (
    BRANCHES,
    CORPUS_DIR,
    DOI_PREFIX,
    FICTION_NOTE,
    SOURCES_DIR,
    VENUE,
    build_corpus,
    check_corpus,
    load_sources,
    main,
    paper_id_for,
)
from arcticqa.papers import PaperRecord

RUSSIAN_NOTE = "Вымышленное исследование, написанное для демонстрационного корпуса arcticqa"
ELIGIBLE_BRANCHES = ("eligible_terrestrial", "eligible_marine", "eligible_russian", "unverifiable")


def _records() -> list[dict[str, Any]]:
    lines = (CORPUS_DIR / "papers.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


RECORDS = _records()


def _by_branch(*branches: str) -> list[dict[str, Any]]:
    return [r for r in RECORDS if r["arcticqa_sample"]["branch"] in branches]


def _pdf(record: dict[str, Any]) -> Path:
    return CORPUS_DIR / record["localPdf"]


def _ids(records: list[dict[str, Any]]) -> list[str]:
    return [r["arcticqa_sample"]["slug"] for r in records]


# -- records --------------------------------------------------------------------------------------
def test_records_validate_and_are_labelled_fictional() -> None:
    assert len(RECORDS) >= 12
    for record in RECORDS:
        paper = PaperRecord.model_validate(record)
        sample = record["arcticqa_sample"]
        assert sample["fictional"] is True
        assert paper.paperId == paper_id_for(sample["slug"])
        assert re.fullmatch(r"[0-9a-f]{40}", paper.paperId)
        assert paper.doi == f"{DOI_PREFIX}.{sample['number']:03d}"
        assert paper.venue == VENUE and "fictional" in paper.venue
        assert paper.year is not None and 2015 <= paper.year <= 2024
        assert paper.publicationDate and paper.publicationDate.startswith(str(paper.year))
        assert paper.abstract and "\u00ad" not in paper.abstract and "\u00ad" not in (paper.title or "")
        assert paper.abstract.startswith((FICTION_NOTE, RUSSIAN_NOTE)), paper.title
    assert len({r["paperId"] for r in RECORDS}) == len(RECORDS)
    assert len({r["externalIds"]["DOI"] for r in RECORDS}) == len(RECORDS)
    assert len({r["title"] for r in RECORDS}) == len(RECORDS)  # dedup must keep every paper


def test_local_pdfs_exist_for_open_access_only() -> None:
    for record in RECORDS:
        paper = PaperRecord.model_validate(record)
        if paper.isOpenAccess:
            assert paper.openAccessPdf is not None and paper.openAccessPdf.url
            assert paper.openAccessPdf.url.startswith("https://example.org/arcticqa-sample/")
            assert paper.localPdf and _pdf(record).is_file(), paper.localPdf
            assert _pdf(record).read_bytes().startswith(b"%PDF-")
        else:
            assert paper.openAccessPdf is None and paper.localPdf is None
    on_disk = {p.name for p in (CORPUS_DIR / "pdf").glob("*")}
    assert on_disk == {Path(r["localPdf"]).name for r in RECORDS if r.get("localPdf")}


def test_funnel_mix() -> None:
    counts = Counter(r["arcticqa_sample"]["branch"] for r in RECORDS)
    assert set(counts) == set(BRANCHES)
    assert counts["eligible_terrestrial"] >= 2 and counts["eligible_marine"] >= 2
    for branch in BRANCHES:
        assert counts[branch] >= 1, branch
    (review,) = _by_branch("review")
    assert review["publicationTypes"] == ["Review"]
    (closed,) = _by_branch("closed_access")
    assert closed["isOpenAccess"] is False and closed["openAccessPdf"] is None and "localPdf" not in closed
    assert [r["arcticqa_sample"]["pdf"] for r in _by_branch("corrupt_pdf")] == ["corrupt"]
    assert [r["arcticqa_sample"]["pdf"] for r in _by_branch("image_only_pdf")] == ["image_only"]
    (russian,) = _by_branch("eligible_russian")
    assert re.search("[а-яА-Я]", russian["title"]) and not re.search("[A-Za-z]{4,}", russian["title"])


def test_layout_mix_and_size() -> None:
    text_pdfs = [r for r in RECORDS if r["arcticqa_sample"]["pdf"] == "text"]
    assert sum(r["arcticqa_sample"]["columns"] == 2 for r in text_pdfs) >= 3
    pages = {r["arcticqa_sample"]["slug"]: pymupdf.open(_pdf(r)).page_count for r in text_pdfs}
    assert sum(n >= 2 for n in pages.values()) >= 3, pages
    assert all(n <= 3 for n in pages.values()), pages
    total = sum(p.stat().st_size for p in (CORPUS_DIR / "pdf").glob("*.pdf"))
    assert total < 1_500_000, total


# -- reproducibility ------------------------------------------------------------------------------
def test_committed_files_match_a_fresh_build() -> None:
    assert check_corpus() == []
    assert main(["--check"]) == 0


def test_check_notices_an_edited_source(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    shutil.copytree(SOURCES_DIR, sources)
    first = sorted(sources.glob("*.toml"))[0]
    first.write_text(first.read_text(encoding="utf-8").replace("increased by 18%", "increased by 81%"),
                     encoding="utf-8")
    problems = check_corpus(CORPUS_DIR, sources)
    assert any(p.startswith("papers.jsonl") for p in problems), problems
    assert any(p.startswith("pdf/bayelva-active-layer.pdf") for p in problems), problems


def test_build_is_byte_identical_twice(tmp_path: Path) -> None:
    build_corpus(tmp_path / "a")
    build_corpus(tmp_path / "b")
    a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert a == b and a
    for rel in a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_sources_cover_every_record() -> None:
    slugs = [s.meta.slug for s in load_sources()]
    assert slugs == _ids(RECORDS)


# -- the stages the corpus is meant to exercise ---------------------------------------------------
def test_prefilter_outcomes() -> None:
    prefilter_mod = pytest.importorskip("arcticqa.stages.prefilter")
    policy = prefilter_mod.load_metadata_policy()
    for record in RECORDS:
        decision = prefilter_mod.prefilter(PaperRecord.model_validate(record), policy)
        branch = record["arcticqa_sample"]["branch"]
        if branch == "review":
            assert decision.rule_ids == ["prefilter.publication_type_excluded"]
        elif branch == "closed_access":
            assert decision.rule_ids == ["prefilter.no_open_access_pdf"]
        else:
            assert decision.disposition == "pass", (branch, decision.rule_ids)
            assert decision.language == ("ru" if branch == "eligible_russian" else "en")


def test_extraction_statuses() -> None:
    extract_mod = pytest.importorskip("arcticqa.stages.extract_text")
    for record in RECORDS:
        if not record.get("localPdf"):
            continue
        doc = extract_mod.extract_document(_pdf(record))
        kind = record["arcticqa_sample"]["pdf"]
        if kind == "corrupt":
            assert doc.status == "corrupt", doc.message
        elif kind == "image_only":
            assert doc.status == "no_text_layer", doc.message
        else:
            assert doc.status == "ok", (record["localPdf"], doc.message)
            kinds = {s.kind for s in doc.sections}
            assert "abstract" in kinds and "references" in kinds, kinds
            if record["arcticqa_sample"]["branch"] != "review":
                assert {"results", "study_area", "methods"} <= kinds, kinds
            assert "Fictional study" in doc.text or "Вымышленное исследование" in doc.text


def test_eligibility_outcomes() -> None:
    extract_mod = pytest.importorskip("arcticqa.stages.extract_text")
    eligibility = pytest.importorskip("arcticqa.stages.eligibility")
    expected = {"subarctic": ("ineligible", "eligibility.south_of_arctic_circle"),
                "antarctic": ("ineligible", "eligibility.southern_hemisphere")}
    expected.update({b: ("eligible", None) for b in ELIGIBLE_BRANCHES})
    for record in RECORDS:
        branch = record["arcticqa_sample"]["branch"]
        if branch not in expected:
            continue
        doc = extract_mod.extract_document(_pdf(record))
        decision = eligibility.assess(PaperRecord.model_validate(record), doc)
        want, rule_id = expected[branch]
        assert decision.decision == want, (record["localPdf"], decision.message)
        if rule_id:
            assert decision.rule_ids == [rule_id]
        if branch == "eligible_marine":
            assert "eligibility.site_in_arctic_region" in decision.rule_ids
