"""A model config's ``recover_in_flight``: requests sent with ``store: true`` and metadata naming
them, written to the store before they leave, and recovered from the provider's stored completions
by whoever asks them next, instead of being sent again. Real openai client, the loopback stand-in,
real SQLite stores, a real SIGKILL."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest
from pydantic import BaseModel, Field

from arcticqa.config import ModelConfig, Settings
from arcticqa.errors import LLMTransportError
from arcticqa.llm.gateway import Gateway, RoleReply
from arcticqa.pipeline.ledger import StoreLedger
from arcticqa.standins.replies import Fault, by_role, json_reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store


class Echo(BaseModel):
    word: str
    n: int = Field(le=3)


ANSWER = {"word": "ice", "n": 1}


def _settings(base_url: str, **model: object) -> Settings:
    fields: dict[str, object] = {"backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 10.0,
                                 "price_in_per_mtok": 2.0, "price_out_per_mtok": 8.0, **model}
    cfg = ModelConfig(base_url=base_url, model="fake-model", api_key_env="", **fields)  # type: ignore[arg-type]
    return Settings(models={"fake": cfg}, roles={"verifier": "fake"})


def _ask(settings: Settings, store: Store) -> RoleReply[Echo]:
    async def go() -> RoleReply[Echo]:
        async with Gateway(settings, StoreLedger(store)) as gw:
            return await gw.ask("verifier", "_selftest/v1", {"word": "ice"}, Echo, subject="paper-1")

    return asyncio.run(go())


def ask_in_child(store_url: str, base_url: str, timeout_s: str) -> None:
    """What the process this module SIGKILLs runs (``python -c``)."""
    _ask(_settings(base_url, recover_in_flight=True, timeout_s=float(timeout_s)), Store(store_url))


def _sent(store: Store) -> list[tuple[str, str]]:
    with store.engine.connect() as conn:
        return [(r[0], r[1]) for r in conn.exec_driver_sql("SELECT request_hash, send_id FROM llm_sent ORDER BY id")]


def test_off_requests_go_out_unchanged_and_nothing_is_written_ahead(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with FakeOpenAIServer(by_role({"verifier": json_reply(ANSWER)})) as srv:
        reply = _ask(_settings(srv.base_url), store)
        body = srv.requests[0].body
    assert reply.output == Echo(**ANSWER)
    assert "store" not in body and "metadata" not in body
    assert set(body) == {"messages", "model", "temperature", "max_tokens", "response_format"}
    assert _sent(store) == [] and srv.stored == {} and srv.stored_lookups == 0


def test_on_each_send_is_written_first_and_named_in_its_metadata(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    with FakeOpenAIServer(by_role({"verifier": json_reply(ANSWER)})) as srv:
        reply = _ask(_settings(srv.base_url, recover_in_flight=True), store)
        body = srv.requests[0].body
        stored = list(srv.stored.values())
    assert body["store"] is True
    [(request_hash, send_id)] = _sent(store)
    assert body["metadata"] == {"arcticqa_request": reply.request_hash, "arcticqa_send": send_id,
                                "arcticqa_attempt": "1"}
    assert request_hash == reply.request_hash
    assert [c["metadata"]["arcticqa_send"] for c in stored] == [send_id]
    # a request nobody sent before is not looked up: the hot path costs a store read and a write
    assert srv.stored_lookups == 0
    [call] = store.llm_calls()
    assert call.request is not None and call.request["metadata"]["arcticqa_send"] == send_id


def test_a_request_in_flight_when_its_process_was_killed_is_answered_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/s.db"
    store = Store(url)
    # 3 s to answer: the child is killed while the stand-in is still generating its answer
    with FakeOpenAIServer(by_role({"verifier": json_reply(ANSWER)}), latency=3.0) as srv:
        child = subprocess.Popen([sys.executable, "-c", "from tests.test_recover_in_flight import ask_in_child; "
                                  f"ask_in_child({url!r}, {srv.base_url!r}, '10')"],
                                 cwd=Path(__file__).resolve().parents[1])
        deadline = time.monotonic() + 60
        while not srv.requests and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        assert srv.requests, "the child never sent its request"
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
        assert store.llm_calls() == []  # the killed process recorded nothing
        [(_, send_id)] = _sent(store)

        started = time.monotonic()
        reply = _ask(_settings(srv.base_url, recover_in_flight=True), store)
        waited = time.monotonic() - started
        posts, lookups = len(srv.requests), srv.stored_lookups

    assert posts == 1  # the stand-in answered the request once
    assert lookups >= 2 and 1.0 < waited < 10.0  # looked up until the answer was stored, then used it
    assert reply.output == Echo(**ANSWER) and not reply.cached
    [call] = store.llm_calls()
    assert call.error is None and call.parsed == ANSWER and not call.cache_hit
    assert call.request is not None and call.request["via"] == "recovered"
    assert call.request["recovered"]["arcticqa_send"] == send_id
    assert call.raw_response is not None and call.raw_response["choices"]
    assert call.tokens_in == 20 and call.cost_usd == pytest.approx((20 * 2.0 + 5 * 8.0) / 1e6)
    # asked again: the store answers, nothing goes to the endpoint
    assert _ask(_settings(srv.base_url, recover_in_flight=True), store).cached


def test_a_request_sent_before_without_a_stored_answer_is_sent_after_the_timeout(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    script = [Fault(500), json_reply(ANSWER)]  # the first send fails: nothing stored
    with FakeOpenAIServer(by_role({"verifier": script})) as srv:
        settings = _settings(srv.base_url, recover_in_flight=True, timeout_s=1.5, max_retries=0)
        with pytest.raises(LLMTransportError):
            _ask(settings, store)
        started = time.monotonic()
        reply = _ask(settings, store)  # another gateway: the first send is someone else's
        waited = time.monotonic() - started
        posts, lookups = len(srv.requests), srv.stored_lookups
    assert reply.output == Echo(**ANSWER)
    assert posts == 2 and lookups >= 1
    assert waited < 1.5 + 1.0  # bounded by the config's timeout after the first send
    assert len(_sent(store)) == 2
    assert [c.request.get("via") for c in store.llm_calls() if c.request is not None] == [None, None]


def test_an_endpoint_that_keeps_no_completions_is_told_once_and_asked_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Store(f"sqlite:///{tmp_path}/s.db")
    script = [Fault(500), json_reply(ANSWER)]
    with FakeOpenAIServer(by_role({"verifier": script}), keeps_completions=False) as srv:
        settings = _settings(srv.base_url, recover_in_flight=True, timeout_s=30.0, max_retries=0)
        with pytest.raises(LLMTransportError):
            _ask(settings, store)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="arcticqa.llm.gateway"):
            reply = _ask(settings, store)
    assert reply.output == Echo(**ANSWER) and time.monotonic() - started < 5.0
    assert [r.message for r in caplog.records if "cannot be looked up" in r.message]


def test_the_stand_in_stores_lists_and_returns_completions_as_openai_does() -> None:
    async def go(base_url: str) -> None:
        async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
            messages = [{"role": "user", "content": "hi"}]
            kept = await client.chat.completions.create(model="m", messages=messages,  # type: ignore[arg-type]
                                                        store=True, metadata={"k": "a"})
            await client.chat.completions.create(model="m", messages=messages, store=True,  # type: ignore[arg-type]
                                                 metadata={"k": "b"})
            await client.chat.completions.create(model="m", messages=messages, metadata={"k": "a"})  # type: ignore[arg-type]
            page = await client.chat.completions.list(metadata={"k": "a"})
            assert [c.id for c in page.data] == [kept.id] and page.data[0].metadata == {"k": "a"}
            both = await client.chat.completions.list(order="desc", limit=1)
            assert len(both.data) == 1 and both.has_more
            assert (await client.chat.completions.retrieve(kept.id)).choices[0].message.content == "{}"
            with pytest.raises(openai.BadRequestError):
                await client.chat.completions.create(model="m", messages=messages,  # type: ignore[arg-type]
                                                     store=True, metadata={"k": "x" * 513})

    with FakeOpenAIServer(lambda body, headers: json_reply({})) as srv:
        asyncio.run(go(srv.base_url))
        assert len(srv.stored) == 2
