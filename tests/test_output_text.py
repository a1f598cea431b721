"""User-supplied text in the files the project writes: CSV cells never run, Markdown never renders.

A model label like ``=cmd|' /C calc'!A0`` must not be a live formula in any report CSV, and
``<script>alert(1)</script>`` must not be raw HTML in TABLES.md. The neutralising must never touch
a true value: every cell of the published ArcticQA v1 result CSVs, and any number the report
formats, comes out unchanged.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.outputs import csv_cell, md_code, md_text
from tests.test_hostile_files import _csv, _rows, _set

HOSTILE_LABELS = ["=cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0", "+m2", "-2+3+cmd|' /C calc'!A0",
                  "\t=1+1", "\r=1+1", "<script>alert(1)</script>"]
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


@pytest.mark.parametrize("label", HOSTILE_LABELS)
def test_formula_text_is_neutralised(label: str) -> None:
    expected = "'" + label if label.startswith(FORMULA_START) else label
    assert csv_cell(label) == expected


def test_numbers_are_never_touched() -> None:
    rng = random.Random(15)
    values = [rng.uniform(-1e6, 1e6) * 10 ** rng.randint(-12, 3) for _ in range(5000)] + [0.0, -0.0]
    formatted = [fmt.format(v) for v in values for fmt in ("{:.6f}", "{:+.2f}", "{:.1e}", "{:.3f}", "{:g}")]
    formatted += [str(rng.randint(-10**9, 10**9)) for _ in range(1000)]
    assert [csv_cell(s) for s in formatted] == formatted


def test_the_published_v1_results_are_unchanged(arcticqa_v1: Path) -> None:
    cells = [cell for name in ("condition-shifts.csv", "metrics.csv", "trial-metrics.csv", "outcome-counts.csv")
             for row in csv.reader((arcticqa_v1 / "results" / name).open(encoding="utf-8")) for cell in row]
    assert len(cells) > 500
    assert [csv_cell(c) for c in cells] == cells
    labels = {row[3] for row in csv.reader((arcticqa_v1 / "responses.csv").open(encoding="utf-8"))}
    assert {md_text(label) for label in labels if label != "model_label"} == labels - {"model_label"}


def test_markdown_escaping_shows_the_text_and_keeps_the_table() -> None:
    assert md_text("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert md_text("a | b\nc") == r"a \| b c"
    assert md_text("**bold** [link](http://x)") == r"\*\*bold\*\* \[link\](http://x)"
    assert md_code("x`y.jsonl") == "`x'y.jsonl`"


def test_a_report_with_hostile_labels_writes_inert_csv_and_markdown(tmp_path: Path) -> None:
    rows = _rows()
    for i, label in enumerate(HOSTILE_LABELS[:3] + HOSTILE_LABELS[-1:]):
        # each model answers both conditions of all three items
        rows += [{**r, "model": f"m{i + 2}", "model_label": label} for r in _rows()]
    responses = tmp_path / "responses.csv"
    responses.write_bytes(_csv(_set(0, model_label=HOSTILE_LABELS[0])(rows)))
    out = tmp_path / "report"
    result = CliRunner().invoke(app, ["evaluate", "report", "--responses", str(responses), "--out", str(out),
                                      "--resamples", "50", "--draws", "50", "--no-figure"])
    assert result.exit_code == 0, result.output
    live = [(p.name, cell) for p in sorted(out.glob("*.csv"))
            for row in csv.reader(p.open(encoding="utf-8")) for cell in row
            if cell.startswith(FORMULA_START) and csv_cell(cell) != cell]
    assert live == []
    labelled = [cell for p in out.glob("*.csv") for row in csv.reader(p.open(encoding="utf-8")) for cell in row
                if cell.startswith("'")]
    assert len(labelled) >= 3  # the labels are there, neutralised, not dropped
    tables = (out / "TABLES.md").read_text(encoding="utf-8")
    assert "<script>" not in tables and "&lt;script&gt;alert(1)&lt;/script&gt;" in tables
