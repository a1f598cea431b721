"""Training exposure on the published v1 responses equals an independent computation.

ArcticQA v1 carries no publication dates, so the test writes an ``--item-dates`` file giving
each paper (by DOI) a date derived from its DOI's hash, leaves some papers out (they must be
reported as undated, never guessed), and gives two models a cutoff and the rest none. The
independent side reads ``responses.csv`` with the csv module and recomputes every number in
plain Python/numpy: outcome counts, the paper's ``random.Random(7)`` question bootstrap, the
label-permutation p-values (within Monte Carlo error: a different random stream) and Holm.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import random
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.records import load_published_responses
from arcticqa.evaluate.arcticabstain.report import StatsSettings
from arcticqa.evaluate.exposure import build_exposure, dates_of_items, read_item_dates

SETTINGS = StatsSettings(resamples=300, draws=4000, seed=7)
CUTOFFS = {"claude-opus-5": date(2021, 1, 1), "gpt-5.6-sol": date(2023, 6, 1)}


def _synthetic_date(doi: str) -> date:
    h = int(hashlib.sha256(doi.encode()).hexdigest(), 16)
    return date(2015 + h % 11, 1 + (h >> 8) % 12, 1 + (h >> 16) % 28)


@pytest.fixture(scope="module")
def v1_case(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    from tests.conftest import ARCTICQA_V1

    if not (ARCTICQA_V1 / "responses.csv").exists():
        pytest.skip(f"published ArcticQA v1 data not found at {ARCTICQA_V1} (CI has ../shared/)")
    item_doi = {}
    for line in (ARCTICQA_V1 / "items.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        item_doi[row["item_id"]] = row["paper"]["doi"]
    dois = sorted(set(item_doi.values()))
    undated_dois = set(dois[::9])
    dates_csv = tmp_path_factory.mktemp("dates") / "item-dates.csv"
    with dates_csv.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["doi", "date"])
        for doi in dois:
            # Upper-case DOIs: the file's spelling need not match the release's.
            writer.writerow([doi.upper(), "" if doi in undated_dois else _synthetic_date(doi).isoformat()])
    return {"root": ARCTICQA_V1, "item_doi": item_doi, "undated_dois": undated_dois, "dates_csv": dates_csv}


def _independent_bootstrap(counts: dict[str, list[int]], resamples: int, seed: int) -> dict[str, tuple[float, float]]:
    """The paper's loop, literally: random.Random(seed), rng.choice per slot, floor-index percentiles."""
    answered = [counts[q] for q in sorted(counts) if sum(counts[q][1:]) > 0]
    n = len(answered)
    rng = random.Random(seed)
    values: dict[str, list[float]] = {"present": [], "absent": [], "shift": [], "accuracy": [],
                                      "present_reliability": []}
    for _ in range(resamples):
        s = [0] * 6
        for _slot in range(n):
            c = answered[rng.choice(range(n))]
            s = [a + b for a, b in zip(s, c, strict=True)]
        present_n, absent_n, acc_n = s[1] + s[2] + s[3], s[4] + s[5], s[1] + s[2]
        p = s[3] / present_n if present_n else math.nan
        a = s[5] / absent_n if absent_n else math.nan
        values["present"].append(p)
        values["absent"].append(a)
        values["shift"].append(a - p)
        values["accuracy"].append(s[1] / acc_n if acc_n else math.nan)
        values["present_reliability"].append(s[1] / present_n if present_n else math.nan)
    bounds = {}
    for name, vals in values.items():
        finite = sorted(v for v in vals if not math.isnan(v))
        last = len(finite) - 1
        bounds[name] = (finite[int(0.025 * last)], finite[int(0.975 * last)])
    return bounds


def _independent_permutation_p(before: list[float], after: list[float], draws: int, seed: int) -> float:
    rng = np.random.default_rng(seed + 1000)
    pooled = np.array(before + after)
    observed = np.mean(before) - np.mean(after)
    hits = 0
    for _ in range(draws):
        shuffled = rng.permutation(pooled)
        hits += abs(shuffled[:len(before)].mean() - shuffled[len(before):].mean()) >= abs(observed) - 1e-12
    return (hits + 1) / (draws + 1)


