"""Option-set cue audit: how well a test-taker who never reads the question can score.

Each strategy looks only at the options of the answer-present condition (the gold answer and the
distractors kept there) — pick the middle numeric value, an extreme value, the longest option,
the option with most decimals, the option sharing most words with the question, the option whose
format differs — and scores the gold answer. Ties are split (a strategy that cannot choose
between t options scores 1/t when the gold is among them), so chance is exactly 1/k on an item
with k options. Accuracy gets a Wilson 95% interval. A cue that beats chance by more than
:data:`CUE_MARGIN` on at least :data:`CUE_MIN_ITEMS` items is a release-level defect.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

from arcticqa.gates.distractors import format_signature
from arcticqa.gates.numbers import Number, comparable, parse_numbers
from arcticqa.gates.text import content_words

if TYPE_CHECKING:
    from arcticqa.release.models import ReleaseItem

__all__ = ["CueResult", "CUE_MARGIN", "CUE_MIN_ITEMS", "STRATEGIES", "audit_cues", "wilson_interval",
           "cue_table", "answer_present_sets", "audit_release"]

#: a cue beating chance by more than this (accuracy points) is an error …
CUE_MARGIN = 0.10
#: … when it applies to at least this many items (below: a warning)
CUE_MIN_ITEMS = 30


class CueResult(BaseModel):
    """One strategy's score on a release."""

    strategy: str
    items: int  # items the strategy applies to
    accuracy: float
    chance: float
    ci_low: float
    ci_high: float

    @property
    def excess(self) -> float:
        return self.accuracy - self.chance

    @property
    def severity(self) -> str | None:
        """``error``/``warning`` when the cue beats chance by more than the margin, else None."""
        if self.items == 0 or self.excess <= CUE_MARGIN:
            return None
        return "error" if self.items >= CUE_MIN_ITEMS else "warning"


def wilson_interval(successes: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _numeric_values(options: Sequence[str]) -> list[float] | None:
    """Each option's first number in the first option's unit, or None when not all comparable."""
    firsts: list[Number] = []
    for option in options:
        numbers = parse_numbers(option)
        if not numbers:
            return None
        firsts.append(numbers[0])
    values: list[float] = []
    for number in firsts:
        cmp = comparable(firsts[0], number)
        if cmp is None:
            return None
        values.append(cmp[1])
    return values


def _middle(question: str, options: Sequence[str]) -> set[int] | None:
    values = _numeric_values(options)
    if values is None or len(set(values)) < 3:
        return None
    ranked = sorted(set(values))
    k = len(ranked)
    mids = {ranked[(k - 1) // 2], ranked[k // 2]}
    return {i for i, v in enumerate(values) if v in mids}


def _extreme(question: str, options: Sequence[str]) -> set[int] | None:
    values = _numeric_values(options)
    if values is None or len(set(values)) < 3:
        return None
    return {i for i, v in enumerate(values) if v in (min(values), max(values))}


def _best(scores: Sequence[float]) -> set[int] | None:
    if len(set(scores)) < 2:
        return None  # every option alike: the cue says nothing
    top = max(scores)
    return {i for i, s in enumerate(scores) if s == top}


def _longest(question: str, options: Sequence[str]) -> set[int] | None:
    return _best([len(o.strip()) for o in options])


def _most_decimals(question: str, options: Sequence[str]) -> set[int] | None:
    return _best([max((n.decimals for n in parse_numbers(o)), default=-1) for o in options])


def _question_overlap(question: str, options: Sequence[str]) -> set[int] | None:
    asked = set(content_words(question))
    return _best([len(asked & set(content_words(o))) for o in options])


def _odd_format(question: str, options: Sequence[str]) -> set[int] | None:
    signatures = [format_signature(o) for o in options]
    unique = [i for i, s in enumerate(signatures) if signatures.count(s) == 1]
    return set(unique) if len(unique) == 1 else None


Strategy = Callable[[str, Sequence[str]], "set[int] | None"]

#: name -> strategy (None = does not apply to this option set)
STRATEGIES: dict[str, Strategy] = {
    "middle numeric value": _middle,
    "extreme numeric value": _extreme,
    "longest option": _longest,
    "most decimals": _most_decimals,
    "most words shared with the question": _question_overlap,
    "odd format": _odd_format,
}


def audit_cues(items: Sequence[tuple[str, Sequence[str], int]]) -> list[CueResult]:
    """Score every strategy on ``(question, options, gold index)`` triples."""
    results: list[CueResult] = []
    for name, strategy in STRATEGIES.items():
        n, hits, chance = 0, 0.0, 0.0
        for question, options, gold in items:
            chosen = strategy(question, options)
            if not chosen:
                continue
            n += 1
            chance += 1 / len(options)
            if gold in chosen:
                hits += 1 / len(chosen)
        low, high = wilson_interval(hits, n)
        results.append(CueResult(strategy=name, items=n, accuracy=hits / n if n else 0.0,
                                 chance=chance / n if n else 0.0, ci_low=low, ci_high=high))
    return results


def answer_present_sets(items: Sequence[ReleaseItem]) -> list[tuple[str, list[str], int]]:
    """``(question, options, 0)`` per item: the gold answer first, then the distractors the
    answer-present condition keeps (all but ``answer_present_drops``)."""
    return [(item.question,
             [item.gold_answer, *(d.text for d in sorted(item.distractors, key=lambda d: d.rank)
                                  if d.text != item.answer_present_drops)], 0)
            for item in items]


def audit_release(items: Sequence[ReleaseItem]) -> list[CueResult]:
    """The cue audit of a release's answer-present condition."""
    return audit_cues(answer_present_sets(items))


def cue_table(results: Sequence[CueResult]) -> str:
    """A Markdown table of the audit (for the release card and docs)."""
    rows = ["| Cue-only strategy | Items | Accuracy | 95% CI | Chance | Verdict |",
            "|---|---:|---:|---|---:|---|"]
    for r in results:
        verdict = {"error": "more than 10 points above chance (error)",
                   "warning": "more than 10 points above chance (fewer than 30 items)"}.get(r.severity or "")
        if verdict is None:
            verdict = ("above chance, within the 10-point margin" if r.ci_low > r.chance
                       else "below chance" if r.ci_high < r.chance else "at chance")
        if r.items == 0:
            rows.append(f"| {r.strategy} | 0 | – | – | – | does not apply |")
            continue
        rows.append(f"| {r.strategy} | {r.items} | {r.accuracy:.1%} | {r.ci_low:.1%}–{r.ci_high:.1%} "
                    f"| {r.chance:.1%} | {verdict} |")
    return "\n".join(rows)
