"""The one live runner of every protocol: each planned (model, item, condition or variant, trial)
cell, once, into the store.

Per model, a pool of ``max_concurrency`` workers takes calls from a queue and calls the model
through :func:`arcticqa.llm.chat.complete_chat` (transport retries with backoff, never a
re-ask), paced by the model's ``requests_per_minute`` / ``tokens_per_minute`` token buckets (the
same :class:`~arcticqa.llm.ratelimit.ModelLimiter` the build's gateway uses). The protocol turns
each reply into a store row (parse → record → row), which is queued for the writer, which inserts
batches through the one write path. ``resume=True`` skips cells already recorded; the store's
unique constraint means a cell is never recorded twice, whatever happens.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel
from arcticqa.errors import StageError
from arcticqa.evaluate.recorded import completed_cells, ensure_tables, insert_responses
from arcticqa.llm.chat import ChatOutcome, complete_chat
from arcticqa.llm.providers.openai import make_async_client
from arcticqa.llm.ratelimit import ModelLimiter, estimate_tokens

__all__ = ["RunResult", "ProtocolCall", "LiveProtocol", "run_protocol", "refuse_recorded_cells"]

#: ``progress(model label, calls done, calls to make, calls that got no answer)``: once with 0 done
#: before a model's first call, then after each call
ProgressHook = Callable[[str, int, int, int], None]


class _HasMessages(Protocol):
    @property
    def messages(self) -> list[dict[str, str]]: ...


class ProtocolCall(_HasMessages, Protocol):
    """What a protocol run needs of a planned call: its cell and its messages."""

    @property
    def cell(self) -> tuple[str, str, str, int]: ...  # (eval_set, item_id, condition, trial)


_C = TypeVar("_C", bound=_HasMessages)


@dataclass(frozen=True)
class LiveProtocol:
    """A protocol's live run: its planned calls per model and the store row of a finished call.

    ``row(call, model, outcome, run_id, position)`` returns the ``eval_response`` columns
    (with ``protocol`` and ``details`` set). ``review(call, row)``, when given, may regrade a row
    before it is stored (the open protocol's verifier of undecided replies); it must not raise.
    """

    name: str
    plan: Callable[[EvalModel], Sequence[ProtocolCall]]
    row: Callable[[Any, EvalModel, ChatOutcome, str, int], dict[str, Any]]
    review: Callable[[Any, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None


@dataclass
class RunResult:
    run_id: str
    planned: int = 0
    skipped: int = 0
    recorded: int = 0
    elapsed_s: float = 0.0
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    #: calls of this run (per model label) that got no answer from the provider (connection,
    #: timeout, 429/5xx after the transport retries): recorded as the protocol's N0 cells
    failed: dict[str, int] = field(default_factory=dict)
    #: the first such call's error, per model label
    first_error: dict[str, str] = field(default_factory=dict)

    def merge(self, other: RunResult) -> None:
        self.planned += other.planned
        self.skipped += other.skipped
        self.recorded += other.recorded
        self.outcomes.update(other.outcomes)
        self.failed.update(other.failed)
        self.first_error.update(other.first_error)

    @property
    def called(self) -> int:
        """Calls this run made (cells it recorded)."""
        return sum(sum(c.values()) for c in self.outcomes.values())

    @property
    def all_failed(self) -> bool:
        """Whether this run made calls and not one got an answer."""
        return self.called > 0 and sum(self.failed.values()) == self.called


class _Writer:
    """Collects rows and inserts them in batches, off the event loop."""

    def __init__(self, engine: Engine, every_s: float = 0.25, batch: int = 200) -> None:
        self.engine, self.every_s, self.batch = engine, every_s, batch
        self.pending: list[dict[str, Any]] = []
        self.inserted = 0
        self.lock = asyncio.Lock()

    async def add(self, row: dict[str, Any]) -> None:
        self.pending.append(row)
        if len(self.pending) >= self.batch:
            await self.flush()

    async def flush(self) -> None:
        async with self.lock:
            rows, self.pending = self.pending, []
            if rows:
                self.inserted += await asyncio.to_thread(insert_responses, self.engine, rows)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), timeout=self.every_s)
            except TimeoutError:
                pass
            await self.flush()


async def _execute(todo: Sequence[_C], model: EvalModel, engine: Engine,
                   make_row: Callable[[_C, ChatOutcome], dict[str, Any]], counts: Counter[str],
                   progress: ProgressHook | None,
                   review: Callable[[_C, dict[str, Any]], Awaitable[dict[str, Any]]] | None = None,
                   result: RunResult | None = None) -> int:
    """Call the model once per planned call (a worker pool), store each row; rows inserted.
    ``result`` gets the calls that got no answer (:attr:`RunResult.failed`)."""
    queue: asyncio.Queue[_C] = asyncio.Queue()
    for call in todo:
        queue.put_nowait(call)
    writer = _Writer(engine)
    stop = asyncio.Event()
    limiter = ModelLimiter.for_config(model)
    finished = failed = 0
    if progress is not None:
        progress(model.label, 0, len(todo), 0)

    async def worker(client: Any) -> None:
        nonlocal finished, failed
        while True:
            try:
                call = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            estimate = estimate_tokens(call.messages, model.max_tokens) if limiter.active else 0
            await limiter.acquire(estimate)
            outcome = await complete_chat(client, model, call.messages, role=f"evaluate:{model.label}")
            # transport retries were requests too; the reported usage corrects the token estimate
            limiter.settle(estimate, outcome.usage.get("total_tokens"), extra_requests=max(0, outcome.attempts - 1))
            row = make_row(call, outcome)
            if review is not None:
                row = await review(call, row)
            counts[row["outcome"]] += 1
            if outcome.failure == "infrastructure":
                failed += 1
                if result is not None:
                    result.failed[model.label] = failed
                    result.first_error.setdefault(model.label, outcome.error or "no answer")
            await writer.add(row)
            finished += 1
            if progress is not None:
                progress(model.label, finished, len(todo), failed)

    flusher = asyncio.create_task(writer.run(stop))
    try:
        async with make_async_client(model) as client:
            workers = max(1, min(model.max_concurrency, len(todo)))
            await asyncio.gather(*(worker(client) for _ in range(workers)))
    finally:
        stop.set()
        await flusher
        await writer.flush()
    return writer.inserted


def refuse_recorded_cells(engine: Engine, plans: Mapping[str, Sequence[ProtocolCall]], *, protocol: str) -> None:
    """The one resume check: refuse a run (before any call is sent) when any model's planned
    cells are already in the store, so a repeated run never pays twice by accident."""
    done = completed_cells(engine, {c.cell[0] for calls in plans.values() for c in calls})
    for label, calls in plans.items():
        recorded = sum(1 for c in calls if _key(label, c) in done)
        if recorded:
            raise StageError(f"model {label}: {recorded} of {len(calls)} cells of this {protocol} run are already "
                             f"recorded in the store; pass --resume to run only the missing ones")


def _key(label: str, call: ProtocolCall) -> tuple[str, str, str, str, int]:
    eval_set, item_id, condition, trial = call.cell
    return (eval_set, label, item_id, condition, trial)


async def run_protocol(protocol: LiveProtocol, models: Sequence[EvalModel], engine: Engine, *,
                       resume: bool = False, run_id: str | None = None,
                       progress: ProgressHook | None = None, first_position: int = 0) -> RunResult:
    """The one runner: every model (concurrently) over a protocol's planned calls — one call per
    cell, no re-ask, resume skips recorded cells, the store refuses duplicates."""
    run_id = run_id or uuid.uuid4().hex[:12]
    ensure_tables(engine)
    plans = {m.label: list(protocol.plan(m)) for m in models}
    if not resume:
        refuse_recorded_cells(engine, plans, protocol=protocol.name)
    done = completed_cells(engine, {c.cell[0] for calls in plans.values() for c in calls})
    started = time.perf_counter()

    async def one(position: int, model: EvalModel) -> RunResult:
        calls = plans[model.label]
        todo = [c for c in calls if _key(model.label, c) not in done]
        result = RunResult(run_id=run_id, planned=len(calls), skipped=len(calls) - len(todo))
        counts: Counter[str] = Counter()
        result.outcomes[model.label] = counts
        if todo:
            result.recorded = await _execute(
                todo, model, engine, lambda call, outcome: protocol.row(call, model, outcome, run_id, position),
                counts, progress, protocol.review, result)
        return result

    results = await asyncio.gather(*(one(first_position + i, m) for i, m in enumerate(models)))
    total = RunResult(run_id=run_id)
    for r in results:
        total.merge(r)
    total.elapsed_s = time.perf_counter() - started
    return total
