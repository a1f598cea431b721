"""The review report: what the verdicts of a plan measure.

- residual error rate among accepted items, weighted by stratum, with its 95% interval, overall,
  per failure type, per stratum, and among rule-decided and model-decided items apart (every
  estimate weights a stratum by its population size, so strata the plan oversampled, such as
  model-decided items, count for their share of the population, not of the sample);
- false-rejection rate among the sampled rejected candidates;
- agreement between reviewers on the doubly reviewed items: Cohen's kappa for each pair of
  reviewers (their own marginals, whichever review slot each filled), Fleiss' kappa over the
  items' two ratings and Krippendorff's alpha; the headline is kappa with two reviewers, alpha
  with more;
- which gate or rule an item the reviewers rejected had passed (what the gates miss);
- the status each reviewed item gets in a release (``expert_verified`` / ``expert_rejected``).

Verdict rows are append-only: a reviewer's newest row on an item counts, and a row given on a
different version of the item (its content hash differs from the item's current one) is stale
and counts for nothing. The estimate uses each item's primary review (slot 1, or the second
review when the primary is missing), so doubly reviewed items are not counted twice.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Literal

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine

from arcticqa.errors import InputError
from arcticqa.review.items import ReviewItem, load_review_items
from arcticqa.review.plan import DISTRACTOR_TRUE, FAILURE_TYPES, failure_rule, plan_dimensions, stratum_of
from arcticqa.review.stats import (
    Estimate,
    cohen_kappa,
    fleiss_kappa,
    krippendorff_alpha,
    proportion,
    stratified_proportion,
)
from arcticqa.review.suspects import SUSPECT_POPULATION
from arcticqa.store.reviews import get_plan, list_plans, plan_assignments, plan_verdicts
from arcticqa.store.tables import ReviewAssignment, ReviewPlan, ReviewVerdict

__all__ = ["StratumRow", "PairKappa", "Agreement", "GateMiss", "ReviewReport", "current_verdicts", "build_report",
           "report_for_store", "render_text", "render_html", "GATE_FOR_FAILURE"]

#: the gate that should have caught each failure type (a distractor's own verification is used
#: for ``review.distractor_true``)
GATE_FOR_FAILURE: dict[str, str] = {
    "review.answer_not_supported": "verify.not_entailed",
    "review.not_standalone": "question.not_standalone",
    "review.ambiguous": "verify.defensible_alternative",
    "review.scope_error": "verify.scope_changed",
    "review.evidence_wrong": "findings (span choice)",
    "review.outside_arctic": "eligibility",
    "review.other": "(no gate)",
}


class StratumRow(BaseModel):
    population: Literal["accepted", "rejected"]
    stratum: str
    size: int
    assigned: int
    estimate: Estimate


class PairKappa(BaseModel):
    """Cohen's kappa between two reviewers over the items both rated."""

    reviewers: tuple[str, str]
    items: int
    kappa: float | None = None


class Agreement(BaseModel):
    """Agreement between reviewers, never between review slots: a reviewer who is sometimes the
    first and sometimes the second keeps one set of marginals."""

    items: int
    reviewers: list[str]
    #: with exactly two reviewers: their Cohen's kappa
    cohen_kappa: float | None = None
    #: every pair of reviewers who rated an item in common
    pairwise: list[PairKappa] = Field(default_factory=list)
    #: two ratings per doubly reviewed item, whoever gave them
    fleiss_kappa: float | None = None
    krippendorff_alpha: float | None = None
    #: Cohen's kappa with two reviewers, Krippendorff's alpha with more
    headline: Literal["cohen_kappa", "krippendorff_alpha"] = "cohen_kappa"
    observed_agreement: float | None = None


class GateMiss(BaseModel):
    failure: str
    gate: str
    items: int


class SuspectReview(BaseModel):
    """The items the item audit flagged (``review sample --from-suspects``), reviewed as their own
    population: the share of them the reviewers rejected is the flags' precision, shown beside the
    random sample's residual error rate (which no suspect added on purpose enters)."""

    #: flagged accepted items in the plan
    items: int
    #: of them, also drawn into the random sample
    in_random_sample: int
    #: every flagged item with a usable verdict: rejected / reviewed (plain Wilson interval: the
    #: suspects are a census of the flagged items, not a sample)
    error: Estimate
    #: per flag rule (an item with two flags counts under both)
    by_rule: dict[str, Estimate] = Field(default_factory=dict)
    #: the random sample's stratum-weighted residual error rate, for comparison
    random_sample: Estimate


