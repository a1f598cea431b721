"""The review plan: which items each reviewer judges, drawn reproducibly from the store.

Accepted items are stratified (answer type, claim type, language, region) and sampled in
proportion to stratum size; candidates rejected at verification or option check are sampled by
the rule that rejected them, to estimate false rejections. Each item's place in the draw is a
hash of the plan's seed and its key, so a draw never depends on the order the store lists items.

A plan only grows. Extending it (more reviewers, new items in the store, a larger size) adds
assignment rows and never changes one: an item sampled before stays sampled with its reviewer.
The stratum sizes are stored with the plan, so the report weights each stratum correctly.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, Field

from arcticqa.errors import InputError
from arcticqa.review.items import ReviewItem
from arcticqa.review.stats import allocate, sample_size
from arcticqa.rules import Rule, rule
from arcticqa.store.tables import ReviewAssignment, ReviewPlan

__all__ = ["VERDICTS", "FAILURE_TYPES", "DISTRACTOR_TRUE", "failure_rule", "SamplingRequest", "extend_plan",
           "draw_order"]

#: what a reviewer can answer
VERDICTS: tuple[str, ...] = ("accept", "reject", "unsure")
#: the failure types of a rejection, as stable rule ids (``review.distractor_true`` is stored per
#: distractor as ``review.distractor_true:k``, k = 1–4 the distractor's rank + 1)
FAILURE_TYPES: dict[str, Rule] = {r.id: r for r in (
    rule("review.answer_not_supported", "reviewer: the gold answer is not supported by the evidence"),
    rule("review.not_standalone", "reviewer: the question cannot be answered without the paper"),
    rule("review.ambiguous", "reviewer: more than one option is a defensible answer"),
    rule("review.distractor_true", "reviewer: a distractor is true or defensible"),
    rule("review.scope_error", "reviewer: the question's scope (place, period, population, method) differs "
                               "from the evidence"),
    rule("review.evidence_wrong", "reviewer: the evidence span is wrong or garbled"),
    rule("review.outside_arctic", "reviewer: the study is outside the Arctic rule"),
    rule("review.other", "reviewer: another problem (see the note)"),
)}
DISTRACTOR_TRUE = "review.distractor_true"


def failure_rule(failure: str) -> str:
    """The rule id of a stored failure type (``review.distractor_true:2`` -> ``review.distractor_true``)."""
    return failure.split(":", 1)[0]


class SamplingRequest(BaseModel):
    """What ``arcticqa review sample`` asks for; None keeps the plan's stored value."""

    plan_id: str = "main"
    seed: int | None = None
    half_width: float | None = None
    n: int | None = None
    rejected_n: int | None = None
    expected_rate: float | None = None
    double_share: float | None = None
    reviewers: list[str] = Field(default_factory=list)
    #: reviewers who agree to be named in release cards (each is also added as a reviewer)
    credited: list[str] = Field(default_factory=list)


_DEFAULTS = {"seed": 20, "half_width": 0.05, "expected_rate": 0.5, "double_share": 0.2}


def draw_order(seed: int, key: str, purpose: str = "sample") -> str:
    """The item's place in the plan's draw (sort by it): stable, independent of listing order."""
    return hashlib.sha256(f"{seed}\x00{purpose}\x00{key}".encode()).hexdigest()


def _target(population: Sequence[ReviewItem], n: int | None, half_width: float, expected: float) -> int:
    return min(len(population), n) if n is not None else sample_size(half_width, len(population),
                                                                     expected_rate=expected)


def _check(req: SamplingRequest, plan: ReviewPlan | None) -> None:
    if plan is not None and req.seed is not None and req.seed != plan.seed:
        raise InputError(f"review plan {plan.id!r} was drawn with seed {plan.seed}; a plan keeps its seed "
                         "(start another plan with --plan NAME)")
    for name in ("half_width", "expected_rate", "double_share"):
        value = getattr(req, name)
        if value is not None and not (0 < value < 1 or (name == "double_share" and value in (0, 1))):
            raise InputError(f"--{name.replace('_', '-')} must be between 0 and 1, not {value}")
    for name in ("n", "rejected_n"):
        value = getattr(req, name)
        if value is not None and value < 0:
            raise InputError(f"--{name.replace('_', '-')} must be 0 or more, not {value}")
    bad = [r for r in [*req.reviewers, *req.credited] if not r.strip() or len(r) > 80 or r != r.strip()]
    if bad:
        raise InputError(f"reviewer name {bad[0]!r} must be 1-80 characters without surrounding spaces")


