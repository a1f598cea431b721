"""The model-endpoint fault matrix: every fault ends as a retried success or a recorded failure.

Two levels. The gateway (real openai + instructor against the loopback stand-in): 429 with and
without Retry-After, 500/502/503, connection reset, read timeout, malformed JSON, JSON of the
wrong schema, ``finish_reason=length``, empty content, refusals — transient faults are retried
to success with every attempt recorded; persistent ones raise the named error. Refusals are asked
again unchanged and truncations with ``max_tokens`` doubled, bounded (``max_refusal_reasks``,
``max_length_reasks``, ``max_tokens_ceiling``), live and in batch mode. Then a whole
build through the runner, where one paper's ``finding_extractor`` calls fail: the ``construct``
stage_run row of that paper carries the right error class and cause, the other paper is
unaffected, nothing is left half-written, and ``resume`` completes it once the endpoint heals.
A budget cap reached mid-run stops cleanly and resumes to the same items as an uninterrupted run.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import load_settings
from arcticqa.errors import FailureThresholdExceeded, LLMError, LLMOutputError, LLMTransportError
from arcticqa.llm.gateway import Gateway, MemoryRecorder
from arcticqa.standins.replies import Drop, Fault, Hang, Reply, by_role, json_reply, role_of
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config
from tests.test_build_pipeline import _items
from tests.test_gateway import Echo, _settings

GOOD = json_reply({"word": "ice", "n": 1})
REFUSAL = "I can't help with that request."


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-faults")


def _ask(base_url: str, recorder: MemoryRecorder, **model: object) -> Echo:
    async def go() -> Echo:
        async with Gateway(_settings(base_url, **model), recorder) as gw:
            reply = await gw.ask("verifier", "_selftest/v1", {"word": "ice"}, Echo, subject="paper-1")
            return reply.output

    return asyncio.run(go())


# --- the gateway ----------------------------------------------------------------------------

TRANSIENT: list[tuple[str, list[Any], str]] = [  # name, faults, what each failed attempt's record says
    ("429_without_retry_after", [Fault(429), Fault(429)], "RateLimitError: Error code: 429"),
    ("429_with_retry_after", [Fault(429, retry_after=0.01)], "RateLimitError: Error code: 429"),
    ("500", [Fault(500)], "InternalServerError: Error code: 500"),
    ("502", [Fault(502), Fault(502)], "InternalServerError: Error code: 502"),
    ("503", [Fault(503)], "InternalServerError: Error code: 503"),
    ("connection_reset", [Drop()], "APIConnectionError: connection error"),
    ("read_timeout", [Hang(2.0)], "APITimeoutError: Request timed out"),
]


@pytest.mark.parametrize(("name", "faults", "said"), TRANSIENT, ids=[t[0] for t in TRANSIENT])
def test_transient_transport_faults_are_retried_to_success(name: str, faults: list[Any], said: str) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": [*faults, GOOD]})) as srv:
        out = _ask(srv.base_url, recorder, timeout_s=0.5, max_retries=3)
        assert len(srv.requests) == len(faults) + 1
    assert (out.word, out.n) == ("ice", 1)
    records = recorder.records
    assert [r.attempt for r in records] == list(range(1, len(faults) + 2))
    # each failed attempt is on file, with what went wrong
    assert all(r.error and r.error.startswith(said) and r.parsed is None for r in records[:-1]), \
        [r.error for r in records]
    assert records[-1].error is None and records[-1].parsed == {"word": "ice", "n": 1}


def test_retry_after_is_honoured() -> None:
    # backoff is 1 ms, so only the server's Retry-After can explain a 0.4 s wait
    with FakeOpenAIServer(by_role({"verifier": [Fault(429, retry_after=0.4), GOOD]})) as srv:
        _ask(srv.base_url, MemoryRecorder(), backoff_initial_s=0.001, backoff_max_s=2.0)
        gap = srv.requests[1].at - srv.requests[0].at
    assert gap >= 0.4


PERSISTENT: list[tuple[str, Any, type[LLMError], str, int]] = [
    # name, the reply every time, the error, a fragment of its message, requests sent
    ("429", Fault(429), LLMTransportError, "RateLimitError", 3),
    ("502", Fault(502), LLMTransportError, "502", 3),
    ("connection_reset", Drop(), LLMTransportError, "APIConnectionError", 3),
    ("read_timeout", Hang(1.0), LLMTransportError, "APITimeoutError", 3),
    ("malformed_json", Reply("{not json"), LLMOutputError, "validation", 2),
    ("wrong_schema", json_reply({"wort": "ice", "n": "many"}), LLMOutputError, "validation", 2),
    ("truncated", Reply('{"word": "i', finish_reason="length"), LLMOutputError, "truncated", 2),
    ("empty_content", Reply(""), LLMOutputError, "validation", 2),
    ("null_content", Reply(None), LLMOutputError, "validation", 2),
    ("refusal_text", Reply(REFUSAL), LLMOutputError, "validation", 2),
]


@pytest.mark.parametrize(("name", "reply", "error", "fragment", "sent"), PERSISTENT, ids=[p[0] for p in PERSISTENT])
def test_persistent_faults_raise_the_named_error_with_every_attempt_recorded(
        name: str, reply: Any, error: type[LLMError], fragment: str, sent: int) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": reply})) as srv:
        with pytest.raises(error, match=fragment) as info:
            _ask(srv.base_url, recorder, timeout_s=0.3, max_retries=2, max_reasks=1)
        assert len(srv.requests) == sent
    assert type(info.value) is error
    # one complete row per request: the request, and an error (never a parsed output)
    assert len(recorder.records) == sent
    assert all(r.request and r.error and r.parsed is None for r in recorder.records)
    if isinstance(reply, Reply) and reply.content:
        assert recorder.records[0].raw_response is not None  # what the model said is kept


# --- refusals and truncations: asked again, bounded, every attempt recorded ------------------

REFUSALS = [Reply(None, refusal=REFUSAL), Reply(None, finish_reason="content_filter")]
REFUSAL_IDS = ["refusal_field", "content_filter"]


def _length() -> Reply:
    return Reply('{"word": "i', finish_reason="length")


@pytest.mark.parametrize("refusals", [0, 1, 2])
@pytest.mark.parametrize("reply", REFUSALS, ids=REFUSAL_IDS)
def test_a_refusal_every_time_is_asked_again_max_refusal_reasks_times_then_fails(reply: Reply, refusals: int
                                                                                 ) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": reply})) as srv:
        with pytest.raises(LLMOutputError, match="refused to answer") as info:
            _ask(srv.base_url, recorder, max_reasks=1, max_refusal_reasks=refusals)
        assert len(srv.requests) == 1 + refusals  # never a validation re-ask: 0 is today's behaviour
        bodies = [r.body for r in srv.requests]
    assert all(b == bodies[0] for b in bodies), "a refusal was asked again with a different request"
    assert ("once" if refusals == 0 else f"{1 + refusals} times") in str(info.value)
    assert "max_refusal_reasks" in str(info.value)
    assert [r.attempt for r in recorder.records] == list(range(1, 2 + refusals))
    assert all(r.error and r.error.startswith("refused: ") and r.parsed is None for r in recorder.records), \
        [r.error for r in recorder.records]


@pytest.mark.parametrize("reply", REFUSALS, ids=REFUSAL_IDS)
def test_a_refusal_then_an_answer_succeeds_with_both_attempts_recorded(reply: Reply) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": [reply, GOOD]})) as srv:
        out = _ask(srv.base_url, recorder)  # the defaults: one refusal re-ask
        assert len(srv.requests) == 2
        first, second = (r.body for r in srv.requests)
    assert (out.word, out.n) == ("ice", 1)
    assert second == first  # the same request, asked again as it was
    assert [r.attempt for r in recorder.records] == [1, 2]
    assert recorder.records[0].error.startswith("refused: ") and recorder.records[0].parsed is None
    assert recorder.records[0].raw_response is not None  # the refusal as the model sent it
    assert recorder.records[1].error is None and recorder.records[1].parsed == {"word": "ice", "n": 1}


def test_refusal_re_asks_are_counted_apart_from_validation_re_asks() -> None:
    # refused, then malformed (instructor's re-ask), then good: 3 requests with max_reasks = 1
    recorder = MemoryRecorder()
    script = [Reply(None, refusal=REFUSAL), Reply("{not json"), GOOD]
    with FakeOpenAIServer(by_role({"verifier": script})) as srv:
        out = _ask(srv.base_url, recorder, max_reasks=1, max_refusal_reasks=1)
        assert len(srv.requests) == 3
        bodies = [r.body for r in srv.requests]
    assert out.word == "ice"
    assert bodies[1] == bodies[0] and len(bodies[2]["messages"]) > len(bodies[0]["messages"])
    assert [(r.error or "")[:9] for r in recorder.records] == ["refused: ", "Validatio", ""]


def test_a_truncated_answer_is_asked_again_with_max_tokens_doubled() -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": [_length(), GOOD]})) as srv:
        out = _ask(srv.base_url, recorder, max_tokens=300)  # the defaults: one length re-ask
        assert [r.body["max_tokens"] for r in srv.requests] == [300, 600]
        first, second = (r.body for r in srv.requests)
    assert (out.word, out.n) == ("ice", 1)
    assert {**second, "max_tokens": 300} == first  # nothing else changed
    records = recorder.records
    assert [r.request["max_tokens"] for r in records] == [300, 600]
    assert records[0].error == "IncompleteOutputException: output truncated (finish_reason=length at max_tokens=300)"
    assert records[0].parsed is None and records[0].raw_response is not None
    assert records[1].error is None and records[1].parsed == {"word": "ice", "n": 1}


@pytest.mark.parametrize(("reasks", "ceiling", "sent"), [
    (0, None, [300]),  # today's behaviour: a truncation fails the call at once
    (1, None, [300, 600]),
    (3, None, [300, 600, 1200, 2400]),
    (3, 1000, [300, 600, 1000]),  # the ceiling ends the doubling: asking 1000 again would not help
    (3, 300, [300]),
], ids=["off", "once", "three_times", "ceiling", "no_room"])
def test_a_truncation_every_time_is_bounded_by_max_length_reasks_and_the_ceiling(
        reasks: int, ceiling: int | None, sent: list[int]) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": _length()})) as srv:
        with pytest.raises(LLMOutputError, match="truncated") as info:
            _ask(srv.base_url, recorder, max_tokens=300, max_length_reasks=reasks, max_tokens_ceiling=ceiling,
                 max_reasks=1)
        assert [r.body["max_tokens"] for r in srv.requests] == sent  # never a validation re-ask
    assert f"max_tokens {' then '.join(map(str, sent))}" in str(info.value)
    assert ("once" if len(sent) == 1 else f"{len(sent)} times") in str(info.value)
    assert [r.request["max_tokens"] for r in recorder.records] == sent
    assert all("finish_reason=length" in (r.error or "") and r.parsed is None for r in recorder.records)


def test_a_transport_retry_after_a_truncation_keeps_the_raised_max_tokens() -> None:
    with FakeOpenAIServer(by_role({"verifier": [_length(), Fault(503), GOOD]})) as srv:
        out = _ask(srv.base_url, MemoryRecorder(), max_tokens=300, max_retries=2)
        assert [r.body["max_tokens"] for r in srv.requests] == [300, 600, 600]
    assert out.word == "ice"


def _ask_batched(tmp_path: Path, base_url: str, recorder: MemoryRecorder, **model: object) -> Echo:
    settings = _settings(base_url, batch_linger_s=0.05, batch_poll_s=0.02, **model)
    settings.build.batch, settings.build.data_dir = True, tmp_path

    async def go() -> Echo:
        async with Gateway(settings, recorder) as gw:
            return (await gw.ask("verifier", "_selftest/v1", {"word": "ice"}, Echo, subject="paper-1")).output

    return asyncio.run(go())


def test_in_batch_mode_a_truncation_is_asked_again_in_a_later_job(tmp_path: Path) -> None:
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": [_length(), GOOD]})) as srv:
        out = _ask_batched(tmp_path, srv.base_url, recorder, max_tokens=300)
        assert not srv.requests, "a batch-mode role sent a live request"
        assert [line["body"]["max_tokens"] for line in srv.batch_lines] == [300, 600]
        assert srv.batches_created == 2
    assert out.word == "ice"
    assert [(r.request["via"], r.request["max_tokens"], r.parsed is not None) for r in recorder.records] == [
        ("batch", 300, False), ("batch", 600, True)]


def test_in_batch_mode_a_refusal_is_not_asked_again(tmp_path: Path) -> None:
    # the same body would be answered from the batch ledger: the stored refusal, not a new answer
    recorder = MemoryRecorder()
    with FakeOpenAIServer(by_role({"verifier": [Reply(None, refusal=REFUSAL), GOOD]})) as srv:
        with pytest.raises(LLMOutputError, match="refused to answer once"):
            _ask_batched(tmp_path, srv.base_url, recorder, max_refusal_reasks=2)
        assert len(srv.batch_lines) == 1 and not srv.requests
    assert len(recorder.records) == 1 and recorder.records[0].error == f"refused: {REFUSAL}"


# --- a whole build through the runner -------------------------------------------------------

class FaultyModel(ScriptedModel):
    """The scripted model, except that ``role`` calls about ``paper`` get ``faults`` (the last
    one repeats; ``None`` means answer normally) while ``broken`` is true."""

    def __init__(self, role: str, paper: str, faults: list[Any]) -> None:
        super().__init__()
        self.role, self.paper, self.faults, self.broken = role, paper, list(faults), True

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        # any message: an instructor re-ask ends with the correction request, not the paper
        if self.broken and role_of(headers) == self.role and self.paper in json.dumps(body["messages"]):
            with self._lock:
                fault = self.faults.pop(0) if len(self.faults) > 1 else self.faults[0]
            if fault is not None:
                return fault
        return super().__call__(body, headers)


def _config(tmp_path: Path, base_url: str, corpus: Path, extra: str = "", timeout: float = 0.5) -> Path:
    config = write_config(tmp_path, base_url=base_url, corpus=corpus, extra=extra)
    config.write_text(config.read_text(encoding="utf-8").replace("timeout_s = 10", f"timeout_s = {timeout}"),
                      encoding="utf-8")
    return config


def _no_half_written_rows(store: Store, db: Path) -> None:
    assert not store.runs(status="running"), "a stage_run row was left running"
    assert all(c.request and (c.error is not None or c.parsed is not None or c.cache_hit)
               for c in store.llm_calls()), "an llm_call row lacks its outcome"
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


STAGE_FAULTS: list[tuple[str, Any, str, str]] = [
    ("429", Fault(429), "LLMTransportError", "429"),
    ("502", Fault(502), "LLMTransportError", "502"),
    ("connection_reset", Drop(), "LLMTransportError", "APIConnectionError"),
    ("read_timeout", Hang(1.0), "LLMTransportError", "APITimeoutError"),
    ("malformed_json", Reply("{not json"), "LLMOutputError", "validation"),
    ("wrong_schema", json_reply({"findings": [{"claim": 3}]}), "LLMOutputError", "validation"),
    ("truncated", Reply('{"findings": [', finish_reason="length"), "LLMOutputError", "truncated"),
    ("empty_content", Reply(""), "LLMOutputError", "validation"),
    ("refusal", Reply(None, refusal=REFUSAL), "LLMOutputError", ""),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "reply", "error_class", "fragment"), STAGE_FAULTS,
                         ids=[s[0] for s in STAGE_FAULTS])
def test_stage_run_records_the_cause_and_resume_heals(tmp_path: Path, name: str, reply: Any, error_class: str,
                                                      fragment: str) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    model = FaultyModel("finding_extractor", "Fram Strait", [reply])
    with FakeOpenAIServer(model) as srv:
        config = _config(tmp_path, srv.base_url, corpus)
        summary = build_in_process(config)
        store = Store(load_settings(config).store.url)
        assert summary["stages"]["construct"] == {"succeeded": 1, "failed": 1}
        failed = store.runs(stage="construct", status="failed")
        assert len(failed) == 1 and failed[0].error_class == error_class
        assert fragment in (failed[0].error_message or "")
        assert "Fram Strait" not in json.dumps([i["question"] for i in _items(store)])
        _no_half_written_rows(store, tmp_path / "arcticqa.db")
        model.broken = False  # the endpoint heals
        build_in_process(config, resume=True)
    assert {r.status for r in store.runs(stage="construct")} >= {"succeeded"}
    assert len(_items(store)) == 2
    _no_half_written_rows(store, tmp_path / "arcticqa.db")


def test_transient_stage_faults_are_retried_inside_the_stage(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    model = FaultyModel("question_writer", "Fram Strait", [Fault(429), Drop(), None])
    with FakeOpenAIServer(model) as srv:
        config = _config(tmp_path, srv.base_url, corpus)
        summary = build_in_process(config)
    assert summary["stages"]["construct"] == {"succeeded": 2}
    store = Store(load_settings(config).store.url)
    writer = [c for c in store.llm_calls() if c.role == "question_writer" and "Fram" in json.dumps(c.request)]
    assert [c.error is None for c in writer] == [False, False, True]
    _no_half_written_rows(store, tmp_path / "arcticqa.db")


def _capped(tmp_path: Path, corpus: Path, srv: FakeOpenAIServer) -> tuple[Path, dict[str, Any] | None]:
    """Build under a cap reached after a handful of calls; the summary, or None if it raised."""
    # each call costs (20 * 1 + 5 * 2) / 1e6 USD
    config = _config(tmp_path, srv.base_url, corpus, extra="budget_usd = 0.00012")
    try:
        return config, build_in_process(config)
    except FailureThresholdExceeded:
        return config, None


def test_budget_cap_mid_run_stops_cleanly(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        _, summary = _capped(tmp_path, corpus, srv)
    assert summary is not None, "the build raised instead of stopping"
    assert summary["stopped"] and "budget cap" in summary["stopped"]


@pytest.mark.slow
def test_budget_cap_mid_run_loses_nothing_and_resume_finishes(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = _config(tmp_path / "reference", srv.base_url, corpus)
        build_in_process(reference)
        expected = _items(Store(load_settings(reference).store.url))
        full = len(srv.requests)

    with FakeOpenAIServer(ScriptedModel()) as srv:
        work = tmp_path / "capped"
        config, _ = _capped(work, corpus, srv)
        stopped_after = len(srv.requests)
        store = Store(load_settings(config).store.url)
        # in-flight calls may finish; no new ones start: at most one per concurrent paper past the cap
        assert 4 <= stopped_after <= 4 + 2 < full
        assert any(r.error_class == "BudgetExceeded" for r in store.runs(status="failed"))
        assert len(_items(store)) < len(expected)
        _no_half_written_rows(store, work / "arcticqa.db")
        answered = {json.dumps(c.request["messages"], sort_keys=True) for c in store.llm_calls()
                    if c.parsed is not None and c.request}

        config.write_text(config.read_text(encoding="utf-8").replace("budget_usd = 0.00012", "budget_usd = 1.0"),
                          encoding="utf-8")
        build_in_process(config, resume=True)
        resent = [json.dumps(r.body["messages"], sort_keys=True) for r in srv.requests[stopped_after:]]
    assert not answered & set(resent), "a request whose answer was recorded was sent again"
    assert _items(store) == expected
    _no_half_written_rows(store, work / "arcticqa.db")
