"""Hostile release and response files: a named error, exit code 2, nothing written.

``evaluate report --responses`` (CSV and JSONL) and ``validate-release`` are given truncated
lines, invalid UTF-8, duplicate ids, wrong types, extra fields and a 100 MB line. The item-level
cases of ``validate-release`` are in ``tests/test_release.py::test_malformed_items_give_named_error``;
here the same faults reach the other files and the response reader.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.errors import InputError
from tests.release_factories import export, make_item

runner = CliRunner()

ABSTAIN = "I abstain from answering"
HEADER = ["trial_id", "item_id", "model", "model_label", "condition", "trial", "option_A", "option_B",
          "option_C", "option_D", "option_E", "correct_letter", "gold_letter", "abstain_letter",
          "raw_response_text", "chosen_letter", "chosen_kind", "outcome", "valid", "invalid_cause",
          "finish_reason", "recorded_at_utc"]
HUGE = 100 * 1024 * 1024


def _rows() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(1, 4):
        for condition in ("answer_present", "answer_absent"):
            texts = ["gold", "d0", "d1", "d2", ABSTAIN] if condition == "answer_present" else \
                ["d0", "d1", "d2", "d3", ABSTAIN]
            kinds = ["gold", "distractor", "distractor", "distractor", "abstain"] if condition == \
                "answer_present" else ["distractor"] * 4 + ["abstain"]
            rows.append({"item_id": f"q{i}", "model": "m1", "model_label": "Model 1", "condition": condition,
                         "trial": 1, "raw_response_text": "E" if i % 2 else "A", "finish_reason": "stop",
                         "options": [{"letter": L, "kind": k, "text": t}
                                     for L, k, t in zip("ABCDE", kinds, texts, strict=True)]})
    return rows


def _jsonl(rows: list[dict[str, object]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _csv(rows: list[dict[str, object]], header: list[str] = HEADER) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for i, r in enumerate(rows):
        options = r["options"]
        assert isinstance(options, list)
        flat = {f"option_{o['letter']}": o["text"] for o in options}
        gold = next((o["letter"] for o in options if o["kind"] == "gold"), "")
        writer.writerow({**r, **flat, "trial_id": f"t{i}", "gold_letter": gold, "abstain_letter": "E",
                         "correct_letter": gold or "E"})
    return out.getvalue().encode()


def _report(path: Path, out: Path) -> tuple[int, str]:
    result = runner.invoke(app, ["evaluate", "report", "--responses", str(path), "--out", str(out),
                                 "--resamples", "50", "--draws", "50", "--no-figure"])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_the_untouched_files_are_accepted(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"responses.{suffix}"
    path.write_bytes(_jsonl(_rows()) if suffix == "jsonl" else _csv(_rows()))
    code, output = _report(path, tmp_path / "out")
    assert code == 0, output
    assert (tmp_path / "out").is_dir()


def _set(index: int, **change: object) -> Callable[[list[dict[str, object]]], list[dict[str, object]]]:
    def edit(rows: list[dict[str, object]]) -> list[dict[str, object]]:
        rows[index] = {**rows[index], **change}
        return rows
    return edit


JSONL_CASES: list[tuple[str, Callable[[bytes], bytes], int, str]] = [
    ("truncated_line", lambda b: b[: len(b) - 40], 6, "truncated line"),
    ("invalid_utf8", lambda b: b.replace(b'"q2"', b'"q\xff\xfe2"', 1), 3, "invalid UTF-8"),
    ("duplicate_cell", lambda b: b + b.splitlines(keepends=True)[0], 7, "second response"),
    ("duplicate_key", lambda b: b.replace(b'"model": "m1",', b'"model": "m1", "model": "m2",', 1), 1,
     "duplicate key"),
    ("wrong_type_trial", lambda b: _jsonl(_set(1, trial="one")(_rows())), 2, "'trial'"),
    ("wrong_type_model", lambda b: _jsonl(_set(2, model={"name": "m1"})(_rows())), 3, "'model'"),
    ("extra_field", lambda b: _jsonl(_set(4, surprise=1)(_rows())), 5, "'surprise'"),
    ("not_an_object", lambda b: b + b"[1, 2]\n", 7, "expected a JSON object"),
    ("nested_100000_deep", lambda b: b + b"[" * 100_000 + b"\n", 7, "JSON nested deeper than 100 levels"),
    ("control_character", lambda b: b.replace(b'"stop"', b'"st\x01op"', 1), 1,
     "invalid JSON: Invalid control character at column"),
    ("nul_in_model_id", lambda b: _jsonl(_set(0, model="m\x001")(_rows())), 1, "control character U+0000"),
    ("huge_line", lambda b: b + b'{"item_id": "' + b"x" * HUGE + b'"}\n', 7, "longer than"),
]


@pytest.mark.parametrize(("name", "edit", "line", "message"), JSONL_CASES, ids=[c[0] for c in JSONL_CASES])
def test_hostile_jsonl_responses(tmp_path: Path, name: str, edit: Callable[[bytes], bytes], line: int,
                                 message: str) -> None:
    path = tmp_path / "responses.jsonl"
    path.write_bytes(edit(_jsonl(_rows())))
    out = tmp_path / "out"
    code, output = _report(path, out)
    assert code == 2, output
    assert "InputError" in output and f"responses.jsonl:{line}" in output and message in output, output
    assert not out.exists()  # nothing written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["responses.jsonl"]


CSV_CASES: list[tuple[str, Callable[[bytes], bytes], int, str]] = [
    # cut inside a quoted reply: the last line has no newline
    ("truncated_quote", lambda b: b.rstrip(b"\n") + b'\nt9,q9,m1,M,answer_absent,1,a,b,c,d,e,E,,E,"The answer is',
     8, "truncated line"),
    ("unterminated_quote", lambda b: b + b't9,q9,m1,M,answer_absent,1,a,b,c,d,e,E,,E,"The answer is\n', 8,
     "malformed CSV"),
    # cut inside the last field (no quotes), or mid-row: accepted with None cells before
    ("cut_in_last_field", lambda b: b[:-8], 7, "truncated line"),
    ("cut_mid_row", lambda b: b[:-60], 7, "truncated line"),
    ("truncated_row", lambda b: b + b"t9,q9,m1,M,answer_absent,1,a,b\n", 8, "fewer values than columns (8 of 22)"),
    ("empty_file", lambda b: b"", 1, "empty file"),
    ("nul_in_model_id", lambda b: b.replace(b",m1,", b",m\x001,", 1), 2, "control character U+0000"),
    ("escape_in_label", lambda b: b.replace(b"Model 1", b"Model \x1b[31m1", 1), 2, "control character U+001B"),
    ("5000_digit_trial", lambda b: _csv(_set(1, trial="9" * 5000)(_rows())), 3, "characters)"),
    ("invalid_utf8", lambda b: b.replace(b",q2,", b",q\xff2,", 1), 4, "invalid UTF-8"),
    ("duplicate_cell", lambda b: b + b.splitlines(keepends=True)[1], 8, "second response"),
    ("wrong_type_trial", lambda b: _csv(_set(1, trial="one")(_rows())), 3, "'trial'"),
    ("extra_column", lambda b: _csv(_rows(), [*HEADER, "surprise"]), 1, "'surprise'"),
    ("extra_cell", lambda b: b + b.splitlines()[1] + b",surplus\n", 8, "more values than columns"),
    ("huge_line", lambda b: b + b"t9,q9," + b"x" * HUGE + b"\n", 8, "longer than"),
]


@pytest.mark.parametrize(("name", "edit", "line", "message"), CSV_CASES, ids=[c[0] for c in CSV_CASES])
def test_hostile_csv_responses(tmp_path: Path, name: str, edit: Callable[[bytes], bytes], line: int,
                               message: str) -> None:
    path = tmp_path / "responses.csv"
    path.write_bytes(edit(_csv(_rows())))
    out = tmp_path / "out"
    code, output = _report(path, out)
    assert code == 2, output
    assert "InputError" in output and f"responses.csv:{line}" in output and message in output, output
    assert len(output) < 400, output  # an echoed value is cut, not printed whole
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["responses.csv"]


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_bytes(_csv(_rows()))
    marked.write_bytes(b"\xef\xbb\xbf" + _csv(_rows()))
    code, output = _report(marked, tmp_path / "marked")
    assert code == 0, output
    assert _report(plain, tmp_path / "plain")[0] == 0
    assert (tmp_path / "marked" / "metrics.csv").read_bytes() == (tmp_path / "plain" / "metrics.csv").read_bytes()


# --- validate-release: the other files of a release ------------------------------------------

def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


RELEASE_CASES: list[tuple[str, str, Callable[[bytes], bytes], str]] = [
    ("items_huge_line", "items.jsonl", lambda b: b + b'{"item_id": "' + b"x" * HUGE + b'"}\n',
     "items.jsonl:4"),
    ("conditions_truncated", "conditions.jsonl", lambda b: b[:-30], "conditions.jsonl:6"),
    ("conditions_invalid_utf8", "conditions.jsonl", lambda b: b"\xff" + b, "conditions.jsonl:1"),
    ("items_nested_100000_deep", "items.jsonl", lambda b: b + b"[" * 100_000 + b"\n", "items.jsonl:4"),
    ("conditions_nested_100000_deep", "conditions.jsonl", lambda b: b"{" + b'"a":{' * 50_000 + b"\n" + b,
     "conditions.jsonl:1"),
    ("conditions_extra_field", "conditions.jsonl", lambda b: b.replace(b"{", b'{"surprise": 1, ', 1),
     "conditions.jsonl:1"),
    ("manifest_invalid_utf8", "MANIFEST.json", lambda b: b.replace(b"{", b"{\xff", 1), "MANIFEST.json"),
    ("manifest_wrong_type", "MANIFEST.json", lambda b: b.replace(b'"format": "arcticqa-release/1"',
                                                                 b'"format": 7'), "MANIFEST.json"),
    ("manifest_huge", "MANIFEST.json", lambda b: b[:-2] + b', "pad": "' + b"x" * (20 * 1024 * 1024) + b'"}\n',
     "MANIFEST.json"),
]


@pytest.mark.parametrize(("name", "file", "edit", "where"), RELEASE_CASES, ids=[c[0] for c in RELEASE_CASES])
def test_hostile_release_files(tmp_path: Path, name: str, file: str, edit: Callable[[bytes], bytes],
                               where: str) -> None:
    release = export([make_item(i) for i in (1, 2, 3)], tmp_path / "rel")
    target = release / file
    target.write_bytes(edit(target.read_bytes()))
    before = _tree(tmp_path)
    result = runner.invoke(app, ["validate-release", str(release)])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, output
    assert where in output and "[release." in output, output
    assert _tree(tmp_path) == before  # nothing written anywhere


def test_evaluate_score_refuses_invalid_utf8_with_a_named_error(tmp_path: Path) -> None:
    item = {"item_id": "q1", "question": "Q?", "question_context": "", "gold_answer": "g",
            "distractors": [{"rank": r, "text": f"d{r}"} for r in range(4)]}
    (tmp_path / "items.jsonl").write_text(json.dumps(item) + "\n", encoding="utf-8")
    row = {"item_id": "q1", "condition": "answer_absent", "trial": 1, "raw_response_text": "E",
           "options": {"A": "d0", "B": "d1", "C": "d2", "D": "d3", "E": ABSTAIN}}
    (tmp_path / "r.jsonl").write_bytes(json.dumps(row).encode().replace(b'"q1"', b'"q\xff1"') + b"\n")
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "arcticabstain", "--items",
                                 str(tmp_path / "items.jsonl"), "--responses", str(tmp_path / "r.jsonl"),
                                 "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "r.jsonl:1" in " ".join(result.output.split())
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("loader", ["arcticabstain", "abstainqa", "know2guess"])
def test_a_prompt_file_that_is_not_a_json_object_names_the_file(tmp_path: Path, loader: str) -> None:
    from arcticqa.evaluate.abstainqa.prompt import load_abstainqa_prompt
    from arcticqa.evaluate.arcticabstain.prompt import load_prompt
    from arcticqa.evaluate.know2guess.prompt import load_know2guess_prompt

    bad = tmp_path / "prompt.json"
    bad.write_text('["not", "an", "object"]', encoding="utf-8")
    load = {"arcticabstain": load_prompt, "abstainqa": load_abstainqa_prompt, "know2guess": load_know2guess_prompt}
    with pytest.raises(InputError, match="expected a JSON object") as info:
        load[loader](bad)
    assert str(bad) in str(info.value)


# --- the other readers of untrusted files: one line, exit 2 ---------------------------------

def _one_line(result: Any) -> str:
    assert result.exit_code == 2, (result.output, result.exception)
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message, message
    return message


def test_deep_nesting_is_refused_by_every_json_reader(tmp_path: Path) -> None:
    release = export([make_item(1)], tmp_path / "rel")
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(b"[" * 100_000 + b"\n")
    prompt = tmp_path / "prompt.json"
    prompt.write_bytes(b"[" * 100_000)
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n', encoding="utf-8")
    for args in (["evaluate", "policies", "--items", str(deep), "--out", str(tmp_path / "a"),
                  "--db", "sqlite:///:memory:"],
                 ["evaluate", "score", "--protocol", "arcticabstain", "--items", str(release / "items.jsonl"),
                  "--responses", str(deep), "--out", str(tmp_path / "b")],
                 ["evaluate", "report", "--responses", str(deep), "--out", str(tmp_path / "c")],
                 ["export", "--prompt", str(prompt), "--out", str(tmp_path / "d"), "-c", str(config)]):
        message = _one_line(runner.invoke(app, args))
        assert "nested deeper than 100 levels" in message, (args, message)
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_an_unreadable_config_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'[store]\nurl = "\xff\xfe"\n')
    assert "bad.toml: invalid UTF-8 at byte 15" in _one_line(runner.invoke(app, ["status", "-c", str(bad)]))
    assert "is a folder, not a config file" in _one_line(runner.invoke(app, ["status", "-c", str(tmp_path)]))


def test_a_store_url_naming_another_file_is_bad_input_and_leaves_it_alone(tmp_path: Path) -> None:
    thesis = tmp_path / "thesis.tex"
    thesis.write_bytes(b"\\documentclass{article}\n" * 200)
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{thesis}"\n', encoding="utf-8")
    message = _one_line(runner.invoke(app, ["status", "-c", str(config)]))
    assert "not an SQLite database" in message and str(thesis) in message
    assert thesis.read_bytes() == b"\\documentclass{article}\n" * 200
    assert sorted(p.name for p in tmp_path.iterdir()) == ["arcticqa.toml", "thesis.tex"]


def test_a_missing_release_file_is_named_once(tmp_path: Path) -> None:
    release = export([make_item(1)], tmp_path / "rel")
    (release / "conditions.jsonl").unlink()
    result = runner.invoke(app, ["validate-release", str(release)])
    assert result.exit_code == 2  # the list of problems, then the first as the error line
    assert result.stderr.splitlines()[-1] == "error: InputError: conditions.jsonl: file is missing [release.missing_file]"
    assert "conditions.jsonl: conditions.jsonl" not in result.stderr
