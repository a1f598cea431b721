"""The published ArcticAbstain statistics: question bootstrap, sign-flip test, Holm, pooled test.

The procedure is fixed by the ArcticQA v1 paper (``random.Random(7)``, ``rng.choice`` per
question slot, ``rng.random() < 0.5`` per sign) and its numbers must be reproduced to the
printed digit. Python's ``random.Random`` is MT19937; we copy its state into numpy's MT19937
and draw the *same* raw 32-bit words in bulk, then apply CPython's own reductions:

- ``choice(range(n))`` is ``_randbelow(n)``: ``getrandbits(k)`` with ``k = n.bit_length()``
  (one word, top ``k`` bits), rejected while ``>= n``;
- ``random()`` consumes two words ``a, b`` and is ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``,
  so ``random() < 0.5`` exactly when ``a < 2**31``.

The draws depend only on the number of questions and the seed, so they are made once and
shared by every model; the statistics are then matrix products. ``tests/test_evaluate_stats``
checks the bulk draws against ``random.Random`` itself.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "python_mt19937",
    "bootstrap_indices",
    "bootstrap_multiplicities",
    "sign_flips",
    "negative_signs",
    "percentile_bounds",
    "SignFlipResult",
    "sign_flip_test",
    "holm",
]


def python_mt19937(seed: int) -> np.random.MT19937:
    """A numpy MT19937 in exactly the state of ``random.Random(seed)``."""
    _version, internal, _gauss = random.Random(seed).getstate()
    bit_generator = np.random.MT19937()
    bit_generator.state = {
        "bit_generator": "MT19937",
        "state": {"key": np.asarray(internal[:624], dtype=np.uint32), "pos": int(internal[624])},
    }
    return bit_generator


def _raw_words(bit_generator: np.random.MT19937, count: int) -> NDArray[np.uint32]:
    # Full-range uint32 integers are MT19937's raw outputs, one word each (numpy returns
    # next_uint32 unmasked for this range); half the memory of random_raw's uint64.
    return np.random.Generator(bit_generator).integers(0, 2**32, size=count, dtype=np.uint32)


def bootstrap_indices(n: int, resamples: int, seed: int) -> NDArray[np.int64]:
    """The ``resamples x n`` question indices of ``[[rng.choice(range(n)) for _ in range(n)] ...]``."""
    if n < 1 or resamples < 1:
        return np.zeros((max(resamples, 0), max(n, 0)), dtype=np.int64)
    k = n.bit_length()
    needed = resamples * n
    bit_generator = python_mt19937(seed)
    accepted: list[NDArray[np.uint32]] = []
    have = 0
    # Acceptance is n / 2**k > 1/2; ask for a little more than the expected need each round.
    while have < needed:
        want = int((needed - have) * (2**k) / n * 1.02) + 64
        words = _raw_words(bit_generator, want) >> np.uint32(32 - k)
        kept = words[words < n]
        accepted.append(kept)
        have += kept.size
    # Over-drawn words are simply unused: each call here starts from a fresh seed.
    return np.concatenate(accepted)[:needed].astype(np.int64).reshape(resamples, n)


@lru_cache(maxsize=16)
def _cached_multiplicities(n: int, resamples: int, seed: int) -> NDArray[np.float64]:
    idx = bootstrap_indices(n, resamples, seed)
    rows = np.repeat(np.arange(resamples, dtype=np.int64), n)
    flat = np.bincount(rows * n + idx.ravel(), minlength=resamples * n)
    matrix = flat.reshape(resamples, n).astype(np.float64)
    matrix.setflags(write=False)
    return matrix


def bootstrap_multiplicities(n: int, resamples: int = 10_000, seed: int = 7) -> NDArray[np.float64]:
    """How often each question (column, in id order) is drawn in each resample (row)."""
    return _cached_multiplicities(n, resamples, seed)


@lru_cache(maxsize=64)
def _cached_negative(n: int, draws: int, seed: int) -> NDArray[np.bool_]:
    words = _raw_words(python_mt19937(seed), 2 * n * draws).reshape(draws, n, 2)[:, :, 0]
    negative = words >= np.uint32(2**31)
    negative.setflags(write=False)
    return negative


def negative_signs(n: int, draws: int = 20_000, seed: int = 7) -> NDArray[np.bool_]:
    """``draws x n``: True where ``rng.random() < 0.5`` is False, i.e. the sign is -1."""
    if n < 1 or draws < 1:
        return np.zeros((max(draws, 0), max(n, 0)), dtype=bool)
    return _cached_negative(n, draws, seed)


def sign_flips(n: int, draws: int = 20_000, seed: int = 7) -> NDArray[np.float64]:
    """``draws x n`` signs: ``+1 if rng.random() < 0.5 else -1`` per question, per draw."""
    return np.where(negative_signs(n, draws, seed), -1.0, 1.0)


def percentile_bounds(values: NDArray[np.float64], level: float = 0.95) -> tuple[float, float]:
    """The published floor-index interval: ``sorted[int(a*(len-1))]``, ``sorted[int((1-a)*(len-1))]``.

    NaN values (a resample whose denominator was zero) are dropped first.
    """
    finite = np.sort(values[~np.isnan(values)])
    if finite.size == 0:
        return (float("nan"), float("nan"))
    alpha = (1.0 - level) / 2.0
    last = finite.size - 1
    return float(finite[int(alpha * last)]), float(finite[int((1.0 - alpha) * last)])


@dataclass(frozen=True)
class SignFlipResult:
    """A two-sided sign-flip permutation test on the mean of per-question differences."""

    questions: int
    mean: float
    positive: int
    negative: int
    zero: int
    p_value: float
    draws: int
    seed: int


_ZERO = 1e-12


def sign_flip_test(differences: Sequence[float], *, draws: int = 20_000, seed: int = 7) -> SignFlipResult:
    """p = (#draws with |mean| >= |observed| - 1e-12, + 1) / (draws + 1); questions in id order."""
    d = np.asarray(differences, dtype=np.float64)
    n = d.size
    if n == 0:
        return SignFlipResult(0, float("nan"), 0, 0, 0, float("nan"), draws, seed)
    # fsum: the published means are correctly rounded sums (they differ from sum() in the last digit).
    observed = math.fsum(differences) / n
    # sum(sign * d) = sum(d) - 2 * sum over negative signs; the boolean matrix is cached per n.
    means = (d.sum() - 2.0 * (negative_signs(n, draws, seed) @ d)) / n
    extreme = int(np.count_nonzero(np.abs(means) >= abs(observed) - 1e-12))
    return SignFlipResult(
        questions=n, mean=observed,
        # Averages of fractions leave ~1e-17 residue where the exact value is 0: count those as zero.
        positive=int(np.count_nonzero(d > _ZERO)), negative=int(np.count_nonzero(d < -_ZERO)),
        zero=int(np.count_nonzero(np.abs(d) <= _ZERO)),
        p_value=(extreme + 1) / (draws + 1), draws=draws, seed=seed,
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values in the input order: running max of ``min(1, (m - i) * p_i)``."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
