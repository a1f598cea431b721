"""What an expert review changes in a release: item statuses, left-out items, the card's numbers.

Used by ``arcticqa export`` (through the store's export adapter). An accepted item with a
current (not stale) ``reject`` from any reviewer becomes ``expert_rejected``: it is left out of
the release and listed in ``excluded-items.json``. One with only ``accept`` verdicts becomes
``expert_verified``. ``unsure`` verdicts, stale verdicts and unreviewed items change nothing. A
store without a review plan gives the release unchanged (and byte-identical to before).
"""

from __future__ import annotations

from sqlalchemy.engine import Engine

from arcticqa.release.audit import AuditData, AuditRejection
from arcticqa.release.models import ExcludedItem, ReleaseItem, ReviewSummary
from arcticqa.review.items import load_review_items
from arcticqa.review.plan import FAILURE_TYPES, failure_rule
from arcticqa.review.report import ReviewReport, report_for_store
from arcticqa.store.reviews import get_plan

__all__ = ["apply_review", "review_summary", "review_release", "mark_expert_rejected"]


def review_summary(report: ReviewReport, credited: list[str], population: int) -> ReviewSummary:
    reviewers = list(report.reviewers)
    named = [r for r in reviewers if r in credited]
    e = report.residual_error
    return ReviewSummary(
        plan_id=report.plan_id, reviewed=e.n, errors=e.hits, residual_error=round(e.rate, 6), low=round(e.low, 6),
        high=round(e.high, 6), coverage=round(report.coverage, 6), sampled=report.sampled_accepted,
        population=population, seed=report.seed, double_share=report.double_share,
        expert_verified=sum(1 for s in report.item_status.values() if s == "expert_verified"),
        reviewers_named=named, reviewers_unnamed=len(reviewers) - len(named),
        expert_rejected=[ExcludedItem(item_id=i, status="expert_rejected",
                                      reason=f"rejected by expert review (plan {report.plan_id}): {', '.join(f)}")
                         for i, f in sorted(report.rejected_items.items())])


def apply_review(items: list[ReleaseItem], report: ReviewReport, credited: list[str]
                 ) -> tuple[list[ReleaseItem], ReviewSummary]:
    """The items to release (statuses set, rejected ones removed) and the card's summary."""
    kept = [it if report.item_status.get(it.item_id) != "expert_verified"
            else it.model_copy(update={"status": "expert_verified"})
            for it in items if report.item_status.get(it.item_id) != "expert_rejected"]
    return kept, review_summary(report, credited, population=len(items))


def review_release(engine: Engine, items: list[ReleaseItem]) -> tuple[list[ReleaseItem], ReviewSummary | None]:
    """``items`` as the newest review plan of the store leaves them (unchanged without a plan or a
    usable verdict)."""
    report = report_for_store(engine)
    if report is None or not (report.item_status or report.residual_error.n):
        return items, None
    plan = get_plan(engine, report.plan_id)
    credited = list((plan.params or {}).get("credited", [])) if plan is not None else []
    return apply_review(items, report, credited)


def mark_expert_rejected(data: AuditData, engine: Engine, *, stage: str | None = None, rule: str | None = None,
                         paper: str | None = None) -> AuditData:
    """The audit with the items reviewers rejected marked ``expert_rejected`` and one rejection
    (stage ``review``, the failure type's rule id) per failure type, filtered like the audit."""
    report = report_for_store(engine)
    if report is None or not report.rejected_items:
        return data
    papers = {i.item_id: i.paper_id for i in load_review_items(engine) if i.item_id}
    found = [AuditRejection(stage="review", rule_id=failure_rule(f), message=FAILURE_TYPES[failure_rule(f)].summary
                            + (f" (distractor {f.partition(':')[2]})" if ":" in f else ""),
                            evidence={"plan": report.plan_id, "failure": f}, paper_id=papers.get(item_id),
                            item_id=item_id)
             for item_id, failures in sorted(report.rejected_items.items()) for f in failures]
    for item in data.items:
        if item.item_id in report.rejected_items:
            item.status = "expert_rejected"
            item.rejections += [r for r in found if r.item_id == item.item_id]
    data.rejections += AuditData(funnel=data.funnel, rejections=found).filtered(stage=stage, rule=rule, paper=paper)
    return data
