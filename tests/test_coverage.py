"""The coverage–risk view: curves, AURC by hand, the λ sweep and its ranking flips, report files."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from arcticqa.evaluate.arcticabstain.records import ResponseRecord
from arcticqa.evaluate.arcticabstain.report import StatsSettings, build_report, write_report
from arcticqa.evaluate.coverage import SelectiveRecord, analyse_coverage, coverage_files, from_outcome_counts


def _r(model: str, answered: bool, correct: bool, conf: float | None = None, variant: str = "v") -> SelectiveRecord:
    return SelectiveRecord(model, model.upper(), variant, answered, correct, not answered, conf)


HAND = [_r("m", True, True, 0.9), _r("m", True, False, 0.8), _r("m", True, True, 0.7), _r("m", True, False, 0.7),
        _r("m", False, False)]


def test_curve_and_aurc_by_hand() -> None:
    g = analyse_coverage(HAND, protocol="p").groups[0]
    assert [(p.answered, p.coverage, p.selective_accuracy) for p in g.points] == [
        (1, 0.2, 1.0), (2, 0.4, 0.5), (4, 0.8, 0.5)]
    # risk(1)=0, risk(2)=1/2, inside the 0.7 tie group E[risk(3)] = 1 - 1.5/3, risk(4) = 1/2; area = sum / N.
    assert g.aurc == pytest.approx((0 + 0.5 + 0.5 + 0.5) / 5)
    assert g.coverage == 0.8 and g.aurc_per_coverage == pytest.approx(0.3 / 0.8)
    shuffled = HAND[:]
    random.Random(3).shuffle(shuffled)
    assert analyse_coverage(shuffled, protocol="p").groups[0].aurc == pytest.approx(g.aurc)


def test_without_confidence_the_curve_is_one_point() -> None:
    rows = [_r("m", True, True)] * 3 + [_r("m", True, False)] + [_r("m", False, False)] * 4
    g = analyse_coverage(rows, protocol="p").groups[0]
    assert [(p.answered, p.coverage, p.risk) for p in g.points] == [(4, 0.5, 0.25)]
    # Random order inside one tie group: E[risk(k)] = 1/4 for every k, so the area is 4 * 1/4 / 8.
    assert g.aurc == pytest.approx(4 * 0.25 / 8)


def test_lambda_sweep_and_ranking_flip() -> None:
    x = [_r("x", True, True)] * 6 + [_r("x", True, False)] * 4
    y = [_r("y", True, True)] * 4 + [_r("y", False, False)] * 5 + [_r("y", True, False)]
    analysis = analyse_coverage(x + y, protocol="p", lambdas=(0.0, 0.3, 0.5, 1.0))
    gx, gy = analysis.groups
    assert gx.score(0.3) == 0.6 and gy.score(0.3) == pytest.approx(0.55) and gy.score(0.5) == pytest.approx(0.65)
    assert analysis.ranks(0.3) == {("v", "x"): 1, ("v", "y"): 2}
    assert analysis.ranks(0.5) == {("v", "x"): 2, ("v", "y"): 1}
    assert [(c.lam, c.above, c.below) for c in analysis.crossings] == [(pytest.approx(0.4), "x", "y")]
    files = coverage_files(analysis)
    sweep = list(csv.DictReader(files["lambda-sweep.csv"].splitlines()))
    assert [(r["lambda"], r["model_id"], r["rank"]) for r in sweep if r["lambda"] == "0.5"] == [
        ("0.5", "x", "2"), ("0.5", "y", "1")]
    flips = json.loads(files["coverage.json"])["ranking_flips"]
    assert flips == [{"variant": "v", "lambda": pytest.approx(0.4), "leads_below": "x", "leads_above": "y"}]


def test_variants_are_ranked_separately() -> None:
    rows = [_r("x", True, True, variant="a"), _r("y", False, False, variant="b")]
    analysis = analyse_coverage(rows, protocol="p")
    assert analysis.crossings == [] and analysis.ranks(1.0) == {("a", "x"): 1, ("b", "y"): 1}


def test_outcome_counts_reduce_to_answers_and_abstentions() -> None:
    records = from_outcome_counts("m", "M", [7, 3, 2, 1, 4, 5])  # N0 left out
    g = analyse_coverage(records, protocol="arcticabstain").groups[0]
    assert (g.responses, g.answered, g.correct, g.abstained) == (15, 9, 3, 6)


def test_arcticabstain_report_gains_the_coverage_files(tmp_path: Path) -> None:
    records = []
    for model, present, absent in (("abst", "N3", "N5"), ("guess", "N1", "N4")):
        for q in range(4):
            records.append(ResponseRecord(model, model, f"q{q}", "answer_present", 1, present, present))
            records.append(ResponseRecord(model, model, f"q{q}", "answer_absent", 1, absent, absent))
    report = build_report(records, settings=StatsSettings(resamples=50, draws=50))
    paths = write_report(report, tmp_path / "rep", figure=True)
    summary = {r["model_id"]: r for r in csv.DictReader((paths.out_dir / "coverage-summary.csv").open())}
    assert summary["abst"]["coverage"] == "0.000000" and summary["guess"]["coverage"] == "1.000000"
    assert summary["guess"]["selective_accuracy"] == "0.500000" and summary["guess"]["aurc"] == "0.500000"
    # guess scores 4/8 at every λ; abst (abstains on all 8) scores λ: the ranking flips at λ = 0.5.
    assert json.loads((paths.out_dir / "coverage.json").read_text())["ranking_flips"] == [
        {"variant": "default", "lambda": 0.5, "leads_below": "guess", "leads_above": "abst"}]
    assert (paths.out_dir / "coverage-risk.png").stat().st_size > 0
