"""Discovery from the live-API path: the real semanticscholar client against a loopback stand-in."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from arcticqa.config import DiscoverySettings
from arcticqa.errors import ConfigError
from arcticqa.papers import S2_FIELDS
from arcticqa.sources.ratelimit import RateLimiter
from arcticqa.sources.s2_api import RetryPolicy, S2Client, ServerFilters
from arcticqa.stages.discover import (
    DiscoveryOptions,
    InMemoryCheckpoint,
    checkpoint_key,
    deduplicate,
    discover,
    parse_source,
)
from tests.fakes.s2_server import S2StandIn


def _paper(i: int, **extra: Any) -> dict[str, Any]:
    paper: dict[str, Any] = {
        "paperId": f"{i:040x}", "corpusId": 1000 + i, "externalIds": {"DOI": f"10.1000/arctic.{i}"},
        "title": f"Arctic sea ice observation number {i}", "abstract": "Sea ice in the Arctic.",
        "year": 2015 + i % 5, "openAccessPdf": {"url": f"http://pdf.example/{i}.pdf", "status": "GOLD",
                                                 "license": "CC-BY"},
    }
    paper.update(extra)
    return paper


def _opts(s2: S2StandIn, **kw: Any) -> DiscoveryOptions:
    base: dict[str, Any] = dict(api_url=s2.url, rate_per_s=1000.0, backoff_initial_s=0.001,
                                backoff_max_s=0.01, max_attempts=4)
    base.update(kw)
    return DiscoveryOptions(**base)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_bulk_search_pages_explicitly_and_records_provenance() -> None:
    papers = [_paper(i) for i in range(5)]
    with S2StandIn(papers, page_size=2) as s2:
        checkpoint = InMemoryCheckpoint()
        result = _run(discover(["arctic"], source="s2", checkpoint=checkpoint, options=_opts(s2)))
        requests = s2.bulk_requests()

    assert result.complete
    assert [r.paper_id for r in result.records] == [p["paperId"] for p in papers]
    assert [r.page for r in result.records] == [1, 1, 2, 2, 3]
    assert all(r.query == "arctic" and r.origin == "s2" and r.fetched_at.tzinfo for r in result.records)
    key = checkpoint_key(parse_source("s2"), "arctic", ServerFilters())
    pages = checkpoint.streams[key].pages
    assert [p[0] for p in pages] == [1, 2, 3]
    # each page's token_in is the previous page's token_out; the last page ends the stream
    assert pages[0][1] is None and pages[1][1] == pages[0][2] and pages[2][1] == pages[1][2]
    assert pages[2][2] is None and checkpoint.is_done(key)
    assert len(requests) == 3
    assert [r.param("token") for r in requests] == [None, pages[0][2], pages[1][2]]
    assert requests[0].param("fields") == ",".join(S2_FIELDS)


def test_query_with_bulk_syntax_arrives_verbatim() -> None:
    query = '"sea ice" + (Arctic | Svalbard) -Antarctic & perma* 100%'
    with S2StandIn({query: [_paper(1)]}) as s2:
        result = _run(discover([query], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
        sent = s2.bulk_requests()[0]
    assert sent.param("query") == query
    assert len(result.records) == 1


def test_server_side_filters_are_sent_and_applied() -> None:
    papers = [_paper(1, year=1990), _paper(2, year=2020), _paper(3, year=2021, openAccessPdf=None)]
    filters = ServerFilters(year="2000-2030", open_access_pdf=True, fields_of_study=("Geology",),
                            publication_types=("JournalArticle",))
    with S2StandIn(papers) as s2:
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(),
                               options=_opts(s2, server_filters=filters)))
        sent = s2.bulk_requests()[0]
    assert sent.param("year") == "2000-2030"
    assert "openAccessPdf" in sent.params
    assert sent.param("fieldsOfStudy") == "Geology"
    assert sent.param("publicationTypes") == "JournalArticle"
    assert [r.paper_id for r in result.records] == [papers[1]["paperId"]]


def test_429_retry_honours_retry_after() -> None:
    with S2StandIn([_paper(1)]) as s2:
        s2.inject(429, times=2, retry_after="0.2")
        started = time.monotonic()
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
        elapsed = time.monotonic() - started
        attempts = len(s2.bulk_requests())
    assert result.complete and len(result.records) == 1
    assert attempts == 3 and result.requests == 3
    # backoff_initial_s is 1 ms, so only Retry-After can account for >= 0.4 s of waiting
    assert elapsed >= 0.4


def test_retry_after_is_capped() -> None:
    with S2StandIn([_paper(1)]) as s2:
        s2.inject(429, retry_after="3600")
        started = time.monotonic()
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(),
                               options=_opts(s2, retry_after_cap_s=0.01)))
    assert result.complete
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("status,body", [(502, None), (503, None), (500, b"<html>oops</html>"),
                                         (504, None)])
def test_5xx_is_retried_not_taken_for_an_empty_result(status: int, body: bytes | None) -> None:
    with S2StandIn([_paper(1), _paper(2)]) as s2:
        s2.inject(status, body=body)
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
        attempts = len(s2.bulk_requests())
    assert result.complete
    assert len(result.records) == 2
    assert attempts == 2


def test_empty_page_with_token_is_retried() -> None:
    with S2StandIn([_paper(1)]) as s2:
        s2.inject_empty_page()
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
        attempts = len(s2.bulk_requests())
    assert [r.paper_id for r in result.records] == [_paper(1)["paperId"]]
    assert attempts == 2


def test_persistent_failure_fails_one_query_and_resumes_from_stored_token() -> None:
    papers = [_paper(i) for i in range(6)]
    with S2StandIn({"arctic": papers, "tundra": [_paper(10)]}, page_size=2) as s2:
        checkpoint = InMemoryCheckpoint()
        first = _run(discover(["arctic"], source="s2", checkpoint=checkpoint,
                              options=_opts(s2, max_pages=1)))
        assert first.outcomes[0].status == "paused"
        # a 503 storm longer than the retry budget interrupts the second page
        s2.inject(503, times=4)
        second = _run(discover(["arctic", "tundra"], source="s2", checkpoint=checkpoint,
                               options=_opts(s2)))
        assert [o.status for o in second.outcomes] == ["failed", "done"]
        assert "503" in (second.outcomes[0].error or "")
        before = len(s2.bulk_requests())
        third = _run(discover(["arctic", "tundra"], source="s2", checkpoint=checkpoint,
                              options=_opts(s2)))
        resumed = s2.bulk_requests()[before:]

    assert [o.status for o in third.outcomes] == ["done", "already_done"]
    # the resumed query starts at the stored token, never back at page 1
    assert all(r.param("token") is not None for r in resumed)
    assert [r.page for r in third.records] == [2, 2, 3, 3]
    dedup = deduplicate(checkpoint.all_records())
    assert len(dedup.kept) == 7 and not dedup.duplicates


def test_expired_token_restarts_the_query_and_dedup_absorbs_repeats() -> None:
    papers = [_paper(i) for i in range(4)]
    with S2StandIn(papers, page_size=2) as s2:
        checkpoint = InMemoryCheckpoint()
        _run(discover(["arctic"], source="s2", checkpoint=checkpoint, options=_opts(s2, max_pages=1)))
        s2.expire_tokens()
        result = _run(discover(["arctic"], source="s2", checkpoint=checkpoint, options=_opts(s2)))
        tokens = [r.param("token") for r in s2.bulk_requests()]
    outcome = result.outcomes[0]
    assert outcome.status == "done" and outcome.token_restarts == 1
    assert tokens[1] is not None and tokens[2] is None  # rejected token, then a fresh start
    dedup = deduplicate(checkpoint.all_records())
    assert len(dedup.kept) == 4
    assert {d.matched_on for d in dedup.duplicates} == {"paper_id"} and len(dedup.duplicates) == 2


def test_expired_token_gives_up_after_the_restart_budget() -> None:
    with S2StandIn([_paper(i) for i in range(4)], page_size=2) as s2:
        checkpoint = InMemoryCheckpoint()
        _run(discover(["arctic"], source="s2", checkpoint=checkpoint, options=_opts(s2, max_pages=1)))
        s2.expire_tokens()
        result = _run(discover(["arctic"], source="s2", checkpoint=checkpoint,
                               options=_opts(s2, max_token_restarts=0)))
    assert result.outcomes[0].status == "failed"
    assert "expired" in (result.outcomes[0].error or "")


def test_bad_records_from_the_api_are_recorded_not_raised() -> None:
    papers = [_paper(1), {"title": "no id at all", "year": 2020},
              _paper(2, year="twenty twenty"), _paper(3, title=None, abstract=None, year=None)]
    with S2StandIn(papers) as s2:
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
    assert len(result.records) == 4
    bad = [r for r in result.records if r.rejection is not None]
    assert [r.rejection.rule_id for r in bad if r.rejection] == ["discover.invalid_record"] * 2
    assert {r.rejection.evidence["field"] for r in bad if r.rejection} == {"paperId", "year"}
    assert result.outcomes[0].invalid == 2 and result.outcomes[0].records == 2


def test_api_key_is_sent_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_S2_KEY", "secret-123")
    with S2StandIn([_paper(1)]) as s2:
        settings = DiscoverySettings(api_url=s2.url, api_key_env="ARCTICQA_TEST_S2_KEY", rate_per_s=1000.0,
                                     max_attempts=4)
        _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(),
                      options=DiscoveryOptions.from_settings(settings, backoff_initial_s=0.001,
                                                             backoff_max_s=0.01)))
        headers = s2.bulk_requests()[0].headers
    assert headers.get("x-api-key") == "secret-123"


def test_default_rate_depends_on_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARCTICQA_TEST_S2_KEY", raising=False)
    settings = DiscoverySettings(api_key_env="ARCTICQA_TEST_S2_KEY")
    assert DiscoveryOptions.from_settings(settings).effective_rate() < 1.0
    monkeypatch.setenv("ARCTICQA_TEST_S2_KEY", "k")
    assert DiscoveryOptions.from_settings(settings).effective_rate() == 1.0


def test_forbidden_is_a_config_error() -> None:
    with S2StandIn([_paper(1)]) as s2:
        s2.inject(403)
        with pytest.raises(ConfigError, match="API key"):
            _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))


def test_client_construction_leaves_root_logger_alone() -> None:
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    for handler in saved_handlers:
        root.removeHandler(handler)
    try:
        with S2StandIn([_paper(1)]) as s2:
            _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
        assert root.handlers == []
    finally:
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)


def test_rate_limiter_spaces_requests() -> None:
    with S2StandIn([_paper(i) for i in range(3)], page_size=1) as s2:
        started = time.monotonic()
        _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(),
                      options=_opts(s2, rate_per_s=10.0)))
        elapsed = time.monotonic() - started
    assert elapsed >= 0.2  # 3 requests at 10/s: two full intervals


def test_rate_limiter_with_a_fake_clock() -> None:
    now = [100.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    limiter = RateLimiter(2.0, clock=lambda: now[0], sleep=fake_sleep)

    async def three() -> None:
        for _ in range(3):
            await limiter.acquire()

    _run(three())
    assert slept == [pytest.approx(0.5), pytest.approx(0.5)]
    with pytest.raises(ValueError):
        RateLimiter(0)


def test_batch_lookup_through_the_library_with_retries() -> None:
    papers = [_paper(1), _paper(2)]
    with S2StandIn(papers) as s2:
        s2.inject(503, endpoint="batch")
        client = S2Client(api_url=s2.url, api_key=None, timeout_s=5, limiter=RateLimiter(1000),
                          retry=RetryPolicy(max_attempts=3, backoff_initial_s=0.001))
        found = _run(client.get_papers([papers[1]["paperId"], "DOI:10.1000/arctic.1", "missing"],
                                       fields=S2_FIELDS))
        batch = [r for r in s2.requests if r.method == "POST"]
    assert [p["paperId"] for p in found] == [papers[1]["paperId"], papers[0]["paperId"]]
    assert len(batch) == 2 and batch[-1].body == {"ids": [papers[1]["paperId"], "DOI:10.1000/arctic.1",
                                                          "missing"]}
    assert client.requests == 2


def test_s2_source_needs_queries() -> None:
    with pytest.raises(ConfigError):
        _run(discover([], source="s2", checkpoint=InMemoryCheckpoint()))