class ReviewReport(BaseModel):
    plan_id: str
    seed: int
    double_share: float
    reviewers: list[str]
    assigned: int
    #: accepted items in the plan's sample (primary assignments)
    sampled_accepted: int
    answered: int
    unsure: int
    stale: int
    #: share of the accepted population in strata with at least one usable verdict
    coverage: float
    residual_error: Estimate
    #: ``rule`` / ``model`` (/ ``unknown``) -> the residual error rate among accepted items whose
    #: verdicts a rule decided, or a model decided at least one of; empty for a plan drawn before
    #: ``decided_by`` was a stratum dimension
    by_decision: dict[str, Estimate] = Field(default_factory=dict)
    by_failure: dict[str, Estimate] = Field(default_factory=dict)
    by_stratum: list[StratumRow] = Field(default_factory=list)
    false_rejection: Estimate
    false_rejection_by_rule: dict[str, Estimate] = Field(default_factory=dict)
    agreement: Agreement
    gate_misses: list[GateMiss] = Field(default_factory=list)
    #: item id -> expert_verified | expert_rejected (accepted items with a usable verdict)
    item_status: dict[str, str] = Field(default_factory=dict)
    #: item id -> the failure types reviewers gave it (expert_rejected items)
    rejected_items: dict[str, list[str]] = Field(default_factory=dict)
    #: the flagged items' review, when the plan has suspects
    suspects: SuspectReview | None = None


def current_verdicts(verdicts: list[ReviewVerdict], items: dict[str, ReviewItem]
                     ) -> tuple[dict[tuple[str, str], ReviewVerdict], int]:
    """(item key, reviewer) -> the reviewer's newest verdict on the item's current content, and
    how many newest verdicts were stale (given on content that has changed since)."""
    newest: dict[tuple[str, str], ReviewVerdict] = {}
    for v in sorted(verdicts, key=lambda v: v.id or 0):
        newest[(v.item_key, v.reviewer)] = v
    live = {k: v for k, v in newest.items() if k[0] in items and items[k[0]].content_hash == v.content_hash}
    return live, len(newest) - len(live)


def _primary(assigned: list[ReviewAssignment], live: dict[tuple[str, str], ReviewVerdict]
             ) -> dict[str, ReviewVerdict]:
    out: dict[str, ReviewVerdict] = {}
    for a in sorted(assigned, key=lambda a: (a.slot, a.position)):
        v = live.get((a.item_key, a.reviewer))
        if v is not None and a.item_key not in out:
            out[a.item_key] = v
    return out


def _agreement(assigned: list[ReviewAssignment], live: dict[tuple[str, str], ReviewVerdict]) -> Agreement:
    slots: dict[str, dict[int, ReviewAssignment]] = defaultdict(dict)
    for a in assigned:
        slots[a.item_key][a.slot] = a
    doubly: list[tuple[str, str]] = []  # (verdict, verdict) per doubly reviewed item, any order
    ratings: dict[str, dict[str, str]] = defaultdict(dict)
    for key, by_slot in slots.items():
        if 1 in by_slot and 2 in by_slot:
            first, second = (live.get((key, by_slot[s].reviewer)) for s in (1, 2))
            if first is not None and second is not None:
                doubly.append((first.verdict, second.verdict))
                ratings[first.reviewer][key] = first.verdict
                ratings[second.reviewer][key] = second.verdict
    reviewers = sorted(ratings)
    pairwise = []
    for i, left in enumerate(reviewers):
        for right in reviewers[i + 1:]:
            shared = sorted(set(ratings[left]) & set(ratings[right]))
            if shared:
                # pairs ordered by reviewer, not by slot: each reviewer's own marginals
                pairs = [(ratings[left][k], ratings[right][k]) for k in shared]
                pairwise.append(PairKappa(reviewers=(left, right), items=len(shared), kappa=cohen_kappa(pairs)))
    return Agreement(items=len(doubly), reviewers=reviewers,
                     cohen_kappa=pairwise[0].kappa if len(reviewers) == 2 and pairwise else None,
                     pairwise=pairwise, fleiss_kappa=fleiss_kappa(doubly),
                     krippendorff_alpha=krippendorff_alpha(ratings) if doubly else None,
                     headline="cohen_kappa" if len(reviewers) <= 2 else "krippendorff_alpha",
                     observed_agreement=sum(a == b for a, b in doubly) / len(doubly) if doubly else None)


def _gate(failure: str, item: ReviewItem) -> str:
    if failure_rule(failure) == DISTRACTOR_TRUE:
        k = failure.partition(":")[2]
        option = next((o for o in item.options if o.kind == "distractor" and k.isdigit()
                       and o.rank == int(k) - 1), None)
        if option is None:
            return "option_check"
        how = option.verification or "option_check"
        return f"{how} ({option.rule})" if option.rule else how
    return GATE_FOR_FAILURE.get(failure_rule(failure), "(no gate)")