def _independent_holm(p: list[float]) -> list[float]:
    m = len(p)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        adjusted[i] = running
    return list(adjusted)


@pytest.mark.shared
def test_split_on_v1_equals_independent_computation(v1_case: dict[str, object]) -> None:
    root = v1_case["root"]
    item_doi = v1_case["item_doi"]
    assert isinstance(root, Path) and isinstance(item_doi, dict)
    dates = read_item_dates(v1_case["dates_csv"])  # type: ignore[arg-type]
    item_dates, undated = dates_of_items(item_doi, dates)
    expected_undated = sorted(i for i, d in item_doi.items() if d in v1_case["undated_dois"])  # type: ignore[operator]
    assert undated == expected_undated and undated  # reported, never guessed
    assert all(item_dates[i] == _synthetic_date(d) for i, d in item_doi.items() if i in item_dates)

    records, _lines = load_published_responses(root / "responses.csv")
    exposures = {e.model: e for e in build_exposure(records, item_dates, CUTOFFS, settings=SETTINGS)}
    assert set(exposures) == {r.model for r in records}

    rows = list(csv.DictReader((root / "responses.csv").open(encoding="utf-8")))
    tested_p: dict[str, tuple[float, float]] = {}
    for model, exposure in exposures.items():
        if model not in CUTOFFS:
            assert not exposure.split and exposure.before is None and exposure.accuracy_test is None
            continue
        cutoff = CUTOFFS[model]
        per_item: dict[str, list[int]] = {}
        for row in rows:
            if row["model"] == model and row["item_id"] in item_dates:
                per_item.setdefault(row["item_id"], [0] * 6)[int(row["outcome"][1])] += 1
        sides = {"before": {q: c for q, c in per_item.items() if item_dates[q] < cutoff},
                 "after": {q: c for q, c in per_item.items() if item_dates[q] >= cutoff}}
        assert exposure.before_items == len(sides["before"]) > 0
        assert exposure.after_items == len(sides["after"]) > 0
        per_question: dict[str, tuple[list[float], list[float]]] = {}
        for side, counts in sides.items():
            result = getattr(exposure, side)
            total = [sum(c[k] for c in counts.values()) for k in range(6)]
            assert result.counts.counts == total
            assert result.counts.present_abstention == pytest.approx(total[3] / (total[1] + total[2] + total[3]))
            assert result.counts.absent_abstention == pytest.approx(total[5] / (total[4] + total[5]))
            assert result.counts.acc == pytest.approx((total[1] + total[5]) / sum(total[1:]))
            ci = _independent_bootstrap(counts, SETTINGS.resamples, SETTINGS.seed)
            assert result.present_ci == pytest.approx(ci["present"], abs=1e-12)
            assert result.absent_ci == pytest.approx(ci["absent"], abs=1e-12)
            assert result.shift_ci == pytest.approx(ci["shift"], abs=1e-12)
            assert result.accuracy_ci == pytest.approx(ci["accuracy"], abs=1e-12)
            acc = [c[1] / (c[1] + c[2]) for _, c in sorted(counts.items()) if c[1] + c[2]]
            resp = [c[5] / (c[4] + c[5]) - c[3] / (c[1] + c[2] + c[3]) for _, c in sorted(counts.items())
                    if c[4] + c[5] and c[1] + c[2] + c[3]]
            per_question[side] = (acc, resp)
        accuracy_test, responsiveness_test = exposure.accuracy_test, exposure.responsiveness_test
        assert accuracy_test is not None and responsiveness_test is not None
        for test, k in ((accuracy_test, 0), (responsiveness_test, 1)):
            before, after = per_question["before"][k], per_question["after"][k]
            assert test.difference == pytest.approx(np.mean(before) - np.mean(after), abs=1e-12)
            p = _independent_permutation_p(before, after, SETTINGS.draws, SETTINGS.seed)
            # Two independent Monte Carlo estimates of one p-value: within 5 standard errors.
            se = math.sqrt(max(p * (1 - p), 1e-4) / SETTINGS.draws)
            assert abs(test.p_value - p) < 5 * se + 2 / SETTINGS.draws
        tested_p[model] = (accuracy_test.p_value, responsiveness_test.p_value)

    models = sorted(tested_p, key=list(exposures).index)
    for k, attribute in ((0, "accuracy_holm_p"), (1, "responsiveness_holm_p")):
        expected = _independent_holm([tested_p[m][k] for m in models])
        assert [getattr(exposures[m], attribute) for m in models] == pytest.approx(expected, abs=1e-15)


