"""Abstain-QA: items, prompts, parsers, the confusion matrix, live runs through the local server, CLI."""

from __future__ import annotations

import asyncio
import csv
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.config import EvalModel
from arcticqa.errors import InputError, StageError
from arcticqa.evaluate.abstainqa import ABSTAINQA, AbstainQAOptions
from arcticqa.evaluate.abstainqa.items import IDK_TEXT, AbstainQAItem, load_abstainqa_items
from arcticqa.evaluate.abstainqa.metrics import ConfusionCounts
from arcticqa.evaluate.abstainqa.parse import parse_reply, score_abstainqa
from arcticqa.evaluate.abstainqa.prompt import AbstainQAPrompt, load_abstainqa_prompt
from arcticqa.evaluate.abstainqa.records import AbstainQARecord
from arcticqa.evaluate.abstainqa.report import build_abstainqa_report
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.policies import parse_prompt
from arcticqa.evaluate.runner import LiveProtocol, run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine, read_session
from arcticqa.store.tables import EvalResponseRow

DATA = Path(__file__).parent / "data" / "abstainqa"
runner = CliRunner()


def _live(items: list[AbstainQAItem], prompts: list[AbstainQAPrompt], **options: Any) -> LiveProtocol:
    """The protocol object's live plan for these in-memory items and prompt variants."""
    return ABSTAINQA.live(RunOptions(variants=tuple(p.variant for p in prompts), **options), items=items)


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _release_items(path: Path, n: int) -> Path:
    return _write(path, [{"item_id": f"r{i:02d}", "question": f"Release question {i}?", "question_context": "",
                          "gold_answer": f"gold {i}", "distractors": [{"rank": r, "text": f"d{r} {i}"} for r in range(4)]}
                         for i in range(n)])


def _model(label: str, url: str) -> EvalModel:
    return EvalModel(label=label, model=label, base_url=url, api_key_env=None, max_concurrency=4, max_retries=1,
                     backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)


# -- items --------------------------------------------------------------------------------------

def test_import_format_items() -> None:
    items = {i.question_id: i for i in load_abstainqa_items(DATA / "items.jsonl")}
    assert len(items) == 6
    assert [i.answerable for i in items.values()] == [True, True, True, True, False, False]
    assert items["aqa-1"].correct_letter == "B" and items["aqa-1"].idk_letter == "E"
    assert items["aqa-2"].correct_letter == "A"  # gold given as the option's text
    assert items["aqa-5"].correct_letter == "E"  # IDK/NOTA
    assert items["aqa-1"].shown()[-1] == {"letter": "E", "kind": "abstain", "text": IDK_TEXT, "option_id": "abstain"}


def test_release_items_give_answerable_and_unanswerable_questions(tmp_path: Path) -> None:
    items = load_abstainqa_items(_release_items(tmp_path / "items.jsonl", 3))
    assert len(items) == 6
    present = [i for i in items if i.question_id.endswith("#present")]
    absent = [i for i in items if i.question_id.endswith("#absent")]
    assert all(i.answerable for i in present) and not any(i.answerable for i in absent)
    for item in present:
        assert item.options[item.gold or 0].startswith("gold") and len(item.options) == 4
        assert item.letters == "ABCDE"
    assert all(set(i.options) == {f"d{r} {i.question_id[1:3].lstrip('0') or '0'}" for r in range(4)} for i in absent)
    # The option order is fixed per question and differs between questions.
    again = load_abstainqa_items(tmp_path / "items.jsonl")
    assert [i.options for i in again] == [i.options for i in items]
    assert len({tuple(o.split()[0] for o in i.options) for i in present}) > 1


