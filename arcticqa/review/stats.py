"""The statistics of an expert review: sample sizes, stratified estimates with Wilson intervals,
and inter-reviewer agreement.

A stratified estimate weights each stratum's observed rate by the stratum's share of the
population, ``p = Σ_h (N_h / N) · p_h``. Its interval is the Wilson score interval computed at
Kish's effective sample size ``n_eff = (Σ w_i)² / Σ w_i²`` (``w_i = N_h / n_h`` for a reviewed
item of stratum h), with ``p · n_eff`` successes: with one stratum, or proportional allocation,
``n_eff = n`` and this is the plain Wilson interval; it stays defined at 0 and at 100% errors,
where a normal-approximation interval collapses to a point.

Krippendorff's alpha comes from the ``krippendorff`` package (nominal level, any number of
reviewers, missing ratings allowed); Cohen's kappa is the two-rater formula.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import krippendorff
import numpy as np
from pydantic import BaseModel

from arcticqa.release.cues import wilson_interval

__all__ = ["Z95", "Estimate", "sample_size", "allocate", "effective_size", "proportion", "stratified_proportion",
           "cohen_kappa", "fleiss_kappa", "krippendorff_alpha"]

#: the two-sided 95% normal quantile
Z95 = 1.959964


class Estimate(BaseModel):
    """A proportion with its 95% interval; ``n`` reviewed units, ``hits`` of them counted."""

    rate: float
    low: float
    high: float
    n: int
    hits: int
    n_effective: float

    @property
    def text(self) -> str:
        if self.n == 0:
            return "not measured (no verdicts)"
        return f"{self.rate:.1%} (95% CI {self.low:.1%}–{self.high:.1%}; {self.hits} of {self.n})"


def sample_size(half_width: float, population: int, *, expected_rate: float = 0.5, z: float = Z95) -> int:
    """Items to review so the 95% interval of a rate near ``expected_rate`` is ± ``half_width``,
    with the finite-population correction (never more than the population)."""
    if not 0 < half_width < 1:
        raise ValueError("half_width must be between 0 and 1")
    if population <= 0:
        return 0
    n0 = z * z * expected_rate * (1 - expected_rate) / (half_width * half_width)
    n = n0 / (1 + (n0 - 1) / population)
    return min(population, max(1, math.ceil(n - 1e-9)))


def allocate(n: int, sizes: Mapping[str, int], weights: Mapping[str, float] | None = None) -> dict[str, int]:
    """Split ``n`` over strata in proportion to their sizes (largest remainder), giving every
    non-empty stratum at least one item while ``n`` allows, so no stratum's weight goes unestimated.

    ``weights`` (stratum -> factor, 1 when absent) oversample strata: a stratum's share is in
    proportion to size × weight, never more than the stratum holds (what it cannot take goes to the
    others). The estimate stays unbiased as long as it weights each stratum by its population size
    (:func:`stratified_proportion`)."""
    strata = sorted((h for h, size in sizes.items() if size > 0), key=lambda h: (-sizes[h], h))
    n = min(n, sum(sizes[h] for h in strata))
    out = {h: 0 for h in sizes}
    for h in strata[:n]:
        out[h] = 1
    rest = n - sum(out.values())
    share: Mapping[str, float] = ({h: sizes[h] * weights.get(h, 1.0) for h in strata} if weights
                                  else {h: sizes[h] for h in strata})
    total = sum(share[h] for h in strata)
    if rest <= 0 or total == 0:
        return out
    want = {h: rest * share[h] / total for h in strata}
    for h in strata:
        out[h] += min(int(want[h]), sizes[h] - out[h])
    while sum(out.values()) < n:
        open_ = [h for h in strata if out[h] < sizes[h]]
        h = max(open_, key=lambda h: (want[h] - int(want[h]), sizes[h] - out[h], h))
        out[h] += 1
        want[h] = int(want[h])  # its remainder is used
    return out


def effective_size(allocation: Mapping[str, int], sizes: Mapping[str, int]) -> float:
    """Kish's effective sample size of a stratified sample, ``(Σ w_i)² / Σ w_i²`` with
    ``w_i = N_h / n_h`` (strata without a sampled item left out, as the estimate leaves them out):
    ``n`` for a proportional allocation, less when some strata are oversampled."""
    taken = {h: k for h, k in allocation.items() if k > 0 and sizes.get(h, 0) > 0}
    if not taken:
        return 0.0
    total = sum(sizes[h] for h in taken)
    return total * total / sum(sizes[h] * sizes[h] / k for h, k in taken.items())


def proportion(hits: int, n: int) -> Estimate:
    """A plain proportion with its Wilson interval (n = 0 gives the uninformative 0–100%)."""
    low, high = wilson_interval(hits, n)
    return Estimate(rate=hits / n if n else 0.0, low=low, high=high, n=n, hits=hits, n_effective=float(n))


def stratified_proportion(observed: Mapping[str, Sequence[bool]], sizes: Mapping[str, int]) -> Estimate:
    """The population rate from per-stratum observations (``True`` = counted), each stratum
    weighted by its population size. Strata without observations are left out, and the weights
    renormalised over the observed ones (the report says how much of the population that covers)."""
    seen = {h: list(v) for h, v in observed.items() if v and sizes.get(h, 0) > 0}
    n = sum(len(v) for v in seen.values())
    hits = sum(sum(v) for v in seen.values())
    if not seen:
        return proportion(0, 0)
    total = sum(sizes[h] for h in seen)
    rate = sum(sizes[h] / total * (sum(v) / len(v)) for h, v in seen.items())
    w = [sizes[h] / len(v) for h, v in seen.items() for _ in v]
    n_eff = sum(w) ** 2 / sum(x * x for x in w)
    low, high = _wilson_float(rate, n_eff)
    return Estimate(rate=rate, low=low, high=high, n=n, hits=hits, n_effective=round(n_eff, 6))


def _wilson_float(rate: float, n: float, z: float = Z95) -> tuple[float, float]:
    # wilson_interval's arithmetic holds for a fractional n; it is typed for counts
    return wilson_interval(rate * n, n, z)  # type: ignore[arg-type]


def cohen_kappa(pairs: Sequence[tuple[Hashable, Hashable]]) -> float | None:
    """Cohen's kappa of two raters over the same units; None when it is undefined (no pairs, or
    both raters always gave the one same category, so chance agreement is 1)."""
    if not pairs:
        return None
    n = len(pairs)
    observed = sum(1 for a, b in pairs if a == b) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[c] * second[c] for c in first) / (n * n)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


def fleiss_kappa(units: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa: each unit rated by the same number of raters (any raters; here two reviewers
    per doubly reviewed item, a different pair on different items). None when undefined (no unit,
    fewer than two ratings a unit, or every rating one category).

    Written out (a dozen lines) rather than taking statsmodels, its scipy/pandas/patsy stack, for
    it; checked against the worked example of Fleiss' paper as Wikipedia gives it (kappa 0.210).
    """
    if not units:
        return None
    raters = len(units[0])
    if raters < 2 or any(len(u) != raters for u in units):
        return None
    counts = [Counter(u) for u in units]
    total = Counter[Hashable]()
    for c in counts:
        total.update(c)
    n_units = len(units)
    agreement = sum((sum(v * v for v in c.values()) - raters) / (raters * (raters - 1)) for c in counts) / n_units
    chance = sum((v / (n_units * raters)) ** 2 for v in total.values())
    if chance >= 1:
        return None
    return (agreement - chance) / (1 - chance)


def krippendorff_alpha(ratings: Mapping[str, Mapping[str, Hashable]]) -> float | None:
    """Nominal Krippendorff's alpha; ``ratings``: reviewer -> unit -> category. None when fewer
    than two ratings share a unit or all ratings are one category (alpha is undefined)."""
    units = sorted({u for by_unit in ratings.values() for u in by_unit})
    categories = sorted({c for by_unit in ratings.values() for c in by_unit.values()}, key=str)
    if len(categories) < 2:
        return None
    code = {c: i for i, c in enumerate(categories)}
    matrix = np.full((len(ratings), len(units)), np.nan)
    for i, reviewer in enumerate(sorted(ratings)):
        for j, unit in enumerate(units):
            if unit in ratings[reviewer]:
                matrix[i, j] = code[ratings[reviewer][unit]]
    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    if not pairable.any():
        return None
    return float(krippendorff.alpha(reliability_data=matrix[:, pairable], level_of_measurement="nominal",
                                    value_domain=list(range(len(categories)))))
