"""Running stages over papers against the store: skip what is done, record every attempt.

This is the durable heart of resume. A stage runs for a paper when its previous stage's newest
attempt succeeded and its own newest attempt did not (``succeeded`` is skipped; ``rejected``
is skipped unless the stage is named in ``retry_rejected``). Every attempt is a new
``stage_run`` row; a crash leaves a ``running`` row, which counts as not done.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel
from sqlmodel import SQLModel

from arcticqa.config import Settings
from arcticqa.errors import BudgetExceeded
from arcticqa.evidence import Document
from arcticqa.llm.gateway import Gateway
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection
from arcticqa.store.store import Store, input_hash, open_store
from arcticqa.store.tables import EVIDENCE_TABLES

__all__ = [
    "StageResult",
    "StageSpec",
    "BuildContext",
    "BatchReport",
    "open_build_context",
    "run_stage_batch",
    "StoreStepRunner",
]

R = TypeVar("R", bound=BaseModel)


@dataclass
class StageResult:
    """What a stage adapter hands the runner. Failures are exceptions, not results."""

    status: Literal["succeeded", "rejected"]
    output: BaseModel | dict[str, Any] | None = None
    rejections: list[Rejection] = field(default_factory=list)
    evidence: list[SQLModel] = field(default_factory=list)
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

    @property
    def data_dir(self) -> Path:
        return self.settings.build.data_dir


StageFn = Callable[[BuildContext, str], Awaitable[StageResult]]
InputsFn = Callable[[BuildContext, str], Any]


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: StageFn
    inputs: InputsFn
    after: str | None  # the stage whose success this one needs


@dataclass
class BatchReport:
    stage: str
    counts: Counter[str] = field(default_factory=Counter)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def attempted(self) -> int:
        return sum(n for status, n in self.counts.items() if status in ("succeeded", "rejected", "failed"))

    def failure_share(self) -> float:
        return self.counts["failed"] / self.attempted if self.attempted else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "counts": dict(self.counts), "errors": self.errors}


@asynccontextmanager
async def open_build_context(settings: Settings, *, retry_rejected: Sequence[str] = (),
                             store: Store | None = None):  # type: ignore[no-untyped-def]
    store = store or open_store(settings)
    run_id = uuid.uuid4().hex[:16]
    store.run_id = run_id
    async with Gateway(settings, store) as gateway, httpx.AsyncClient() as http:
        yield BuildContext(settings=settings, store=store, llm=gateway, http=http, run_id=run_id,
                           retry_rejected=frozenset(retry_rejected))


async def _run_one(ctx: BuildContext, spec: StageSpec, paper_id: str) -> str:
    latest = ctx.store.latest_run(paper_id, spec.name)
    if latest is not None and latest.status == "succeeded":
        return "skipped"
    if latest is not None and latest.status == "rejected" and spec.name not in ctx.retry_rejected:
        return "skipped"
    if spec.after is not None:
        upstream = ctx.store.latest_run(paper_id, spec.after)
        if upstream is None or upstream.status != "succeeded":
            return "blocked"
    if ctx.stopped:
        return "not_started"
    run = ctx.store.start_run(paper_id, spec.name, "", input_hash=input_hash(spec.inputs(ctx, paper_id)),
                              run_id=ctx.run_id)
    try:
        result = await spec.run(ctx, paper_id)
    except BudgetExceeded as exc:
        ctx.stopped = str(exc)
        ctx.store.finish_run(run, status="failed", error=exc)
        return "failed"
    except Exception as exc:  # noqa: BLE001 - a paper's failure is recorded, never raised through the flow
        ctx.store.finish_run(run, status="failed", error=exc)
        return "failed"
    ctx.store.finish_run(run, status=result.status, output=result.output, rejections=result.rejections,
                         evidence=result.evidence, document=result.document,
                         prompt_version=result.prompt_version)
    return result.status


async def run_stage_batch(ctx: BuildContext, spec: StageSpec, paper_ids: Sequence[str]) -> BatchReport:
    """Run one stage over a batch of papers concurrently (bounded by ``paper_concurrency``)."""
    report = BatchReport(stage=spec.name)
    limit = asyncio.Semaphore(ctx.settings.build.paper_concurrency)

    async def one(pid: str) -> None:
        async with limit:
            status = await _run_one(ctx, spec, pid)
        report.counts[status] += 1
        if status == "failed":
            latest = ctx.store.latest_run(pid, spec.name)
            if latest is not None:
                report.errors[pid] = f"{latest.error_class}: {latest.error_message}"

    await asyncio.gather(*(one(pid) for pid in paper_ids))
    return report


class StoreStepRunner:
    """Memoises the steps of a multi-step stage (item construction) in ``stage_run`` rows.

    A step whose newest attempt finished (succeeded or rejected) with the same input hash is
    loaded, not re-run: after a crash only the unfinished steps run again.
    """

    def __init__(self, ctx: BuildContext, paper_id: str) -> None:
        self.ctx, self.paper_id = ctx, paper_id

    async def __call__(self, stage: str, subject: str, inputs: BaseModel,
                       fn: Callable[[], Awaitable[R]], result_type: type[R]) -> R:
        store = self.ctx.store
        h = input_hash(inputs)
        latest = store.latest_run(self.paper_id, stage, subject)
        if latest is not None and latest.status in ("succeeded", "rejected") and latest.input_hash == h \
                and latest.output is not None:
            return result_type.model_validate(latest.output)
        run = store.start_run(self.paper_id, stage, subject, input_hash=h, run_id=self.ctx.run_id)
        try:
            result = await fn()
        except BaseException as exc:
            store.finish_run(run, status="failed", error=exc)
            raise
        rejections: list[Rejection] = list(getattr(result, "rejections", []) or [])
        status: Literal["succeeded", "rejected"] = "succeeded" if _step_ok(result) else "rejected"
        # accepted items are written once, by the stage that owns the whole construction
        table = EVIDENCE_TABLES.get(stage) if stage != "accept" else None
        evidence = [table(stage_run_id=0, paper_id=self.paper_id, payload=result.model_dump(mode="json"))] \
            if table is not None else []
        provenance = getattr(result, "provenance", None)
        store.finish_run(run, status=status, output=result, rejections=rejections, evidence=evidence,
                         prompt_version=getattr(provenance, "prompt_version", None))
        return result


def _step_ok(result: BaseModel) -> bool:
    """Whether a construction step produced something the next step can use."""
    if hasattr(result, "ok"):
        return bool(result.ok)
    if hasattr(result, "item"):  # accept
        return result.item is not None
    if hasattr(result, "findings"):  # findings: some candidates survived their gates
        return bool(result.findings)
    if hasattr(result, "admitted"):  # option checks: some options were admitted
        return bool(result.admitted)
    if hasattr(result, "kept"):  # distractors: some candidates passed the free gates
        return bool(result.kept)
    return not getattr(result, "rejections", None)