def test_item_dates_bad_input_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "dates.csv"
    path.write_text("item_id,date\naqa-1,2020-02-30\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"dates\.csv:2: not a date .*field 'date'") as caught:
        read_item_dates(path)
    assert caught.value.exit_code == 2
    path.write_text("item,when\nx,2020\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"dates\.csv:1: needs a 'date' column"):
        read_item_dates(path)
    path.write_text("doi,date\n10.1/A,2020\n10.1/a,2021\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"dates\.csv:3: doi '10.1/a' has two different dates"):
        read_item_dates(path)


def test_partial_dates_are_their_earliest_day(tmp_path: Path) -> None:
    path = tmp_path / "dates.csv"
    path.write_text("item_id,doi,date\na,,2019\nb,10.5/X,2019-07\nc,,\n", encoding="utf-8")
    dates = read_item_dates(path)
    assert dates == {"a": date(2019, 1, 1), "b": date(2019, 7, 1), "10.5/x": date(2019, 7, 1)}
    found, missing = dates_of_items({"a": None, "z": "10.5/x", "c": None}, dates)
    assert found == {"a": date(2019, 1, 1), "z": date(2019, 7, 1)} and missing == ["c"]


@pytest.mark.shared
def test_cli_report_config_cutoff_and_published_unsplit_rows(v1_case: dict[str, object], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from arcticqa.cli.app import app

    root = v1_case["root"]
    assert isinstance(root, Path)
    config = tmp_path / "arcticqa.toml"
    config.write_text('[[evaluate.models]]\nlabel = "claude-opus-5"\nmodel = "x"\nknowledge_cutoff = 2021-01-01\n'
                      '[[evaluate.models]]\nlabel = "gpt-5.6-sol"\nmodel = "x"\nknowledge_cutoff = 1999-01-01\n',
                      encoding="utf-8")
    out = tmp_path / "exposure"
    # The CLI --cutoff overrides the config's for gpt-5.6-sol; claude-opus-5 keeps the config's.
    result = CliRunner().invoke(app, [
        "evaluate", "exposure", "--responses", str(root / "responses.csv"), "--item-dates", str(v1_case["dates_csv"]),
        "--config", str(config), "--cutoff", "gpt-5.6-sol=2023-06-01", "--out", str(out), "--no-figure",
        "--resamples", str(SETTINGS.resamples), "--draws", str(SETTINGS.draws)])
    assert result.exit_code == 0, result.output
    assert "Claude Sonnet 5: no knowledge_cutoff declared; reported unsplit." in result.output
    rows = list(csv.DictReader((out / "exposure.csv").open(encoding="utf-8")))
    assert {(r["model"], r["knowledge_cutoff"]) for r in rows if r["side"] == "before"} == {
        (m, d.isoformat()) for m, d in CUTOFFS.items()}
    undated = [r["item_id"] for r in csv.DictReader((out / "undated-items.csv").open(encoding="utf-8"))]
    assert len(undated) == len(dates_of_items(v1_case["item_doi"], read_item_dates(v1_case["dates_csv"]))[1])  # type: ignore[arg-type]

    # The "all" rows are the published numbers (their point values do not depend on resamples).
    published = {r["model_id"]: r for r in csv.DictReader((root / "results" / "condition-shifts.csv").open(encoding="utf-8"))}
    for row in rows:
        if row["side"] == "all":
            theirs = published[row["model"]]
            for ours_key, theirs_key in (("present_abstention", "present_abstention"), ("shift", "shift"),
                                         ("absent_abstention", "absent_abstention"), ("questions", "questions"),
                                         ("present_accuracy_when_answering", "present_accuracy_when_answering")):
                assert row[ours_key] == theirs[theirs_key], (row["model"], ours_key)
    tests_rows = list(csv.DictReader((out / "exposure-tests.csv").open(encoding="utf-8")))
    assert len(tests_rows) == 2 * len(CUTOFFS)


@pytest.mark.shared
def test_cli_bad_cutoff_and_unknown_model_exit_2(v1_case: dict[str, object], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from arcticqa.cli.app import app

    root = v1_case["root"]
    assert isinstance(root, Path)
    base = ["evaluate", "exposure", "--responses", str(root / "responses.csv"), "--item-dates",
            str(v1_case["dates_csv"]), "--no-figure"]
    bad = CliRunner().invoke(app, [*base, "--cutoff", "claude-opus-5=spring", "--out", str(tmp_path / "a")])
    assert bad.exit_code == 2 and "--cutoff: expected MODEL=YYYY-MM-DD" in bad.output
    unknown = CliRunner().invoke(app, [*base, "--cutoff", "gpt-7=2024-01-01", "--out", str(tmp_path / "b")])
    assert unknown.exit_code == 2 and "cutoff for models not in the responses: gpt-7" in unknown.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.shared
def test_items_own_publication_date_is_used_and_the_csv_wins(v1_case: dict[str, object], tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from arcticqa.cli.app import app

    root = v1_case["root"]
    assert isinstance(root, Path)
    dates = read_item_dates(v1_case["dates_csv"])  # type: ignore[arg-type]
    items = tmp_path / "items.jsonl"
    lines = []
    for line in (root / "items.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        when = dates.get(row["paper"]["doi"].lower())
        if when is not None:
            # A wrong date in the items file: the CSV below must override it.
            row["paper"]["publication_date"] = "1990-01-01" if row["item_id"] < "aqa-3" else when.isoformat()
        lines.append(json.dumps(row))
    items.write_text("\n".join(lines) + "\n", encoding="utf-8")
    base = ["evaluate", "exposure", "--responses", str(root / "responses.csv"), "--items", str(items),
            "--cutoff", "claude-opus-5=2021-01-01", "--no-figure", "--resamples", "50", "--draws", "200"]
    from_csv = CliRunner().invoke(app, [*base, "--item-dates", str(v1_case["dates_csv"]), "--out", str(tmp_path / "a")])
    assert from_csv.exit_code == 0, from_csv.output
    own_only = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "b")])
    assert own_only.exit_code == 0, own_only.output
    undated = [r["item_id"] for r in csv.DictReader((tmp_path / "b" / "undated-items.csv").open(encoding="utf-8"))]
    assert undated == dates_of_items(v1_case["item_doi"], dates)[1]  # type: ignore[arg-type]
    a = (tmp_path / "a" / "exposure.csv").read_text(encoding="utf-8")
    b = (tmp_path / "b" / "exposure.csv").read_text(encoding="utf-8")
    assert a != b  # the 1990 dates moved items to "before" when only the items file was read
    # With the true dates in the items file and no CSV, the report equals the CSV-driven one.
    for line_no, line in enumerate(lines):
        row = json.loads(line)
        when = dates.get(row["paper"]["doi"].lower())
        if when is not None:
            row["paper"]["publication_date"] = when.isoformat()
        lines[line_no] = json.dumps(row)
    items.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fixed = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "c")])
    assert fixed.exit_code == 0, fixed.output
    assert (tmp_path / "c" / "exposure.csv").read_text(encoding="utf-8") == a


@pytest.mark.shared
def test_zones_on_v1_equal_independent_computation(v1_case: dict[str, object]) -> None:
    """Know2Guess-style zones per model with a cutoff: seen/unseen (answer-present before/after),
    boundary/unknown (answer-absent before/after), recomputed from responses.csv with the csv module."""
    root, item_doi = v1_case["root"], v1_case["item_doi"]
    assert isinstance(root, Path) and isinstance(item_doi, dict)
    item_dates, _undated = dates_of_items(item_doi, read_item_dates(v1_case["dates_csv"]))  # type: ignore[arg-type]
    records, _lines = load_published_responses(root / "responses.csv")
    exposures = {e.model: e for e in build_exposure(records, item_dates, CUTOFFS, settings=SETTINGS)}
    rows = list(csv.DictReader((root / "responses.csv").open(encoding="utf-8")))
    assert any(r["outcome"] == "N0" for r in rows)  # the refusal and invalid rates have something to count
    for model, exposure in exposures.items():
        if model not in CUTOFFS:
            assert exposure.zones == []
            continue
        zones = {z.zone: z for z in exposure.zones}
        assert list(zones) == ["seen", "unseen", "boundary", "unknown"]
        cutoff = CUTOFFS[model]
        mine = [r for r in rows if r["model"] == model and r["item_id"] in item_dates]
        for side, present_zone, absent_zone in (("before", "seen", "boundary"), ("after", "unseen", "unknown")):
            on_side = [r for r in mine if (item_dates[r["item_id"]] < cutoff) == (side == "before")]
            per_item: dict[str, list[int]] = {}
            for r in on_side:
                per_item.setdefault(r["item_id"], [0] * 6)[int(r["outcome"][1])] += 1
            ci = _independent_bootstrap(per_item, SETTINGS.resamples, SETTINGS.seed)
            for zone_name, condition in ((present_zone, "answer_present"), (absent_zone, "answer_absent")):
                zone = zones[zone_name]
                these = [r for r in on_side if r["condition"] == condition]
                n = [sum(r["outcome"] == f"N{k}" for r in these) for k in range(6)]
                causes = [r["invalid_cause"] for r in these]
                with_answer = len(these) - causes.count("infrastructure_no_provider_answer")
                assert (zone.side, zone.condition, zone.abstention_expected) == (side, condition,
                                                                                condition == "answer_absent")
                assert (zone.responses, zone.valid, zone.provider_answered) == (len(these), len(these) - n[0],
                                                                                 with_answer)
                assert zone.questions == len({r["item_id"] for r in these if r["outcome"] != "N0"})
                assert zone.refusal_rate == pytest.approx(causes.count("provider_safeguard_refusal") / with_answer)
                assert zone.invalid_rate == pytest.approx(causes.count("model_format_violation") / with_answer)
                if condition == "answer_present":
                    valid = n[1] + n[2] + n[3]
                    assert zone.reliability == pytest.approx(n[1] / valid)  # the expected action: the gold option
                    assert zone.answered == n[1] + n[2]
                    assert zone.answered_accuracy == pytest.approx(n[1] / (n[1] + n[2]))
                    assert zone.abstention_rate == pytest.approx(n[3] / valid)
                    assert zone.reliability_ci == pytest.approx(ci["present_reliability"], abs=1e-12)
                    assert zone.answered_accuracy_ci == pytest.approx(ci["accuracy"], abs=1e-12)
                    assert zone.abstention_ci == pytest.approx(ci["present"], abs=1e-12)
                else:
                    valid = n[4] + n[5]
                    assert zone.reliability == zone.abstention_rate == pytest.approx(n[5] / valid)
                    assert zone.answered == n[4]
                    # No gold option is shown: an answer is never correct (Know2Guess's zone D rule).
                    assert zone.answered_accuracy == (0.0 if n[4] else None)
                    assert zone.reliability_ci == zone.abstention_ci == pytest.approx(ci["absent"], abs=1e-12)
