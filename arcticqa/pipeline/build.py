"""The build: one engine and one entry point.

A build is :func:`run_build` over an open :class:`BuildContext`: discovery, then every stage
over every paper in batches, each batch handed to ``run_batch``. ``run_batch`` is the one seam
an orchestrator needs: here it is the stage runner on the context (:func:`run_stage_batch`);
in the ``build-arcticqa`` Prefect flow (``flows/build_arcticqa.py``) it submits the batch as a
Prefect task, which runs the same :func:`run_stage_batch`. Either way the store is the durable
truth.

:func:`build` is how every caller starts a build (the CLI, the demo, the flow's command line,
the tests and the benches): it applies the caller's overrides to the :class:`Settings`, then
runs the build in this process or hands it to an :data:`Orchestrator`, a function given by the
caller: ``pipeline`` sits below ``flows/`` and cannot import the flow, so an interface that wants
Prefect passes ``flows.build_arcticqa.run_flow``.

Several builds may run at once on one store (``docs/scale-out.md``): each claims paper stages
as it goes, and after its pass re-checks the papers another worker held until none are left.
"""

from __future__ import annotations

import asyncio
import functools
import multiprocessing
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arcticqa.config import Settings, read_env_file
from arcticqa.errors import ConfigError, FailureThresholdExceeded
from arcticqa.pipeline.runner import (
    BatchReport,
    BuildContext,
    StageSpec,
    interruptible,
    open_build_context,
    run_stage_batch,
)
from arcticqa.pipeline.stages import BUILD_STAGES, discover_papers

__all__ = [
    "BuildSummary",
    "BuildOptions",
    "RunBatch",
    "Orchestrator",
    "build",
    "check_workers",
    "build_here",
    "run_build",
    "batches",
]

#: how one batch of papers runs one stage: :func:`run_stage_batch` on the build's context, or a
#: Prefect task submit that runs it (the flow)
RunBatch = Callable[[StageSpec, list[str]], Awaitable[BatchReport]]


class BuildSummary(BaseModel):
    run_id: str
    discovered: dict[str, Any] | None = None
    stages: dict[str, dict[str, int]] = Field(default_factory=dict)
    errors: dict[str, dict[str, str]] = Field(default_factory=dict)
    stopped: str | None = None
    llm_spent_usd: float = 0.0


