"""Abstain-QA metrics: the confusion matrix and AR, AAC, UAC and P.

With D the scored responses, A the answerable and U the unanswerable ones among them:
AR = (FN+TN)/|D|, AAC = TP/|A|, UAC = TN/|U|, P = TP/(TP+FP). INVALID replies are outside
every denominator (like ArcticAbstain's N0).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from arcticqa.evaluate.abstainqa.parse import CAUSE_INFRASTRUCTURE

__all__ = ["ConfusionCounts"]


@dataclass
class ConfusionCounts:
    """TP, FN, FP (split by answerability), TN and INVALID of a set of responses."""

    tp: int = 0
    fn: int = 0
    fp_answerable: int = 0
    fp_unanswerable: int = 0
    tn: int = 0
    invalid: int = 0
    no_answer: int = 0  # no provider answer (infrastructure): outside everything, counted apart

    @classmethod
    def of(cls, pairs: Iterable[tuple[bool, str]], causes: Iterable[str | None] = ()) -> ConfusionCounts:
        c = cls()
        for answerable, outcome in pairs:
            c.add(answerable, outcome)
        c.no_answer = sum(1 for cause in causes if cause == CAUSE_INFRASTRUCTURE)
        return c

    def add(self, answerable: bool, outcome: str) -> None:
        if outcome == "TP":
            self.tp += 1
        elif outcome == "FN":
            self.fn += 1
        elif outcome == "TN":
            self.tn += 1
        elif outcome == "FP":
            if answerable:
                self.fp_answerable += 1
            else:
                self.fp_unanswerable += 1
        else:
            self.invalid += 1

    @property
    def fp(self) -> int:
        return self.fp_answerable + self.fp_unanswerable

    @property
    def scored(self) -> int:  # |D|
        return self.tp + self.fn + self.fp + self.tn

    @property
    def answerable(self) -> int:  # |A|
        return self.tp + self.fn + self.fp_answerable

    @property
    def unanswerable(self) -> int:  # |U|
        return self.tn + self.fp_unanswerable

    @staticmethod
    def _ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    @property
    def ar(self) -> float:
        return self._ratio(self.fn + self.tn, self.scored)

    @property
    def aac(self) -> float:
        return self._ratio(self.tp, self.answerable)

    @property
    def uac(self) -> float:
        return self._ratio(self.tn, self.unanswerable)

    @property
    def precision(self) -> float:
        return self._ratio(self.tp, self.tp + self.fp)

    def metrics(self) -> dict[str, float]:
        return {"AR": self.ar, "AAC": self.aac, "UAC": self.uac, "P": self.precision}
