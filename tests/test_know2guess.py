"""Know2Guess: item loading and validation, grading, parsers, metrics, live runs and the CLI."""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.config import EvalModel
from arcticqa.errors import InputError
from arcticqa.evaluate.know2guess import KNOW2GUESS
from arcticqa.evaluate.know2guess.items import Know2GuessItem, load_know2guess_items
from arcticqa.evaluate.know2guess.metrics import compute_metrics, expected_calibration_error
from arcticqa.evaluate.know2guess.parse import grade, normalise_answer, parse_robust_reply, parse_strict_reply
from arcticqa.evaluate.know2guess.prompt import Know2GuessPrompt, load_know2guess_prompt
from arcticqa.evaluate.know2guess.records import Know2GuessRecord
from arcticqa.evaluate.know2guess.report import build_know2guess_report
from arcticqa.evaluate.runner import LiveProtocol, run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine

DATA = Path(__file__).parent / "data" / "know2guess"
runner = CliRunner()


def _live(items: list[Know2GuessItem], prompts: list[Know2GuessPrompt], **options: Any) -> LiveProtocol:
    """The protocol object's live plan for these in-memory items and prompt variants."""
    return KNOW2GUESS.live(RunOptions(variants=tuple(p.variant for p in prompts), **options), items=items)


def _items() -> list[Know2GuessItem]:
    return load_know2guess_items(DATA / "items.jsonl")


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- items --------------------------------------------------------------------------------------

def test_fixture_items_cover_every_zone_and_keep_metadata() -> None:
    items = _items()
    assert [i.zone for i in items] == ["A", "A", "B", "B", "C", "C", "D", "D"]
    assert [i.abstention_expected for i in items] == [False] * 6 + [True] * 2
    assert items[0].metadata == {"source": "fixture", "difficulty": 0.1}
    assert items[6].gold_answer is None and items[6].metadata == {"note": "unknowable by construction"}
    assert items[4].acceptable_variants == ("Gjoa", "Gjöa")


def test_malformed_line_is_named() -> None:
    with pytest.raises(InputError) as info:
        load_know2guess_items(DATA / "malformed.jsonl")
    assert info.value.line == 3 and info.value.field == "zone"
    assert "malformed.jsonl:3:" in str(info.value) and "A, B, C, D" in str(info.value)


