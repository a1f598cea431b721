"""Client-side pacing: token buckets (driven by a fake clock) and the gateway's limits over HTTP."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from pydantic import BaseModel

from arcticqa.config import ModelConfig, Settings
from arcticqa.llm.gateway import Gateway
from arcticqa.llm.ratelimit import ModelLimiter, TokenBucket, estimate_tokens
from arcticqa.standins.replies import Reply, json_reply
from arcticqa.standins.server import FakeOpenAIServer


class Echo(BaseModel):
    word: str
    n: int


class FakeClock:
    """Time that only moves when the bucket sleeps: the tests never wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture(autouse=True)
def _fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-ratelimit")


def test_bucket_lets_a_burst_through_then_paces_at_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2.0, 2.0, clock=clock, sleep=clock.sleep)  # 120 per minute

    async def go() -> list[float]:
        times = []
        for _ in range(6):
            await bucket.take(1)
            times.append(clock.now)
        return times

    times = asyncio.run(go())
    assert times == pytest.approx([0.0, 0.0, 0.5, 1.0, 1.5, 2.0])


def test_concurrent_takers_never_exceed_the_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(2.0, 2.0, clock=clock, sleep=clock.sleep)

    async def go() -> list[float]:
        times: list[float] = []

        async def one() -> None:
            await bucket.take(1)
            times.append(clock.now)

        await asyncio.gather(*(one() for _ in range(10)))
        return sorted(times)

    times = asyncio.run(go())
    # in any window of w seconds at most capacity + rate * w requests start
    for i, t in enumerate(times):
        in_window = sum(1 for u in times[i:] if u < t + 1.0)
        assert in_window <= 2 + 2
    assert times[-1] == pytest.approx(4.0)


def test_oversized_request_goes_into_debt_and_later_requests_wait() -> None:
    clock = FakeClock()
    bucket = TokenBucket(100.0, 100.0, clock=clock, sleep=clock.sleep)

    async def go() -> tuple[float, float]:
        first = await bucket.take(500)  # more than the bucket holds: allowed from a full bucket
        second = await bucket.take(50)  # waits for the debt (400) and its own 50 to refill
        return first, second

    first, second = asyncio.run(go())
    assert first == 0.0 and second == pytest.approx(4.5)


def test_usage_correction_refunds_an_overestimate() -> None:
    clock = FakeClock()
    cfg = ModelConfig(tokens_per_minute=6000)  # 100 tokens/s, holds 100
    limiter = ModelLimiter.for_config(cfg)
    assert limiter.tokens is not None and limiter.requests is None
    limiter.tokens = TokenBucket(100.0, 100.0, clock=clock, sleep=clock.sleep)

    async def go() -> float:
        await limiter.acquire(100)
        limiter.settle(100, 20)  # the provider reported 20 tokens: 80 come back
        return await limiter.acquire(100)

    assert asyncio.run(go()) == pytest.approx(0.2)


def test_estimate_counts_prompt_length_and_answer_ceiling() -> None:
    messages = [{"role": "system", "content": "x" * 400}, {"role": "user", "content": "y" * 400}]
    assert estimate_tokens(messages, 50) == 200 + 50


def _settings(base_url: str, **models: dict[str, Any]) -> Settings:
    base = {"base_url": base_url, "model": "fake-model", "api_key_env": "ARCTICQA_TEST_KEY",
            "backoff_initial_s": 0.01, "backoff_max_s": 0.05, "timeout_s": 10.0}
    configs = {name: ModelConfig(**{**base, **fields}) for name, fields in models.items()}
    roles = {"verifier": "a", "reconstructor": "b" if "b" in configs else "a"}
    return Settings(models=configs, roles=roles)


async def _ask_many(settings: Settings, roles: list[str]) -> None:
    async with Gateway(settings) as gw:
        await asyncio.gather(*(gw.ask(role, "_selftest/v1", {"word": f"w{i}"}, Echo)
                               for i, role in enumerate(roles)))


def test_requests_per_minute_holds_through_the_gateway() -> None:
    # 120 rpm: a burst of 2 (one second's worth), then one request every 0.5 s
    with FakeOpenAIServer(lambda body, headers: json_reply({"word": "ice", "n": 1})) as srv:
        settings = _settings(srv.base_url, a={"requests_per_minute": 120, "max_concurrency": 16})
        asyncio.run(_ask_many(settings, ["verifier"] * 6))
        at = sorted(r.at for r in srv.requests)
    assert len(at) == 6
    assert at[-1] - at[0] >= (6 - 2) / 2.0 * 0.9  # ~2 calls/s after the burst
    for i, t in enumerate(at):  # no one-second window holds more than burst + rate
        assert sum(1 for u in at[i:] if u < t + 0.99) <= 2 + 2


class _Concurrency:
    """A responder that answers after a pause and records how many requests overlapped."""

    def __init__(self) -> None:
        self.now = self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
        with self.lock:
            self.now += 1
            self.peak = max(self.peak, self.now)
        time.sleep(0.1)
        with self.lock:
            self.now -= 1
        return json_reply({"word": "ice", "n": 1})


def test_endpoint_limit_is_shared_by_model_configs_on_one_base_url() -> None:
    responder = _Concurrency()
    with FakeOpenAIServer(responder) as srv:
        settings = _settings(srv.base_url, a={"max_concurrency": 10, "endpoint_max_concurrency": 3},
                             b={"max_concurrency": 10, "endpoint_max_concurrency": 5})
        asyncio.run(_ask_many(settings, ["verifier", "reconstructor"] * 6))
        assert len(srv.requests) == 12
    assert responder.peak == 3  # the smaller of the two configs' endpoint bounds, and it was reached


def test_model_limit_alone_bounds_each_config() -> None:
    responder = _Concurrency()
    with FakeOpenAIServer(responder) as srv:
        settings = _settings(srv.base_url, a={"max_concurrency": 2}, b={"max_concurrency": 2})
        asyncio.run(_ask_many(settings, ["verifier", "reconstructor"] * 4))
    assert responder.peak == 4  # two configs x two each: no endpoint bound configured
