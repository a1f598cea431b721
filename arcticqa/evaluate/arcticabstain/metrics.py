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
from fractions import Fraction

__all__ = ["OutcomeCounts", "METRIC_NAMES", "ratio", "median_of"]

METRIC_NAMES: tuple[str, ...] = ("acc", "precision_abs", "recall_abs", "f1_abs", "abstention_rate",
                                 "r_acc", "ssr")


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0


def _exact_ratio(numerator: Fraction, denominator: Fraction) -> Fraction:
    return numerator / denominator if denominator else Fraction(0)


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

    def exact(self, name: str) -> Fraction:
        """Metric ``name`` as an exact fraction of counts (0 on a zero denominator): two models
        compare equal exactly when their fractions do, never by float noise (a ranking flip is
        a strict reversal of these)."""
        n1, n2, n3, n4, n5 = (Fraction(c) for c in self.counts[1:])
        valid = n1 + n2 + n3 + n4 + n5
        if name == "f1_abs":
            p, r = self.exact("precision_abs"), self.exact("recall_abs")
            return _exact_ratio(2 * p * r, p + r)
        if name == "shift":
            return self.exact("absent_abstention") - self.exact("present_abstention")
        numerator, denominator = {
            "acc": (n1 + n5, valid), "precision_abs": (n5, n3 + n5), "recall_abs": (n5, n2 + n4 + n5),
            "abstention_rate": (n3 + n5, valid), "r_acc": (n1, n1 + n2 + n4), "ssr": (n1 + n3 + n5, valid),
            "present_abstention": (n3, n1 + n2 + n3), "absent_abstention": (n5, n4 + n5),
            "present_accuracy_when_answering": (n1, n1 + n2)}[name]
        return _exact_ratio(numerator, denominator)

    @property
    def acc(self) -> float:
        return float(self.exact("acc"))

    @property
    def precision_abs(self) -> float:
        return float(self.exact("precision_abs"))

    @property
    def recall_abs(self) -> float:
        return float(self.exact("recall_abs"))

    @property
    def f1_abs(self) -> float:
        return float(self.exact("f1_abs"))

    @property
    def abstention_rate(self) -> float:
        return float(self.exact("abstention_rate"))

    @property
    def r_acc(self) -> float:
        return float(self.exact("r_acc"))

    @property
    def ssr(self) -> float:
        return float(self.exact("ssr"))

    @property
    def present_valid(self) -> int:
        return self["N1"] + self["N2"] + self["N3"]

    @property
    def absent_valid(self) -> int:
        return self["N4"] + self["N5"]

    @property
    def present_abstention(self) -> float:
        return float(self.exact("present_abstention"))

    @property
    def absent_abstention(self) -> float:
        return float(self.exact("absent_abstention"))

    @property
    def shift(self) -> float:
        return float(self.exact("shift"))

    @property
    def present_accuracy_when_answering(self) -> float:
        return float(self.exact("present_accuracy_when_answering"))

    def metrics(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in METRIC_NAMES}
