"""bench/bench_gates.py on a smaller run (slow): the red team plants its defects into a build of
the first six sample papers (all eligible) over the wire, and none reaches the release; the same
build without a tamper exports the offline build's items byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.bench_gates import corpus_subset, passthrough_same, run_seed, table

pytestmark = pytest.mark.slow


def test_no_planted_defect_reaches_the_release_and_the_pass_through_is_the_offline_build(tmp_path: Path) -> None:
    corpus = corpus_subset(tmp_path / "corpus", 6)
    run = run_seed(1, corpus, tmp_path / "seed-1")
    text, figures = table([run])
    reached = [(o.plant.defect, o.plant.change) for o in run.outcomes if o.reached]
    assert reached == [], text
    assert figures["classes"] >= 8 and figures["plants"] >= 20, text
    # every plant was caught by a rule (or, for a transport fault, asked again): none slipped by unseen
    assert all(o.caught_by for o in run.outcomes), text
    assert run.log.read_text(encoding="utf-8").count("\n") == len(run.outcomes)
    same, items = passthrough_same(corpus, tmp_path / "passthrough")
    assert same and items >= 5
