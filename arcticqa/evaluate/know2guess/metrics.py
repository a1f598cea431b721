"""Know2Guess metrics over the responses with a provider answer.

Reliability = mean of [answer expected and answered correctly] + [abstention expected and
abstained]; answered accuracy; abstention rate; effective abstention on zone D; refusal rate;
invalid rate; ECE over answered responses with a confidence (equal-width bins, 10 by default; a
confidence of 1.0 falls in the last bin); cost-sensitive reliability (+1 correct action, −penalty
per wrong answer, including any answer to an abstention-expected item, 0 otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from arcticqa.evaluate.know2guess.records import Know2GuessRecord
from arcticqa.evaluate.reportio import f6

__all__ = ["Know2GuessMetrics", "METRIC_HEADER", "expected_calibration_error", "compute_metrics"]


@dataclass
class Know2GuessMetrics:
    responses: int
    no_answer: int
    reliability: float
    answered: int
    answered_accuracy: float
    abstention_rate: float
    effective_abstention_d: float | None
    refusal_rate: float
    invalid_rate: float
    ece: float | None
    ece_responses: int
    cost_sensitive_reliability: float

    def row(self) -> list[Any]:
        return [self.responses, self.no_answer, f6(self.reliability), self.answered, f6(self.answered_accuracy),
                f6(self.abstention_rate), f6(self.effective_abstention_d), f6(self.refusal_rate),
                f6(self.invalid_rate), f6(self.ece), self.ece_responses, f6(self.cost_sensitive_reliability)]


METRIC_HEADER = ["responses", "no_provider_answer", "reliability", "answered", "answered_accuracy",
                 "abstention_rate", "effective_abstention_zone_d", "refusal_rate", "invalid_rate", "ece",
                 "ece_responses", "cost_sensitive_reliability"]


def expected_calibration_error(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> float | None:
    """Σ_b |B_b|/n · |accuracy(B_b) − mean confidence(B_b)| over equal-width bins of [0, 1]."""
    if not pairs:
        return None
    buckets: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for conf, correct in pairs:
        buckets[min(int(conf * bins), bins - 1)].append((conf, correct))
    total = 0.0
    for bucket in buckets:
        if bucket:
            accuracy = sum(c for _, c in bucket) / len(bucket)
            mean_conf = math.fsum(conf for conf, _ in bucket) / len(bucket)
            total += len(bucket) / len(pairs) * abs(accuracy - mean_conf)
    return total


def compute_metrics(records: Iterable[Know2GuessRecord], *, parser: str = "strict", wrong_penalty: float = 1.0,
                    bins: int = 10) -> Know2GuessMetrics:
    all_rows = list(records)
    rows = [(r, *r.view(parser)) for r in all_rows]
    rows = [x for x in rows if x[1] != "NONE"]
    n = len(rows)

    def share(count: float, of: int) -> float:
        return count / of if of else 0.0

    def reliable(r: Know2GuessRecord, decision: str, correct: bool) -> bool:
        return decision == "ABSTAIN" if r.abstention_expected else (decision == "ANSWER" and correct)

    answered = [(r, d, c, conf) for r, d, c, conf in rows if d == "ANSWER"]
    zone_d = [(r, d) for r, d, _, _ in rows if r.zone == "D"]
    cost = math.fsum(1.0 if reliable(r, d, c) else (-wrong_penalty if d == "ANSWER" and not c else 0.0)
                     for r, d, c, _ in rows)
    calibrated = [(conf, c) for _, _, c, conf in answered if conf is not None]
    return Know2GuessMetrics(
        responses=n, no_answer=len(all_rows) - n,
        reliability=share(sum(reliable(r, d, c) for r, d, c, _ in rows), n),
        answered=len(answered), answered_accuracy=share(sum(c for _, _, c, _ in answered), len(answered)),
        abstention_rate=share(sum(d == "ABSTAIN" for _, d, _, _ in rows), n),
        effective_abstention_d=share(sum(d == "ABSTAIN" for _, d in zone_d), len(zone_d)) if zone_d else None,
        refusal_rate=share(sum(d == "REFUSE" for _, d, _, _ in rows), n),
        invalid_rate=share(sum(d == "INVALID" for _, d, _, _ in rows), n),
        ece=expected_calibration_error(calibrated, bins), ece_responses=len(calibrated),
        cost_sensitive_reliability=share(cost, n))
