"""The review plan: which items each reviewer judges, drawn reproducibly from the store.

Accepted items are stratified (answer type, claim type, language, region, and whether a model
decided any of their verdicts) and sampled in proportion to stratum size, except that a stratum of
model-decided items gets ``model_weight`` times its proportional share (oversampled: a model's
verdict is where an error is likelier to hide); the report weights each stratum by its population
size, so the error-rate estimate stays unbiased. Candidates rejected at verification or option
check are sampled by the rule that rejected them, to estimate false rejections. Each item's place in
the draw is a hash of the plan's seed and its key, so a draw never depends on the order the store
lists items.

A plan only grows. Extending it (more reviewers, new items in the store, a larger size) adds
assignment rows and never changes one: an item sampled before stays sampled with its reviewer.
The stratum sizes and dimensions are stored with the plan, so the report weights each stratum
correctly; a plan drawn before ``decided_by`` was a dimension keeps its four dimensions.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from arcticqa.errors import InputError
from arcticqa.review.items import FIRST_DIMENSIONS, REJECTED_DIMENSIONS, STRATUM_DIMENSIONS, ReviewItem
from arcticqa.review.stats import allocate, effective_size, sample_size
from arcticqa.review.suspects import SUSPECT_POPULATION
from arcticqa.rules import Rule, rule
from arcticqa.store.tables import ReviewAssignment, ReviewPlan

__all__ = ["VERDICTS", "FAILURE_TYPES", "DISTRACTOR_TRUE", "MODEL_WEIGHT", "failure_rule", "SamplingRequest",
           "extend_plan", "draw_order", "plan_dimensions", "stratum_of"]

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
    #: how many times its proportional share a stratum of model-decided items gets
    model_weight: float | None = None
    reviewers: list[str] = Field(default_factory=list)
    #: reviewers who agree to be named in release cards (each is also added as a reviewer)
    credited: list[str] = Field(default_factory=list)
    #: items the item audit flagged (item id -> its flags ``{"rule", "reason"}``): added to the plan
    #: as the ``suspect`` population, outside the random sample
    suspects: dict[str, list[dict[str, str]]] = Field(default_factory=dict)


_DEFAULTS = {"seed": 20, "half_width": 0.05, "expected_rate": 0.5, "double_share": 0.2}
#: a new plan's ``model_weight``: a model-decided stratum gets three times its proportional share
MODEL_WEIGHT = 3.0


def plan_dimensions(params: dict[str, object] | None) -> dict[str, tuple[str, ...]]:
    """Population -> the dimensions its strata are keyed by, as the plan with ``params`` drew them
    (a plan stored before ``decided_by`` was a dimension has no ``dimensions`` and keeps the first four)."""
    stored = (params or {}).get("dimensions")
    accepted = tuple(str(d) for d in stored) if isinstance(stored, list) else FIRST_DIMENSIONS
    return {"accepted": accepted, "rejected": REJECTED_DIMENSIONS}


def stratum_of(item: ReviewItem, dimensions: dict[str, tuple[str, ...]]) -> str:
    """The item's stratum key in a plan with these dimensions (see :func:`plan_dimensions`)."""
    return item.stratum_in(dimensions[item.population])


def draw_order(seed: int, key: str, purpose: str = "sample") -> str:
    """The item's place in the plan's draw (sort by it): stable, independent of listing order."""
    return hashlib.sha256(f"{seed}\x00{purpose}\x00{key}".encode()).hexdigest()


def _target(sizes: Counter[str], weights: dict[str, float], n: int | None, half_width: float,
            expected: float) -> int:
    """The sample size: ``n`` (at most the population), else the size for ``half_width``. When some
    strata are oversampled, the size grows until Kish's effective sample size of the allocation
    reaches the size a proportional sample would need, so the interval keeps its promised width."""
    population = sum(sizes.values())
    if n is not None:
        return min(population, n)
    want = sample_size(half_width, population, expected_rate=expected)
    if not weights:
        return want
    size = want
    for _ in range(100):
        n_eff = effective_size(allocate(size, sizes, weights), sizes)
        if n_eff >= want - 1e-9 or size >= population:
            break
        size = min(population, max(size + 1, math.ceil(size * want / n_eff)))
    return size


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
    if req.model_weight is not None:
        if not 1 <= req.model_weight <= 100:
            raise InputError(f"--model-weight must be between 1 and 100, not {req.model_weight}")
        if plan is not None and "decided_by" not in plan_dimensions(plan.params)["accepted"]:
            raise InputError(f"review plan {plan.id!r} was drawn before model-decided items were a stratum, so "
                             "it cannot oversample them (start another plan with --plan NAME)")
    bad = [r for r in [*req.reviewers, *req.credited] if not r.strip() or len(r) > 80 or r != r.strip()]
    if bad:
        raise InputError(f"reviewer name {bad[0]!r} must be 1-80 characters without surrounding spaces")


