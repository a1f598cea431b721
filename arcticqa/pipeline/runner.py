"""Running stages over papers against the store: skip what is done, record every attempt.

This is the durable heart of resume. A stage runs for a paper when its previous stage's newest
attempt succeeded and its own newest attempt did not (``succeeded`` is skipped; ``rejected``
is skipped unless the stage is named in ``retry_rejected``). Every attempt is a new
``stage_run`` row; a crash leaves a ``running`` row, which counts as not done.

Several build processes may work on one store at once: each attempt is *claimed*
(:meth:`Store.claim_run`) by the process's worker, so a paper stage held by another live worker
is reported ``claimed_elsewhere`` instead of being run twice, while one left ``running`` by a
dead worker is taken over. See ``docs/scale-out.md``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import gc
import signal
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel

from arcticqa.config import Settings
from arcticqa.errors import BudgetExceeded, ClaimedElsewhere
from arcticqa.evidence import Document
from arcticqa.llm.gateway import CallRecord, Gateway, paper_scope
from arcticqa.llm.types import RoleClient
from arcticqa.pipeline.ledger import StoreLedger
from arcticqa.pipeline.outcomes import OutcomeWriter, write_alone
from arcticqa.rules import Rejection
from arcticqa.stages.results import StepResult
from arcticqa.standins.offline.roles import OFFLINE_ROLES
from arcticqa.store.runs import ClosedAttempt, EvidenceValues, FinishedStep, input_hash
from arcticqa.store.store import Store, open_store
from arcticqa.store.tables import EVIDENCE_TABLES, StageRun, utcnow

__all__ = [
    "StageResult",
    "StageSpec",
    "BuildContext",
    "BatchReport",
    "open_build_context",
    "run_stage_batch",
    "StoreStepRunner",
    "Heartbeat",
    "LIVE_CONTEXTS",
    "live_context",
    "shared_context",
    "claimed_attempt",
    "frozen_heap",
    "interruptible",
]

R = TypeVar("R", bound=StepResult)


@dataclass
class StageResult:
    """What a stage adapter hands the runner. Failures are exceptions, not results."""

    status: Literal["succeeded", "rejected"]
    output: BaseModel | dict[str, Any] | None = None
    rejections: list[Rejection] = field(default_factory=list)
    evidence: list[SQLModel | EvidenceValues] = field(default_factory=list)
    document: Document | None = None
    prompt_version: str | None = None


@dataclass
class BuildContext:
    settings: Settings
    store: Store
    llm: RoleClient
    http: httpx.AsyncClient
    run_id: str
    retry_rejected: frozenset[str] = frozenset()
    stopped: str | None = None  # set when the budget cap is reached: no new work is started
    worker_id: str | None = None  # this process's row in ``worker``; stamped on every claimed attempt
    #: the gateway's recorder on the store; construction steps hold their call records for their
    #: own write (:meth:`StoreLedger.held`)
    ledger: StoreLedger | None = None
    #: group commit of attempt outcomes (:mod:`arcticqa.pipeline.outcomes`)
    outcomes: OutcomeWriter | None = None

    @property
    def data_dir(self) -> Path:
        return self.settings.build.data_dir


#: open BuildContexts of this process by run id, for orchestrator tasks that run in the process
#: that opened the context (the Prefect flow's in-process tasks). It lives in this importable
#: module, not in the flow's, so a task function that a distributed runner pickles *by value*
#: (a flow loaded from a script) does not drag live contexts into the pickle.
LIVE_CONTEXTS: dict[str, BuildContext] = {}


def live_context(run_key: str) -> BuildContext | None:
    """The open context of this process for ``run_key``. Tasks call this function rather than
    reading :data:`LIVE_CONTEXTS`: cloudpickle pickles a by-value function's globals by value,
    but an importable function by reference."""
    return LIVE_CONTEXTS.get(run_key)


@contextmanager
def shared_context(ctx: BuildContext) -> Iterator[BuildContext]:
    """Make ``ctx`` findable by :func:`live_context` while the block runs."""
    LIVE_CONTEXTS[ctx.run_id] = ctx
    try:
        yield ctx
    finally:
        LIVE_CONTEXTS.pop(ctx.run_id, None)


StageFn = Callable[[BuildContext, str], Awaitable[StageResult]]
InputsFn = Callable[[BuildContext, str], Any]
#: a stage that decides a whole batch at once from the store alone: paper id → (input hash,
#: result) for the papers it decided; a paper it leaves out runs alone (``StageSpec.run``)
ScreenFn = Callable[[BuildContext, Sequence[str]], dict[str, tuple[str, StageResult]]]


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: StageFn
    inputs: InputsFn
    after: str | None  # the stage whose success this one needs
    #: papers of a batch at once when fewer than ``paper_concurrency``: a stage that waits on
    #: nothing but this process's CPU and the store gains nothing from more, and each paper it
    #: runs at once delays the other stages' papers running beside it on the same event loop
    concurrency: int | None = None
    #: decides a batch in one read and one write (:func:`_screen_batch`) instead of a read, a
    #: claim and a write per paper: for a stage that calls nothing outside this process
    screen: ScreenFn | None = None
    #: reads the papers' families, which are final only once discovery has ended: while it
    #: runs, the stage's papers wait
    needs_families: bool = False


@dataclass
class BatchReport:
    stage: str
    counts: Counter[str] = field(default_factory=Counter)
    errors: dict[str, str] = field(default_factory=dict)
    #: paper id → this batch's outcome for it (the build re-checks ``claimed_elsewhere`` ones)
    statuses: dict[str, str] = field(default_factory=dict)
    #: the papers whose newest attempt of this stage succeeded (run now or found done), in the
    #: batch's order: the next stage's work
    passed: list[str] = field(default_factory=list)
    stopped: str | None = None

    @property
    def attempted(self) -> int:
        return sum(n for status, n in self.counts.items() if status in ("succeeded", "rejected", "failed"))

    def failure_share(self) -> float:
        return self.counts["failed"] / self.attempted if self.attempted else 0.0


class Heartbeat:
    """Registers this process as a worker and keeps its heartbeat fresh from a daemon thread.

    A thread, not an asyncio task: a stage that blocks the event loop for a while (PDF
    extraction) must not make a live worker look dead to the others.
    """

    def __init__(self, store: Store, interval_s: float) -> None:
        self.store, self.interval_s = store, interval_s
        self.worker_id = store.register_worker()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="arcticqa-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.store.heartbeat(self.worker_id)
            except Exception:  # noqa: BLE001 - a missed beat is retried; staleness is the safe failure
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.store.stop_worker(self.worker_id)


@asynccontextmanager
async def open_build_context(settings: Settings, *, retry_rejected: Sequence[str] = (),
                             store: Store | None = None) -> AsyncIterator[BuildContext]:
    """A build context for one run: its store (``store``, or the configured one, closed on exit),
    model gateway (spending within the settings' caps), HTTP client and worker heartbeat."""
    own_store = store is None
    store = store or open_store(settings)
    run_id = uuid.uuid4().hex[:16]
    heartbeat = Heartbeat(store, settings.store.heartbeat_s)
    ledger = StoreLedger(store, run_id)
    try:
        # roles configured offline (the default) are answered by the rule-based stand-ins
        async with Gateway(settings, ledger, ledger=ledger, run_id=run_id,
                           offline_roles=OFFLINE_ROLES) as gateway, httpx.AsyncClient() as http:
            with frozen_heap():
                yield BuildContext(settings=settings, store=store, llm=gateway, http=http, run_id=run_id,
                                   retry_rejected=frozenset(retry_rejected), worker_id=heartbeat.worker_id,
                                   ledger=ledger, outcomes=OutcomeWriter(store))
    except BaseException as exc:
        # Ctrl-C (the task is cancelled), SIGTERM (:func:`interruptible`), or an error that ends the
        # build: the attempts still open would show "running" for ever; they say what happened
        _interrupt_open_attempts(store, heartbeat.worker_id, exc)
        raise
    finally:
        heartbeat.stop()
        if own_store:
            store.close()


def _interrupt_open_attempts(store: Store, worker_id: str, exc: BaseException) -> None:
    why = {"CancelledError": "the build was cancelled (Ctrl-C)", "KeyboardInterrupt": "the build was interrupted "
           "(Ctrl-C or SIGTERM)", "SystemExit": "the build process was told to exit"}.get(
        type(exc).__name__, f"the build stopped on {type(exc).__name__}: {exc}")
    try:
        store.interrupt_runs(worker_id, f"{why} before this attempt finished; `arcticqa resume` runs it again")
    except Exception:  # noqa: BLE001 - best effort on the way out; the attempt stays "running", taken over later
        pass


@contextmanager
def interruptible() -> Iterator[None]:
    """While a build runs in the main thread, SIGTERM stops it as Ctrl-C does (KeyboardInterrupt), so
    its open attempts are closed as ``interrupted`` instead of left ``running``; the previous handler
    is put back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):  # someone (Prefect, a test harness) handles it: theirs
        yield
        return
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_frozen_depth = 0
#: young-generation threshold while a build runs (CPython's default is 700)
_YOUNG_THRESHOLD = 100_000


@contextmanager
def frozen_heap() -> Iterator[None]:
    """While a build runs, the garbage collector leaves alone what was alive when it started and
    runs less often on what is new (every build context holds this while it is open).

    What start-up leaves (modules, pydantic and SQLAlchemy machinery, the opened clients: ~360,000
    objects) is frozen: each full collection otherwise walks all of it again, ~140 ms a time. The
    young generation is collected every 100,000 allocations instead of 700, so most of a model
    call's short-lived objects are freed by reference counting before a collection looks at them.
    Measured with bench.bench_pipeline ("GC ms/paper" of construct): 3.2 ms per paper before, 1.3
    with the freeze alone, 0.5 with both (young threshold 20,000), 0.2-0.3 with 100,000. Nested
    builds in one process (tests) change this once; the outermost gives the heap back and restores
    the thresholds when it ends. A caller that opens one build context after another holds it
    around both, so the second does not collect the whole heap again (~0.2 s, between the two).
    """
    global _frozen_depth
    if _frozen_depth == 0:
        thresholds = gc.get_threshold()
        gc.collect()  # garbage left from start-up is freed now rather than kept forever
        gc.freeze()
        gc.set_threshold(_YOUNG_THRESHOLD, *thresholds[1:])
    _frozen_depth += 1
    try:
        yield
    finally:
        _frozen_depth -= 1
        if _frozen_depth == 0:
            gc.unfreeze()
            gc.set_threshold(*thresholds)


def _stage_done(ctx: BuildContext, stage: str, run: StageRun | None) -> bool:
    if run is None:
        return False
    return run.status == "succeeded" or (run.status == "rejected" and stage not in ctx.retry_rejected)


#: the attempt :func:`_run_one` claimed for the stage running in this task
_claimed: contextvars.ContextVar[StageRun | None] = contextvars.ContextVar("arcticqa_claimed_attempt", default=None)


def claimed_attempt() -> StageRun | None:
    """The attempt the runner claimed for the stage that is running in this task (``None``
    outside the runner): a stage reads its own attempt number here instead of from the store."""
    return _claimed.get()


#: what :func:`_run_one` returns for a paper found done whose newest attempt succeeded (counted as
#: ``skipped``; the paper goes on to the next stage)
_SKIPPED_PASSED = "skipped:succeeded"


def _skipped(run: StageRun | None) -> str:
    """The status of a paper whose stage is already done: skipped, and passed on when it succeeded."""
    return _SKIPPED_PASSED if run is not None and run.status == "succeeded" else "skipped"


def _tally(ctx: BuildContext, spec: StageSpec, report: BatchReport, pid: str, status: str) -> None:
    """Count one paper's status in ``report`` (a failure with its recorded error)."""
    if status in ("succeeded", _SKIPPED_PASSED):
        report.passed.append(pid)
        status = "skipped" if status == _SKIPPED_PASSED else status
    report.counts[status] += 1
    report.statuses[pid] = status
    if status == "failed":
        latest = ctx.store.latest_run(pid, spec.name)
        if latest is not None:
            report.errors[pid] = f"{latest.error_class}: {latest.error_message}"


async def _run_one(ctx: BuildContext, spec: StageSpec, paper_id: str, limit: asyncio.Semaphore) -> str:
    async with limit:
        newest = ctx.store.latest_runs(paper_id, [spec.name] if spec.after is None else [spec.name, spec.after])
        own = newest.get(spec.name)
        if _stage_done(ctx, spec.name, own):  # read-only fast path: no write lock for done work
            return _skipped(own)
        if spec.after is not None:
            upstream = newest.get(spec.after)
            if upstream is None or upstream.status != "succeeded":
                # another worker is (or was, if it died) mid-way through the upstream stage: the
                # build's re-check pass comes back to this paper
                return "claimed_elsewhere" if upstream is not None and upstream.status == "running" else "blocked"
        if ctx.stopped:
            return "not_started"
        claim = ctx.store.claim_run(paper_id, spec.name, "", input_hash=input_hash(spec.inputs(ctx, paper_id)),
                                    run_id=ctx.run_id, worker_id=ctx.worker_id,
                                    done=lambda r: _stage_done(ctx, spec.name, r))
        if claim.status == "done":
            return _skipped(claim.run)
        if claim.status == "held" or claim.run is None:
            return "claimed_elsewhere"
        run = claim.run
        claimed = _claimed.set(run)
        try:
            with paper_scope(paper_id):  # model calls inside are charged to this paper's budget
                result = await spec.run(ctx, paper_id)
        except ClaimedElsewhere as exc:
            await _write_outcome(ctx, ClosedAttempt(run=run, status="failed", error=exc))
            return "claimed_elsewhere"
        except BudgetExceeded as exc:
            if _budget_scope(exc) == "run":  # a paper's own cap fails that paper only
                ctx.stopped = str(exc)
            await _write_outcome(ctx, ClosedAttempt(run=run, status="failed", error=exc))
            return "failed"
        except Exception as exc:  # noqa: BLE001 - a paper's failure is recorded, never raised through the flow
            await _write_outcome(ctx, ClosedAttempt(run=run, status="failed", error=exc))
            return "failed"
        finally:
            _claimed.reset(claimed)
        await _write_outcome(ctx, ClosedAttempt(run=run, status=result.status, output=result.output,
                                                rejections=result.rejections, evidence=result.evidence,
                                                document=result.document, prompt_version=result.prompt_version))
        return result.status


async def _write_outcome(ctx: BuildContext, outcome: FinishedStep | ClosedAttempt) -> None:
    """Write an attempt's outcome; back once it is committed (with other papers' outcomes when
    the context has an :class:`OutcomeWriter`)."""
    if ctx.outcomes is not None:
        await ctx.outcomes.write(outcome)
    else:
        write_alone(ctx.store, outcome)


def _budget_scope(exc: BudgetExceeded) -> str:
    """``run`` (stop starting work) or ``paper`` (fail this paper); see arcticqa.llm.gateway.Budget."""
    return str(getattr(exc, "scope", "run"))


async def run_stage_batch(ctx: BuildContext, spec: StageSpec, paper_ids: Sequence[str]) -> BatchReport:
    """Run one stage over a batch of papers concurrently (bounded by ``paper_concurrency``)."""
    if spec.screen is not None:
        return await _screen_batch(ctx, spec, spec.screen, paper_ids)
    report = BatchReport(stage=spec.name)
    # In batch mode every paper of the batch goes at once: their requests wait together in
    # the provider's job, so bounding papers would only split one job into several.
    at_once = (len(paper_ids) or 1) if ctx.settings.build.batch else ctx.settings.build.paper_concurrency
    limit = asyncio.Semaphore(min(at_once, spec.concurrency or at_once))

    tasks = [asyncio.ensure_future(_run_one(ctx, spec, pid, limit)) for pid in paper_ids]
    try:
        statuses = await asyncio.gather(*tasks)
    except BaseException:
        # a paper's failure is recorded, not raised: what leaves _run_one ends the build (the store
        # gone, Ctrl-C). Its siblings stop here and their errors are collected, so the build ends
        # with that one error instead of each sibling's traceback at the event loop's shutdown.
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    for pid, status in zip(paper_ids, statuses, strict=True):
        _tally(ctx, spec, report, pid, status)
    report.stopped = ctx.stopped
    return report


async def _screen_batch(ctx: BuildContext, spec: StageSpec, screen: ScreenFn,
                        paper_ids: Sequence[str]) -> BatchReport:
    """:func:`run_stage_batch` for a stage that decides a batch at once: one read of the newest
    attempts, the decisions, one transaction that writes them finished (:meth:`Store.record_screened`:
    it skips what another worker did or holds meanwhile). The papers it cannot decide so (not
    in the store, an attempt running, the stage before not done, two PostgreSQL workers on the
    same papers) run one at a time, claimed as any stage's."""
    statuses: dict[str, str] = {}
    alone: list[str] = list(paper_ids) if ctx.stopped else []
    todo: list[str] = []
    if not ctx.stopped:
        stages = [spec.name] if spec.after is None else [spec.name, spec.after]
        newest = ctx.store.newest_runs(paper_ids, stages)
        for pid in paper_ids:
            runs = newest.get(pid, {})
            own = runs.get(spec.name)
            if _stage_done(ctx, spec.name, own):
                statuses[pid] = _skipped(own)
            elif (own is not None and own.status == "running") or (
                    spec.after is not None and getattr(runs.get(spec.after), "status", None) != "succeeded"):
                alone.append(pid)
            else:
                todo.append(pid)
    decided = screen(ctx, todo) if todo else {}
    started = utcnow()
    steps = [FinishedStep(pid, spec.name, "", input_hash=h, status=result.status, output=result.output,
                          rejections=result.rejections, evidence=result.evidence,
                          prompt_version=result.prompt_version, run_id=ctx.run_id, worker_id=ctx.worker_id,
                          started_at=started)
             for pid in todo if pid in decided for h, result in (decided[pid],)]
    alone.extend(pid for pid in todo if pid not in decided)
    try:
        claims = ctx.store.record_screened(steps, done=lambda r: _stage_done(ctx, spec.name, r))
    except IntegrityError:
        claims = []
        alone.extend(step.paper_id for step in steps)
    for step, claim in zip(steps, claims, strict=False):
        if claim.status == "claimed":
            statuses[step.paper_id] = step.status
        elif claim.status == "done":
            statuses[step.paper_id] = _skipped(claim.run)
        else:
            statuses[step.paper_id] = "claimed_elsewhere"
    report = BatchReport(stage=spec.name)
    passed_alone: set[str] = set()
    if alone:
        report = await run_stage_batch(ctx, dataclasses.replace(spec, screen=None), alone)
        passed_alone, report.passed = set(report.passed), []
    for pid in paper_ids:  # the batch's order, as run_stage_batch gives it
        status = statuses.get(pid)
        if status is not None:
            _tally(ctx, spec, report, pid, status)
        elif pid in passed_alone:  # counted by the run of the papers left alone
            report.passed.append(pid)
    report.stopped = ctx.stopped
    return report


def _taken(calls: list[CallRecord]) -> list[CallRecord]:
    """The step's held call records, handed to its write (which keeps them even if the row fails)."""
    taken = list(calls)
    calls.clear()
    return taken


class StoreStepRunner:
    """Memoises the steps of a multi-step stage (item construction) in ``stage_run`` rows.

    A step whose newest attempt finished (succeeded or rejected) with the same input hash is
    loaded, not re-run: after a crash only the unfinished steps run again.
    """

    def __init__(self, ctx: BuildContext, paper_id: str, *, first_attempt: bool = False) -> None:
        self.ctx, self.paper_id = ctx, paper_id
        #: the stage's first attempt for this paper: no step of it can be in the store yet and the
        #: runner's claim on the paper keeps other workers out, so steps skip the look-up and the
        #: claim and are written once, finished (:meth:`Store.record_run`)
        self.first_attempt = first_attempt

    async def __call__(self, stage: str, subject: str, inputs: BaseModel,
                       fn: Callable[[], Awaitable[R]], result_type: type[R]) -> R:
        store = self.ctx.store
        h = input_hash(inputs)

        def finished(run: StageRun | None) -> bool:
            return run is not None and run.status in ("succeeded", "rejected") and run.input_hash == h \
                and run.output is not None

        if self.first_attempt:
            with self._held_calls() as calls:
                return await self._run_first(stage, subject, h, fn, calls)
        latest = store.latest_run(self.paper_id, stage, subject)
        if finished(latest):
            assert latest is not None
            return result_type.model_validate(latest.output)
        claim = store.claim_run(self.paper_id, stage, subject, input_hash=h, run_id=self.ctx.run_id,
                                worker_id=self.ctx.worker_id, done=finished)
        if claim.status == "done" and claim.run is not None:
            return result_type.model_validate(claim.run.output)
        if claim.status != "claimed" or claim.run is None:
            raise ClaimedElsewhere(f"{stage} {subject} of paper {self.paper_id} is running in another worker")
        run = claim.run
        with self._held_calls() as calls:
            try:
                result = await fn()
            except BaseException as exc:
                await _write_outcome(self.ctx, ClosedAttempt(run=run, status="failed", error=exc,
                                                             calls=_taken(calls)))
                raise
            await _write_outcome(self.ctx, ClosedAttempt(run=run, **self._outcome(stage, result),
                                                         calls=_taken(calls)))
        return result

    def _held_calls(self) -> contextlib.AbstractContextManager[list[CallRecord]]:
        """The step's model-call records, kept for the step's own write (one commit a step)."""
        ledger = self.ctx.ledger
        return ledger.held() if ledger is not None else contextlib.nullcontext([])

    async def _run_first(self, stage: str, subject: str, h: str, fn: Callable[[], Awaitable[R]],
                         calls: list[CallRecord]) -> R:
        """A step of a first attempt: no other worker can hold it, so it is written once, finished."""
        common: dict[str, Any] = dict(input_hash=h, run_id=self.ctx.run_id, worker_id=self.ctx.worker_id,
                                      started_at=utcnow())
        try:
            result = await fn()
        except BaseException as exc:
            await _write_outcome(self.ctx, FinishedStep(self.paper_id, stage, subject, status="failed", error=exc,
                                                        calls=_taken(calls), **common))
            raise
        await _write_outcome(self.ctx, FinishedStep(self.paper_id, stage, subject, **self._outcome(stage, result),
                                                    calls=_taken(calls), **common))
        return result

    def _outcome(self, stage: str, result: StepResult) -> dict[str, Any]:
        rejections: list[Rejection] = list(getattr(result, "rejections", []) or [])
        status: Literal["succeeded", "rejected"] = "succeeded" if result.ok else "rejected"
        # accepted items are written once, by the stage that owns the whole construction
        table = EVIDENCE_TABLES.get(stage) if stage != "accept" else None
        evidence = [EvidenceValues(table, {"paper_id": self.paper_id, "payload": result.model_dump(mode="json")})] \
            if table is not None else []
        provenance = getattr(result, "provenance", None)
        return dict(status=status, output=result, rejections=rejections, evidence=evidence,
                    prompt_version=getattr(provenance, "prompt_version", None))

