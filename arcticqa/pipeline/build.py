"""The build plan: discovery, then each per-paper stage in order, in batches.

``dispatch`` decides how a batch runs: directly (tests, ``--orchestrator local``) or as one
Prefect task (the ``build-arcticqa`` flow). Either way the store is the durable truth.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from arcticqa.pipeline.runner import BatchReport, BuildContext, StageSpec, run_stage_batch

__all__ = ["BuildSummary", "Dispatch", "run_build", "batches", "FailureThresholdExceeded"]

Dispatch = Callable[[StageSpec, int, list[str]], Awaitable[BatchReport]]


class FailureThresholdExceeded(RuntimeError):
    """More than ``failure_threshold`` of a batch failed: something systemic is wrong."""


class BuildSummary(BaseModel):
    run_id: str
    discovered: dict[str, Any] | None = None
    stages: dict[str, dict[str, int]] = Field(default_factory=dict)
    errors: dict[str, dict[str, str]] = Field(default_factory=dict)
    stopped: str | None = None
    llm_spent_usd: float = 0.0


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    return [list(ids[i:i + size]) for i in range(0, len(ids), size)]


async def _direct(ctx: BuildContext) -> Dispatch:
    async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
        return await run_stage_batch(ctx, spec, ids)

    return dispatch


async def run_build(ctx: BuildContext, *, discover: bool = True, dispatch: Dispatch | None = None,
                    discover_fn: Callable[[BuildContext], Awaitable[dict[str, Any]]] | None = None,
                    stages: Sequence[StageSpec] | None = None) -> BuildSummary:
    from arcticqa.pipeline.stages import BUILD_STAGES, discover_papers

    dispatch = dispatch or await _direct(ctx)
    summary = BuildSummary(run_id=ctx.run_id)
    if discover:
        summary.discovered = await (discover_fn or discover_papers)(ctx)
    paper_ids = ctx.store.paper_ids()
    threshold = ctx.settings.build.failure_threshold
    for spec in stages or BUILD_STAGES:
        totals: dict[str, int] = {}
        for batch_no, ids in enumerate(batches(paper_ids, ctx.settings.build.batch_size)):
            report = await dispatch(spec, batch_no, ids)
            for status, n in report.counts.items():
                totals[status] = totals.get(status, 0) + n
            if report.errors:
                summary.errors.setdefault(spec.name, {}).update(report.errors)
            if report.attempted >= 2 and report.failure_share() > threshold:
                summary.stages[spec.name] = totals
                raise FailureThresholdExceeded(
                    f"stage {spec.name}: {report.counts['failed']} of {report.attempted} papers in batch "
                    f"{batch_no} failed (threshold {threshold:.0%}); first error: "
                    f"{next(iter(report.errors.values()), '?')}")
        summary.stages[spec.name] = totals
    summary.stopped = ctx.stopped
    budget = getattr(ctx.llm, "budget", None)
    summary.llm_spent_usd = float(getattr(budget, "spent_usd", 0.0))
    return summary