def extend_plan(plan: ReviewPlan | None, existing: Sequence[ReviewAssignment], items: Sequence[ReviewItem],
                req: SamplingRequest) -> tuple[ReviewPlan, list[ReviewAssignment]]:
    """The plan (new or extended) and the assignment rows to add; existing rows are never changed."""
    _check(req, plan)
    if plan is None:  # a new plan is stratified by who decided the verdicts, and oversamples the models'
        params: dict[str, Any] = dict(_DEFAULTS) | {"dimensions": list(STRATUM_DIMENSIONS),
                                                    "model_weight": MODEL_WEIGHT}
    else:
        params = dict(_DEFAULTS) | dict(plan.params or {})
    params |= {k: v for k, v in req.model_dump(exclude={"plan_id", "reviewers", "credited", "suspects"}).items()
               if v is not None}
    dims = plan_dimensions(params)
    params["credited"] = sorted({*params.get("credited", []), *req.credited})
    seed = plan.seed if plan is not None else int(params["seed"])
    reviewers = list(plan.reviewers or []) if plan is not None else []
    reviewers += [r for r in dict.fromkeys([*req.reviewers, *req.credited]) if r not in reviewers]
    if not reviewers:
        raise InputError("a review plan needs at least one reviewer (--reviewer NAME)")
    by_key = {a.item_key: a for a in existing if a.slot == 1}
    seconds = {a.item_key for a in existing if a.slot == 2}
    # the random sample: primary assignments of the draw, and suspects the draw reached later (an
    # item has one primary row; the draw is the same whether or not it was flagged first)
    random_also = set(params.get("random_also", []))
    in_random = {k for k, a in by_key.items() if a.population != SUSPECT_POPULATION} | random_also
    load = Counter(a.reviewer for a in existing)
    position = max((a.position for a in existing), default=-1) + 1
    strata: dict[str, dict[str, int]] = {}
    new: list[ReviewAssignment] = []
    wanted = {"accepted": params.get("n"), "rejected": params.get("rejected_n")}
    for population in ("accepted", "rejected"):
        pop = [i for i in items if i.population == population]
        stratum = {i.key: stratum_of(i, dims) for i in pop}
        sizes = Counter(stratum.values())
        strata[population] = dict(sorted(sizes.items()))
        weights = {stratum[i.key]: float(params.get("model_weight", 1.0)) for i in pop
                   if "decided_by" in dims[population] and i.strata.get("decided_by") == "model"}
        weights = {h: w for h, w in weights.items() if w != 1.0}
        size = _target(sizes, weights, wanted[population], params["half_width"], params["expected_rate"])
        quota = allocate(size, sizes, weights)
        taken = Counter(by_key[i.key].stratum if by_key[i.key].population != SUSPECT_POPULATION else stratum[i.key]
                        for i in pop if i.key in in_random)
        for item in sorted(pop, key=lambda i: draw_order(seed, i.key)):
            h = stratum[item.key]
            if item.key in in_random or taken[h] >= quota.get(h, 0):
                continue
            taken[h] += 1
            in_random.add(item.key)
            if item.key in by_key:  # flagged and assigned as a suspect before the draw reached it
                random_also.add(item.key)
                continue
            reviewer = min(reviewers, key=lambda r: (load[r], reviewers.index(r)))
            load[reviewer] += 1
            row = ReviewAssignment(plan_id=req.plan_id, item_key=item.key, population=population,
                                   stratum=h, reviewer=reviewer, slot=1, position=position,
                                   content_hash=item.content_hash)
            position += 1
            by_key[item.key] = row
            new.append(row)
    new += _add_suspects(req, params, items, by_key, load, reviewers, position, seed)
    params["random_also"] = sorted(random_also)
    new += _second_reviews(by_key, seconds, load, reviewers, seed, float(params["double_share"]),
                           {i.key: i.content_hash for i in items})
    params["seed"] = seed
    out = ReviewPlan(id=req.plan_id, seed=seed, double_share=float(params["double_share"]), reviewers=reviewers,
                     strata=strata, params=params)
    if plan is not None:
        out.created_at = plan.created_at
    return out, new


def _add_suspects(req: SamplingRequest, params: dict[str, Any], items: Sequence[ReviewItem],
                  by_key: dict[str, ReviewAssignment], load: Counter[str], reviewers: list[str], position: int,
                  seed: int) -> list[ReviewAssignment]:
    """Primary assignments (population ``suspect``) for the flagged accepted items not yet in the
    plan; every flag is kept in ``params["suspects"]`` (key -> flags), whether or not the item was
    already sampled. Flags of items the store does not hold as accepted items are refused."""
    if not req.suspects:
        return []
    accepted = {i.key: i for i in items if i.population == "accepted"}
    unknown = sorted(k for k in req.suspects if k not in accepted)
    if len(unknown) == len(req.suspects):
        raise InputError(f"none of the {len(req.suspects)} suspect item(s) is an accepted item of this store "
                         f"(first: {unknown[0]!r}); was the item audit run on another release?")
    stored: dict[str, list[dict[str, str]]] = {k: list(v) for k, v in (params.get("suspects") or {}).items()}
    for key, flags in req.suspects.items():
        if key in accepted:
            stored.setdefault(key, [])
            stored[key] += [f for f in flags if f not in stored[key]]
    params["suspects"] = dict(sorted(stored.items()))
    params["suspects_unmatched"] = sorted(set(params.get("suspects_unmatched", [])) | set(unknown))
    new = []
    position = max([position, *(a.position + 1 for a in by_key.values())])
    for key in sorted(stored, key=lambda k: draw_order(seed, k, "suspect")):
        if key in by_key:
            continue
        reviewer = min(reviewers, key=lambda r: (load[r], reviewers.index(r)))
        load[reviewer] += 1
        row = ReviewAssignment(plan_id=req.plan_id, item_key=key, population=SUSPECT_POPULATION,
                               stratum=stored[key][0]["rule"], reviewer=reviewer, slot=1, position=position,
                               content_hash=accepted[key].content_hash)
        position += 1
        by_key[key] = row
        new.append(row)
    return new


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
