"""The review statistics against hand-computed values, edge cases (0 errors, all errors, one
stratum) and properties that must hold for any input (a check that is true of a rewrite)."""

from __future__ import annotations

import math
import random

import pytest

from arcticqa.review.stats import (
    Z95,
    allocate,
    cohen_kappa,
    effective_size,
    fleiss_kappa,
    krippendorff_alpha,
    proportion,
    sample_size,
    stratified_proportion,
)

Z2 = Z95 * Z95


def test_wilson_interval_by_hand() -> None:
    # 3 of 10: centre (0.3 + z²/20) / (1 + z²/10), half z·sqrt(0.021 + z²/400) / (1 + z²/10)
    e = proportion(3, 10)
    centre = (0.3 + Z2 / 20) / (1 + Z2 / 10)
    half = Z95 * math.sqrt(0.3 * 0.7 / 10 + Z2 / 400) / (1 + Z2 / 10)
    assert (e.low, e.high) == pytest.approx((centre - half, centre + half))
    assert (round(e.low, 4), round(e.high, 4)) == (0.1078, 0.6032)  # the textbook Wilson interval of 3/10


def test_zero_and_all_errors_keep_an_interval() -> None:
    none, every = proportion(0, 10), proportion(10, 10)
    assert (none.rate, none.low) == (0.0, 0.0) and none.high == pytest.approx(Z2 / (10 + Z2))  # 0.2775
    assert (every.rate, every.high) == pytest.approx((1.0, 1.0)) and every.low == pytest.approx(10 / (10 + Z2))
    assert proportion(0, 0).text == "not measured (no verdicts)"
    assert stratified_proportion({"a": [False] * 10}, {"a": 50}).high == pytest.approx(Z2 / (10 + Z2))
    assert stratified_proportion({"a": [True] * 4, "b": [True] * 2}, {"a": 9, "b": 1}).rate == 1.0


def test_stratified_estimate_by_hand() -> None:
    # stratum a: 80 items, 1 error in 4 reviewed; stratum b: 20 items, 2 errors in 2 reviewed
    e = stratified_proportion({"a": [True, False, False, False], "b": [True, True]}, {"a": 80, "b": 20})
    assert e.rate == pytest.approx(0.8 * 0.25 + 0.2 * 1.0)  # 0.4
    # Kish: item weights 20 (x4) and 10 (x2): (100)^2 / (4*400 + 2*100) = 10000/1800
    assert e.n_effective == pytest.approx(10000 / 1800, abs=1e-6)
    n = 10000 / 1800
    centre = (0.4 + Z2 / (2 * n)) / (1 + Z2 / n)
    half = Z95 * math.sqrt(0.4 * 0.6 / n + Z2 / (4 * n * n)) / (1 + Z2 / n)
    assert (e.low, e.high) == pytest.approx((centre - half, centre + half), abs=1e-6)
    assert (e.n, e.hits) == (6, 3)


def test_one_stratum_and_proportional_samples_are_the_plain_wilson_interval() -> None:
    rng = random.Random(7)
    for _ in range(200):
        n = rng.randint(1, 60)
        obs = [rng.random() < rng.random() for _ in range(n)]
        one = stratified_proportion({"only": obs}, {"only": rng.randint(n, 10 * n)})
        plain = proportion(sum(obs), n)
        assert (one.rate, one.low, one.high) == pytest.approx((plain.rate, plain.low, plain.high))
        # the same observations split over strata sampled in proportion to their size
        k = rng.randint(1, 4)
        split = {f"s{h}": obs[h::k] for h in range(k) if obs[h::k]}
        same = stratified_proportion(split, {h: len(v) * 7 for h, v in split.items()})
        assert (same.rate, same.low, same.high) == pytest.approx((plain.rate, plain.low, plain.high))
        # renaming strata or reordering observations never changes the estimate
        renamed = stratified_proportion({f"x{h}": list(reversed(v)) for h, v in split.items()},
                                        {f"x{h}": len(v) * 7 for h, v in split.items()})
        assert renamed.rate == pytest.approx(same.rate) and renamed.high == pytest.approx(same.high)


def test_sample_size_from_a_half_width() -> None:
    assert sample_size(0.05, 10**9) == 385  # 1.96² · 0.25 / 0.05² = 384.1
    assert sample_size(0.05, 100) == 80  # finite population: 384.1 / (1 + 383.1/100) = 79.5
    assert sample_size(0.05, 6) == 6 and sample_size(0.05, 0) == 0
    assert sample_size(0.05, 10**9, expected_rate=0.1) == 139  # 1.96² · 0.09 / 0.0025 = 138.3
    with pytest.raises(ValueError):
        sample_size(0, 100)


