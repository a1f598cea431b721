"""The build: one engine and one entry point.

A build is :func:`run_build` over an open :class:`BuildContext`: discovery, then every stage
over the papers the stage before passed, in batches, the stages side by side, each batch handed
to ``run_batch``. ``run_batch`` is the one seam
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
import math
import multiprocessing
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

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
#: how long papers that passed a stage wait for more to join them while that stage is busy (a
#: batch a Prefect task: fewer, fuller batches); they start at once when the stage has nothing in
#: flight, when they fill a batch, or when they are as many as the stage's papers in flight, so
#: while papers arrive fast the batches grow instead of waiting
_LINGER_S = 1.0


class _Arrivals:
    """The papers discovery hands on while it runs (``on_papers`` of :func:`discover_papers`)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[dict[str, Any] | None]
        self._papers: list[str] = []
        self._waiter: asyncio.Future[None] | None = None
        #: papers whose family is written when discovery ends (preprints): a stage that reads
        #: families leaves them waiting until then
        self.unsettled: set[str] = set()

    def add(self, papers: list[str], unsettled: set[str]) -> None:
        self._papers.extend(papers)
        self.unsettled |= unsettled
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def take(self) -> list[str]:
        papers, self._papers = self._papers, []
        return papers

    def waiter(self) -> asyncio.Future[None]:
        """Done when papers arrive."""
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.get_running_loop().create_future()
        return self._waiter


@dataclass
class _Lane:
    """One stage's queue in a pass: the papers the stage before passed, waiting for a batch."""

    spec: StageSpec
    pending: list[str] = field(default_factory=list)
    since: float = 0.0  # when the oldest pending paper arrived
    in_flight: int = 0  # papers of this stage's running batches
    batches: int = 0
    upstream_done: bool = False

    def finished(self) -> bool:
        return self.upstream_done and not self.pending and not self.in_flight


async def run_build(ctx: BuildContext, run_batch: RunBatch, *, resume: bool = False,
                    parallelism: int = 1) -> BuildSummary:
    """Discovery (``resume``: only what a stopped build left unfinished), then every stage over
    the papers the stage before passed, ``run_batch`` running each batch; then re-check the
    papers other workers held until none are.

    Stages overlap (:func:`_pass`): a stage's batch is cut from the papers the stage before has
    passed so far, so eligible papers reach the model stages while later PDFs still extract.
    ``parallelism`` scales the papers one stage has in batches at once (``batch_size`` each: 1
    in-process; the number of Dask workers with the DaskTaskRunner). Summary counts give each
    paper's final outcome per stage (a paper that did not reach a stage is ``blocked`` there, as
    the stage would have found it), so a paper first ``claimed_elsewhere`` and later found done by
    the other worker is counted once, as ``skipped``.
    """
    summary = BuildSummary(run_id=ctx.run_id)
    # stage → paper → status of the papers that reached the stage; the others are counted
    # ``blocked`` at the end, not held one entry a paper
    outcome: dict[str, dict[str, str]] = {spec.name: {} for spec in BUILD_STAGES}
    papers: Sequence[str] = ()
    feed: _Arrivals | None = None
    if resume:
        summary.discovered = await discover_papers(ctx, only_unfinished=True)
    else:
        feed = _Arrivals()
    papers = ctx.store.paper_ids()  # with discovery running: the papers of builds before
    if feed is not None:
        feed.task = asyncio.ensure_future(discover_papers(ctx, on_papers=feed.add))
    reached = 0  # the papers of the first pass (later passes re-check some of them)
    first = True
    while papers or feed is not None:
        held: set[str] = set()
        try:
            passed = await _pass(ctx, run_batch, papers, max(parallelism, 1), summary, outcome, held, feed)
        finally:
            if feed is not None and not feed.task.done():
                feed.task.cancel()
                await asyncio.gather(feed.task, return_exceptions=True)
        if feed is not None:
            summary.discovered = feed.task.result()
            feed = None
        if first:
            reached, first = passed, False
            blocked = not ctx.stopped  # the papers the first pass did not take to a stage
        # Another worker holds these papers (or held them and died). Waiting here means a worker
        # that finishes first does not report an incomplete build, and a dead worker's papers are
        # taken over (its ``running`` attempts are no longer live).
        if not held or ctx.stopped or not ctx.settings.build.wait_for_claimed:
            break
        await asyncio.sleep(ctx.settings.build.claim_poll_s)
        papers = sorted(held)
    for spec in BUILD_STAGES:
        counts = Counter(outcome[spec.name].values())
        if not first and blocked and spec is not BUILD_STAGES[0] and reached > len(outcome[spec.name]):
            counts["blocked"] += reached - len(outcome[spec.name])
        summary.stages[spec.name] = dict(counts)
    summary.stopped = ctx.stopped
    budget = getattr(ctx.llm, "budget", None)
    summary.llm_spent_usd = float(getattr(budget, "spent_usd", 0.0))
    return summary


