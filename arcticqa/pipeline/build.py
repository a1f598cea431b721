"""The build plan and the one build entry point.

:func:`build` is how every caller starts a build (the CLI, the demo, the Prefect flow, the
tests and the benches): it applies the caller's overrides to the :class:`Settings`, then hands
the build to an :class:`Orchestrator`. Whatever the orchestrator, :func:`execute` is the one
place that opens a build context and runs :func:`run_build` in it.

The orchestrator is chosen by the caller, as an object, not by name: ``pipeline`` sits below
``flows/``, so it cannot import the Prefect flow. :data:`LOCAL` (this module) runs the stages
in this process (plus helper processes for ``workers > 1``); ``flows.build_arcticqa.PREFECT``
starts the ``build-arcticqa`` flow, whose body calls :func:`execute` with a :class:`Route` that
runs each batch as a Prefect task. Imports only point down: interfaces import ``flows`` for the
Prefect route, ``flows`` imports this module, this module imports neither.

``dispatch`` decides how a batch runs: directly (tests, ``--orchestrator local``) or as one
Prefect task (the ``build-arcticqa`` flow). Either way the store is the durable truth.

On the Prefect route a build may start with *early work* (:func:`run_early`), run directly while
the flow's API server starts: discovery and the stages that call no model, then the later stages
until the server answers; the flow's tasks then report what the early work recorded
(:func:`early_outcomes`) and run only the rest (:func:`run_batch_after_early`).

Several builds may run at once on one store (``docs/scale-out.md``): each claims paper stages
as it goes, and after its pass re-checks the papers another worker held until none are left.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from arcticqa.config import Settings, read_env_file
from arcticqa.errors import ConfigError, FailureThresholdExceeded
from arcticqa.llm.gateway import Budget
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
    "Dispatch",
    "DiscoverFn",
    "BatchPlan",
    "EarlyWork",
    "Route",
    "Orchestrator",
    "LocalOrchestrator",
    "LOCAL",
    "build",
    "check_workers",
    "execute",
    "run_early",
    "early_outcomes",
    "run_batch_after_early",
    "run_build",
    "batches",
]

Dispatch = Callable[[StageSpec, int, list[str]], Awaitable[BatchReport]]
DiscoverFn = Callable[[BuildContext], Awaitable[dict[str, Any] | None]]


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


@dataclass(frozen=True)
class BatchPlan:
    """How one build's batches and discovery run (None: in this process, directly)."""

    dispatch: Dispatch | None = None
    discover: DiscoverFn | None = None
    #: batches of one stage dispatched at once (1 in-process; the Dask workers with DaskTaskRunner)
    parallelism: int = 1


class Route(Protocol):
    """Binds a :class:`BatchPlan` to an open build context for as long as the build runs."""

    def bind(self, ctx: BuildContext) -> AbstractContextManager[BatchPlan]: ...


class Orchestrator(Protocol):
    """Runs one build to its end in this process's caller (blocking) and returns its summary."""

    #: the ``--orchestrator`` name, for messages
    name: str
    #: whether ``workers > 1`` helper processes are supported
    runs_workers: bool

    def run(self, settings: Settings, options: BuildOptions) -> BuildSummary: ...


@contextmanager
def _direct(ctx: BuildContext) -> Iterator[BatchPlan]:
    yield BatchPlan()


class _DirectRoute:
    def bind(self, ctx: BuildContext) -> AbstractContextManager[BatchPlan]:
        return _direct(ctx)


async def execute(settings: Settings, options: BuildOptions, route: Route | None = None,
                  stages: Sequence[StageSpec] | None = None, *, budget: Budget | None = None,
                  hand_over: Callable[[str], bool] | None = None) -> BuildSummary:
    """Open a build context and run the build in it: the one place this sequence is written.

    ``stages``: only these (discovery and the first stages, :func:`run_early`); one process only.
    ``budget`` and ``hand_over``: the context's (:func:`open_build_context`), for early work and
    the flow run after it. With ``options.workers > 1``, discovery runs here once, then
    ``workers - 1`` helper processes (:func:`_helper`) resume the build on the same store beside
    this one; a helper that exits non-zero is reported under ``errors["workers"]``.
    """
    route = route or _DirectRoute()
    async with open_build_context(settings, retry_rejected=options.retry_rejected, budget=budget,
                                  hand_over=hand_over) as ctx:
        with route.bind(ctx) as plan:
            if options.workers == 1:
                return await run_build(ctx, discover=not options.resume, dispatch=plan.dispatch,
                                       discover_fn=plan.discover, batch_parallelism=plan.parallelism,
                                       stages=stages)
            if stages is not None:
                raise ConfigError("a build of some stages only runs in one process (workers = 1)")
            return await _build_with_helpers(ctx, settings, options, plan)


