"""Shared report plumbing for the evaluator's protocols: CSV text and atomic report folders.

A report folder is written to a temporary sibling and renamed into place by
:mod:`arcticqa.outputs`, so a failed run never leaves a half-written report, and a folder
holding anything but report files is never replaced.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arcticqa.outputs import check_folder_target, csv_cell, md_code, md_text, write_folder

__all__ = ["REPORT_FILES", "check_report_folder", "csv_cell", "csv_text", "f6", "md_code", "md_text",
           "write_report_folder"]


def csv_text(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Every CSV the evaluator writes: one header, ``\\n`` line ends, formula text neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(v) for v in header])
    writer.writerows([csv_cell(v) for v in row] for row in rows)
    return buffer.getvalue()


def f6(value: float | None) -> str:
    """Six decimals (the evaluator's CSV number format); empty for a missing value."""
    if value is None or value != value:  # None or NaN
        return ""
    return f"{value:.6f}"


#: every file a report writer (ArcticAbstain, Abstain-QA, Know2Guess, open) may put in its folder:
#: what ``--overwrite`` may replace there; anything else in the folder is someone else's
REPORT_FILES = frozenset({
    "TABLES.md", "summary.json", "checks.json", "condition-shifts.csv", "metrics.csv", "trial-metrics.csv",
    "outcome-counts.csv", "confusion.csv", "thresholds.csv", "parser-sensitivity.csv", "zones.csv",
    "contamination.csv", "EXPOSURE.md", "exposure.csv", "exposure-tests.csv", "exposure-zones.csv", "undated-items.csv", "coverage-summary.csv", "coverage-risk.csv", "lambda-sweep.csv", "coverage.json", "pairing.csv",
    *(f"{stem}.{ext}" for stem in ("figure-1", "exposure", "coverage-risk", "abstainqa-metrics", "know2guess-zones",
                                   "open-outcomes")
      for ext in ("png", "svg")),
    # the prompt-robustness report (evaluate report --variants)
    "VARIANTS.md", "variant-metrics.csv", "variant-spread.csv", "ranking-flips.csv", "variants.json",
    "variants.png", "variants.svg",
    # the item audit (evaluate items)
    "ITEMS.md", "item-stats.csv", "suspects.csv", "item-models.csv", "item-map.png", "item-map.svg",
})


def check_report_folder(out_dir: Path | str, *, overwrite: bool) -> Path:
    """Refuse a report target before the work (see :func:`arcticqa.outputs.check_folder_target`)."""
    return check_folder_target(out_dir, overwrite=overwrite, own=REPORT_FILES)


def write_report_folder(out_dir: Path | str, texts: Mapping[str, str],
                        figures: Sequence[Callable[[Path], None]] = (), *, overwrite: bool = True) -> Path:
    """Write ``texts`` (file name -> content) and call each figure writer with the staging folder;
    then put the folder in place as a whole (:func:`arcticqa.outputs.write_folder`)."""
    def fill(staging: Path) -> None:
        for name, text in texts.items():
            (staging / name).write_text(text, encoding="utf-8")
        for draw in figures:
            draw(staging)

    return write_folder(out_dir, fill, overwrite=overwrite, own=REPORT_FILES | set(texts))
