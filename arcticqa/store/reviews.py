"""Persistence of expert review: plans, their assignments and the append-only verdicts.

Plain functions over an engine, so the review package and the workbench share one write path
(:func:`arcticqa.store.db.write_session`, one transaction per call: a killed process leaves a
whole verdict or none).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from arcticqa.store.db import read_session, write_session
from arcticqa.store.tables import ReviewAssignment, ReviewPlan, ReviewVerdict, utcnow

__all__ = ["get_plan", "list_plans", "save_plan", "plan_assignments", "add_verdict", "plan_verdicts"]


def get_plan(engine: Engine, plan_id: str) -> ReviewPlan | None:
    with read_session(engine) as s:
        return s.get(ReviewPlan, plan_id)


def list_plans(engine: Engine) -> list[ReviewPlan]:
    with read_session(engine) as s:
        return list(s.exec(select(ReviewPlan).order_by(col(ReviewPlan.created_at), col(ReviewPlan.id))).all())


def save_plan(engine: Engine, plan: ReviewPlan, new_assignments: Sequence[ReviewAssignment]) -> None:
    """Write the plan row (created or updated) and add its new assignments, in one transaction."""
    with write_session(engine) as s:
        row = s.get(ReviewPlan, plan.id)
        if row is None:
            s.add(ReviewPlan.model_validate(plan.model_dump()))
        else:
            row.reviewers, row.strata, row.params = plan.reviewers, plan.strata, plan.params
            row.double_share, row.updated_at = plan.double_share, utcnow()
            s.add(row)
        s.flush()
        for a in new_assignments:
            s.add(ReviewAssignment.model_validate(a.model_dump(exclude={"id"})))


def plan_assignments(engine: Engine, plan_id: str, *, reviewer: str | None = None) -> list[ReviewAssignment]:
    """The plan's assignments in review order (position, then slot)."""
    q = select(ReviewAssignment).where(ReviewAssignment.plan_id == plan_id)
    if reviewer is not None:
        q = q.where(ReviewAssignment.reviewer == reviewer)
    with read_session(engine) as s:
        return list(s.exec(q.order_by(col(ReviewAssignment.position), col(ReviewAssignment.slot))).all())


def add_verdict(engine: Engine, verdict: ReviewVerdict) -> ReviewVerdict:
    """Append one verdict row (never updates an earlier one)."""
    row = ReviewVerdict.model_validate(verdict.model_dump(exclude={"id"}))
    with write_session(engine) as s:
        s.add(row)
        s.flush()
        s.refresh(row)
    return row


def plan_verdicts(engine: Engine, plan_id: str) -> list[ReviewVerdict]:
    """Every verdict row of the plan, oldest first."""
    with read_session(engine) as s:
        return list(s.exec(select(ReviewVerdict).where(ReviewVerdict.plan_id == plan_id)
                           .order_by(col(ReviewVerdict.id))).all())