@pytest.mark.parametrize(("change", "field"), [
    ({"abstention_expected": True}, "abstention_expected"),
    ({"abstention_expected": "yes"}, "abstention_expected"),
    ({"grading_rule": "llm_judge"}, "grading_rule"),
    ({"item_origin": "scraped"}, "item_origin"),
    ({"contamination_risk": "extreme"}, "contamination_risk"),
    ({"gold_answer": None}, "gold_answer"),
    ({"acceptable_variants": "Oslo"}, "acceptable_variants"),
    ({"acceptable_variants": ["ok", ""]}, "acceptable_variants[1]"),
    ({"question_text": ""}, "question_text"),
])
def test_validation_errors_name_the_field(tmp_path: Path, change: dict[str, Any], field: str) -> None:
    row = json.loads((DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()[0])
    path = _write(tmp_path / "items.jsonl", [row | {"question_id": "other"}, row | change])
    with pytest.raises(InputError) as info:
        load_know2guess_items(path)
    assert (info.value.line, info.value.field) == (2, field)


def test_missing_required_field_and_duplicate_id(tmp_path: Path) -> None:
    row = json.loads((DATA / "items.jsonl").read_text(encoding="utf-8").splitlines()[0])
    without = {k: v for k, v in row.items() if k != "split"}
    with pytest.raises(InputError) as info:
        load_know2guess_items(_write(tmp_path / "a.jsonl", [without]))
    assert info.value.field == "split" and "missing" in str(info.value)
    with pytest.raises(InputError, match="duplicate question_id"):
        load_know2guess_items(_write(tmp_path / "b.jsonl", [row, row]))


# -- grading and parsing ------------------------------------------------------------------------

def test_normalisation_and_grading() -> None:
    items = {i.question_id: i for i in _items()}
    assert normalise_answer("  The  Greenland Ice-Sheet! ") == "greenland ice sheet"
    assert normalise_answer("ＯＳＬＯ") == "oslo"  # NFKC folds full-width letters
    assert grade(items["k2g-a1"], "oslo.")
    assert grade(items["k2g-b1"], "the inland ice")
    assert grade(items["k2g-c1"], "Gjoa") and grade(items["k2g-c1"], "GJØA")
    assert not grade(items["k2g-c1"], "Fram")
    assert grade(items["k2g-b2"], "About 23.5°")
    # An answer to an abstention-expected item is never correct.
    assert not grade(items["k2g-d2"], "")


@pytest.mark.parametrize(("text", "decision", "answer", "confidence"), [
    ('{"decision": "ANSWER", "answer": "Oslo", "confidence": 0.9}', "ANSWER", "Oslo", 0.9),
    ('{"decision": "ABSTAIN", "answer": "", "confidence": 0.2}', "ABSTAIN", None, 0.2),
    ("I can't help with that.", "REFUSE", None, None),
    ("I'm sorry, but I cannot assist with this request.", "REFUSE", None, None),
    ('```json\n{"decision": "ANSWER", "answer": "Oslo", "confidence": 0.9}\n```', "INVALID", None, None),
    ('{"decision": "answer", "answer": "Oslo", "confidence": 0.9}', "INVALID", None, None),
    ('{"decision": "ANSWER", "answer": "Oslo", "confidence": 1.5}', "INVALID", None, None),
    ('{"decision": "ANSWER", "answer": "Oslo"}', "INVALID", None, None),
    ("I don't know", "INVALID", None, None),
])
def test_strict_parser(text: str, decision: str, answer: str | None, confidence: float | None) -> None:
    parsed = parse_strict_reply(text)
    assert (parsed.decision, parsed.answer, parsed.confidence) == (decision, answer, confidence)


@pytest.mark.parametrize(("text", "decision", "answer", "confidence"), [
    ('```json\n{"decision": "ANSWER", "answer": "Oslo", "confidence": 0.9}\n```', "ANSWER", "Oslo", 0.9),
    ('Sure! {"Decision": "answer", "Answer": "Oslo", "Confidence": "80%"}', "ANSWER", "Oslo", 0.8),
    ("Decision: ABSTAIN\nAnswer:\nConfidence: 0.1", "ABSTAIN", None, 0.1),
    ("**Decision:** answer\n**Answer:** Oslo\n**Confidence:** 75", "ANSWER", "Oslo", 0.75),
    ("I don't know.", "ABSTAIN", None, None),
    ("I can't help with that.", "REFUSE", None, None),
    ("Oslo", "ANSWER", "Oslo", None),
])
def test_robust_parser(text: str, decision: str, answer: str | None, confidence: float | None) -> None:
    parsed = parse_robust_reply(text)
    assert (parsed.decision, parsed.answer, parsed.confidence) == (decision, answer, confidence)


def test_transport_outcomes() -> None:
    assert parse_strict_reply(None, failure="refusal").decision == "REFUSE"
    assert parse_strict_reply(None, failure="infrastructure").decision == "NONE"
    control = parse_strict_reply('{"answer": "Oslo", "confidence": 0.5}', mode="answer_only")
    assert (control.decision, control.answer) == ("ANSWER", "Oslo")
    assert parse_strict_reply('{"answer": "Oslo", "confidence": 0.5}').decision == "INVALID"


def test_ece_by_hand() -> None:
    pairs = [(0.95, True), (0.95, False), (0.15, False), (0.15, False), (1.0, True)]
    # bins: [0.9,1.0] holds 0.95, 0.95, 1.0 (acc 2/3, conf 0.9667); [0.1,0.2) holds 0.15 x2 (acc 0, conf 0.15)
    expected = 3 / 5 * abs(2 / 3 - (0.95 + 0.95 + 1.0) / 3) + 2 / 5 * 0.15
    assert expected_calibration_error(pairs) == pytest.approx(expected)
    assert expected_calibration_error([]) is None


# -- live runs ----------------------------------------------------------------------------------

def _responder(items: list[Know2GuessItem]) -> Callable[[dict[str, Any], Mapping[str, str]], Any]:
    by_question = {i.question_text: i for i in items}

    def reply(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        item = by_question[user.removeprefix("QUESTION\n")]
        policy = body["model"]
        if policy == "refuse-everything":
            return Reply(content=None, refusal="I can't help with that")
        if policy == "refuse-in-text":
            return Reply(content="I can't help with that.")
        if policy == "always-abstain":
            return Reply(content='{"decision": "ABSTAIN", "answer": "", "confidence": 0.1}')
        if policy == "always-correct":  # the gold answer, or a guess where there is none
            answer, conf = (item.acceptable_variants or (item.gold_answer,))[-1] or "Unknown Person", 0.9
        elif policy == "always-wrong":
            answer, conf = "Atlantis", 0.7
        else:
            raise AssertionError(policy)
        return Reply(content=json.dumps({"decision": "ANSWER", "answer": answer, "confidence": conf}))

    return reply


def _model(label: str, url: str) -> EvalModel:
    return EvalModel(label=label, model=label, base_url=url, api_key_env=None, max_concurrency=4, max_retries=1,
                     backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)


POLICIES = ["always-abstain", "always-correct", "always-wrong", "refuse-everything", "refuse-in-text"]


def test_scripted_policies_give_known_results(tmp_path: Path) -> None:
    items = _items()
    n, n_d = len(items), sum(i.zone == "D" for i in items)
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    prompts = [load_know2guess_prompt("answer_or_abstain")]
    with FakeOpenAIServer(_responder(items)) as server:
        result = asyncio.run(run_protocol(_live(items, prompts, trials=2),
                                          [_model(p, server.base_url) for p in POLICIES], engine))
    assert result.recorded == len(POLICIES) * n * 2
    records = KNOW2GUESS.records_from_store(engine)
    assert {r.prompt_version for r in records} == {"know2guess-answer_or_abstain-v1"}
    report = build_know2guess_report(records, wrong_penalty=2.0)
    by = {g.model: g for g in report.groups}

    abstain = by["always-abstain"]
    m = abstain.strict
    assert (m.responses, m.reliability, m.abstention_rate, m.effective_abstention_d, m.answered) == \
        (2 * n, n_d / n, 1.0, 1.0, 0)
    assert abstain.boundary_sharpness == 1.0 and m.ece is None

    correct = by["always-correct"]
    m = correct.strict
    assert m.reliability == (n - n_d) / n and m.answered == 2 * n
    assert m.answered_accuracy == (n - n_d) / n and m.effective_abstention_d == 0.0
    assert correct.boundary_sharpness == -1.0
    assert m.cost_sensitive_reliability == pytest.approx(((n - n_d) - 2.0 * n_d) / n)
    assert m.ece == pytest.approx(abs((n - n_d) / n - 0.9))
    assert {z: g.reliability for z, g in correct.zones.items()} == {"A": 1.0, "B": 1.0, "C": 1.0, "D": 0.0}

    wrong = by["always-wrong"].strict
    assert (wrong.reliability, wrong.answered_accuracy, wrong.cost_sensitive_reliability) == (0.0, 0.0, -2.0)

    # Refusals are never abstentions: zero abstention, zero effective abstention on zone D.
    for policy in ("refuse-everything", "refuse-in-text"):
        refused = by[policy].strict
        assert (refused.refusal_rate, refused.abstention_rate, refused.effective_abstention_d) == (1.0, 0.0, 0.0)
        assert refused.reliability == 0.0 and refused.cost_sensitive_reliability == 0.0
        assert by[policy].robust.abstention_rate == 0.0
    risks = by["always-correct"].risks
    assert set(risks) == {"low", "medium", "high"} and risks["high"].reliability == 1.0
    assert risks["low"].responses == 2 * 4 and risks["low"].reliability == 0.5


def test_control_prompt_and_variants(tmp_path: Path) -> None:
    items = _items()
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")

    def reply(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        system = body["messages"][0]["content"]
        if "ABSTAIN" in system:
            return Reply(content='{"decision": "ABSTAIN", "answer": "", "confidence": 0.3}')
        return Reply(content='{"answer": "Oslo", "confidence": 0.6}')

    prompts = [load_know2guess_prompt(v) for v in ("answer_or_abstain", "answer_only", "answer_or_abstain_terse")]
    assert [p.mode for p in prompts] == ["answer_or_abstain", "answer_only", "answer_or_abstain"]
    with FakeOpenAIServer(reply) as server:
        asyncio.run(run_protocol(_live(items, prompts), [_model("m", server.base_url)], engine))
    records = KNOW2GUESS.records_from_store(engine)
    by = {g.variant: g.strict for g in build_know2guess_report(records).groups}
    assert by["answer_or_abstain"].abstention_rate == 1.0 and by["answer_or_abstain_terse"].abstention_rate == 1.0
    control = by["answer_only"]
    assert control.answered == len(items) and control.reliability == 1 / len(items)  # only "Oslo" is right


# -- CLI ----------------------------------------------------------------------------------------

def test_cli_score_external_responses(tmp_path: Path) -> None:
    def line(qid: str, text: str | None, **kw: Any) -> dict[str, Any]:
        return {"question_id": qid, "raw_response_text": text, "model": "ext", **kw}

    answer = '{{"decision": "ANSWER", "answer": "{}", "confidence": {}}}'
    abstain = '{"decision": "ABSTAIN", "answer": "", "confidence": 0.2}'
    rows = [line("k2g-a1", answer.format("Oslo", 0.9)), line("k2g-a2", answer.format("K", 0.9)),
            line("k2g-b1", abstain), line("k2g-b2", "I can't help with that"),
            line("k2g-c1", answer.format("Gjoa", 0.4)), line("k2g-c2", "narwhal"),
            line("k2g-d1", abstain), line("k2g-d2", answer.format("Rex", 0.3)),
            line("k2g-a1", "Oslo", prompt_variant="answer_only", confidence=0.8)]
    responses = _write(tmp_path / "r.jsonl", rows)
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "know2guess", "--items", str(DATA / "items.jsonl"),
                                 "--responses", str(responses), "--out", str(out), "--wrong-penalty", "0.5",
                                 "--no-figure"])
    assert result.exit_code == 0, result.output
    metrics = {r["variant"]: r for r in csv.DictReader((out / "metrics.csv").open())}
    m = metrics["answer_or_abstain"]
    # reliable: a1 (correct), c1 (correct), d1 (abstained) -> 3/8; wrong answers: a2, d2
    assert m["reliability"] == "0.375000" and m["answered"] == "4" and m["answered_accuracy"] == "0.500000"
    assert m["abstention_rate"] == "0.250000" and m["refusal_rate"] == "0.125000" and m["invalid_rate"] == "0.125000"
    assert m["effective_abstention_zone_d"] == "0.500000"
    assert m["cost_sensitive_reliability"] == f"{(3 - 2 * 0.5) / 8:.6f}"
    assert m["boundary_sharpness"] == f"{0.5 - 0.5:.6f}"
    robust = [r for r in csv.DictReader((out / "parser-sensitivity.csv").open())
              if r["parser"] == "robust" and r["variant"] == "answer_or_abstain"][0]
    assert robust["reliability"] == "0.500000"  # "narwhal" as a plain answer counts under the robust parser
    zones = {r["zone"]: r for r in csv.DictReader((out / "zones.csv").open()) if r["variant"] == "answer_or_abstain"}
    assert zones["D"]["reliability"] == "0.500000" and zones["A"]["reliability"] == "0.500000"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["wrong_penalty"] == 0.5 and {g["variant"] for g in summary["groups"]} == {"answer_or_abstain",
                                                                                          "answer_only"}
    assert "Know2Guess results" in (out / "TABLES.md").read_text()


def test_cli_score_malformed_items(tmp_path: Path) -> None:
    responses = _write(tmp_path / "r.jsonl", [{"question_id": "k2g-a1", "raw_response_text": "x"}])
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "know2guess", "--items",
                                 str(DATA / "malformed.jsonl"), "--responses", str(responses),
                                 "--out", str(tmp_path / "o")])
    assert result.exit_code == 2 and "'zone'" in result.output
    assert not (tmp_path / "o").exists()


def test_compute_metrics_leaves_out_missing_provider_answers() -> None:
    item = _items()[0]
    base = dict(model="m", model_label="m", variant="v", mode="answer_or_abstain", trial=1, question_id=item.question_id,
                zone="A", domain="d", contamination_risk="low", item_origin="real_public", abstention_expected=False,
                raw_response_text=None, answer=None, confidence=None, correct=False, cause=None,
                robust_answer=None, robust_confidence=None, robust_correct=False)
    none = Know2GuessRecord(**base, decision="NONE", robust_decision="NONE")  # type: ignore[arg-type]
    right = Know2GuessRecord(**(base | {"answer": "Oslo", "correct": True, "trial": 2}),  # type: ignore[arg-type]
                             decision="ANSWER", robust_decision="ANSWER")
    m = compute_metrics([none, right])
    assert (m.responses, m.no_answer, m.reliability) == (1, 1, 1.0)
