"""The item audit (`evaluate items`): the 2PL fit against a published fit, analytic cases with
scripted responses, determinism, and the published ArcticQA v1 responses."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.irt import fit_2pl_mml, fit_items_on_rasch
from arcticqa.evaluate.itemaudit import ABSTAIN_TEXT, audit_items, choices_from_rows, item_texts

# LSAT-6 (Bock and Lieberman 1970): 1000 respondents, 5 items; frequencies of the 32 patterns 00000..11111
LSAT_FREQ = [3, 6, 2, 11, 1, 1, 3, 4, 1, 8, 0, 16, 0, 3, 2, 15, 10, 29, 14, 81, 3, 28, 15, 80, 16, 56, 21, 173,
             11, 61, 28, 298]
# R ltm 1.2: ltm(LSAT ~ z1, IRT.param = TRUE), 21 Gauss-Hermite points: log.Lik -2466.653
LTM_B = [-3.3597, -1.3696, -0.2799, -1.8659, -3.1236]
LTM_A = [0.8254, 0.7229, 0.8905, 0.6886, 0.6575]


def test_2pl_mml_reproduces_ltm_on_lsat6() -> None:
    patterns = np.array([[int(b) for b in f"{p:05b}"] for p in range(32)], dtype=float)
    fit = fit_2pl_mml(patterns, np.array(LSAT_FREQ, dtype=float), nodes=21)
    assert fit.converged
    assert fit.loglik == pytest.approx(-2466.653, abs=0.01)
    # ltm's quasi-Newton stopped at max|grad| 0.024: agreement to its printed precision
    assert np.allclose(fit.a, LTM_A, atol=0.002)
    assert np.allclose(fit.b, LTM_B, atol=0.005)


def test_items_on_rasch_recovers_simulated_parameters() -> None:
    rng = np.random.default_rng(3)
    theta, a, c = rng.normal(size=60), rng.uniform(0.6, 2.0, 80), rng.normal(size=80)
    p = 1 / (1 + np.exp(-(theta[:, None] * a + c)))
    k = rng.binomial(3, p).astype(float)
    fit = fit_items_on_rasch(k, np.full(k.shape, 3.0))
    assert fit.converged
    assert np.corrcoef(fit.theta, theta)[0, 1] > 0.97
    assert np.corrcoef(fit.c, c)[0, 1] > 0.9
    assert np.corrcoef(fit.a, a)[0, 1] > 0.5
    # a planted negative slope comes out negative
    p[:, 0] = 1 / (1 + np.exp(-(-1.5 * theta)))
    k[:, 0] = rng.binomial(3, p[:, 0])
    assert fit_items_on_rasch(k, np.full(k.shape, 3.0)).a[0] < 0


def _items(n: int) -> list[EvalItem]:
    return [EvalItem(item_id=f"it-{i:02d}", question=f"Which value {i}?", question_context="",
                     gold_answer=f"gold {i}", distractors=(f"wrong {i}a", f"wrong {i}b", f"wrong {i}c", f"wrong {i}d"))
            for i in range(n)]


def _scripted(items: list[EvalItem], *, swapped: str, seed: int = 1) -> list[dict[str, object]]:
    """8 models of graded ability answer 3 trials of both conditions. On ``swapped`` the key is
    wrong: the true answer is distractor 1, which the stronger models choose."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.15, 0.95, 8)
    abstains = np.linspace(0.05, 0.8, 8)
    rows: list[dict[str, object]] = []
    for m, (p, q) in enumerate(zip(skill, abstains, strict=True)):
        for item in items:
            for trial in (1, 2, 3):
                for condition in ("answer_present", "answer_absent"):
                    texts = ([item.gold_answer, *item.distractors[:3]] if condition == "answer_present"
                             else list(item.distractors))
                    options = [{"letter": "ABCDE"[j], "text": t} for j, t in enumerate([*texts, ABSTAIN_TEXT])]
                    if condition == "answer_present":
                        if item.item_id == swapped:
                            pick = 1 if rng.random() < p else int(rng.choice([0, 2, 3]))
                        else:
                            pick = 0 if rng.random() < p else int(rng.integers(1, 4))
                    else:
                        pick = 4 if rng.random() < q else int(rng.integers(0, 4))
                    rows.append({"model": f"m{m}", "model_label": f"m{m}", "item_id": item.item_id,
                                 "condition": condition, "trial": trial, "options": options,
                                 "chosen_letter": "ABCDE"[pick], "outcome": "N1", "details": None})
    return rows


def test_planted_swap_is_flagged_and_a_clean_item_is_not() -> None:
    items = _items(30)
    audit = audit_items(choices_from_rows(_scripted(items, swapped="it-07"), items, source="scripted"),
                        resamples=50, seed=7)
    rules = {(s.item_id, s.rule_id) for s in audit.suspects}
    assert ("it-07", "items.strong_models_converge") in rules
    assert ("it-07", "items.low_discrimination") in rules
    swapped = next(s for s in audit.suspects if s.rule_id == "items.strong_models_converge")
    assert swapped.option == "distractor 1" and swapped.option_text == "wrong 7a"
    stats = {(s.item_id, s.condition): s for s in audit.stats}
    assert stats[("it-07", "answer_present")].irt_a < 0
    # the clean item with the highest discrimination is not flagged
    clean = max((s for s in audit.stats if s.condition == "answer_present" and s.item_id != "it-07"),
                key=lambda s: s.discrimination or -1)
    assert clean.discrimination is not None and clean.discrimination > 0.4 and clean.irt_a > 0.5
    assert not any(s.item_id == clean.item_id for s in audit.suspects)
    # the swapped item ranks first
    assert max(audit.scores, key=lambda k: audit.scores[k]) == "it-07"