@pytest.mark.parametrize(("row", "field"), [
    ({"question_id": "x", "question": "Q?", "options": ["a", "b"], "gold": "C"}, "gold"),
    ({"question_id": "x", "question": "Q?", "options": ["a", IDK_TEXT], "gold": "A"}, "options[1]"),
    ({"question_id": "x", "question": "Q?", "options": ["a"], "gold": "A"}, "options"),
    ({"question_id": "x", "question": "", "options": ["a", "b"], "gold": "A"}, "question"),
    ({"question_id": "x", "question": "Q?", "options": {"B": "a", "A": "b"}, "gold": "A"}, "options"),
])
def test_bad_import_line_is_named(tmp_path: Path, row: dict[str, Any], field: str) -> None:
    good = {"question_id": "ok", "question": "Q?", "options": ["a", "b"], "gold": "A"}
    path = _write(tmp_path / "i.jsonl", [good, row])
    with pytest.raises(InputError) as info:
        load_abstainqa_items(path)
    assert info.value.line == 2 and info.value.field == field


def test_prompt_variants_are_versioned_files() -> None:
    texts = set()
    for variant in ("standard", "abstain", "extreme_abstain"):
        prompt = load_abstainqa_prompt(variant)
        assert prompt.variant == variant and prompt.version == f"abstainqa-{variant}-v1" and len(prompt.sha256) == 64
        texts.add(prompt.system(False))
        assert "Confidence" in prompt.system(True)
    assert len(texts) == 3
    with pytest.raises(InputError, match="not found"):
        load_abstainqa_prompt("nonexistent_variant")


# -- parsing and scoring ------------------------------------------------------------------------

def test_confusion_cells_follow_the_protocol() -> None:
    assert score_abstainqa(True, "B", "B", "E") == "TP"
    assert score_abstainqa(True, "E", "B", "E") == "FN"
    assert score_abstainqa(True, "A", "B", "E") == "FP"
    assert score_abstainqa(False, "E", "E", "E") == "TN"
    # Failing to abstain on an unanswerable item is FP, never FN.
    assert score_abstainqa(False, "A", "E", "E") == "FP"
    assert score_abstainqa(True, None, "B", "E") == "INVALID"


def test_metrics_formulas() -> None:
    c = ConfusionCounts()
    for answerable, outcome in [(True, "TP")] * 3 + [(True, "FN")] * 2 + [(True, "FP")] + \
            [(False, "TN")] * 2 + [(False, "FP")] * 2 + [(True, "INVALID")]:
        c.add(answerable, outcome)
    assert (c.scored, c.answerable, c.unanswerable, c.invalid) == (10, 6, 4, 1)
    assert c.ar == pytest.approx(4 / 10)
    assert c.aac == pytest.approx(3 / 6)
    assert c.uac == pytest.approx(2 / 4)
    assert c.precision == pytest.approx(3 / 6)


@pytest.mark.parametrize(("text", "verbal", "expected"), [
    ("B", False, ("B", None, "B", None)),
    (" B\n", False, ("B", None, "B", None)),
    ("Answer: B", False, (None, None, "B", None)),
    ("Answer: C\nConfidence: 4", True, ("C", 4, "C", 4)),
    ("C", True, (None, None, "C", None)),
    ("Answer: C\nConfidence: 9", True, (None, None, "C", None)),
    ("The answer is D. Confidence: 2/5", True, (None, None, "D", 2)),
    ("I can't help with that", False, (None, None, None, None)),
])
def test_parsers(text: str, verbal: bool, expected: tuple[Any, ...]) -> None:
    assert parse_reply(text, "ABCDE", verbal_confidence=verbal) == expected


def test_thresholds_convert_low_confidence_answers_to_idk() -> None:
    def rec(answerable: bool, letter: str, conf: int) -> AbstainQARecord:
        return AbstainQARecord("m", "m", "standard+confidence", 1, f"q{letter}{conf}{answerable}", answerable,
                               "ABCDE", "A" if answerable else "E", "x", letter, conf, letter, conf, None)

    records = [rec(True, "A", 5), rec(True, "B", 2), rec(False, "C", 1), rec(False, "D", 4)]
    report = build_abstainqa_report(records, thresholds=(0, 2, 5))
    t = report.groups[0].thresholds
    assert (t[0].tp, t[0].fp, t[0].fn, t[0].tn) == (1, 3, 0, 0)
    assert (t[2].tp, t[2].fp, t[2].fn, t[2].tn) == (1, 1, 1, 1)
    assert (t[5].tp, t[5].fp, t[5].fn, t[5].tn) == (0, 0, 2, 2)


