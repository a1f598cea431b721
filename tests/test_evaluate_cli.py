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
    # A protocol the CLI has never heard of is scored and reported once it is registered, with its own
    # options: the commands hold no per-protocol branch or flag.
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import PROTOCOLS, EvalProtocol, ProtocolOptions, ReportSummary

    class EchoOptions(ProtocolOptions):
        bins: int = 10

    class Echo(EvalProtocol):
        name = "echo"
        summary = "test protocol"
        options_model = EchoOptions

        def live(self, options):
            raise ConfigError("echo: no live runs")

        def score_external(self, items, responses, out, options):
            out.mkdir()
            (out / "echo.txt").write_text(responses.read_text())
            bins = EchoOptions.of(options.protocol_options).bins
            return ReportSummary(out, [f"echo scored {items.name} (bins {bins})"], ["echo warning"])

        def report_from_store(self, engine, out, options, *, source, models=None, in_given_order=False):
            raise ConfigError("echo: no store")

    monkeypatch.setitem(PROTOCOLS, "echo", Echo())
    items, responses = _write(tmp_path / "i.jsonl", [{}]), _write(tmp_path / "r.jsonl", [{"x": 1}])
    out = tmp_path / "o"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "echo", "--items", str(items),
                                 "--responses", str(responses), "--out", str(out), "-P", "bins=3"])
    assert result.exit_code == 0, result.output
    assert "echo scored i.jsonl (bins 3)" in _text(result.output) and "echo warning" in result.output
    assert (out / "echo.txt").read_text() == responses.read_text()
    # an older flag of another protocol is not one of echo's: said and left out, as it always was
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "echo", "--items", str(items),
                                 "--responses", str(responses), "--out", str(tmp_path / "o1"), "--ece-bins", "3"])
    assert result.exit_code == 0, result.output
    assert "--ece-bins is not an option of --protocol echo" in _text(result.output)
    assert "(bins 10)" in _text(result.output)
    result = runner.invoke(app, ["evaluate", "report", "--protocol", "echo", "--responses", str(responses),
                                 "--out", str(tmp_path / "o2")])
    assert result.exit_code == 2 and "--protocol echo: give --db" in _text(result.output)
    listed = runner.invoke(app, ["evaluate", "protocols"])
    assert listed.exit_code == 0 and "echo: test protocol" in listed.output and "-P bins=<integer>" in listed.output


# -- each protocol's own options (-P KEY=VALUE) -----------------------------------------------------------

K2G = Path(__file__).parent / "data" / "know2guess" / "items.jsonl"


def _k2g_responses(tmp_path: Path) -> Path:
    replies = ['{"decision": "ANSWER", "answer": "Oslo", "confidence": 0.9}', '{"decision": "ABSTAIN"}',
               '{"decision": "ANSWER", "answer": "x", "confidence": 0.2}']
    ids = [json.loads(x)["question_id"] for x in K2G.read_text(encoding="utf-8").splitlines() if x.strip()]
    return _write(tmp_path / "r.jsonl", [{"question_id": q, "raw_response_text": replies[i % len(replies)]}
                                         for i, q in enumerate(ids)])


def _score_k2g(tmp_path: Path, name: str, *args: str) -> tuple[int, str, Path]:
    out = tmp_path / name
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "know2guess", "--items", str(K2G), "--responses",
                                 str(_k2g_responses(tmp_path)), "--out", str(out), "--no-figure", *args])
    return result.exit_code, _text(result.output), out


def test_a_protocol_option_and_its_older_flag_give_the_same_report(tmp_path: Path) -> None:
    code, output, by_option = _score_k2g(tmp_path, "a", "-P", "wrong_penalty=2.5", "-P", "ece_bins=4")
    assert code == 0, output
    code, output, by_flag = _score_k2g(tmp_path, "b", "--wrong-penalty", "2.5", "--ece-bins", "4")
    assert code == 0, output
    code, output, default = _score_k2g(tmp_path, "c")
    assert code == 0, output
    summary = json.loads((by_option / "summary.json").read_text())
    assert summary["wrong_penalty"] == 2.5
    for name in ("metrics.csv", "zones.csv", "TABLES.md"):
        assert (by_option / name).read_text() == (by_flag / name).read_text(), name
    assert (by_option / "metrics.csv").read_text() != (default / "metrics.csv").read_text()
    assert json.loads((default / "summary.json").read_text())["wrong_penalty"] == 1.0  # the protocol's default