def build_report(plan: ReviewPlan, assigned: list[ReviewAssignment], verdicts: list[ReviewVerdict],
                 items: list[ReviewItem]) -> ReviewReport:
    """The report of one plan from its rows and the store's current items."""
    by_key = {i.key: i for i in items}
    dims = plan_dimensions(plan.params)
    # a sampled item counts in the stratum it was drawn from (its slot-1 row), whatever its
    # stratum reads today: a relabelled item (a better region lookup, a rebuilt item) must not
    # drop out of an estimate whose stratum sizes were fixed when the plan was drawn
    drawn = {a.item_key: a.stratum for a in assigned if a.slot == 1}
    key_stratum = {i.key: drawn.get(i.key) or stratum_of(i, dims) for i in items}
    live, stale = current_verdicts([v for v in verdicts if v.plan_id == plan.id], by_key)
    primary = _primary(assigned, live)
    strata = plan.strata or {}
    usable = {k: v for k, v in primary.items() if v.verdict != "unsure"}
    params = plan.params or {}
    # the random sample: suspects added on purpose never enter its estimates
    in_random = ({a.item_key for a in assigned if a.slot == 1 and a.population != SUSPECT_POPULATION}
                 | set(params.get("random_also", [])))

    def observed(population: str, hit: str | None = None, failure: str | None = None) -> dict[str, list[bool]]:
        out: dict[str, list[bool]] = defaultdict(list)
        for key, v in usable.items():
            item = by_key[key]
            if item.population != population or key not in in_random:
                continue
            if failure is not None:
                out[key_stratum[key]].append(v.verdict == "reject"
                                         and failure in {failure_rule(f) for f in v.failure_types or []})
            else:
                out[key_stratum[key]].append(v.verdict == hit)
        return out

    acc_sizes = strata.get("accepted", {})
    errors = observed("accepted", "reject")
    rows = []
    for population, sizes in sorted(strata.items()):
        obs = observed(population, "reject" if population == "accepted" else "accept")
        n_assigned = Counter(a.stratum for a in assigned if a.population == population and a.slot == 1)
        for stratum, size in sorted(sizes.items()):
            got = obs.get(stratum, [])
            rows.append(StratumRow(population=population, stratum=stratum, size=size,
                                   assigned=n_assigned.get(stratum, 0), estimate=proportion(sum(got), len(got))))
    by_decision: dict[str, Estimate] = {}
    if "decided_by" in dims["accepted"]:
        decision = {key_stratum[i.key]: i.strata.get("decided_by", "unknown") for i in items if i.population == "accepted"}
        for value in sorted(set(decision.values()), key=("rule", "model", "unknown").index):
            within = {h for h, d in decision.items() if d == value}
            by_decision[value] = stratified_proportion({h: v for h, v in errors.items() if h in within},
                                                       {h: n for h, n in acc_sizes.items() if h in within})
    covered = sum(size for h, size in acc_sizes.items() if errors.get(h))
    rej_obs = observed("rejected", "accept")
    given: dict[str, set[str]] = defaultdict(set)
    failures: dict[str, set[str]] = defaultdict(set)
    for (key, _reviewer), v in live.items():
        item = by_key[key]
        if item.population == "accepted" and item.item_id is not None:
            given[item.item_id].add(v.verdict)
            failures[item.item_id] |= set(v.failure_types or []) if v.verdict == "reject" else set()
    # any current reject rejects; only accepts verify; an unsure anywhere leaves the item as it was
    status = {i: "expert_rejected" if "reject" in g else "expert_verified"
              for i, g in sorted(given.items()) if "reject" in g or g == {"accept"}}
    rejected_items = {i: sorted(failures[i]) for i, s in status.items() if s == "expert_rejected"}
    misses: Counter[tuple[str, str]] = Counter()
    for key, v in usable.items():
        item = by_key[key]
        if item.population == "accepted" and v.verdict == "reject":
            for f in v.failure_types or ["review.other"]:
                misses[(failure_rule(f), _gate(f, item))] += 1
    suspects = None
    flagged: dict[str, list[dict[str, str]]] = {k: v for k, v in (params.get("suspects") or {}).items()
                                                if k in by_key}
    residual = stratified_proportion(errors, acc_sizes)
    if flagged:
        judged = {k: usable[k].verdict == "reject" for k in flagged if k in usable}
        rules = sorted({f["rule"] for flags in flagged.values() for f in flags})
        suspects = SuspectReview(
            items=len(flagged), in_random_sample=sum(k in in_random for k in flagged),
            error=proportion(sum(judged.values()), len(judged)),
            by_rule={r: proportion(sum(v for k, v in judged.items() if any(f["rule"] == r for f in flagged[k])),
                                   sum(1 for k in judged if any(f["rule"] == r for f in flagged[k])))
                     for r in rules},
            random_sample=residual)
    return ReviewReport(
        plan_id=plan.id, seed=plan.seed, double_share=plan.double_share, reviewers=list(plan.reviewers or []),
        assigned=len(assigned), sampled_accepted=sum(1 for a in assigned if a.population == "accepted" and a.slot == 1),
        answered=len(live), unsure=sum(v.verdict == "unsure" for v in live.values()),
        stale=stale, coverage=covered / sum(acc_sizes.values()) if acc_sizes else 0.0,
        residual_error=residual, by_decision=by_decision,
        by_failure={f: stratified_proportion(observed("accepted", failure=f), acc_sizes) for f in FAILURE_TYPES},
        by_stratum=rows, false_rejection=stratified_proportion(rej_obs, strata.get("rejected", {})),
        false_rejection_by_rule={h: proportion(sum(v), len(v)) for h, v in sorted(rej_obs.items())},
        agreement=_agreement(assigned, live),
        gate_misses=[GateMiss(failure=f, gate=g, items=n) for (f, g), n in sorted(misses.items())],
        item_status=status, rejected_items=rejected_items, suspects=suspects)


