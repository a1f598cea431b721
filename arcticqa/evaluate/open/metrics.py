"""Open-protocol metrics and the pairing with the multiple-choice answer-present condition.

Over the responses with a provider answer (n): accuracy = correct/n, abstention rate = abstained/n,
R-Acc = correct/(correct + wrong + undecided) (accuracy among the replies that committed to an
answer; an undecided answer counts against it until it is graded, so R-Acc is a lower bound while
replies stay undecided), plus the undecided and unparseable rates, and how many replies the verifier
role graded (confidence ``low``; counted in their outcome as well).

Pairing (per model, over the (item, trial) cells with a valid reply in both the ArcticAbstain
answer-present condition and the open protocol): the 2×2 of "abstained in MC" × "abstained in open"
with an exact McNemar test on its discordant cells, and the two cross-overs the open report shows: of
the cells where MC committed to a wrong option, how many abstain in open; of the cells where open
committed to a wrong answer, how many abstained in MC.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from arcticqa.evaluate.open.records import OpenRecord
from arcticqa.evaluate.reportio import f6

__all__ = ["OpenMetrics", "METRIC_HEADER", "compute_metrics", "mcnemar_exact", "MCResponse", "Pairing",
           "PAIRING_HEADER", "pair_with_mc"]


@dataclass
class OpenMetrics:
    responses: int
    no_answer: int
    correct: int
    wrong: int
    abstained: int
    undecided: int
    unparseable: int
    verifier_graded: int = 0

    def _share(self, count: int, of: int) -> float:
        return count / of if of else 0.0

    @property
    def accuracy(self) -> float:
        return self._share(self.correct, self.responses)

    @property
    def abstention_rate(self) -> float:
        return self._share(self.abstained, self.responses)

    @property
    def r_acc(self) -> float:
        return self._share(self.correct, self.correct + self.wrong + self.undecided)

    @property
    def undecided_rate(self) -> float:
        return self._share(self.undecided, self.responses)

    @property
    def unparseable_rate(self) -> float:
        return self._share(self.unparseable, self.responses)

    def row(self) -> list[Any]:
        return [self.responses, self.no_answer, self.correct, self.wrong, self.abstained, self.undecided,
                self.unparseable, f6(self.accuracy), f6(self.abstention_rate), f6(self.r_acc),
                f6(self.undecided_rate), f6(self.unparseable_rate), self.verifier_graded]

    def as_dict(self) -> dict[str, Any]:
        return dict(zip(METRIC_HEADER, [self.responses, self.no_answer, self.correct, self.wrong, self.abstained,
                                        self.undecided, self.unparseable, self.accuracy, self.abstention_rate,
                                        self.r_acc, self.undecided_rate, self.unparseable_rate,
                                        self.verifier_graded], strict=True))


METRIC_HEADER = ["responses", "no_provider_answer", "correct", "wrong", "abstained", "undecided", "unparseable",
                 "accuracy", "abstention_rate", "r_acc", "undecided_rate", "unparseable_rate", "verifier_graded"]


def compute_metrics(records: Iterable[OpenRecord]) -> OpenMetrics:
    rows = list(records)
    counts: Mapping[str, int] = {o: sum(r.outcome == o for r in rows) for o in
                                 ("correct", "wrong", "abstained", "undecided", "unparseable", "no_answer")}
    return OpenMetrics(responses=len(rows) - counts["no_answer"], no_answer=counts["no_answer"],
                       correct=counts["correct"], wrong=counts["wrong"], abstained=counts["abstained"],
                       undecided=counts["undecided"], unparseable=counts["unparseable"],
                       verifier_graded=sum(r.grade_confidence == "low" for r in rows))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value of discordant counts ``b`` and ``c``: twice the binomial(b + c,
    1/2) tail at min(b, c), capped at 1 (1.0 when there is no discordant pair)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = math.fsum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


class MCResponse(Protocol):
    """What the pairing reads of an ArcticAbstain record (N1 gold, N2 distractor, N3 abstain in the
    answer-present condition; N0 invalid)."""

    @property
    def model(self) -> str: ...
    @property
    def item_id(self) -> str: ...
    @property
    def condition(self) -> str: ...
    @property
    def trial(self) -> int: ...
    @property
    def outcome(self) -> str: ...


@dataclass
class Pairing:
    model: str
    cells: int
    both_abstained: int
    mc_only_abstained: int
    open_only_abstained: int
    neither_abstained: int
    mc_wrong: int
    mc_wrong_open_abstained: int
    open_wrong: int
    open_wrong_mc_abstained: int

    @property
    def mcnemar_p(self) -> float:
        return mcnemar_exact(self.mc_only_abstained, self.open_only_abstained)

    def row(self) -> list[Any]:
        return [self.model, self.cells, self.both_abstained, self.mc_only_abstained, self.open_only_abstained,
                self.neither_abstained, f6(self.mcnemar_p), self.mc_wrong, self.mc_wrong_open_abstained,
                self.open_wrong, self.open_wrong_mc_abstained]


PAIRING_HEADER = ["model_id", "paired_cells", "both_abstained", "mc_only_abstained", "open_only_abstained",
                  "neither_abstained", "mcnemar_exact_p", "mc_wrong", "mc_wrong_open_abstained", "open_wrong",
                  "open_wrong_mc_abstained"]

_MC_VALID = {"N1", "N2", "N3"}
_OPEN_VALID = {"correct", "wrong", "abstained", "undecided"}


def pair_with_mc(open_records: Iterable[OpenRecord], mc_records: Iterable[MCResponse]) -> list[Pairing]:
    """One :class:`Pairing` per model with paired cells, sorted by model id. A cell is (model, item,
    trial); unparseable or missing replies on either side leave the cell out."""
    mc = {(r.model, r.item_id, r.trial): r.outcome for r in mc_records
          if r.condition == "answer_present" and r.outcome in _MC_VALID}
    tables: dict[str, list[int]] = {}
    for r in open_records:
        mc_outcome = mc.get((r.model, r.item_id, r.trial))
        if mc_outcome is None or r.outcome not in _OPEN_VALID:
            continue
        t = tables.setdefault(r.model, [0] * 9)
        mc_abst, open_abst = mc_outcome == "N3", r.outcome == "abstained"
        t[0] += 1
        t[1 + (0 if mc_abst and open_abst else 1 if mc_abst else 2 if open_abst else 3)] += 1
        if mc_outcome == "N2":
            t[5] += 1
            t[6] += open_abst
        if r.outcome == "wrong":
            t[7] += 1
            t[8] += mc_abst
    return [Pairing(model, *counts) for model, counts in sorted(tables.items())]