class BuildOptions(BaseModel):
    """What one build is asked to do besides its settings (plain data: it crosses processes)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: finish what a stopped build started: no new discovery, only the unfinished part of it
    resume: bool = False
    #: stages whose rejected papers run again
    retry_rejected: tuple[str, ...] = ()
    #: build processes sharing the store: this one plus ``workers - 1`` helpers
    workers: int = Field(1, ge=1)


#: runs one build to its end somewhere else than in this process's event loop (the Prefect flow:
#: ``flows.build_arcticqa.run_flow``) and returns its summary; blocking
Orchestrator = Callable[[Settings, BuildOptions], BuildSummary]


def check_workers(orchestrator: Orchestrator | None, workers: int) -> None:
    """``workers > 1`` starts helper processes, which only a build in this process does (a
    ConfigError otherwise)."""
    if workers > 1 and orchestrator is not None:
        raise ConfigError("--workers needs --orchestrator local (with prefect, use build.task_runner = \"dask\" "
                          "or a process work pool: docs/scale-out.md)")


def build(settings: Settings, *, resume: bool = False, orchestrator: Orchestrator | None = None, workers: int = 1,
          batch: bool = False, retry_rejected: Sequence[str] = ()) -> BuildSummary:
    """Run one build: discovery (``resume``: only what a stopped build left unfinished), then
    every stage that is not done, and return its summary.

    ``orchestrator``: None runs the stages in this process (``--orchestrator local``; with
    ``workers`` build processes sharing the store); ``flows.build_arcticqa.run_flow`` runs them
    as the ``build-arcticqa`` Prefect flow. ``batch`` sends the ``build.batch_roles`` through the
    provider's Batch API (the same as ``build.batch = true``).
    """
    check_workers(orchestrator, workers)
    if batch and not settings.build.batch:
        settings = settings.model_copy(update={"build": settings.build.model_copy(update={"batch": True})})
    options = BuildOptions(resume=resume, retry_rejected=tuple(retry_rejected), workers=workers)
    with interruptible():  # SIGTERM closes the open attempts as Ctrl-C does (``interrupted``)
        if orchestrator is None:
            return asyncio.run(build_here(settings, options))
        return orchestrator(settings, options)


async def build_here(settings: Settings, options: BuildOptions) -> BuildSummary:
    """The build in this process: open its context, run it. With ``options.workers > 1``,
    discovery runs here once, then ``workers - 1`` helper processes (:func:`_helper`) resume the
    build on the same store beside this one; a helper that exits non-zero is reported under
    ``errors["workers"]``."""
    async with open_build_context(settings, retry_rejected=options.retry_rejected) as ctx:
        if options.workers == 1:
            return await run_build(ctx, functools.partial(run_stage_batch, ctx), resume=options.resume)
        return await _build_with_helpers(ctx, settings, options)


async def _build_with_helpers(ctx: BuildContext, settings: Settings, options: BuildOptions) -> BuildSummary:
    # the helpers start first, so their interpreter start-up (seconds) overlaps discovery; they
    # touch the store only once discovery, done here once, has finished
    helpers, discovered = _start_helpers(options.workers - 1, settings, options)
    try:
        found = await discover_papers(ctx, only_unfinished=options.resume)
    except BaseException:
        for process in helpers:
            process.terminate()
        await asyncio.gather(*(asyncio.to_thread(_exit_code, p) for p in helpers))
        raise
    discovered.set()
    try:
        summary = await run_build(ctx, functools.partial(run_stage_batch, ctx), resume=True)
    finally:
        codes = await asyncio.gather(*(asyncio.to_thread(_exit_code, p) for p in helpers))
    summary.discovered = found or summary.discovered
    failed = {f"worker {i}": f"exited {code}" for i, code in enumerate(codes, start=2) if code}
    if failed:
        summary.errors["workers"] = failed
    return summary


def _start_helpers(n: int, settings: Settings, options: BuildOptions) -> tuple[list[Any], Any]:
    """``n`` helper processes that resume this build on the same store once the returned event is
    set. They get the settings object itself (pickled by ``multiprocessing``), so CLI overrides
    reach them without a config file or environment variable; ``spawn`` so no live connection or
    thread is copied."""
    spawn = multiprocessing.get_context("spawn")
    discovered = spawn.Event()
    helper_options = options.model_copy(update={"resume": True, "workers": 1})
    processes = [spawn.Process(target=_helper, args=(settings, helper_options, discovered),
                               name=f"arcticqa-worker-{i}") for i in range(2, n + 2)]
    for process in processes:
        process.start()
    return processes, discovered


def _exit_code(process: Any) -> int:
    process.join()
    return int(process.exitcode or 0)


def _helper(settings: Settings, options: BuildOptions, discovered: Any) -> None:
    # a spawned process starts with a fresh interpreter: the keys of the settings' env file
    # are read again here (they never travel with the settings)
    read_env_file(settings)
    parent = multiprocessing.parent_process()
    while not discovered.wait(1.0):
        if parent is not None and not parent.is_alive():
            return  # the build that started this helper is gone: nothing to help with
    asyncio.run(build_here(settings, options))


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    return [list(ids[i:i + size]) for i in range(0, len(ids), size)]


#: outcomes a later re-check pass may change (another worker held the paper or its upstream)
_RECHECK = ("claimed_elsewhere", "blocked")


async def run_build(ctx: BuildContext, run_batch: RunBatch, *, resume: bool = False,
                    parallelism: int = 1) -> BuildSummary:
    """Discovery (``resume``: only what a stopped build left unfinished), then every stage over
    every paper, ``run_batch`` running each batch; then re-check the papers other workers held
    until none are.

    ``parallelism`` batches of a stage run at once (1 in-process; the number of Dask workers
    with the DaskTaskRunner). Summary counts give each paper's final outcome per stage, so a
    paper first ``claimed_elsewhere`` and later found done by the other worker is counted once,
    as ``skipped``.
    """
    summary = BuildSummary(run_id=ctx.run_id)
    summary.discovered = await discover_papers(ctx, only_unfinished=resume)
    outcome: dict[str, dict[str, str]] = {spec.name: {} for spec in BUILD_STAGES}  # stage → paper → status
    step = max(parallelism, 1)
    papers: Sequence[str] = ctx.store.paper_ids()
    while papers:
        held: set[str] = set()
        for spec in BUILD_STAGES:
            numbered = list(enumerate(batches(papers, ctx.settings.build.batch_size)))
            for start in range(0, len(numbered), step):
                window = numbered[start:start + step]
                reports = await asyncio.gather(*(run_batch(spec, ids) for _, ids in window))
                _tally(ctx, spec, window, reports, summary, outcome, held)
                if ctx.stopped:  # the run's budget cap: stop cleanly, finished work is kept
                    break
            if ctx.stopped:
                break
        # Another worker holds these papers (or held them and died). Waiting here means a worker
        # that finishes first does not report an incomplete build, and a dead worker's papers are
        # taken over (its ``running`` attempts are no longer live).
        if not held or ctx.stopped or not ctx.settings.build.wait_for_claimed:
            break
        await asyncio.sleep(ctx.settings.build.claim_poll_s)
        papers = sorted(held)
    for spec in BUILD_STAGES:
        summary.stages[spec.name] = dict(Counter(outcome[spec.name].values()))
    summary.stopped = ctx.stopped
    budget = getattr(ctx.llm, "budget", None)
    summary.llm_spent_usd = float(getattr(budget, "spent_usd", 0.0))
    return summary


def _tally(ctx: BuildContext, spec: StageSpec, window: list[tuple[int, list[str]]], reports: Sequence[BatchReport],
           summary: BuildSummary, outcome: dict[str, dict[str, str]], held: set[str]) -> None:
    """Count a window of batches' outcomes into ``outcome`` and ``summary``, collect the papers
    another worker held into ``held``, and stop the build when too many of a batch failed."""
    threshold = ctx.settings.build.failure_threshold
    seen = outcome[spec.name]
    for (batch_no, ids), report in zip(window, reports, strict=True):
        if report.stopped and not ctx.stopped:
            ctx.stopped = report.stopped  # a task in another process hit the budget cap
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
        if ctx.stopped:
            return
        # a paper that hit its own budget cap is a policy outcome, not a systemic failure
        capped = sum(1 for e in report.errors.values() if e.startswith("BudgetExceeded"))
        failed = report.counts["failed"] - capped
        if report.attempted >= 2 and failed / report.attempted > threshold:
            summary.stages[spec.name] = dict(Counter(seen.values()))
            raise FailureThresholdExceeded(
                f"stage {spec.name}: {failed} of {report.attempted} papers in batch "
                f"{batch_no} failed (threshold {threshold:.0%}); first error: "
                f"{next(iter(report.errors.values()), '?')}")
