"""The stand-ins that enforce a provider's limits: the model endpoint's RPM and TPM
buckets answered with 429 + Retry-After, its latency and faults, and Semantic Scholar's rate."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from typing import Any

import httpx
import openai
import pytest

from arcticqa.standins.limits import LimitedResponder, ProviderLimits, ServerBucket, prompt_tokens
from arcticqa.standins.replies import Fault, Hang, Reply
from arcticqa.standins.s2 import S2StandIn
from arcticqa.standins.server import FakeOpenAIServer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def ok(body: dict[str, Any], headers: Mapping[str, str]) -> Reply:
    return Reply(content="x" * 40)


def body(text: str = "hello", max_tokens: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": text}]}
    if max_tokens is not None:
        out["max_tokens"] = max_tokens
    return out


def _client(server: FakeOpenAIServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, timeout=10)


def _ask(client: openai.OpenAI, n: int) -> Any:
    return client.chat.completions.create(model="m", messages=[{"role": "user", "content": f"question {n}"}])


def test_a_burst_beyond_rpm_gets_429s_whose_retry_after_if_honoured_succeeds() -> None:
    """Over loopback HTTP with the real openai client: 120 rpm holds a burst of 2 (one second's
    worth); the rest are refused with a Retry-After, and a client that waits that long gets in."""
    limited = LimitedResponder(ok, ProviderLimits(requests_per_minute=120))
    with FakeOpenAIServer(limited) as server:
        client = _client(server)
        answers, refusals = [], []
        for n in range(5):
            try:
                answers.append(_ask(client, n))
            except openai.RateLimitError as exc:
                refusals.append(float(exc.response.headers["retry-after"]))
        assert len(answers) == 2 and len(refusals) == 3
        # the bucket refills at 2 a second: the first refusal waits (nearly) half a second
        assert 0.3 < refusals[0] <= 0.5
        time.sleep(refusals[-1])
        honoured = _ask(client, 99)  # came back when told: admitted
        assert honoured.choices[0].message.content == "x" * 40
    assert limited.stats.refused_rpm == 3 and limited.stats.answered == 3
    # usage is the stand-in's count: the prompt's characters / 4, the answer's likewise
    assert honoured.usage is not None and honoured.usage.completion_tokens == 10


def test_the_openai_clients_own_retries_honour_retry_after_and_all_calls_get_through() -> None:
    limited = LimitedResponder(ok, ProviderLimits(requests_per_minute=300))  # 5 a second, burst 5
    with FakeOpenAIServer(limited) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=5, timeout=10)
        started = time.monotonic()
        for n in range(9):
            _ask(client, n)
        took = time.monotonic() - started
    assert limited.stats.answered == 9 and limited.stats.refused_rpm >= 1
    assert took >= 0.6  # four beyond the burst of five, at 5 a second
    assert limited.stats.answered_twice == 0


def test_tpm_refuses_with_the_wait_for_the_tokens_and_charges_usage() -> None:
    clock = Clock()
    limits = ProviderLimits(tokens_per_minute=6000)  # 100 tokens a second, bucket of 100
    limited = LimitedResponder(ok, limits, clock=clock)
    prompt = body("y" * 320)  # 80 prompt tokens, answered with 10
    assert prompt_tokens(prompt) == 80
    first = limited(prompt, {})
    assert isinstance(first, Reply) and (first.prompt_tokens, first.completion_tokens) == (80, 10)
    # 90 charged: 10 left, 80 needed → 0.7 s
    refused = limited(body("z" * 320), {})
    assert isinstance(refused, Fault) and refused.status == 429 and refused.retry_after == pytest.approx(0.7)
    clock.now += 0.7
    assert isinstance(limited(body("z" * 320), {}), Reply)
    assert limited.stats.refused_tpm == 1 and limited.stats.tokens_charged == 180


def test_max_tokens_charge_reserves_the_answer_ceiling_and_a_large_request_goes_into_debt() -> None:
    clock = Clock()
    limited = LimitedResponder(ok, ProviderLimits(tokens_per_minute=6000, charge="max_tokens"), clock=clock)
    # 80 + 500 tokens: more than the bucket holds, admitted from a full bucket, leaving it 480 in debt
    assert isinstance(limited(body("y" * 320, max_tokens=500), {}), Reply)
    refused = limited(body("q", max_tokens=10), {})
    assert isinstance(refused, Fault) and refused.retry_after == pytest.approx(4.91)  # (480 + 1 + 10) / 100
    assert limited.stats.tokens_charged == 580


def test_server_bucket_waits_for_what_it_lacks() -> None:
    clock = Clock()
    bucket = ServerBucket(2.0, 2.0, clock)
    bucket.take(2)
    assert bucket.wait(1) == pytest.approx(0.5)
    clock.now += 0.25
    assert bucket.wait(1) == pytest.approx(0.25)
    assert bucket.wait(10) == pytest.approx(0.75)  # at most a full bucket is waited for


def test_faults_and_latency_are_drawn_per_request_from_the_seed() -> None:
    limits = ProviderLimits(latency_median_s=1.5, latency_p99_s=8.0, latency_cap_s=20.0, error_rate=0.03,
                            timeout_rate=0.02, hang_s=25.0, seed=7)

    def run(order: list[int]) -> dict[int, tuple[str, float]]:
        limited = LimitedResponder(ok, limits)
        out = {}
        for i in order:
            r = limited(body(f"paper {i}"), {})
            assert isinstance(r, Hang)
            kind = "timeout" if r.then is None else ("error" if isinstance(r.then, Fault) else "answer")
            out[i] = (kind, r.seconds)
        return out

    forward = run(list(range(3000)))
    assert forward == run(list(reversed(range(3000))))  # arrival order does not matter
    kinds = [k for k, _ in forward.values()]
    assert 0.02 < kinds.count("error") / 3000 < 0.04 and 0.01 < kinds.count("timeout") / 3000 < 0.03
    latencies = sorted(s for k, s in forward.values() if k == "answer")
    assert statistics.median(latencies) == pytest.approx(1.5, rel=0.1)
    assert latencies[int(0.99 * len(latencies))] == pytest.approx(8.0, rel=0.25)
    # the same request sent again is a new draw (a retry after a fault is not doomed to repeat it)
    limited = LimitedResponder(ok, ProviderLimits(error_rate=0.5, seed=1))
    fates = {isinstance(limited(body("again"), {}), Fault) for _ in range(40)}
    assert fates == {True, False}


def test_a_body_answered_twice_is_counted() -> None:
    limited = LimitedResponder(ok, ProviderLimits())
    limited(body("a"), {})
    limited(body("a"), {})
    limited(body("b"), {})
    assert limited.stats.answered == 3 and len(limited.stats.bodies) == 2 and limited.stats.answered_twice == 1
    summary = limited.stats.summary()  # what bench_scale reads across processes: plain data
    assert (summary["refused"], summary["distinct_answered"], summary["answered_twice"]) == (0, 2, 1)


def test_s2_stand_in_refuses_beyond_its_rate_with_retry_after() -> None:
    records = [{"paperId": f"p{i}", "title": f"Paper {i}", "year": 2020} for i in range(2500)]
    with S2StandIn(records, page_size=1000, rate_per_s=2.0, keep_requests=False) as s2:
        url = f"{s2.url}/graph/v1/paper/search/bulk"
        with httpx.Client(timeout=10) as client:
            first = client.get(url, params={"query": "q"})
            refused = client.get(url, params={"query": "q", "token": first.json()["token"]})
            assert first.status_code == 200 and len(first.json()["data"]) == 1000
            assert refused.status_code == 429
            wait = float(refused.headers["Retry-After"])
            assert 0 < wait <= 0.5
            time.sleep(wait)
            second = client.get(url, params={"query": "q", "token": first.json()["token"]})
            assert second.status_code == 200 and second.json()["data"][0]["paperId"] == "p1000"
        assert s2.counts() == {"received": 3, "refused": 1, "pages": 2}
        assert s2.requests == []  # keep_requests=False: counted, not kept


def test_the_scripted_model_answers_a_finding_request_whose_prompt_holds_no_methods_span() -> None:
    from arcticqa.standins.scripted import ScriptedModel

    # a long rehearsal paper's prompt held its results span but no methods span: the stand-in raised
    # StopIteration in its handler and the connection dropped, so the paper's build failed
    body = {"messages": [{"role": "user", "content": "Spans:\n[sp-0a1b] (results) Mean sea-ice thickness at the "
                                                     "Fram Strait mooring decreased by 12% from 2010 to 2020."}]}
    reply = ScriptedModel()(body, {"X-Arcticqa-Role": "finding_extractor"})
    assert isinstance(reply, Reply) and reply.content is not None
    finding = json.loads(reply.content)["findings"][0]
    assert finding["span_ids"] == ["sp-0a1b"] and finding["scope_span_ids"] == ["sp-0a1b"]
    assert finding["answer"] == "12%"