async def _pass(ctx: BuildContext, run_batch: RunBatch, papers: Sequence[str], parallelism: int,
                summary: BuildSummary, outcome: dict[str, dict[str, str]], held: set[str],
                feed: _Arrivals | None = None) -> int:
    """Every stage over ``papers``, the stages side by side: each stage's batches hold only the
    papers the stage before passed (most discovered papers stop at the prefilter), cut as soon
    as a batch is full, the stage before has finished, the waiting papers are as many as the
    stage has in flight (none, at first), or the oldest has waited :data:`_LINGER_S`. A stage
    has at most ``batch_size × parallelism`` papers in batches at once, so what a build holds
    depends on the batch size, not on the number of papers. With the Batch API (``build.batch``) a batch is cut only full or
    at the end of the stage before, so each provider job holds a whole batch.

    ``feed``: discovery is still running and hands on its papers as they arrive; the first
    stage takes them as the stage before's, and a stage that reads families
    (``needs_families``) waits until discovery has ended. Returns the number of papers the
    pass took."""
    size = ctx.settings.build.batch_size
    room = size * parallelism
    eager = not ctx.settings.build.batch
    lanes = [_Lane(spec) for spec in BUILD_STAGES]
    lanes[0].pending, lanes[0].upstream_done = list(papers), feed is None
    taken = len(papers)
    running: dict[asyncio.Task[BatchReport], tuple[int, int, list[str]]] = {}
    recent: dict[str, deque[bool]] = {spec.name: deque(maxlen=size) for spec in BUILD_STAGES}
    loop = asyncio.get_running_loop()
    # too many failures stop new batches; those running finish (and are counted) before it is raised
    failure: FailureThresholdExceeded | None = None
    try:
        while True:
            now = loop.time()
            wake: float | None = None
            discovering = feed is not None and not feed.task.done()
            if feed is not None:
                arrived = feed.take()
                if arrived:
                    if not lanes[0].pending:
                        lanes[0].since = now
                    lanes[0].pending.extend(arrived)
                    taken += len(arrived)
                elif not discovering:
                    feed.task.result()  # discovery's error ends the pass
                    lanes[0].upstream_done = True
                    feed = None
            for i, lane in enumerate(lanes):
                waiting: list[str] = []
                if discovering and lane.spec.needs_families and feed is not None:
                    unsettled = feed.unsettled
                    waiting = [pid for pid in lane.pending if pid in unsettled]
                    if waiting:
                        lane.pending = [pid for pid in lane.pending if pid not in unsettled]
                while lane.pending and lane.in_flight < room and not ctx.stopped and failure is None:
                    full = len(lane.pending) >= size
                    ripe = eager and (len(lane.pending) >= lane.in_flight or now - lane.since >= _LINGER_S)
                    if not (full or lane.upstream_done or ripe):
                        if eager:
                            wake = min(wake or math.inf, lane.since + _LINGER_S)
                        break
                    ids = lane.pending[:min(size, room - lane.in_flight)]
                    del lane.pending[:len(ids)]
                    lane.since = now
                    lane.in_flight += len(ids)
                    task = asyncio.ensure_future(run_batch(lane.spec, ids))
                    running[task] = (i, lane.batches, ids)
                    lane.batches += 1
                if waiting:
                    lane.pending[:0] = waiting
            waits: set[asyncio.Future[Any]] = set(running)
            if feed is not None:
                waits |= {feed.task, feed.waiter()}
            elif not running:
                break
            done, _ = await asyncio.wait(waits, timeout=None if wake is None else max(wake - loop.time(), 0.0),
                                         return_when=asyncio.FIRST_COMPLETED)
            for finished in done:
                if finished not in running:
                    continue
                i, batch_no, ids = running.pop(cast(asyncio.Task[BatchReport], finished))
                lane = lanes[i]
                report = finished.result()
                lane.in_flight -= len(ids)
                try:
                    _tally(ctx, lane.spec, batch_no, ids, report, summary, outcome, held, recent[lane.spec.name],
                           check=failure is None)
                except FailureThresholdExceeded as exc:
                    failure = exc
                if i + 1 < len(lanes) and report.passed:
                    after = lanes[i + 1]
                    if not after.pending:
                        after.since = loop.time()
                    after.pending.extend(report.passed)
            for i in range(1, len(lanes)):
                lanes[i].upstream_done = lanes[i - 1].finished()
    finally:
        for task in running:  # an error (or Ctrl-C) ends the pass: stop what still runs
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
    if failure is not None:
        raise failure
    return taken


def _tally(ctx: BuildContext, spec: StageSpec, batch_no: int, ids: list[str], report: BatchReport,
           summary: BuildSummary, outcome: dict[str, dict[str, str]], held: set[str], recent: deque[bool], *,
           check: bool = True) -> None:
    """Count a batch's outcomes into ``outcome`` and ``summary``, collect the papers another worker
    held into ``held``, and stop the build when too many of the stage's last ``batch_size``
    attempts failed (batches are cut as papers arrive, so one may hold a single paper)."""
    threshold = ctx.settings.build.failure_threshold
    seen = outcome[spec.name]
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
        if status in ("succeeded", "rejected"):
            recent.append(False)
        elif status == "failed":
            # a paper that hit its own budget cap is a policy outcome, not a systemic failure
            recent.append(not report.errors.get(pid, "").startswith("BudgetExceeded"))
    if report.errors:
        summary.errors.setdefault(spec.name, {}).update(report.errors)
    if ctx.stopped or not check:
        return
    failed = sum(recent)
    if len(recent) >= 2 and failed / len(recent) > threshold:
        summary.stages[spec.name] = dict(Counter(seen.values()))
        first = next((report.errors[p] for p in ids if p in report.errors), next(iter(report.errors.values()), "?"))
        raise FailureThresholdExceeded(
            f"stage {spec.name}: {failed} of the last {len(recent)} papers failed, up to batch "
            f"{batch_no} (threshold {threshold:.0%}); first error: {first}")
