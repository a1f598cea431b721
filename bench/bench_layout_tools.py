"""Benchmark: our extractor against pymupdf4llm (with pymupdf-layout's model) on the real papers.

Scores both on the classes of ``tests/real_papers.py`` that apply to plain Markdown: body
sentences that lie whole in one paragraph (ours: one evidence span), display headings found as
headings, page furniture kept out of the body, and seconds per page. Needs
``../shared/real-papers``.

    .venv/bin/python -m bench.bench_layout_tools [--papers N]
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from tests.real_papers import ABSENT_REASON, ROOT, TRUTH, document_of, flat, heading_key, paper_ids, truth_of

_MARKUP = re.compile(r"<sup>(.*?)</sup>|<sub>(.*?)</sub>|\*\*|__|`|^#+\s*|^[-*]\s+", re.MULTILINE)


def _plain(markdown: str) -> str:
    return _MARKUP.sub(lambda m: m.group(1) or m.group(2) or "", markdown)


def _score_markdown(paper: str, markdown: str) -> tuple[int, int, int]:
    truth = truth_of(paper)
    paragraphs = [flat(_plain(p)) for p in re.split(r"\n\s*\n", markdown) if p.strip()]
    sentences = sum(any(flat(s["text"]) in p for p in paragraphs) for s in truth["sentences"])
    headings_md = {heading_key(_plain(line)) for line in markdown.splitlines() if line.lstrip().startswith("#")}
    headings = sum(heading_key(h) in headings_md for h in truth["headings"])
    body = " ".join(paragraphs)
    furniture = sum(flat(f) not in body for f in truth["furniture"])
    return sentences, headings, furniture


def _score_ours(paper: str) -> tuple[int, int, int]:
    truth = truth_of(paper)
    doc = document_of(paper)
    spans = [flat(s.text) for s in doc.spans]
    sentences = sum(any(flat(s["text"]) in sp for sp in spans) for s in truth["sentences"])
    titles = {heading_key(s.title) for s in doc.sections}
    headings = sum(heading_key(h) in titles for h in truth["headings"])
    furniture = sum(not any(flat(f) in sp for sp in spans) for f in truth["furniture"])
    return sentences, headings, furniture


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=0, help="only the first N papers (0 = all)")
    args = parser.parse_args()
    if not TRUTH.is_file():
        print(ABSENT_REASON, file=sys.stderr)
        return 2
    import pymupdf
    import pymupdf4llm  # heavy: loads onnxruntime and the layout model

    papers = paper_ids()[: args.papers or None]
    totals = {"pymupdf4llm": [0, 0, 0, 0.0], "arcticqa": [0, 0, 0, 0.0]}
    wanted = [0, 0, 0]
    pages = 0
    print(f"{'paper':22} {'tool':12} {'sentences':>9} {'headings':>9} {'furniture':>9} {'s/page':>7}")
    for paper in papers:
        truth = truth_of(paper)
        path = ROOT / "pdfs" / truth["file"]
        with pymupdf.open(path) as doc:
            n = doc.page_count
        pages += n
        wanted = [wanted[0] + len(truth["sentences"]), wanted[1] + len(truth["headings"]),
                  wanted[2] + len(truth["furniture"])]
        started = time.perf_counter()
        markdown = pymupdf4llm.to_markdown(str(path), show_progress=False)
        theirs_s = time.perf_counter() - started
        started = time.perf_counter()
        document_of.cache_clear()
        ours = _score_ours(paper)
        ours_s = time.perf_counter() - started
        for tool, score, seconds in (("pymupdf4llm", _score_markdown(paper, markdown), theirs_s),
                                     ("arcticqa", ours, ours_s)):
            row = totals[tool]
            for i in range(3):
                row[i] += score[i]
            row[3] += seconds
            print(f"{paper:22} {tool:12} {score[0]:9} {score[1]:9} {score[2]:9} {seconds / n:7.3f}")
    print(f"\n{'all ' + str(len(papers)) + ' papers':22} {'wanted':12} {wanted[0]:9} {wanted[1]:9} {wanted[2]:9}")
    for tool, row in totals.items():
        print(f"{'':22} {tool:12} {row[0]:9.0f} {row[1]:9.0f} {row[2]:9.0f} {row[3] / pages:7.3f}")
    ratio = totals["pymupdf4llm"][3] / totals["arcticqa"][3]
    print(f"\npymupdf4llm takes {ratio:.0f}x our time per page")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
