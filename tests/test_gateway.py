"""The LLM gateway through the real openai + instructor path against the loopback stand-in."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from arcticqa.config import ModelConfig, Settings
from arcticqa.errors import BudgetExceeded, LLMOutputError, LLMTransportError
from arcticqa.llm.gateway import Budget, Gateway
from arcticqa.pipeline.ledger import StoreLedger
from arcticqa.standins.replies import Drop, Fault, Hang, Reply, by_role, json_reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store


class Echo(BaseModel):
    word: str
    n: int = Field(le=3)


def _settings(base_url: str, **model: object) -> Settings:
    fields: dict[str, object] = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 2.0,
                                 "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0, **model}
    cfg = ModelConfig(base_url=base_url, model="fake-model", api_key_env="ARCTICQA_TEST_KEY",
                      **fields)  # type: ignore[arg-type]
    return Settings(models={"fake": cfg}, roles={"verifier": "fake"})


def _ask(settings: Settings, store: Store | None = None, word: str = "ice", budget: Budget | None = None
         ) -> tuple[Echo, bool]:
    async def go() -> tuple[Echo, bool]:
        async with Gateway(settings, StoreLedger(store) if store is not None else None, budget=budget) as gw:
            reply = await gw.ask("verifier", "_selftest/v1", {"word": word}, Echo, subject="paper-1")
            return reply.output, reply.cached

    return asyncio.run(go())


@pytest.fixture(autouse=True)
def _fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-SECRET-7f3a9c")


def test_transport_faults_are_retried_and_every_attempt_recorded(tmp_path: Path) -> None:
    script = [Fault(503), Fault(429, retry_after=0.01), Drop(), json_reply({"word": "ice", "n": 1})]
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with FakeOpenAIServer(by_role({"verifier": script})) as srv:
        out, cached = _ask(_settings(srv.base_url), store)
        assert (out.word, out.n, cached) == ("ice", 1, False)
        assert len(srv.requests) == 4
        assert srv.requests[0].headers["authorization"] == "Bearer sk-test-SECRET-7f3a9c"
    calls = store.llm_calls()
    assert [c.attempt for c in calls] == [1, 2, 3, 4]
    assert [c.error is None for c in calls] == [False, False, False, True]
    assert calls[-1].parsed == {"word": "ice", "n": 1}
    assert calls[-1].cost_usd == pytest.approx((20 * 2.0 + 5 * 8.0) / 1e6)
    assert {c.prompt_version.split("#")[0] for c in calls} == {"_selftest@v1"}


def test_validation_reask_is_bounded(tmp_path: Path) -> None:
    bad = json_reply({"word": "ice", "n": 99})
    with FakeOpenAIServer(by_role({"verifier": [bad]})) as srv:
        with pytest.raises(LLMOutputError, match="validation"):
            _ask(_settings(srv.base_url, max_reasks=1))
        assert len(srv.requests) == 2  # the first answer and one re-ask
        assert "Correct your JSON" in json.dumps(srv.requests[1].body["messages"])


def test_malformed_json_and_truncation_are_output_errors() -> None:
    with FakeOpenAIServer(by_role({"verifier": [Reply("{not json")]})) as srv:
        with pytest.raises(LLMOutputError):
            _ask(_settings(srv.base_url, max_reasks=0))
    with FakeOpenAIServer(by_role({"verifier": [Reply('{"word": "i', finish_reason="length")]})) as srv:
        with pytest.raises(LLMOutputError, match="truncated"):
            _ask(_settings(srv.base_url, max_reasks=0))


def test_exhausted_transport_retries_raise_transport_error() -> None:
    with FakeOpenAIServer(by_role({"verifier": [Fault(500)]})) as srv:
        with pytest.raises(LLMTransportError):
            _ask(_settings(srv.base_url, max_retries=2))
        assert len(srv.requests) == 3


def test_read_timeout_is_retried() -> None:
    script = [Hang(3.0, then=json_reply({"word": "late", "n": 1})), json_reply({"word": "ice", "n": 2})]
    with FakeOpenAIServer(by_role({"verifier": script})) as srv:
        out, _ = _ask(_settings(srv.base_url, timeout_s=0.5))
        assert out.n == 2


def test_cache_answers_repeat_requests_without_the_network(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with FakeOpenAIServer(by_role({"verifier": json_reply({"word": "ice", "n": 3})})) as srv:
        first, c1 = _ask(_settings(srv.base_url), store)
        second, c2 = _ask(_settings(srv.base_url), store)
        third, c3 = _ask(_settings(srv.base_url), store, word="snow")
        assert len(srv.requests) == 2
    assert (c1, c2, c3) == (False, True, False)
    assert first.model_dump() == second.model_dump()
    assert [c.cache_hit for c in store.llm_calls()] == [False, True, False]


def test_budget_cap_stops_new_calls() -> None:
    with FakeOpenAIServer(by_role({"verifier": json_reply({"word": "ice", "n": 1})})) as srv:
        budget = Budget(cap_usd=1e-9)
        _ask(_settings(srv.base_url), budget=budget)
        assert budget.spent_usd > 0
        with pytest.raises(BudgetExceeded):
            _ask(_settings(srv.base_url), word="snow", budget=budget)
        assert len(srv.requests) == 1


def test_api_key_never_reaches_the_store(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with FakeOpenAIServer(by_role({"verifier": [Fault(500), json_reply({"word": "ice", "n": 1})]})) as srv:
        _ask(_settings(srv.base_url), store)
    store.close()
    for f in tmp_path.iterdir():
        assert b"sk-test-SECRET-7f3a9c" not in f.read_bytes(), f