def extend_plan(plan: ReviewPlan | None, existing: Sequence[ReviewAssignment], items: Sequence[ReviewItem],
                req: SamplingRequest) -> tuple[ReviewPlan, list[ReviewAssignment]]:
    """The plan (new or extended) and the assignment rows to add; existing rows are never changed."""
    _check(req, plan)
    params = dict(_DEFAULTS) | dict((plan.params or {}) if plan else {})
    params |= {k: v for k, v in req.model_dump(exclude={"plan_id", "reviewers", "credited"}).items()
               if v is not None}
    params["credited"] = sorted({*params.get("credited", []), *req.credited})
    seed = plan.seed if plan is not None else int(params["seed"])
    reviewers = list(plan.reviewers or []) if plan is not None else []
    reviewers += [r for r in dict.fromkeys([*req.reviewers, *req.credited]) if r not in reviewers]
    if not reviewers:
        raise InputError("a review plan needs at least one reviewer (--reviewer NAME)")
    by_key = {a.item_key: a for a in existing if a.slot == 1}
    seconds = {a.item_key for a in existing if a.slot == 2}
    load = Counter(a.reviewer for a in existing)
    position = max((a.position for a in existing), default=-1) + 1
    strata: dict[str, dict[str, int]] = {}
    new: list[ReviewAssignment] = []
    wanted = {"accepted": params.get("n"), "rejected": params.get("rejected_n")}
    for population in ("accepted", "rejected"):
        pop = [i for i in items if i.population == population]
        sizes = Counter(i.stratum for i in pop)
        strata[population] = dict(sorted(sizes.items()))
        quota = allocate(_target(pop, wanted[population], params["half_width"], params["expected_rate"]), sizes)
        taken = Counter(by_key[i.key].stratum for i in pop if i.key in by_key)
        for item in sorted(pop, key=lambda i: draw_order(seed, i.key)):
            if item.key in by_key or taken[item.stratum] >= quota.get(item.stratum, 0):
                continue
            taken[item.stratum] += 1
            reviewer = min(reviewers, key=lambda r: (load[r], reviewers.index(r)))
            load[reviewer] += 1
            row = ReviewAssignment(plan_id=req.plan_id, item_key=item.key, population=population,
                                   stratum=item.stratum, reviewer=reviewer, slot=1, position=position,
                                   content_hash=item.content_hash)
            position += 1
            by_key[item.key] = row
            new.append(row)
    new += _second_reviews(by_key, seconds, load, reviewers, seed, float(params["double_share"]),
                           {i.key: i.content_hash for i in items})
    params["seed"] = seed
    out = ReviewPlan(id=req.plan_id, seed=seed, double_share=float(params["double_share"]), reviewers=reviewers,
                     strata=strata, params=params)
    if plan is not None:
        out.created_at = plan.created_at
    return out, new


def _second_reviews(primary: dict[str, ReviewAssignment], seconds: set[str], load: Counter[str],
                    reviewers: list[str], seed: int, share: float, hashes: dict[str, str]) -> list[ReviewAssignment]:
    """Second reviewers for ``share`` of the sampled items (the same items whatever is added later:
    the next ones in the plan's own draw order), each to the least-loaded other reviewer."""
    if len(reviewers) < 2:
        return []
    target = round(share * len(primary))
    out: list[ReviewAssignment] = []
    for key in sorted(primary, key=lambda k: draw_order(seed, k, "double")):
        if len(seconds) + len(out) >= target:
            break
        if key in seconds:
            continue
        first = primary[key]
        other = min((r for r in reviewers if r != first.reviewer), key=lambda r: (load[r], reviewers.index(r)))
        load[other] += 1
        out.append(ReviewAssignment(plan_id=first.plan_id, item_key=key, population=first.population,
                                    stratum=first.stratum, reviewer=other, slot=2, position=first.position,
                                    content_hash=hashes.get(key, first.content_hash)))
    return out
