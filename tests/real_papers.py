"""Ground-truth checks of extraction and eligibility on real published papers.

The papers and their truth live in ``../shared/real-papers/`` (beside the project root, never in
this repository). Each check is one named fact read off a paper's pages: the extraction succeeded,
the title stands in the front matter, each display heading opens a section in print order and no
other line does, the abstract sentence lies whole in one abstract span, every reference entry and
every piece of page furniture stays out of the evidence, each chosen body sentence lies whole in
one span, and the eligibility decision is one the truth accepts.

``python -m tests.real_papers`` prints the score by paper and class, and every failing check.
"""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from arcticqa.evidence import Document

ROOT = Path(os.environ.get("REAL_PAPERS_DIR", Path(__file__).resolve().parents[2] / "shared" / "real-papers"))
TRUTH = ROOT / "truth.json"
ABSENT_REASON = (f"{ROOT} is absent: the real published papers live beside the project in ../shared/real-papers "
                 "(a user's clone does not have them)")

#: section titles the extractor gives itself; never a heading read off the page
SYNTHETIC_KINDS = ("front_matter", "captions", "footnotes", "tables")


@dataclass(frozen=True)
class Check:
    paper: str
    kind: str  # status, title, headings, false_headings, abstract, reference, furniture, sentence, eligibility
    name: str
    passed: bool
    detail: str = ""


#: the truth writes a hemisphere after a degree sign with a space ("48° N") wherever the page
#: shows any gap, printed (a thin space) or not (the glyph's side bearing): both read the same
_DEGREE_HEMISPHERE = re.compile(r"°\s+(?=[NSEW]\b)")


def flat(text: str) -> str:
    """Compare text as a reader does: NFKC, one space between words, case kept."""
    return _DEGREE_HEMISPHERE.sub("°", " ".join(unicodedata.normalize("NFKC", text).split()))


def heading_key(text: str) -> str:
    return flat(text).rstrip(" .:").replace("’", "'").casefold()


@cache
def papers() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(TRUTH.read_text(encoding="utf-8"))["papers"]
    return data


def paper_ids() -> list[str]:
    return [p["id"] for p in papers()] if TRUTH.is_file() else []


def truth_of(paper_id: str) -> dict[str, Any]:
    return next(p for p in papers() if p["id"] == paper_id)


@cache
def document_of(paper_id: str) -> Document:
    from arcticqa.text.extract import extract_pdf_bytes

    return extract_pdf_bytes((ROOT / "pdfs" / truth_of(paper_id)["file"]).read_bytes())


@cache
def decision_of(paper_id: str) -> Any:
    from arcticqa.papers import PaperRecord
    from arcticqa.stages.eligibility import assess

    # as `arcticqa eligibility explain --file PDF` reads a paper: the PDF alone, no metadata
    return assess(PaperRecord(paperId=paper_id), document_of(paper_id))


def _in_one_span(text: str, doc: Document, kinds: tuple[str, ...] | None = None) -> bool:
    want = flat(text)
    return any(want in flat(s.text) for s in doc.spans if kinds is None or s.section in kinds)


def _nearest_span(text: str, doc: Document) -> str:
    """The span holding the sentence's first words, to show what went wrong."""
    head = flat(text)[:40]
    for s in doc.spans:
        if head in flat(s.text):
            return f"[{s.section}] {flat(s.text)[:300]}"
    found = flat(doc.text).find(head)
    return f"not in any span; in the text: {found >= 0}"


def checks(paper_id: str) -> Iterator[Check]:
    truth = truth_of(paper_id)
    doc = document_of(paper_id)
    yield Check(paper_id, "status", "extracted", doc.status == "ok", doc.message or "")
    if doc.status != "ok":
        return
    front = " ".join(doc.text[s.start:s.end] for s in doc.sections if s.kind == "front_matter")
    yield Check(paper_id, "title", truth["title"], flat(truth["title"]).casefold() in flat(front).casefold()
                and not _in_one_span(truth["title"], doc), "")
    titles = [heading_key(s.title) for s in doc.sections if s.kind not in SYNTHETIC_KINDS]
    cursor = 0
    for heading in truth["headings"]:
        key = heading_key(heading)
        at = titles.index(key, cursor) if key in titles[cursor:] else -1
        yield Check(paper_id, "headings", heading, at >= 0,
                    "" if at >= 0 else ("out of order" if key in titles else "not a section"))
        cursor = at + 1 if at >= 0 else cursor
    # the abstract's own label is checked by where the abstract sentence lands
    allowed = {heading_key(h) for h in truth["headings"] + truth.get("also_headings", []) + ["Abstract"]}
    extra = [s.title for s in doc.sections
             if s.kind not in SYNTHETIC_KINDS and heading_key(s.title) not in allowed
             and not s.title.endswith("(found by the shape of the list)")
             and not s.title.endswith(("(no heading in the PDF)", "(continued)"))]
    yield Check(paper_id, "false_headings", "no other line opens a section", not extra, "; ".join(extra)[:500])
    yield Check(paper_id, "abstract", truth["abstract_sentence"][:60],
                _in_one_span(truth["abstract_sentence"], doc, ("abstract",)),
                _nearest_span(truth["abstract_sentence"], doc))
    for entry in truth["references"]:
        inside = [s.id for s in doc.spans if flat(entry) in flat(s.text)]
        yield Check(paper_id, "reference", entry[:60], not inside, ", ".join(inside))
    for piece in truth["furniture"]:
        inside = [f"[{s.section}] {flat(s.text)[:200]}" for s in doc.spans if flat(piece) in flat(s.text)]
        yield Check(paper_id, "furniture", piece[:60], not inside, " | ".join(inside))
    for sentence in truth["sentences"]:
        yield Check(paper_id, "sentence", sentence["text"][:60], _in_one_span(sentence["text"], doc),
                    _nearest_span(sentence["text"], doc))
    decision = decision_of(paper_id)
    accept = truth["eligibility"]["accept"]
    yield Check(paper_id, "eligibility", f"one of {', '.join(accept)}", decision.decision in accept,
                f"{decision.decision}: {', '.join(decision.rule_ids)}")


def all_checks() -> list[Check]:
    return [c for pid in paper_ids() for c in checks(pid)]


def main() -> int:
    if not TRUTH.is_file():
        print(ABSENT_REASON, file=sys.stderr)
        return 2
    results = all_checks()
    kinds = sorted({c.kind for c in results}, key=[c.kind for c in results].index)
    width = max(len(p) for p in paper_ids())
    print(f"{'paper':<{width}}  " + "  ".join(f"{k:>14}" for k in kinds))
    for pid in paper_ids():
        row = []
        for kind in kinds:
            mine = [c for c in results if c.paper == pid and c.kind == kind]
            row.append(f"{sum(c.passed for c in mine)}/{len(mine)}" if mine else "-")
        print(f"{pid:<{width}}  " + "  ".join(f"{r:>14}" for r in row))
    passed = sum(c.passed for c in results)
    print(f"\n{passed}/{len(results)} checks hold ({100 * passed / len(results):.1f}%)\n")
    for c in results:
        if not c.passed:
            print(f"FAIL {c.paper} {c.kind}: {c.name}\n     {c.detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