@pytest.mark.parametrize(("args", "said"), [
    # an unknown key: the protocol, the key, a did-you-mean and every key it has
    (["-P", "wrong_penalti=2"], ["-P wrong_penalti", "--protocol know2guess has no option 'wrong_penalti'",
                                 "did you mean 'wrong_penalty'", "options of know2guess: wrong_penalty, ece_bins"]),
    # a bad value: the key and the protocol's options
    (["-P", "ece_bins=0"], ["-P ece_bins=0", "--protocol know2guess", "greater than or equal to 1",
                            "options of know2guess: wrong_penalty, ece_bins"]),
    (["-P", "wrong_penalty=much"], ["-P wrong_penalty=much", "--protocol know2guess"]),
    (["--ece-bins", "0"], ["-P ece_bins=0", "--protocol know2guess"]),  # the older flag, checked the same way
    (["-P", "wrong_penalty"], ["expected KEY=VALUE"]),
    (["-P", "ece_bins=3", "-P", "ece_bins=4"], ["-P ece_bins: given twice"]),
    (["-P", "ece_bins=3", "--ece-bins", "4"], ["--ece-bins and -P ece_bins set the same option"]),
])
def test_a_bad_protocol_option_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: list[str]) -> None:
    code, output, out = _score_k2g(tmp_path, "o", *args)
    assert code == 2, output
    assert all(part in output for part in said), output
    assert not out.exists()


def test_an_option_only_a_run_reads_is_refused_by_score_and_report(tmp_path: Path) -> None:
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "abstainqa", "--items", "i.jsonl",
                                 "--responses", "r.jsonl", "--out", str(tmp_path / "o"), "-P", "verbal_confidence=true"])
    assert result.exit_code == 2
    assert "an option of --protocol abstainqa that only evaluate run reads" in _text(result.output)
    db = tmp_path / "e.db"
    db.write_bytes(b"")
    result = runner.invoke(app, ["evaluate", "report", "--protocol", "open", "--db", str(db), "--out",
                                 str(tmp_path / "o"), "-P", "verifier=judge"])
    assert result.exit_code == 2 and "only evaluate run reads" in _text(result.output)


def test_the_docs_table_of_protocol_options_is_the_options_models() -> None:
    # docs/evaluation.md holds the table `arcticqa evaluate protocols --markdown` prints, made from the
    # protocols' options models: a new option, default or help text shows up here until the docs say it
    from arcticqa.evaluate.protocols import BUNDLED, options_table

    docs = (Path(__file__).resolve().parent.parent / "docs" / "evaluation.md").read_text(encoding="utf-8")
    table = options_table(BUNDLED)
    assert table in docs, "regenerate the table in docs/evaluation.md: arcticqa evaluate protocols --markdown"
    shown = runner.invoke(app, ["evaluate", "protocols", "--markdown"])
    assert shown.exit_code == 0 and shown.output == options_table()
    for protocol in BUNDLED:
        assert all(f"| `{protocol.name}` | `{key}` |" in table for key in protocol.options_model.model_fields)


def test_the_protocol_commands_hold_no_protocol_of_their_own() -> None:
    # run, report and score show the same options whatever the protocol: none is one protocol's
    import typer.main

    from arcticqa.evaluate.protocols import BUNDLED

    commands = typer.main.get_command(app).commands["evaluate"].commands  # type: ignore[attr-defined]
    keys = {key.replace("_", "-") for p in BUNDLED for key in p.options_model.model_fields}
    for name in ("run", "report", "score"):
        shown = {o for p in commands[name].params if not p.hidden for o in p.opts}
        assert "-P" in shown and "--protocol" in shown
        assert not {o.lstrip("-") for o in shown} & keys, name
    source = (Path(__file__).resolve().parent.parent / "arcticqa" / "cli" / "evaluate.py").read_text(encoding="utf-8")
    branches = [b for b in ("chosen.name ==", "chosen.name !=", "protocol ==", "protocol !=", "protocol not in",
                            "name in (") if b in source]
    assert branches == []


def test_a_variants_report_is_the_protocols_to_write(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    db.write_bytes(b"")
    result = runner.invoke(app, ["evaluate", "report", "--db", str(db), "--protocol", "know2guess", "--variants",
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "--protocol know2guess has no prompt-variants report" in _text(result.output)
    result = runner.invoke(app, ["evaluate", "report", "--responses", str(db), "--variants", "--out",
                                 str(tmp_path / "o")])
    assert result.exit_code == 2 and "recorded in the store: give --db" in _text(result.output)
    assert not (tmp_path / "o").exists()
