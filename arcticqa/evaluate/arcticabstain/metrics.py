"""Outcome counts and the ArcticAbstain metrics computed from them.

With T = N1+...+N5 (N0 is outside every denominator): ACC = (N1+N5)/T;
Precision_abs = N5/(N3+N5); Recall_abs = N5/(N2+N4+N5); F1_abs their harmonic mean;
abstention rate = (N3+N5)/T; R-Acc = N1/(N1+N2+N4); SSR = (N1+N3+N5)/T; condition rates
present = N3/(N1+N2+N3), absent = N5/(N4+N5), shift = absent - present. A ratio with a zero
denominator is 0.0 (the published files never hit one; a run of a handful of calls can).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["OutcomeCounts", "METRIC_NAMES", "ratio", "median_of"]

METRIC_NAMES: tuple[str, ...] = ("acc", "precision_abs", "recall_abs", "f1_abs", "abstention_rate",
                                 "r_acc", "ssr")


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def median_of(values: Iterable[float]) -> float:
    data = list(values)
    return statistics.median(data) if data else 0.0


@dataclass
class OutcomeCounts:
    """N0..N5 of a set of responses."""

    counts: list[int] = field(default_factory=lambda: [0] * 6)

    @classmethod
    def of(cls, outcomes: Iterable[str]) -> OutcomeCounts:
        result = cls()
        for outcome in outcomes:
            result.add(outcome)
        return result

    def add(self, outcome: str) -> None:
        self.counts[int(outcome[1])] += 1

    def __getitem__(self, outcome: str) -> int:
        return self.counts[int(outcome[1])]

    @property
    def responses(self) -> int:
        return sum(self.counts)

    @property
    def valid(self) -> int:
        return sum(self.counts[1:])

    @property
    def acc(self) -> float:
        return ratio(self["N1"] + self["N5"], self.valid)

    @property
    def precision_abs(self) -> float:
        return ratio(self["N5"], self["N3"] + self["N5"])

    @property
    def recall_abs(self) -> float:
        return ratio(self["N5"], self["N2"] + self["N4"] + self["N5"])

    @property
    def f1_abs(self) -> float:
        p, r = self.precision_abs, self.recall_abs
        return ratio(2 * p * r, p + r)

    @property
    def abstention_rate(self) -> float:
        return ratio(self["N3"] + self["N5"], self.valid)

    @property
    def r_acc(self) -> float:
        return ratio(self["N1"], self["N1"] + self["N2"] + self["N4"])

    @property
    def ssr(self) -> float:
        return ratio(self["N1"] + self["N3"] + self["N5"], self.valid)

    @property
    def present_valid(self) -> int:
        return self["N1"] + self["N2"] + self["N3"]

    @property
    def absent_valid(self) -> int:
        return self["N4"] + self["N5"]

    @property
    def present_abstention(self) -> float:
        return ratio(self["N3"], self.present_valid)

    @property
    def absent_abstention(self) -> float:
        return ratio(self["N5"], self.absent_valid)

    @property
    def shift(self) -> float:
        return self.absent_abstention - self.present_abstention

    @property
    def present_accuracy_when_answering(self) -> float:
        return ratio(self["N1"], self["N1"] + self["N2"])

    def metrics(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in METRIC_NAMES}
