"""Extraction and eligibility on real published papers, checked against a truth read off the pages.

The papers live in ``../shared/real-papers/`` (never in this repository); every test skips with the
reason when that folder is absent. One test per paper and class of check, so a failure names its
class: ``status``, ``title``, ``headings``, ``false_headings``, ``abstract``, ``reference``,
``furniture``, ``sentence``, ``eligibility`` (tests/real_papers.py defines each).
"""

from __future__ import annotations

import hashlib

import pytest

from tests.real_papers import ABSENT_REASON, ROOT, TRUTH, all_checks, checks, document_of, paper_ids, truth_of

if not TRUTH.is_file():
    pytest.skip(ABSENT_REASON, allow_module_level=True)

KINDS = ("status", "title", "headings", "false_headings", "abstract", "reference", "furniture", "sentence",
         "eligibility")

#: checks that fail today, each with its cause (docs/fulltext.md lists them too); strict, so a
#: fix that makes one pass must also take it off this list
KNOWN: dict[tuple[str, str], str] = {}


@pytest.mark.parametrize("paper", paper_ids())
def test_the_pdf_is_the_one_the_truth_was_read_from(paper: str) -> None:
    truth = truth_of(paper)
    assert hashlib.sha256((ROOT / "pdfs" / truth["file"]).read_bytes()).hexdigest() == truth["sha256"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("paper", paper_ids())
def test_real_paper(paper: str, kind: str, request: pytest.FixtureRequest) -> None:
    if (paper, kind) in KNOWN:
        request.applymarker(pytest.mark.xfail(reason=KNOWN[(paper, kind)], strict=True))
    mine = [c for c in checks(paper) if c.kind == kind]
    if kind != "status" and document_of(paper).status != "ok":
        pytest.fail(f"{paper}: extraction failed ({document_of(paper).status})")
    assert mine, f"no {kind} check for {paper}: the truth has no entry of that kind"
    failed = [f"{c.name!r}: {c.detail}" for c in mine if not c.passed]
    assert not failed, f"{len(failed)} of {len(mine)} {kind} checks fail:\n" + "\n".join(failed)


def test_at_least_98_percent_of_the_checks_hold() -> None:
    results = all_checks()
    held = sum(c.passed for c in results)
    assert held >= 0.98 * len(results), f"{held}/{len(results)} checks hold"
