"""The live ArcticAbstain runner: every (model, item, condition, trial) cell, once, into the store.

Per model, a pool of ``max_concurrency`` workers takes cells from a queue and calls the model
through :func:`arcticqa.llm.chat.complete_chat` (transport retries with backoff, never a
re-ask); an optional ``requests_per_second`` spaces the call starts. Each reply is scored with
the strict parser (the lenient reading is stored beside it) and queued for the writer, which
inserts batches through the one write path. ``resume=True`` skips cells already recorded; the
store's unique constraint means a cell is never recorded twice, whatever happens.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Engine

from arcticqa.errors import StageError
from arcticqa.evaluate.conditions import Call, EvalItem, PromptTemplate, build_call, load_prompt
from arcticqa.evaluate.outcomes import CONDITIONS, score_reply
from arcticqa.evaluate.records import completed_cells, ensure_tables, insert_responses
from arcticqa.evaluate.settings import EvalModel
from arcticqa.llm.chat import ChatOutcome, complete_chat
from arcticqa.llm.providers.openai import make_async_client

__all__ = ["RunResult", "plan_calls", "run_evaluation", "run_model", "response_row", "ProtocolCall",
           "LiveProtocol", "run_protocol", "arcticabstain_live", "refuse_recorded_cells"]

ProgressHook = Callable[[str, int, int], None]


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
    (with ``protocol`` and ``details`` set).
    """

    name: str
    plan: Callable[[EvalModel], Sequence[ProtocolCall]]
    row: Callable[[Any, EvalModel, ChatOutcome, str, int], dict[str, Any]]


@dataclass
class RunResult:
    run_id: str
    planned: int = 0
    skipped: int = 0
    recorded: int = 0
    elapsed_s: float = 0.0
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)

    def merge(self, other: RunResult) -> None:
        self.planned += other.planned
        self.skipped += other.skipped
        self.recorded += other.recorded
        self.outcomes.update(other.outcomes)


def plan_calls(items: Sequence[EvalItem], model: EvalModel, prompt: PromptTemplate, *, trials: int,
               eval_set: str) -> list[Call]:
    """Every call of one model, item by item (id order), present before absent, trial 1..n."""
    return [build_call(item, condition, trial, model.label, prompt, eval_set=eval_set)
            for item in items for condition in CONDITIONS for trial in range(1, trials + 1)]


def response_row(call: Call, model: EvalModel, outcome: ChatOutcome, run_id: str, *,
                 position: int = 0) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished call."""
    scored = score_reply(call.condition, call.options, outcome.text, failure=outcome.failure)
    correct = next(o.letter for o in call.options
                   if o.kind == ("gold" if call.condition == "answer_present" else "abstain"))
    return {
        "run_id": run_id, "eval_set": call.eval_set, "model": model.label, "model_label": model.name,
        "model_position": position,
        "api_model": model.model, "item_id": call.item.item_id, "condition": call.condition,
        "trial": call.trial, "order_seed": call.order_seed,
        "options": [asdict(o) for o in call.options], "correct_letter": correct,
        "prompt_version": call.prompt_version, "prompt_sha256": call.prompt_sha256,
        "raw_response_text": outcome.text, "chosen_letter": scored.chosen_letter,
        "chosen_kind": scored.chosen_kind, "parser": scored.parser, "lenient_letter": scored.lenient_letter,
        "outcome": scored.outcome, "lenient_outcome": scored.lenient_outcome, "cause": scored.cause,
        "finish_reason": outcome.finish_reason, "usage": outcome.usage, "latency_s": outcome.latency_s,
        "attempts": outcome.attempts, "cost_usd": outcome.cost_usd(model), "error": outcome.error,
    }


class _Pacer:
    """Spaces call starts ``1/rate`` seconds apart (no-op without a rate)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self.next_at = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.interval:
            return
        async with self.lock:
            now = time.monotonic()
            start = max(now, self.next_at)
            self.next_at = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


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
                   progress: ProgressHook | None) -> int:
    """Call the model once per planned call (a worker pool), store each row; rows inserted."""
    queue: asyncio.Queue[_C] = asyncio.Queue()
    for call in todo:
        queue.put_nowait(call)
    writer = _Writer(engine)
    stop = asyncio.Event()
    pacer = _Pacer(model.requests_per_second)
    finished = 0

    async def worker(client: Any) -> None:
        nonlocal finished
        while True:
            try:
                call = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await pacer.wait()
            outcome = await complete_chat(client, model, call.messages, role=f"evaluate:{model.label}")
            row = make_row(call, outcome)
            counts[row["outcome"]] += 1
            await writer.add(row)
            finished += 1
            if progress is not None:
                progress(model.label, finished, len(todo))

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


def arcticabstain_live(items: Sequence[EvalItem], prompt: PromptTemplate | None = None, *, trials: int = 3,
                       eval_set: str = "arcticqa") -> LiveProtocol:
    """ArcticAbstain as a live protocol: both conditions of every item, ``trials`` times."""
    template = prompt or load_prompt()
    return LiveProtocol(
        name="arcticabstain",
        plan=lambda model: plan_calls(items, model, template, trials=trials, eval_set=eval_set),
        row=lambda call, model, outcome, run_id, position: response_row(call, model, outcome, run_id,
                                                                        position=position))


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


async def run_model(items: Sequence[EvalItem], model: EvalModel, engine: Engine, *, trials: int = 3,
                    prompt: PromptTemplate | None = None, eval_set: str = "arcticqa", resume: bool = False,
                    run_id: str | None = None, progress: ProgressHook | None = None,
                    position: int = 0) -> RunResult:
    """Run one model over every ArcticAbstain cell (the Prefect flow's task body); ``position``
    orders reports."""
    return await run_protocol(arcticabstain_live(items, prompt, trials=trials, eval_set=eval_set), [model],
                              engine, resume=resume, run_id=run_id, progress=progress, first_position=position)


async def run_evaluation(items: Sequence[EvalItem], models: Sequence[EvalModel], engine: Engine, *,
                         trials: int = 3, prompt: PromptTemplate | None = None, eval_set: str = "arcticqa",
                         resume: bool = False, run_id: str | None = None,
                         progress: ProgressHook | None = None) -> RunResult:
    """Run every model concurrently over every ArcticAbstain cell (each with its own concurrency
    and rate limit)."""
    return await run_protocol(arcticabstain_live(items, prompt, trials=trials, eval_set=eval_set), models,
                              engine, resume=resume, run_id=run_id, progress=progress)


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
                counts, progress)
        return result

    results = await asyncio.gather(*(one(first_position + i, m) for i, m in enumerate(models)))
    total = RunResult(run_id=run_id)
    for r in results:
        total.merge(r)
    total.elapsed_s = time.perf_counter() - started
    return total