# -- live runs through the local OpenAI-compatible server ----------------------------------------

def _responder(gold: Mapping[str, str | None]) -> Callable[[dict[str, Any], Mapping[str, str]], Any]:
    """Scripted policies keyed by model name; ``gold`` maps question -> gold text (None: unanswerable)."""

    def reply(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        question, options = parse_prompt(user)
        idk = next(letter for letter, text in options if text == IDK_TEXT)
        content_letters = [letter for letter, text in options if text != IDK_TEXT]
        answer = gold[question]
        right = next((letter for letter, text in options if text == answer), None)
        policy = body["model"]
        if policy == "refuse-everything":
            return Reply(content=None, refusal="I can't help with that")
        if policy == "refuse-in-text":
            return Reply(content="I can't help with that.")
        if policy == "always-abstain":
            letter = idk
        elif policy == "always-correct":  # the gold option, or an option when there is none
            letter = right or content_letters[0]
        elif policy == "always-wrong":
            letter = next(x for x in content_letters if x != right)
        elif policy == "confident-when-right":
            letter, conf = (right, 5) if right else (content_letters[0], 2)
            return Reply(content=f"Answer: {letter}\nConfidence: {conf}")
        else:
            raise AssertionError(policy)
        if "Confidence" in system:
            return Reply(content=f"Answer: {letter}\nConfidence: 3")
        return Reply(content=letter)

    return reply


def _gold(items: list[AbstainQAItem]) -> dict[str, str | None]:
    """question -> gold text. A release question appears twice (present and absent, same text): the
    policies find the gold option only when it is shown."""
    gold: dict[str, str | None] = {i.question: None for i in items}
    gold.update({i.question: i.options[i.gold] for i in items if i.gold is not None})
    return gold


POLICIES = ["always-abstain", "always-correct", "always-wrong", "refuse-everything", "refuse-in-text"]


def test_scripted_policies_give_known_results(tmp_path: Path) -> None:
    items = load_abstainqa_items(_release_items(tmp_path / "items.jsonl", 5)) + \
        load_abstainqa_items(DATA / "items.jsonl")
    n_a, n_u = sum(i.answerable for i in items), sum(not i.answerable for i in items)
    assert (n_a, n_u) == (9, 7)
    prompts = [load_abstainqa_prompt("standard"), load_abstainqa_prompt("extreme_abstain")]
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    with FakeOpenAIServer(_responder(_gold(items))) as server:
        result = asyncio.run(run_protocol(_live(items, prompts, trials=2),
                                          [_model(p, server.base_url) for p in POLICIES], engine))
    assert result.recorded == len(POLICIES) * 16 * 2 * 2
    records = ABSTAINQA.records_from_store(engine)
    report = build_abstainqa_report(records)
    by = {(g.model, g.variant): g.strict for g in report.groups}
    assert len(by) == len(POLICIES) * 2
    for variant in ("standard", "extreme_abstain"):
        abstain = by[("always-abstain", variant)]
        assert (abstain.tp, abstain.fn, abstain.fp, abstain.tn) == (0, 2 * n_a, 0, 2 * n_u)
        assert (abstain.ar, abstain.aac, abstain.uac, abstain.precision) == (1.0, 0.0, 1.0, 0.0)
        correct = by[("always-correct", variant)]
        # Answering every unanswerable question is FP, never FN.
        assert (correct.tp, correct.fn, correct.fp_unanswerable, correct.tn) == (2 * n_a, 0, 2 * n_u, 0)
        assert (correct.ar, correct.aac, correct.uac) == (0.0, 1.0, 0.0)
        assert correct.precision == pytest.approx(n_a / (n_a + n_u))
        wrong = by[("always-wrong", variant)]
        assert (wrong.tp, wrong.fn, wrong.fp, wrong.tn) == (0, 0, 2 * (n_a + n_u), 0)
        assert wrong.metrics() == {"AR": 0.0, "AAC": 0.0, "UAC": 0.0, "P": 0.0}
        # Refusals (provider or in text) are never IDK/NOTA: no FN, no TN, all invalid.
        for policy in ("refuse-everything", "refuse-in-text"):
            refused = by[(policy, variant)]
            assert (refused.scored, refused.fn, refused.tn, refused.invalid) == (0, 0, 0, 2 * (n_a + n_u))
            assert refused.ar == 0.0
    causes = {(r.model, r.cause) for r in records if r.model.startswith("refuse")}
    assert causes == {("refuse-everything", "provider_safeguard_refusal"),
                      ("refuse-in-text", "model_format_violation")}
    with read_session(engine) as session:
        rows = session.exec(select(EvalResponseRow)).all()
    assert {r.protocol for r in rows} == {"abstainqa"} and {r.eval_set for r in rows} == {"abstainqa:arcticqa"}
    assert {r.prompt_version for r in rows} == {"abstainqa-standard-v1", "abstainqa-extreme_abstain-v1"}
    assert all(len(r.prompt_sha256) == 64 and r.options and r.options[-1]["text"] == IDK_TEXT for r in rows)
    # The ArcticAbstain readers never see another protocol's rows.
    assert ARCTICABSTAIN.records_from_store(engine) == []


def test_resume_and_refusal_to_rerun(tmp_path: Path) -> None:
    items = load_abstainqa_items(DATA / "items.jsonl")
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    live = _live(items, [load_abstainqa_prompt("abstain")])
    with FakeOpenAIServer(_responder(_gold(items))) as server:
        model = _model("always-abstain", server.base_url)
        asyncio.run(run_protocol(_live(items[:3], [load_abstainqa_prompt("abstain")]), [model], engine))
        with pytest.raises(StageError, match="--resume"):
            asyncio.run(run_protocol(live, [model], engine))
        sent = len(server.requests)
        again = asyncio.run(run_protocol(live, [model], engine, resume=True))
        assert (again.skipped, again.recorded, len(server.requests) - sent) == (3, 3, 3)


def test_verbal_confidence_thresholds_live(tmp_path: Path) -> None:
    items = load_abstainqa_items(DATA / "items.jsonl")
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    with FakeOpenAIServer(_responder(_gold(items))) as server:
        asyncio.run(run_protocol(_live(items, [load_abstainqa_prompt("standard")],
                                       protocol_options=AbstainQAOptions(verbal_confidence=True)),
                                 [_model("confident-when-right", server.base_url)], engine))
    records = ABSTAINQA.records_from_store(engine)
    assert {r.variant for r in records} == {"standard+confidence"}
    group = build_abstainqa_report(records).groups[0]
    assert group.has_confidence
    # Unanswerable answers carry confidence 2: FP up to t = 1, TN from t = 2; right answers (5) stay TP.
    assert (group.thresholds[1].fp, group.thresholds[1].tn) == (2, 0)
    assert (group.thresholds[2].fp, group.thresholds[2].tn, group.thresholds[2].tp) == (0, 2, 4)
    assert group.thresholds[2].metrics() == {"AR": pytest.approx(2 / 6), "AAC": 1.0, "UAC": 1.0, "P": 1.0}


# -- CLI ----------------------------------------------------------------------------------------

def test_cli_score_external_responses(tmp_path: Path) -> None:
    lines = [
        {"question_id": "aqa-1", "raw_response_text": "B", "model": "ext"},        # TP
        {"question_id": "aqa-2", "raw_response_text": "E", "model": "ext"},        # FN
        {"question_id": "aqa-3", "raw_response_text": "A", "model": "ext"},        # FP (answerable)
        {"question_id": "aqa-4", "raw_response_text": "Answer: B", "model": "ext"},  # invalid strict, TP lenient
        {"question_id": "aqa-5", "raw_response_text": "E", "model": "ext"},        # TN
        {"question_id": "aqa-6", "raw_response_text": "B", "model": "ext"},        # FP (unanswerable)
        {"question_id": "aqa-1", "raw_response_text": "Answer: B\nConfidence: 2", "model": "ext",
         "prompt_variant": "standard+confidence"},
    ]
    responses = _write(tmp_path / "r.jsonl", lines)
    out = tmp_path / "out"
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "abstainqa", "--items", str(DATA / "items.jsonl"),
                                 "--responses", str(responses), "--out", str(out), "--no-figure"])
    assert result.exit_code == 0, result.output
    rows = {(r["model_id"], r["variant"]): r for r in csv.DictReader((out / "confusion.csv").open())}
    std = rows[("ext", "standard")]
    assert [std[k] for k in ("TP", "FN", "FP_answerable", "FP_unanswerable", "TN", "invalid")] == \
        ["1", "1", "1", "1", "1", "1"]
    assert std["AR"] == "0.400000" and std["AAC"] == "0.333333" and std["UAC"] == "0.500000" and std["P"] == "0.333333"
    lenient = [r for r in csv.DictReader((out / "parser-sensitivity.csv").open())
               if r["parser"] == "lenient" and r["variant"] == "standard"][0]
    assert lenient["TP"] == "2" and lenient["invalid"] == "0"
    thresholds = [r for r in csv.DictReader((out / "thresholds.csv").open())]
    assert {(r["threshold"], r["TP"], r["FN"]) for r in thresholds} >= {("1", "1", "0"), ("2", "0", "1")}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["protocol"] == "abstainqa" and summary["questions"] == 6
    for name in ("TABLES.md", "coverage-summary.csv", "coverage-risk.csv", "lambda-sweep.csv", "coverage.json"):
        assert (out / name).exists(), name