def test_allocation_is_proportional_and_covers_every_stratum() -> None:
    assert allocate(10, {"a": 50, "b": 30, "c": 20, "d": 0}) == {"a": 5, "b": 3, "c": 2, "d": 0}
    assert allocate(5, {"a": 100, "b": 1, "c": 1}) == {"a": 3, "b": 1, "c": 1}
    assert allocate(2, {"a": 5, "b": 3, "c": 1}) == {"a": 1, "b": 1, "c": 0}
    assert allocate(99, {"a": 2, "b": 3}) == {"a": 2, "b": 3}  # never more than a stratum holds
    rng = random.Random(3)
    for _ in range(200):
        sizes = {f"s{h}": rng.randint(0, 40) for h in range(rng.randint(1, 6))}
        n = rng.randint(0, sum(sizes.values()))
        got = allocate(n, sizes)
        assert sum(got.values()) == n and all(0 <= got[h] <= sizes[h] for h in sizes)
        if n >= sum(1 for v in sizes.values() if v):
            assert all(got[h] >= 1 for h, v in sizes.items() if v)


def test_weighted_allocation_oversamples_and_never_exceeds_a_stratum() -> None:
    # "m" weighs 3: one item each, then 14 in shares 60 : 3·20 : 20 -> 6 : 6 : 2
    assert allocate(17, {"r": 60, "m": 20, "u": 20}, {"m": 3.0}) == {"r": 7, "m": 7, "u": 3}
    # proportional, for contrast: 14 in shares 60 : 20 : 20 -> 8.4 : 2.8 : 2.8, largest remainders
    assert allocate(17, {"r": 60, "m": 20, "u": 20}) == {"r": 9, "m": 4, "u": 4}
    # a weight no stratum can honour: "m" takes all it holds, the rest goes to the others
    assert allocate(20, {"r": 90, "m": 5}, {"m": 50.0}) == {"r": 15, "m": 5}
    assert allocate(10, {"a": 50, "b": 30, "c": 20}, {}) == allocate(10, {"a": 50, "b": 30, "c": 20})
    rng = random.Random(4)
    for _ in range(200):
        sizes = {f"s{h}": rng.randint(0, 40) for h in range(rng.randint(1, 6))}
        weights = {h: rng.choice([1.0, 2.0, 3.0, 10.0]) for h in sizes}
        n = rng.randint(0, sum(sizes.values()))
        got = allocate(n, sizes, weights)
        assert sum(got.values()) == n and all(0 <= got[h] <= sizes[h] for h in sizes)


def test_effective_size_is_n_for_a_proportional_sample_and_less_when_oversampled() -> None:
    assert effective_size({"a": 5, "b": 3, "c": 2}, {"a": 50, "b": 30, "c": 20}) == pytest.approx(10)
    # 80 rule items (4 sampled, weight 20 each), 20 model items (6 sampled, weight 10/3): 100² / (1600 + 66.7)
    assert effective_size({"r": 4, "m": 6}, {"r": 80, "m": 20}) == pytest.approx(10000 / (1600 + 400 / 6))
    assert effective_size({"r": 0}, {"r": 80}) == 0.0


def test_cohen_kappa_by_hand() -> None:
    # the classic 2x2 table: yes/yes 20, yes/no 5, no/yes 10, no/no 15 -> po 0.7, pe 0.5, kappa 0.4
    pairs = [("y", "y")] * 20 + [("y", "n")] * 5 + [("n", "y")] * 10 + [("n", "n")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("a", "a"), ("a", "r"), ("r", "r"), ("r", "r")]) == pytest.approx(0.5)
    assert cohen_kappa([("a", "a"), ("r", "r")]) == pytest.approx(1.0)
    assert cohen_kappa([("a", "a")] * 5) is None  # both always "accept": chance agreement is 1
    assert cohen_kappa([]) is None


def test_krippendorff_alpha_by_hand_and_published() -> None:
    two = {"x": {"1": "a", "2": "a", "3": "r", "4": "r"}, "y": {"1": "a", "2": "r", "3": "r", "4": "r"}}
    # coincidences: n=8 values (3 a, 5 r), 2 disagreeing pairs: 1 - 7·2 / (2·3·5)
    assert krippendorff_alpha(two) == pytest.approx(1 - 14 / 30)
    # Krippendorff's own nominal example (4 coders, 12 units, missing values): alpha = 0.743
    rows = ["1 2 3 3 2 1 4 1 2 . . .", "1 2 3 3 2 2 4 1 2 5 . 3", ". 3 3 3 2 3 4 2 2 5 1 .",
            "1 2 3 3 2 4 4 1 2 5 1 ."]
    data = {f"c{i}": {str(u): v for u, v in enumerate(r.split()) if v != "."} for i, r in enumerate(rows)}
    assert krippendorff_alpha(data) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha({"x": {"1": "a"}, "y": {"1": "a"}}) is None  # one category: undefined
    assert krippendorff_alpha({"x": {"1": "a"}, "y": {"2": "r"}}) is None  # no unit rated twice


def test_fleiss_kappa_on_the_worked_example_of_fleiss_1971() -> None:
    # the ten subjects, fourteen raters and five categories of the example Wikipedia works through
    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
             [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]
    units = [[category for category, n in enumerate(row) for _ in range(n)] for row in table]
    assert fleiss_kappa(units) == pytest.approx(0.210, abs=5e-4)
    assert fleiss_kappa([["a", "a"], ["a", "a"]]) is None  # one category: chance agreement is 1
    assert fleiss_kappa([]) is None and fleiss_kappa([["a"], ["b"]]) is None
