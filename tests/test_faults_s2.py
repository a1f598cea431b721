"""Semantic Scholar faults the other discovery tests do not cover: 429 storms and null-field records.

(5xx, Retry-After, expired tokens and invalid records are in ``tests/test_discover_s2.py``.)
A 429 storm shorter than the retry budget is ridden out; a longer one fails that query only,
is recorded, and the next run resumes from the stored page token. Records whose optional fields
are all null become papers; records without a usable id are kept as rejections, never raised.
"""

from __future__ import annotations

from typing import Any

from arcticqa.stages.discover import InMemoryCheckpoint, deduplicate, discover
from tests.fakes.s2_server import S2StandIn
from tests.test_discover_s2 import _opts, _paper, _run


def test_a_429_storm_within_the_budget_is_ridden_out() -> None:
    with S2StandIn([_paper(1), _paper(2)]) as s2:
        s2.inject(429, times=5)  # no Retry-After: jittered backoff
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(),
                               options=_opts(s2, max_attempts=6)))
        attempts = len(s2.bulk_requests())
    assert result.complete and len(result.records) == 2 and attempts == 6


def test_a_429_storm_beyond_the_budget_fails_one_query_and_resumes_from_its_token() -> None:
    papers = [_paper(i) for i in range(4)]
    with S2StandIn({"arctic": papers, "tundra": [_paper(9)]}, page_size=2) as s2:
        checkpoint = InMemoryCheckpoint()
        first = _run(discover(["arctic"], source="s2", checkpoint=checkpoint, options=_opts(s2, max_pages=1)))
        assert first.outcomes[0].status == "paused"
        s2.inject(429, times=20, retry_after="0")
        second = _run(discover(["arctic", "tundra"], source="s2", checkpoint=checkpoint, options=_opts(s2)))
        assert second.outcomes[0].status == "failed" and "429" in (second.outcomes[0].error or "")
        s2.clear_faults()
        before = len(s2.bulk_requests())
        third = _run(discover(["arctic", "tundra"], source="s2", checkpoint=checkpoint, options=_opts(s2)))
        resumed = s2.bulk_requests()[before:]
    assert {o.status for o in third.outcomes} <= {"done", "already_done"}
    assert resumed and resumed[0].param("token") is not None  # not back at page 1
    assert len(deduplicate(checkpoint.all_records()).kept) == 5


def test_records_with_null_fields_are_kept_or_rejected_never_raised() -> None:
    nulls: dict[str, Any] = {k: None for k in ("corpusId", "externalIds", "abstract", "year", "openAccessPdf",
                                               "publicationTypes", "fieldsOfStudy", "venue", "authors")}
    papers = [_paper(1, **nulls), {"paperId": None, "title": None}, {"paperId": "", "title": "empty id"},
              _paper(3, title=None), _paper(4)]
    with S2StandIn(papers) as s2:
        result = _run(discover(["arctic"], source="s2", checkpoint=InMemoryCheckpoint(), options=_opts(s2)))
    assert result.complete and len(result.records) == 5
    by_id = {r.paper_id: r for r in result.records if r.paper is not None}
    assert f"{1:040x}" in by_id and f"{4:040x}" in by_id
    rejected = [r for r in result.records if r.rejection is not None]
    assert rejected and {r.rejection.rule_id for r in rejected if r.rejection} == {"discover.invalid_record"}
