"""Spending caps: per run and per paper, in the gateway and through a whole build."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from arcticqa.config import ModelConfig, Settings, load_settings
from arcticqa.errors import BudgetExceeded
from arcticqa.llm.gateway import Budget, Gateway, paper_scope
from arcticqa.standins.replies import Fault, Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config


class Echo(BaseModel):
    word: str
    n: int


@pytest.fixture(autouse=True)
def _fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-budget")


def test_budget_scopes() -> None:
    budget = Budget(cap_usd=1.0, per_paper_cap_usd=0.1)
    budget.add(0.1, "p1")
    with pytest.raises(BudgetExceeded) as paper:
        budget.check("p1")
    assert paper.value.scope == "paper"  # type: ignore[attr-defined]
    budget.check("p2")  # another paper is not affected
    budget.check(None)  # nor are calls outside any paper
    budget.add(0.95, "p2")
    with pytest.raises(BudgetExceeded) as run:
        budget.check("p3")
    assert run.value.scope == "run"  # type: ignore[attr-defined]


def test_gateway_stops_one_papers_calls_and_not_the_others() -> None:
    # 1M prompt tokens at USD 1/Mtok: every call costs USD 1; the paper cap is USD 0.5
    reply = Reply(content='{"word": "ice", "n": 1}', prompt_tokens=1_000_000)
    with FakeOpenAIServer(lambda body, headers: reply) as srv:
        cfg = ModelConfig(base_url=srv.base_url, model="fake", api_key_env="ARCTICQA_TEST_KEY",
                          price_in_per_mtok=1.0)
        settings = Settings(models={"fake": cfg}, roles={"verifier": "fake"},
                            build={"budget_per_paper_usd": 0.5})  # type: ignore[arg-type]

        async def go() -> tuple[list[str], Budget]:
            outcomes = []
            async with Gateway(settings) as gw:
                for paper, word in (("A", "one"), ("A", "two"), ("B", "three"), ("B", "four")):
                    with paper_scope(paper):
                        try:
                            await gw.ask("verifier", "_selftest/v1", {"word": word}, Echo)
                            outcomes.append(f"{paper}:ok")
                        except BudgetExceeded as exc:
                            outcomes.append(f"{paper}:{exc.scope}")  # type: ignore[attr-defined]
                return outcomes, gw.budget

        outcomes, budget = asyncio.run(go())
        assert len(srv.requests) == 2  # the refused calls never reached the endpoint
    assert outcomes == ["A:ok", "A:paper", "B:ok", "B:paper"]
    assert budget.paper_spent_usd == pytest.approx({"A": 1.0, "B": 1.0})


class _Expensive:
    """The scripted model, with every call about the Fram Strait paper costing USD 1."""

    def __init__(self) -> None:
        self.model = ScriptedModel()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        reply = self.model(body, headers)
        if isinstance(reply, Reply) and "Fram Strait" in body["messages"][-1]["content"]:
            reply.prompt_tokens = 1_000_000
        return reply


def test_build_fails_the_paper_over_its_cap_and_finishes_the_others(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(_Expensive()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus,
                              extra="budget_per_paper_usd = 0.5")
        settings = load_settings(config)
        summary = build_in_process(settings)
    assert summary["stopped"] is None  # the run itself was never stopped
    assert summary["stages"]["construct"] == {"succeeded": 2, "failed": 1}
    store = Store(settings.store.url)
    failed = store.runs(stage="construct", status="failed")
    assert len(failed) == 1 and failed[0].error_class == "BudgetExceeded"
    assert "per-paper budget cap" in (failed[0].error_message or "")
    fram = failed[0].paper_id
    paid = [c for c in store.llm_calls() if c.subject and c.cost_usd > 0.5]
    assert len(paid) == 1  # exactly one call was made for that paper: the one that crossed the cap
    assert len(store.items()) == 2 and all(i.paper_id != fram for i in store.items())
