"""The run log's one-query look-up of a paper's newest attempts (``Store.latest_runs``, the stage
runner's first read for every paper and stage) agrees with ``Store.latest_run`` stage by stage."""

from __future__ import annotations

from pathlib import Path

from arcticqa.store.runs import FinishedStep
from arcticqa.store.store import Store


def test_latest_runs_is_latest_run_for_each_stage(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'arcticqa.db'}")
    statuses = {"prefilter": ["succeeded"], "extract_text": ["failed", "failed", "succeeded"],
                "eligibility": ["rejected", "failed"]}
    store.record_outcomes([FinishedStep(pid, stage, "", input_hash="h", status=status)
                       for pid in ("p1", "p2") for stage, runs in statuses.items() for status in runs])
    # other subjects and papers must not leak in
    store.record_outcomes([FinishedStep("p1", "eligibility", "fd-1/r0", input_hash="h", status="succeeded"),
                       FinishedStep("p3", "eligibility", "", input_hash="h", status="succeeded")])
    stages = ["prefilter", "extract_text", "eligibility", "construct"]
    newest = store.latest_runs("p1", stages)
    assert sorted(newest) == ["eligibility", "extract_text", "prefilter"]  # no construct attempt yet
    for stage in stages:
        one = store.latest_run("p1", stage)
        assert (newest[stage].id, newest[stage].attempt, newest[stage].status) == (one.id, one.attempt, one.status) \
            if one is not None else stage not in newest
    assert (newest["extract_text"].attempt, newest["eligibility"].status) == (3, "failed")
    assert store.latest_runs("p1", ["eligibility"], subject="fd-1/r0")["eligibility"].status == "succeeded"
    assert store.latest_runs("p4", stages) == {}
