"""The bulk numpy draws equal CPython's random.Random draws, and the tests/intervals follow the published rules."""

from __future__ import annotations

import random

import numpy as np
import pytest

from arcticqa.evaluate.stats import (
    bootstrap_indices,
    bootstrap_multiplicities,
    holm,
    percentile_bounds,
    sign_flip_test,
    sign_flips,
)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 193, 194, 256, 1000])
def test_bootstrap_indices_equal_python_choice(n: int) -> None:
    resamples = 25
    rng = random.Random(7)
    expected = [[rng.choice(range(n)) for _ in range(n)] for _ in range(resamples)]
    assert bootstrap_indices(n, resamples, 7).tolist() == expected


@pytest.mark.parametrize("n,seed", [(1, 7), (5, 7), (194, 7), (31, 123)])
def test_sign_flips_equal_python_random(n: int, seed: int) -> None:
    draws = 40
    rng = random.Random(seed)
    expected = [[1.0 if rng.random() < 0.5 else -1.0 for _ in range(n)] for _ in range(draws)]
    assert sign_flips(n, draws, seed).tolist() == expected


def test_multiplicities_count_draws() -> None:
    idx = bootstrap_indices(11, 30, 7)
    m = bootstrap_multiplicities(11, 30, 7)
    assert m.shape == (30, 11)
    assert (m.sum(axis=1) == 11).all()
    assert m[4].tolist() == np.bincount(idx[4], minlength=11).tolist()


def _python_sign_flip(d: list[float], draws: int, seed: int) -> float:
    rng = random.Random(seed)
    observed = abs(sum(d) / len(d))
    count = 0
    for _ in range(draws):
        signs = [1 if rng.random() < 0.5 else -1 for _ in d]
        if abs(sum(s * x for s, x in zip(signs, d, strict=True)) / len(d)) >= observed - 1e-12:
            count += 1
    return (count + 1) / (draws + 1)


def test_sign_flip_p_matches_straightforward_procedure() -> None:
    rng = random.Random(3)
    d = [rng.choice([-1, -0.5, 0, 1 / 3, 0.5, 1, 2 / 3]) for _ in range(37)]
    result = sign_flip_test(d, draws=500, seed=7)
    assert result.p_value == _python_sign_flip(d, 500, 7)
    assert result.positive == sum(x > 0 for x in d) and result.negative == sum(x < 0 for x in d)
    assert result.questions == 37


def test_sign_flip_all_zero_gives_p_one() -> None:
    assert sign_flip_test([0.0] * 10, draws=99, seed=7).p_value == 1.0


def test_percentile_bounds_use_floor_indices() -> None:
    values = np.arange(101, dtype=float)[::-1]
    # int(0.025 * 100) = 2, int(0.975 * 100) = 97
    assert percentile_bounds(values) == (2.0, 97.0)
    # NaN (zero-denominator resamples) are dropped: [1, 2, 3] -> indices 0 and int(0.975 * 2) = 1
    assert percentile_bounds(np.array([np.nan, 3.0, 1.0, 2.0])) == (1.0, 2.0)


def test_holm_running_max_in_input_order() -> None:
    p = [0.04, 0.01, 0.03, 0.5]
    # sorted: 0.01*4=0.04, 0.03*3=0.09, 0.04*2=0.08 -> running max 0.09, 0.5*1 -> 0.5
    assert holm(p) == pytest.approx([0.09, 0.04, 0.09, 0.5])
    assert holm([0.9, 0.8]) == [1.0, 1.0]