def test_same_seed_same_flags_and_files() -> None:
    items = _items(20)
    rows = _scripted(items, swapped="it-03", seed=5)
    first = item_texts(audit_items(choices_from_rows(rows, items, source="s"), resamples=30, seed=11))
    again = item_texts(audit_items(choices_from_rows(rows, items, source="s"), resamples=30, seed=11))
    assert first == again
    flags = [(s.item_id, s.rule_id) for s in audit_items(choices_from_rows(rows, items, source="s"), resamples=30,
                                                         seed=12).suspects]
    # which items are flagged does not depend on the bootstrap draws (only the intervals quoted do)
    assert flags == [(s.item_id, s.rule_id) for s in audit_items(choices_from_rows(rows, items, source="s"),
                                                                 resamples=30, seed=11).suspects]


def test_absent_convergence_of_good_abstainers() -> None:
    items = _items(20)
    rows = _scripted(items, swapped="none", seed=2)
    for row in rows:  # on it-05 the four best abstainers all choose distractor 2 when the answer is absent
        if row["item_id"] == "it-05" and row["condition"] == "answer_absent" and row["model"] in ("m4", "m5", "m6", "m7"):
            row["chosen_letter"] = "B"
    audit = audit_items(choices_from_rows(rows, items, source="s"), resamples=0)
    found = [s for s in audit.suspects if s.rule_id == "items.absent_converge"]
    assert [(s.item_id, s.option) for s in found] == [("it-05", "distractor 2")]


def test_v1_run_lists_suspects(arcticqa_v1: Path, tmp_path: Path) -> None:
    out = tmp_path / "items"
    result = CliRunner().invoke(app, ["evaluate", "items", "--responses", str(arcticqa_v1 / "responses.csv"),
                                      "--out", str(out), "--no-figure"])
    assert result.exit_code == 0, result.output
    assert "9312 responses of 8 models on 194 items" in result.output
    with (out / "item-stats.csv").open(encoding="utf-8") as handle:
        stats = list(csv.DictReader(handle))
    assert len(stats) == 2 * 194
    present = [r for r in stats if r["condition"] == "answer_present"]
    # on 31 items fewer than 20% of answered answer-present responses choose the key
    assert sum(float(r["difficulty"]) < 0.2 for r in present) == 31
    with (out / "suspects.csv").open(encoding="utf-8") as handle:
        suspects = list(csv.DictReader(handle))
    assert suspects and all(r["reason"] and r["rule_id"].startswith("items.") for r in suspects)
    assert {r["rule_id"] for r in suspects} <= {"items.low_discrimination", "items.strong_models_converge",
                                                  "items.absent_converge", "items.shared_cue",
                                                  "items.key_looks_moved"}
    ids = {json.loads(line)["item_id"] for line in (arcticqa_v1 / "items.jsonl").open(encoding="utf-8")}
    assert {r["item_id"] for r in suspects} <= ids
    assert "## Suspects" in (out / "ITEMS.md").read_text(encoding="utf-8")


def test_without_bootstrap_refits_reasons_quote_no_interval() -> None:
    items = _items(30)
    audit = audit_items(choices_from_rows(_scripted(items, swapped="it-07"), items, source="scripted"), resamples=0)
    low = [s for s in audit.suspects if s.rule_id == "items.low_discrimination"]
    assert low and all("95%" not in s.reason and "nan" not in s.reason for s in low)
    assert not any("nan" in s.reason for s in audit.suspects)
    with_refits = audit_items(choices_from_rows(_scripted(items, swapped="it-07"), items, source="scripted"),
                              resamples=30)
    assert all("95%" in s.reason for s in with_refits.suspects if s.rule_id == "items.low_discrimination")


def test_figure_labels_one_cluster_once() -> None:
    from arcticqa.evaluate.itemaudit import _label_groups

    # eleven suspects on one spot (every model right), two neighbours, one alone
    points = [(1.0, 1.1 + 0.01 * k, f"id{k:02d}") for k in range(11)]
    points += [(0.0, 0.80, "aaaaaa"), (0.02, 0.72, "bbbbbb"), (0.45, -0.46, "cccccc")]
    labels = sorted(text for _x, _y, text in _label_groups(points))
    assert labels == ["11 suspects", "aaaaaa, bbbbbb", "cccccc"]
    # a point that bridges two groups joins them into one
    bridged = _label_groups([(0.0, 0.0, "a"), (0.1, 0.0, "b"), (0.05, 0.0, "c")])
    assert [text for _x, _y, text in bridged] == ["3 suspects"]



def test_intervals_and_csv_never_print_negative_zero() -> None:
    from arcticqa.evaluate.itemaudit import _interval, _num

    # a bootstrap bound of -0.001 printed "-0.00" beside an estimate of "+0.00"
    assert _interval((-0.001, 0.5)) == " (95% +0.00 to +0.50)"
    assert _num(-1e-9) == "0.000000" and _num(-0.25) == "-0.250000"
