"""The live runner through a real local OpenAI-compatible server: scripted policies, faults, resume."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from sqlmodel import select

from arcticqa.config import EvalModel
from arcticqa.errors import StageError
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.arcticabstain.prompt import load_prompt
from arcticqa.evaluate.arcticabstain.report import StatsSettings, build_report
from arcticqa.evaluate.policies import parse_prompt, policy_responder
from arcticqa.evaluate.runner import run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins.replies import Drop, Fault, Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine, read_session
from arcticqa.store.tables import EvalResponseRow

FAST = StatsSettings(resamples=500, draws=500)


def _items(n: int) -> list[EvalItem]:
    return [EvalItem(f"q-{i:03d}", f"Question number {i}?", "" if i % 2 else f"Context {i}.", f"gold {i}",
                     (f"d0 {i}", f"d1 {i}", f"d2 {i}", f"d3 {i}")) for i in range(n)]


def _model(label: str, url: str, **kw: object) -> EvalModel:
    base = dict(label=label, model=label, base_url=url, api_key_env=None, max_concurrency=8, max_retries=1,
                backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)
    return EvalModel(**(base | kw))  # type: ignore[arg-type]


def _run(items: list[EvalItem], models: list[EvalModel], db: Path, *, trials: int, resume: bool = False):
    engine = make_engine(f"sqlite:///{db}")
    live = ARCTICABSTAIN.live(RunOptions(trials=trials), items=items)
    return engine, asyncio.run(run_protocol(live, models, engine, resume=resume))


def test_scripted_policies_give_known_metrics(tmp_path: Path) -> None:
    items = _items(40)
    gold = {it.question: it.gold_answer for it in items}
    labels = ["always-abstain", "gold-or-first-distractor", "random", "oracle"]
    with FakeOpenAIServer(policy_responder(gold)) as server:
        engine, result = _run(items, [_model(m, server.base_url) for m in labels], tmp_path / "e.db", trials=3)
    assert result.recorded == 4 * 40 * 2 * 3 and result.skipped == 0
    report = build_report(ARCTICABSTAIN.records_from_store(engine), settings=FAST, models=labels)
    by = {r.model: r.counts for r in report.models}
    abstain = by["always-abstain"]
    assert (abstain.present_abstention, abstain.absent_abstention, abstain.acc) == (1.0, 1.0, 0.5)
    gfd = by["gold-or-first-distractor"]
    assert (gfd["N1"], gfd["N4"], gfd.acc, gfd.present_abstention, gfd.absent_abstention) == (120, 120, 0.5, 0.0, 0.0)
    assert by["oracle"].acc == 1.0 and by["oracle"].shift == 1.0
    rnd = by["random"]
    half_width = 3 * math.sqrt(0.2 * 0.8 / rnd.valid)
    assert abs(rnd.acc - 0.2) < half_width
    assert report.models[labels.index("oracle")].test.p_value < 0.01


def test_every_response_records_what_was_shown(tmp_path: Path) -> None:
    items = _items(3)
    with FakeOpenAIServer(lambda body, headers: Reply(content=" A", completion_tokens=1)) as server:
        engine, _ = _run(items, [_model("m1", server.base_url, price_in_per_mtok=1.0)], tmp_path / "e.db", trials=2)
        sent = [json.loads(json.dumps(r.body)) for r in server.requests]
    with read_session(engine) as session:
        rows = session.exec(select(EvalResponseRow)).all()
    assert len(rows) == 3 * 2 * 2
    prompt = load_prompt()
    for row in rows:
        assert row.chosen_letter == "A" and row.parser == "strict" and row.outcome in {"N1", "N2", "N3", "N4", "N5"}
        assert [o["letter"] for o in row.options] == list("ABCDE")
        assert row.prompt_version == prompt.version and len(row.prompt_sha256) == 64
        assert row.usage["prompt_tokens"] == 20 and row.cost_usd == pytest.approx(20 / 1e6)
    user_texts = [m["content"] for b in sent for m in b["messages"] if m["role"] == "user"]
    shown = {tuple(o["text"] for o in r.options) for r in rows}
    assert shown == {tuple(t for _, t in parse_prompt(u)[1]) for u in user_texts}


def test_failures_become_n0_with_their_cause(tmp_path: Path) -> None:
    def responder(body: dict, headers: object) -> object:
        label = body["model"]
        if label == "down":
            return Fault(503)
        if label == "dropper":
            return Drop()
        if label == "refuser":
            return Reply(content=None, refusal="I can't help with that", finish_reason="stop")
        return Reply(content="The answer is B because...")

    items = _items(2)
    models = [_model(m, "") for m in ("down", "dropper", "refuser", "chatty")]
    with FakeOpenAIServer(responder) as server:
        models = [m.model_copy(update={"base_url": server.base_url}) for m in models]
        engine, _ = _run(items, models, tmp_path / "e.db", trials=1)
        attempts_down = sum(1 for r in server.requests if r.body["model"] == "down")
    causes = {(r.model, r.outcome, r.cause) for r in ARCTICABSTAIN.records_from_store(engine)}
    assert causes == {("down", "N0", "infrastructure_no_provider_answer"),
                      ("dropper", "N0", "infrastructure_no_provider_answer"),
                      ("refuser", "N0", "provider_safeguard_refusal"),
                      ("chatty", "N0", "model_format_violation")}
    assert attempts_down == 4 * 2  # 4 calls, each tried once and retried once (max_retries=1), never re-asked


def test_resume_skips_recorded_cells_and_never_duplicates(tmp_path: Path) -> None:
    items = _items(4)
    calls = {"n": 0}

    def responder(body: dict, headers: object) -> object:
        calls["n"] += 1
        return Reply(content="C")

    with FakeOpenAIServer(responder) as server:
        model = _model("m", server.base_url)
        engine, first = _run(items[:2], [model], tmp_path / "e.db", trials=2)
        with pytest.raises(StageError, match="--resume"):
            _run(items, [model], tmp_path / "e.db", trials=2)
        assert calls["n"] == 8  # the refused run sent nothing
        _, second = _run(items, [model], tmp_path / "e.db", trials=2, resume=True)
        _, third = _run(items, [model], tmp_path / "e.db", trials=2, resume=True)
    assert (first.recorded, second.recorded, second.skipped, third.recorded) == (8, 8, 8, 0)
    assert calls["n"] == 16
    records = ARCTICABSTAIN.records_from_store(engine)
    assert len(records) == len({r.cell for r in records}) == 16