def report_for_store(engine: Engine, plan_id: str | None = None) -> ReviewReport | None:
    """The report of ``plan_id`` (default: the only or newest plan); None when the store has no plan."""
    if plan_id is None:
        plans = list_plans(engine)
        if not plans:
            return None
        plan = plans[-1]
    else:
        found = get_plan(engine, plan_id)
        if found is None:
            raise InputError(f"no review plan {plan_id!r} in the store (arcticqa review sample --plan {plan_id})")
        plan = found
    return build_report(plan, plan_assignments(engine, plan.id), plan_verdicts(engine, plan.id),
                        load_review_items(engine))


_DECIDED = {"rule": "rule-decided", "model": "model-decided",
            "unknown": "undetermined (answer match not recorded)"}


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _suspect_lines(report: ReviewReport) -> list[str]:
    s = report.suspects
    if s is None:
        return []
    return [f"suspects flagged by the item audit ({s.items} item(s), {s.in_random_sample} also in the random sample): "
            f"error rate {s.error.text} among those reviewed, beside {s.random_sample.text} in the random sample",
            *(f"  flagged by {rule}: {e.text}" for rule, e in s.by_rule.items())]


def render_text(report: ReviewReport) -> str:
    """The report as plain lines for the terminal."""
    a = report.agreement
    lines = [f"review plan {report.plan_id}: {report.answered} verdict(s) on {report.assigned} assignment(s), "
             f"{report.unsure} unsure, {report.stale} stale; reviewers: {', '.join(report.reviewers)}",
             f"residual error rate (accepted items, stratum-weighted): {report.residual_error.text}; "
             f"strata reviewed cover {report.coverage:.0%} of accepted items",
             *[f"  among {_DECIDED[d]} items: {e.text}" for d, e in report.by_decision.items()],
             *_suspect_lines(report),
             f"false-rejection rate (sampled rejected candidates): {report.false_rejection.text}",
             f"agreement on {a.items} doubly reviewed item(s): Cohen's kappa {_fmt(a.cohen_kappa)}, "
             f"Fleiss' kappa {_fmt(a.fleiss_kappa)}, Krippendorff's alpha {_fmt(a.krippendorff_alpha)} "
             f"(headline: {'kappa' if a.headline == 'cohen_kappa' else 'alpha'})",
             *([f"  Cohen's kappa {p.reviewers[0]} × {p.reviewers[1]} ({p.items} item(s)): {_fmt(p.kappa)}"
                for p in a.pairwise] if len(a.pairwise) > 1 else []),
             "by failure type:"]
    lines += [f"  {f}: {e.text}" for f, e in report.by_failure.items() if e.hits]
    lines.append("by stratum:")
    lines += [f"  {r.population} {r.stratum} (N={r.size}, assigned {r.assigned}): {r.estimate.text}"
              for r in report.by_stratum]
    lines.append("what the gates missed (failure type, gate it passed, items):")
    lines += [f"  {m.failure}  {m.gate}  {m.items}" for m in report.gate_misses] or ["  (none)"]
    return "\n".join(lines)


def render_html(report: ReviewReport) -> str:
    """A self-contained page (no script, autoescaped)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

    env = Environment(loader=PackageLoader("arcticqa.review", "templates"), undefined=StrictUndefined,
                      autoescape=select_autoescape(default=True, default_for_string=True))
    return env.get_template("report.html.j2").render(r=report, summaries={k: r.summary for k, r in
                                                                          FAILURE_TYPES.items()},
                                                     decided=_DECIDED)
