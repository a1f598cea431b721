"""The build plan: discovery, then each per-paper stage in order, in batches.

``dispatch`` decides how a batch runs: directly (tests, ``--orchestrator local``) or as one
Prefect task (the ``build-arcticqa`` flow). Either way the store is the durable truth.

Several builds may run at once on one store (``docs/scale-out.md``): each claims paper stages
as it goes, and after its pass re-checks the papers another worker held until none are left.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from arcticqa.errors import FailureThresholdExceeded
from arcticqa.pipeline.runner import BatchReport, BuildContext, StageSpec, run_stage_batch

__all__ = ["BuildSummary", "Dispatch", "run_build", "batches"]

Dispatch = Callable[[StageSpec, int, list[str]], Awaitable[BatchReport]]


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


#: outcomes a later re-check pass may change (another worker held the paper or its upstream)
_RECHECK = ("claimed_elsewhere", "blocked")


async def run_build(ctx: BuildContext, *, discover: bool = True, dispatch: Dispatch | None = None,
                    discover_fn: Callable[[BuildContext], Awaitable[dict[str, Any] | None]] | None = None,
                    stages: Sequence[StageSpec] | None = None, batch_parallelism: int = 1) -> BuildSummary:
    """Run every stage over every paper; then re-check papers other workers held until none are.

    ``batch_parallelism`` batches of a stage are dispatched at once (1 in-process; the number
    of Dask workers with the DaskTaskRunner). Summary counts give each paper's final outcome
    per stage, so a paper first ``claimed_elsewhere`` and later found done by the other worker
    is counted once, as ``skipped``.
    """
    from arcticqa.pipeline.stages import BUILD_STAGES, discover_papers

    dispatch = dispatch or await _direct(ctx)
    summary = BuildSummary(run_id=ctx.run_id)
    if discover:
        summary.discovered = await (discover_fn or discover_papers)(ctx)
    else:  # resume: finish a discovery that was interrupted, start none
        summary.discovered = await discover_papers(ctx, only_unfinished=True)
    specs = list(BUILD_STAGES if stages is None else stages)  # () runs discovery only
    outcome: dict[str, dict[str, str]] = {spec.name: {} for spec in specs}  # stage → paper → status
    pending = await _pass(ctx, specs, ctx.store.paper_ids(), dispatch, summary, outcome, batch_parallelism)
    # Another worker holds these papers (or held them and died). Waiting here means a worker
    # that finishes first does not report an incomplete build, and a dead worker's papers are
    # taken over (its ``running`` attempts are no longer live).
    while pending and ctx.settings.build.wait_for_claimed and not ctx.stopped:
        await asyncio.sleep(ctx.settings.build.claim_poll_s)
        pending = await _pass(ctx, specs, sorted(pending), dispatch, summary, outcome, batch_parallelism)
    for spec in specs:
        summary.stages[spec.name] = dict(Counter(outcome[spec.name].values()))
    summary.stopped = ctx.stopped
    budget = getattr(ctx.llm, "budget", None)
    summary.llm_spent_usd = float(getattr(budget, "spent_usd", 0.0))
    return summary


async def _pass(ctx: BuildContext, specs: list[StageSpec], paper_ids: Sequence[str], dispatch: Dispatch,
                summary: BuildSummary, outcome: dict[str, dict[str, str]], parallelism: int) -> set[str]:
    """One pass of every stage over ``paper_ids``; returns the papers held by another worker."""
    threshold = ctx.settings.build.failure_threshold
    held: set[str] = set()
    for spec in specs:
        numbered = list(enumerate(batches(paper_ids, ctx.settings.build.batch_size)))
        for start in range(0, len(numbered), max(parallelism, 1)):
            window = numbered[start:start + max(parallelism, 1)]
            reports = await asyncio.gather(*(dispatch(spec, batch_no, ids) for batch_no, ids in window))
            for (batch_no, ids), report in zip(window, reports, strict=True):
                if report.stopped and not ctx.stopped:
                    ctx.stopped = report.stopped  # a task in another process hit the budget cap
                seen = outcome[spec.name]
                for pid in ids:
                    status = report.statuses.get(pid)
                    if status is None:
                        continue
                    if pid not in seen or seen[pid] in _RECHECK:
                        seen[pid] = status
                    if status == "claimed_elsewhere":
                        held.add(pid)
                if report.errors:
                    summary.errors.setdefault(spec.name, {}).update(report.errors)
                if ctx.stopped:  # the run's budget cap: stop cleanly, finished work is kept
                    return held
                # a paper that hit its own budget cap is a policy outcome, not a systemic failure
                capped = sum(1 for e in report.errors.values() if e.startswith("BudgetExceeded"))
                failed = report.counts["failed"] - capped
                if report.attempted >= 2 and failed / report.attempted > threshold:
                    summary.stages[spec.name] = dict(Counter(outcome[spec.name].values()))
                    raise FailureThresholdExceeded(
                        f"stage {spec.name}: {failed} of {report.attempted} papers in batch "
                        f"{batch_no} failed (threshold {threshold:.0%}); first error: "
                        f"{next(iter(report.errors.values()), '?')}")
    return held
