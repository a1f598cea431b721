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


def test_latest_output_is_the_newest_attempts_output(tmp_path: Path) -> None:
    """``latest_output`` (the stages' input reads) is ``latest_run(...).output``: the newest
    attempt's, even when that attempt has none, per paper, stage and subject."""
    store = Store(f"sqlite:///{tmp_path / 'arcticqa.db'}")
    store.record_outcomes([
        FinishedStep("p1", "extract_text", "", input_hash="h", status="succeeded", output={"sha256": "a", "n": 1}),
        FinishedStep("p1", "extract_text", "", input_hash="h", status="succeeded", output={"sha256": "b", "µ": "°C"}),
        FinishedStep("p2", "extract_text", "", input_hash="h", status="succeeded", output={"sha256": "c"}),
        FinishedStep("p2", "extract_text", "", input_hash="h", status="failed", error=RuntimeError("x")),
        FinishedStep("p1", "eligibility", "fd-1/r0", input_hash="h", status="succeeded", output={"x": [1, 2]}),
    ])
    cases = [("p1", "extract_text", ""), ("p2", "extract_text", ""), ("p1", "eligibility", "fd-1/r0"),
             ("p1", "eligibility", ""), ("p3", "extract_text", "")]
    for paper, stage, subject in cases:
        run = store.latest_run(paper, stage, subject)
        assert store.latest_output(paper, stage, subject) == (run.output if run is not None else None)
    assert store.latest_output("p1", "extract_text") == {"sha256": "b", "µ": "°C"}
    assert store.latest_output("p2", "extract_text") is None  # the newest attempt failed: no output
