"""`arcticqa evaluate score|report` from the command line: external runs, bad input, unknown protocols."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app

runner = CliRunner()


def _text(output: str) -> str:
    """The output with rich's line wrapping undone."""
    return " ".join(output.split())


def test_score_external_run_matches_published_counts(arcticqa_v1: Path, tmp_path: Path) -> None:
    # Re-shape the published responses into the external format, dropping the zero-width space and
    # the kinds, so every option's kind must be recovered from items.jsonl.
    external = tmp_path / "external.jsonl"
    with (arcticqa_v1 / "responses.csv").open(encoding="utf-8", newline="") as src, external.open("w") as dst:
        for row in csv.DictReader(src):
            options = {L: row[f"option_{L}"].replace("\u200b", "") for L in "ABCDE"}
            raw = row["raw_response_text"] or None
            dst.write(json.dumps({"question_id": row["item_id"], "model": row["model"],
                                  "model_label": row["model_label"], "condition": row["condition"],
                                  "trial": int(row["trial"]), "options": options, "raw_response_text": raw,
                                  "finish_reason": row["finish_reason"] or None}) + "\n")
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "arcticabstain", "--items",
                                 str(arcticqa_v1 / "items.jsonl"), "--responses", str(external), "--out", str(out),
                                 "--resamples", "200", "--draws", "200", "--no-figure"])
    assert result.exit_code == 0, result.output
    assert (out / "outcome-counts.csv").read_text() == (arcticqa_v1 / "results" / "outcome-counts.csv").read_text()


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


ITEM = {"item_id": "q1", "question": "Q?", "question_context": "", "gold_answer": "g",
        "distractors": [{"rank": r, "text": f"d{r}"} for r in range(4)]}


def test_score_bad_line_names_file_line_and_field(tmp_path: Path) -> None:
    items = _write(tmp_path / "items.jsonl", [ITEM])
    good = {"item_id": "q1", "condition": "answer_absent", "trial": 1,
            "options": {"A": "d0", "B": "d1", "C": "d2", "D": "d3", "E": "I abstain from answering"},
            "raw_response_text": "E"}
    responses = _write(tmp_path / "r.jsonl", [good, good | {"condition": "answer_maybe"}])
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "arcticabstain", "--items", str(items),
                                 "--responses", str(responses), "--out", str(out)])
    assert result.exit_code == 2
    assert "r.jsonl:2:" in _text(result.output) and "'condition'" in _text(result.output)
    assert not out.exists()


@pytest.mark.parametrize(("change", "field"), [
    ({"item_id": "q9"}, "'item_id'"),  # the field the line uses is named, not the reader's default
    ({"item_id": None, "question_id": "q9"}, "'question_id'"),
    ({"raw_response_text": 5}, "'raw_response_text'"),
    ({"trial": "first"}, "'trial'"),
])
def test_score_shared_reader_checks_arcticabstain_lines(tmp_path: Path, change: dict, field: str) -> None:
    items = _write(tmp_path / "items.jsonl", [ITEM])
    good = {"item_id": "q1", "condition": "answer_absent", "trial": 1,
            "options": {"A": "d0", "B": "d1", "C": "d2", "D": "d3", "E": "I abstain from answering"},
            "raw_response_text": "E"}
    responses = _write(tmp_path / "r.jsonl", [good, {k: v for k, v in (good | change).items() if v is not None}])
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "arcticabstain", "--items", str(items),
                                 "--responses", str(responses), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "r.jsonl:2:" in _text(result.output) and field in _text(result.output)
    assert not out.exists()


def test_score_duplicate_cell_is_refused(tmp_path: Path) -> None:
    items = _write(tmp_path / "items.jsonl", [ITEM])
    row = {"item_id": "q1", "condition": "answer_present", "trial": 1,
           "options": [{"letter": L, "text": t} for L, t in zip("ABCDE", ["g", "d0", "d1", "d2",
                                                                           "I abstain from answering"], strict=True)],
           "raw_response_text": "A"}
    responses = _write(tmp_path / "r.jsonl", [row, row])
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "arcticabstain", "--items", str(items),
                                 "--responses", str(responses), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "second response" in _text(result.output)


@pytest.mark.parametrize("protocol", ["abstainqa", "know2guess", "nonsense"])
def test_other_protocols_give_a_clear_error(tmp_path: Path, protocol: str) -> None:
    result = runner.invoke(app, ["evaluate", "score", "--protocol", protocol, "--items", "i.jsonl",
                                 "--responses", "r.jsonl", "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert protocol in _text(result.output)


def test_report_from_store_after_policies(tmp_path: Path) -> None:
    items = _write(tmp_path / "items.jsonl", [ITEM | {"item_id": f"q{i}", "question": f"Q{i}?"} for i in range(6)])
    out = tmp_path / "rep"
    db = tmp_path / "e.db"
    result = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", str(out), "--db", str(db),
                                 "--trials", "1"])
    assert result.exit_code == 0, result.output
    counts = {r["model_id"]: r for r in csv.DictReader((out / "outcome-counts.csv").open())}
    assert list(counts) == ["always-abstain", "first-option", "random", "oracle"]
    assert counts["oracle"]["N1"] == "6" and counts["oracle"]["N5"] == "6"
    assert (out / "figure-1.png").stat().st_size > 0 and (out / "figure-1.svg").exists()
    again = runner.invoke(app, ["evaluate", "report", "--db", str(db), "--out", str(tmp_path / "rep2"), "--no-figure"])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "rep2" / "outcome-counts.csv").read_text() == (out / "outcome-counts.csv").read_text()


def test_cli_dispatches_through_the_registry_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A protocol the CLI has never heard of is scored and reported once it is registered: the
    # commands hold no per-protocol branch.
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import PROTOCOLS, EvalProtocol, ReportSummary

    class Echo(EvalProtocol):
        name = "echo"
        summary = "test protocol"

        def live(self, options):
            raise ConfigError("echo: no live runs")

        def score_external(self, items, responses, out, options):
            out.mkdir()
            (out / "echo.txt").write_text(responses.read_text())
            return ReportSummary(out, [f"echo scored {items.name} (ece bins {options.bins})"], ["echo warning"])

        def report_from_store(self, engine, out, options, *, source, models=None, in_given_order=False):
            raise ConfigError("echo: no store")

    monkeypatch.setitem(PROTOCOLS, "echo", Echo())
    items, responses = _write(tmp_path / "i.jsonl", [{}]), _write(tmp_path / "r.jsonl", [{"x": 1}])
    out = tmp_path / "o"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "echo", "--items", str(items),
                                 "--responses", str(responses), "--out", str(out), "--ece-bins", "3"])
    assert result.exit_code == 0, result.output
    assert "echo scored i.jsonl (ece bins 3)" in _text(result.output) and "echo warning" in result.output
    assert (out / "echo.txt").read_text() == responses.read_text()
    result = runner.invoke(app, ["evaluate", "report", "--protocol", "echo", "--responses", str(responses),
                                 "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2 and "--protocol echo: give --db" in _text(result.output)
