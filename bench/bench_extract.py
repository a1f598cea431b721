"""Benchmark: extraction speed on a generated 200-page two-column PDF and on real papers.

Prints pages per second for our extractor, the share of its time spent inside PyMuPDF versus
our post-processing (reading order, cleaning, sections, spans), and, side by side, plain
``get_text`` and (optionally, on a few pages because it is slow) pymupdf4llm.

With ``--against REV`` (default: the extractor before it was fitted to real published papers)
the same PDFs — the generated one, and the real papers of ``../shared/real-papers`` when present —
are extracted by that revision and by the working tree, each in its own process, alternated
``--rounds`` times, and the pages/s of both and their ratio are printed.

    .venv/bin/python -m bench.bench_extract [--pages 200] [--pymupdf4llm-pages 10] [--against REV|none]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import pymupdf

from arcticqa.stages.extract_text import extract_document
from arcticqa.text.extract import TEXT_FLAGS
from arcticqa.text.render import PaperSection, PaperSource, render_paper_pdf


def _paper() -> PaperSource:
    words = ("sea ice extent declined over the Barents Sea while permafrost temperature at the "
             "monitoring boreholes increased and snow depth on the tundra varied with winter "
             "precipitation and wind redistribution").split()
    paragraphs = []
    for n in range(8):
        sentences = [" ".join(words[(n + k + i) % len(words)] for i in range(14 + k)).capitalize() + "."
                     for k in range(6)]
        paragraphs.append(" ".join(sentences))
    sections = [PaperSection(heading=f"{i + 1}. {name}", paragraphs=paragraphs,
                             captions=["Figure 1. Station map."] if i == 2 else [])
                for i, name in enumerate(["Introduction", "Study area", "Methods", "Results", "Discussion"])]
    return PaperSource(title="Benchmark paper", authors=["A. Bench"], venue="Bench Journal 1 (2024)",
                       abstract="A generated paper for timing extraction.", sections=sections,
                       references=[f"Author {i}. Title {i}. Journal {i}, 1-2." for i in range(30)])


def _build(target_pages: int) -> bytes:
    paper = _paper()
    one = render_paper_pdf(paper, columns=2, running_header="Benchmark paper — Bench et al.")
    with pymupdf.open(stream=one, filetype="pdf") as doc:
        per_repeat = max(doc.page_count - 1, 1)
    repeat = max(1, -(-target_pages // per_repeat))
    while True:  # repeats share pages, so the first estimate undershoots: grow until reached
        data = render_paper_pdf(paper, columns=2, running_header="Benchmark paper — Bench et al.", repeat=repeat)
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            pages = doc.page_count
        if pages >= target_pages:
            return data
        repeat = max(repeat + 1, -(-repeat * target_pages // pages))


ROOT = Path(__file__).resolve().parents[1]
REAL_PAPERS = ROOT.parent / "shared" / "real-papers" / "pdfs"
#: the extractor before it was fitted to real published papers (page and column edges, false
#: headings, unlabelled abstracts, glued words): the speed it must stay within 20% of
BASELINE = "edb5196"


def _export(rev: str, into: Path) -> bool:
    """The ``arcticqa`` package of ``rev`` unpacked into ``into``; False where git cannot give it."""
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "arcticqa"],
                                 capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"--against {rev}: cannot read that revision ({exc}); side by side skipped")
        return False
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return True


def _child(tree: Path, repeats: int, pdfs: list[Path]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("_extract_child.py")), str(repeats),
                          *map(str, pdfs)], capture_output=True, text=True, check=True, env=env).stdout
    result: dict[str, float] = json.loads(out)
    return result


def _side_by_side(rev: str, sets: list[tuple[str, list[Path]]], rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old_tree = Path(tmp) / "old"
        if not _export(rev, old_tree):
            return
        print(f"\nside by side: {rev} against the working tree, {rounds} alternated rounds, best of 3 each")
        print(f"{'PDFs':24} {'pages':>6} {rev + ' pages/s':>16} {'now pages/s':>12} {'now/old':>8}")
        for name, pdfs in sets:
            old: list[float] = []
            new: list[float] = []
            pages = 0.0
            for _ in range(rounds):
                a = _child(old_tree, 3, pdfs)
                b = _child(ROOT, 3, pdfs)
                assert str(old_tree) in str(a["module"]) and str(ROOT) in str(b["module"]), (a, b)
                pages = b["pages"]
                old.append(pages / a["seconds"])
                new.append(pages / b["seconds"])
            old_rate, new_rate = statistics.median(old), statistics.median(new)
            print(f"{name:24} {pages:6.0f} {old_rate:16.1f} {new_rate:12.1f} {new_rate / old_rate:8.2f}")


def _time(fn, repeats: int = 3) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--pymupdf4llm-pages", type=int, default=0,
                        help="also time pymupdf4llm on this many pages (slow; 0 = skip)")
    parser.add_argument("--against", default=BASELINE,
                        help=f"time this git revision's extractor beside the working tree (default {BASELINE}; "
                             "'none' to skip)")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds of old and new (median)")
    args = parser.parse_args()

    t = time.perf_counter()
    data = _build(args.pages)
    build_s = time.perf_counter() - t
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        pages = doc.page_count
    print(f"generated {pages} two-column pages ({len(data) / 1e6:.2f} MB) in {build_s:.2f} s")

    def plain() -> None:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            for page in doc:
                page.get_text("text", flags=TEXT_FLAGS)

    def as_dict() -> None:
        with pymupdf.open(stream=data, filetype="pdf") as doc:
            for page in doc:
                page.get_text("dict", flags=TEXT_FLAGS)

    plain_s = _time(plain)
    dict_s = _time(as_dict)
    runs = [extract_document(data) for _ in range(3)]
    best = min(runs, key=lambda d: d.stats["time_total_s"])
    total = best.stats["time_total_s"]
    in_mupdf = best.stats["time_pymupdf_s"]
    post = best.stats["time_postprocess_s"]
    print(f"{'method':34} {'seconds':>8} {'pages/s':>9} {'ms/page':>8}")
    for name, seconds in [("get_text('text') (no order)", plain_s), ("get_text('dict') only", dict_s),
                          ("arcticqa extract_document", total)]:
        print(f"{name:34} {seconds:8.3f} {pages / seconds:9.1f} {1000 * seconds / pages:8.2f}")
    print(f"arcticqa split: PyMuPDF {in_mupdf:.3f} s ({in_mupdf / total:.0%}), "
          f"post-processing {post:.3f} s ({post / total:.0%}); "
          f"post/PyMuPDF ratio {post / in_mupdf:.2f}")
    print(f"document: status={best.status} chars={best.stats['chars']} spans={best.stats['spans']} "
          f"chunks={best.stats['chunks']} running lines removed={best.stats['running_lines_removed']}")

    if args.against != "none":
        with tempfile.TemporaryDirectory() as tmp:
            generated = Path(tmp) / "generated.pdf"
            generated.write_bytes(data)
            sets = [("generated two-column", [generated])]
            real = sorted(REAL_PAPERS.glob("*.pdf")) if REAL_PAPERS.is_dir() else []
            if real:
                sets.append((f"real papers ({len(real)})", real))
            else:
                print(f"({REAL_PAPERS} absent: the real papers are not timed)")
            _side_by_side(args.against, sets, args.rounds)

    if args.pymupdf4llm_pages:
        import pymupdf4llm  # noqa: PLC0415  (heavy; only when asked)

        n = min(args.pymupdf4llm_pages, pages)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.pdf"
            path.write_bytes(data)
            t = time.perf_counter()
            pymupdf4llm.to_markdown(str(path), pages=list(range(n)))
            llm_s = time.perf_counter() - t
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ours_per_page = total / pages
        print(f"{'pymupdf4llm.to_markdown':34} {llm_s:8.3f} {n / llm_s:9.1f} {1000 * llm_s / n:8.2f}"
              f"   ({n} pages; peak RSS {rss_mb:.0f} MB; {llm_s / n / ours_per_page:.0f}x slower per page)")


if __name__ == "__main__":
    main()