class EarlyWork(BaseModel):
    """What a build did before its Prefect flow run, while the flow's API server started (plain
    data: the flow gets it as its ``early`` parameter)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: the run id of the early work's build context; its stage attempts carry it
    run_id: str
    #: the stages it ran, in build order (those that call a model only until the server answered)
    stages: tuple[str, ...]
    #: what its discovery reported (None: a resume with no discovery to finish)
    discovered: dict[str, Any] | None = None
    #: wall time of the early work
    seconds: float = 0.0
    #: what its model calls cost, in all and by paper: the flow's budget goes on from there
    spent_usd: float = 0.0
    paper_spent_usd: dict[str, float] = Field(default_factory=dict)

    def budget(self, settings: Settings) -> Budget:
        """The settings' spending caps, with what the early work spent already counted."""
        return Budget.of_build(settings, self.spent_usd, self.paper_spent_usd)


async def run_early(settings: Settings, options: BuildOptions, free: Sequence[StageSpec],
                    until: Callable[[], bool] | None = None) -> EarlyWork:
    """The first part of a build whose flow run starts afterwards, run directly: discovery
    (``options.resume``: only the unfinished part), the stages ``free`` (which call no model) over
    every paper, then, given ``until``, the build's later stages until ``until()`` is true.

    From then on no paper starts a later stage (the papers in one finish it), and the flow run
    does the rest, the rest of a batch under way included. Model calls here are counted against
    the build's budget, which the flow takes over (:meth:`EarlyWork.budget`). Papers another
    worker holds are not waited for here; the flow comes back to them.
    """
    started = time.perf_counter()
    own = settings.model_copy(update={"build": settings.build.model_copy(update={"wait_for_claimed": False})})
    names = {s.name for s in free}
    stages = list(free) if until is None else [*free, *(s for s in BUILD_STAGES if s.name not in names)]
    budget = Budget.of_build(settings)

    def hand_over(stage: str) -> bool:
        return stage not in names and until is not None and until()

    summary = await execute(own, options.model_copy(update={"workers": 1}), stages=stages, budget=budget,
                            hand_over=hand_over)
    return EarlyWork(run_id=summary.run_id, stages=tuple(s.name for s in stages), discovered=summary.discovered,
                     seconds=round(time.perf_counter() - started, 3), spent_usd=budget.spent_usd,
                     paper_spent_usd={p: c for p, c in budget.paper_spent_usd.items() if c})


def early_outcomes(ctx: BuildContext, stage: str, paper_ids: Sequence[str], early: EarlyWork
                   ) -> tuple[BatchReport, list[str]]:
    """The outcomes the early work recorded for ``stage`` over ``paper_ids`` (the attempts it
    made, as :func:`run_stage_batch` would have reported them), and the papers it did not attempt
    (done before, blocked, held by another worker, not started before the flow took over, or
    new), which still need a run."""
    report = BatchReport(stage=stage)
    # one query for the batch (the newest attempt of each of its papers), not one per paper
    newest = {r.paper_id: r for r in ctx.store.runs(stage=stage, paper_ids=paper_ids) if not r.subject} \
        if stage in early.stages else {}
    left: list[str] = []
    for pid in paper_ids:
        run = newest.get(pid)
        if run is None or run.run_id != early.run_id or run.status not in ("succeeded", "rejected", "failed"):
            left.append(pid)
            continue
        report.counts[run.status] += 1
        report.statuses[pid] = run.status
        if run.status == "failed":
            report.errors[pid] = f"{run.error_class}: {run.error_message}"
    return report, left


async def run_batch_after_early(ctx: BuildContext, spec: StageSpec, paper_ids: Sequence[str],
                                early: EarlyWork | None) -> tuple[BatchReport, BatchReport | None]:
    """One batch of the flow run that follows early work: the papers the early work attempted
    are reported as it recorded them, the others run now. Returns the batch's report and the
    part of it done early (None: the early work did not run this stage)."""
    if early is None or spec.name not in early.stages:
        return await run_stage_batch(ctx, spec, paper_ids), None
    done, left = early_outcomes(ctx, spec.name, paper_ids, early)
    report = BatchReport(stage=spec.name, errors=dict(done.errors), statuses=dict(done.statuses))
    report.counts.update(done.counts)
    if left:
        rest = await run_stage_batch(ctx, spec, left)
        report.counts.update(rest.counts)
        report.statuses.update(rest.statuses)
        report.errors.update(rest.errors)
        report.stopped = rest.stopped
    return report, done