def test_cli_score_bad_response_line(tmp_path: Path) -> None:
    responses = _write(tmp_path / "r.jsonl", [{"question_id": "aqa-1", "raw_response_text": "B"},
                                              {"question_id": "aqa-1", "raw_response_text": "B", "confidence": 7}])
    result = runner.invoke(app, ["evaluate", "score", "--protocol", "abstainqa", "--items", str(DATA / "items.jsonl"),
                                 "--responses", str(responses), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "r.jsonl:2:" in " ".join(result.output.split()) and "'confidence'" in result.output
    assert not (tmp_path / "o").exists()


def test_cli_run_and_report_from_store(tmp_path: Path) -> None:
    items = load_abstainqa_items(DATA / "items.jsonl")
    with FakeOpenAIServer(_responder(_gold(items))) as server:
        config = tmp_path / "eval.toml"
        config.write_text(
            f'[evaluate]\ntrials = 1\nitems = "{DATA / "items.jsonl"}"\ndb_url = "sqlite:///{tmp_path / "e.db"}"\n'
            + "".join(f'[[evaluate.models]]\nlabel = "{p}"\nmodel = "{p}"\nbase_url = "{server.base_url}"\n'
                      f'api_key_env = ""\nmax_retries = 1\n' for p in ("always-abstain", "always-correct")), encoding="utf-8")
        out = tmp_path / "rep"
        result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--protocol", "abstainqa", "--variant",
                                     "standard", "--variant", "abstain", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader((out / "confusion.csv").open()))
    assert [(r["model_id"], r["variant"]) for r in rows] == [
        ("always-abstain", "standard"), ("always-abstain", "abstain"),
        ("always-correct", "standard"), ("always-correct", "abstain")]
    assert (out / "abstainqa-metrics.png").stat().st_size > 0 and (out / "coverage-risk.svg").exists()
    again = runner.invoke(app, ["evaluate", "report", "--db", str(tmp_path / "e.db"), "--protocol", "abstainqa",
                                "--out", str(tmp_path / "rep2"), "--no-figure"])
    assert again.exit_code == 0, again.output
    assert (tmp_path / "rep2" / "confusion.csv").read_text() == (out / "confusion.csv").read_text()