async def _build_with_helpers(ctx: BuildContext, settings: Settings, options: BuildOptions,
                              plan: BatchPlan) -> BuildSummary:
    # the helpers start first, so their interpreter start-up (seconds) overlaps discovery; they
    # touch the store only once discovery, done here once, has finished
    helpers, discovered = _start_helpers(options.workers - 1, settings, options)
    try:
        await run_build(ctx, discover=not options.resume, stages=(), discover_fn=plan.discover)
    except BaseException:
        for process in helpers:
            process.terminate()
        await asyncio.gather(*(asyncio.to_thread(_exit_code, p) for p in helpers))
        raise
    discovered.set()
    try:
        summary = await run_build(ctx, discover=False, dispatch=plan.dispatch, batch_parallelism=plan.parallelism)
    finally:
        codes = await asyncio.gather(*(asyncio.to_thread(_exit_code, p) for p in helpers))
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
    asyncio.run(execute(settings, options))


class LocalOrchestrator:
    """The stages in this process (``--orchestrator local``), no Prefect; ``route`` (the benches'
    timers) decides how its batches run, directly by default."""

    name = "local"
    runs_workers = True

    def __init__(self, route: Route | None = None) -> None:
        self.route = route

    def run(self, settings: Settings, options: BuildOptions) -> BuildSummary:
        return asyncio.run(execute(settings, options, self.route))


#: the in-process orchestrator; the Prefect one is ``flows.build_arcticqa.PREFECT``
LOCAL: Orchestrator = LocalOrchestrator()


def check_workers(orchestrator: Orchestrator, workers: int) -> None:
    """``workers > 1`` needs an orchestrator that starts helper processes (a ConfigError otherwise)."""
    if workers > 1 and not orchestrator.runs_workers:
        raise ConfigError(f"--workers needs --orchestrator local (with {orchestrator.name}, use "
                          "build.task_runner = \"dask\" or a process work pool: docs/scale-out.md)")


def build(settings: Settings, *, resume: bool = False, orchestrator: Orchestrator = LOCAL, workers: int = 1,
          batch: bool = False, retry_rejected: Sequence[str] = ()) -> BuildSummary:
    """Run one build: discovery (``resume``: only what a stopped build left unfinished), then
    every stage that is not done, and return its summary.

    ``batch`` sends the ``build.batch_roles`` through the provider's Batch API (the same as
    ``build.batch = true``); ``workers`` is the number of build processes sharing the store.
    """
    check_workers(orchestrator, workers)
    if batch and not settings.build.batch:
        settings = settings.model_copy(update={"build": settings.build.model_copy(update={"batch": True})})
    options = BuildOptions(resume=resume, retry_rejected=tuple(retry_rejected), workers=workers)
    with interruptible():  # SIGTERM closes the open attempts as Ctrl-C does (``interrupted``)
        return orchestrator.run(settings, options)


def batches(ids: Sequence[str], size: int) -> list[list[str]]:
    return [list(ids[i:i + size]) for i in range(0, len(ids), size)]


def _direct_dispatch(ctx: BuildContext) -> Dispatch:
    async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
        return await run_stage_batch(ctx, spec, ids)

    return dispatch


#: outcomes a later re-check pass may change (another worker held the paper or its upstream)
_RECHECK = ("claimed_elsewhere", "blocked")


async def run_build(ctx: BuildContext, *, discover: bool = True, dispatch: Dispatch | None = None,
                    discover_fn: DiscoverFn | None = None,
                    stages: Sequence[StageSpec] | None = None, batch_parallelism: int = 1) -> BuildSummary:
    """Run every stage over every paper; then re-check papers other workers held until none are.

    ``batch_parallelism`` batches of a stage are dispatched at once (1 in-process; the number
    of Dask workers with the DaskTaskRunner). Summary counts give each paper's final outcome
    per stage, so a paper first ``claimed_elsewhere`` and later found done by the other worker
    is counted once, as ``skipped``.
    """
    dispatch = dispatch or _direct_dispatch(ctx)
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
            if ctx.hand_over is not None and ctx.hand_over(spec.name):
                return held  # early work: the flow's tasks take over from here
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
