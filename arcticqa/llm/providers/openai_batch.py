"""The Batch API queue and transport of the OpenAI-compatible provider (``arcticqa build --batch``).

How batch mode works, and why it is durable, is told in :mod:`arcticqa.llm.batch`, which keeps
the provider-independent part (the job ledger). This module is the provider's half: the queue
that turns waiting chat-completion bodies into JSONL files, jobs and answers, and the httpx
transport that hands an openai client's requests to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx2
from openai import AsyncOpenAI

from arcticqa.config import ModelConfig
from arcticqa.llm.batch import TERMINAL, BatchJob, BatchLedger, LineResult, body_hash
from arcticqa.llm.providers.openai_errors import describe_error

__all__ = ["BatchQueue", "BatchTransport"]

log = logging.getLogger(__name__)

_ENDPOINT: Literal["/v1/chat/completions"] = "/v1/chat/completions"
#: consecutive failed status polls after which a job's requests are answered as failed
#: (they are retried in a new job; the old one stays open in the ledger and is polled next run)
_MAX_POLL_FAILURES = 5

Answer = tuple[int, dict[str, Any]]


def _failed(message: str) -> Answer:
    # a 503 is a transport failure to the gateway: the request is retried (in a later job)
    return 503, {"error": {"message": message, "type": "batch_error", "code": "batch_failed"}}


@dataclass
class _Waiting:
    custom_id: str
    body: dict[str, Any]
    sha: str
    answer: asyncio.Future[Answer]


class BatchQueue:
    """Collects one model config's requests into Batch API jobs and answers them from the results."""

    def __init__(self, cfg: ModelConfig, api: AsyncOpenAI, ledger: BatchLedger, work_dir: Path, *,
                 run_id: str | None = None) -> None:
        self.cfg, self.api, self.ledger, self.work_dir, self.run_id = cfg, api, ledger, work_dir, run_id
        self.endpoint = str(cfg.base_url or "https://api.openai.com/v1")
        self._queued: list[_Waiting] = []
        self._by_sha: dict[str, asyncio.Future[Answer]] = {}  # requests already in a queued/open job
        self._arrived = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._flusher: asyncio.Task[None] | None = None
        self._started = False
        #: jobs this queue submitted, for reports and tests
        self.submitted: list[str] = []

    async def submit(self, body: dict[str, Any], role: str) -> Answer:
        """Queue one chat-completions body; returns (status code, response body) once its job ends."""
        self._start()
        sha = body_hash(body)
        stored = self.ledger.batch_answer(sha)
        if stored is not None:
            return 200, stored
        pending = self._by_sha.get(sha)
        if pending is None:
            pending = asyncio.get_running_loop().create_future()
            self._by_sha[sha] = pending
            pending.add_done_callback(functools.partial(self._forget, sha))
            # the role leads the custom_id: batch lines carry no headers, and readers of the
            # files (people, the stand-in server) want to know which role a line is for
            self._queued.append(_Waiting(f"{role}|{uuid.uuid4().hex}", body, sha, pending))
            self._arrived.set()
        return await asyncio.shield(pending)

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for job in self.ledger.open_batches(self.endpoint):
            futures: dict[str, asyncio.Future[Answer]] = {}
            for custom_id, sha in job.lines.items():
                future = self._by_sha.get(sha) or asyncio.get_running_loop().create_future()
                self._by_sha[sha] = future
                future.add_done_callback(functools.partial(self._forget, sha))
                futures[custom_id] = future
            log.info("following batch %s left open by an earlier run (%d requests)", job.id, len(futures))
            self._spawn(self._follow(job.id, futures))
        self._flusher = asyncio.create_task(self._flush_loop())

    def _forget(self, sha: str, _future: object) -> None:
        self._by_sha.pop(sha, None)

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _flush_loop(self) -> None:
        while True:
            await self._arrived.wait()
            # linger: submit once the queue stops growing, or as soon as it is full
            while len(self._queued) < self.cfg.batch_max_requests:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), self.cfg.batch_linger_s)
                except TimeoutError:
                    break
            self._arrived.clear()
            lines, self._queued = (self._queued[:self.cfg.batch_max_requests],
                                   self._queued[self.cfg.batch_max_requests:])
            if self._queued:
                self._arrived.set()
            if lines:
                self._spawn(self._submit(lines))

    async def _submit(self, lines: list[_Waiting]) -> None:
        path = self._write_file(lines)
        try:
            uploaded = await self.api.files.create(file=(path.name, path.read_bytes()), purpose="batch")
            job = await self.api.batches.create(input_file_id=uploaded.id, endpoint=_ENDPOINT,
                                                completion_window=self.cfg.batch_completion_window,  # type: ignore[arg-type]
                                                metadata={"arcticqa_run": str(self.run_id or ""),
                                                          "arcticqa_file": path.name})
        except Exception as exc:  # noqa: BLE001 - every waiting request gets the failure
            for w in lines:
                if not w.answer.done():
                    w.answer.set_result(_failed(f"batch submission failed: {describe_error(exc)}"))
            return
        self.submitted.append(job.id)
        self.ledger.record_batch(BatchJob(id=job.id, endpoint=self.endpoint, model=self.cfg.model,
                                          status=job.status, input_file_id=uploaded.id,
                                          lines={w.custom_id: w.sha for w in lines}, run_id=self.run_id))
        await self._follow(job.id, {w.custom_id: w.answer for w in lines})

    def _write_file(self, lines: list[_Waiting]) -> Path:
        """The JSONL batch file, kept under the data folder (written whole, then renamed)."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        path = self.work_dir / f"batch-{uuid.uuid4().hex[:16]}.jsonl"
        tmp = path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for w in lines:
                fh.write(json.dumps({"custom_id": w.custom_id, "method": "POST", "url": _ENDPOINT, "body": w.body},
                                    ensure_ascii=False) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)
        return path

    async def _follow(self, batch_id: str, answers: dict[str, asyncio.Future[Answer]]) -> None:
        """Poll a job until it ends, store its results, answer its requests."""
        failures = 0
        status = "unknown"
        job: Any = None
        while True:
            try:
                job = await self.api.batches.retrieve(batch_id)
                failures = 0
            except Exception as exc:  # noqa: BLE001 - a failed poll is retried; many in a row give up
                failures += 1
                if failures >= _MAX_POLL_FAILURES:
                    _answer_all(answers, _failed(f"batch {batch_id}: status unavailable: {describe_error(exc)}"))
                    return
            else:
                if job.status != status:
                    status = job.status
                    self.ledger.update_batch(batch_id, status)
                if status in TERMINAL:
                    break
            await asyncio.sleep(self.cfg.batch_poll_s)
        try:
            results = [*(await self._lines(job.output_file_id)), *(await self._lines(job.error_file_id))]
        except Exception as exc:  # noqa: BLE001 - results unreadable now; the job stays open for later
            _answer_all(answers, _failed(f"batch {batch_id}: results unavailable: {describe_error(exc)}"))
            return
        errors = getattr(job, "errors", None)
        detail = "; ".join(f"{e.code}: {e.message}" for e in (errors.data or [])) if errors else None
        self.ledger.ingest_batch(batch_id, status, results, output_file_id=job.output_file_id,
                                 error_file_id=job.error_file_id, error=detail)
        by_id = {r.custom_id: r for r in results}
        for custom_id, future in answers.items():
            if future.done():
                continue
            r = by_id.get(custom_id)
            if r is not None and r.status_code is not None and r.response is not None:
                future.set_result((r.status_code, r.response))
            else:
                reason = (r.error if r is not None else None) or detail or "no result for this request"
                future.set_result(_failed(f"batch {batch_id} ended {status}: {reason}"))

    async def _lines(self, file_id: str | None) -> list[LineResult]:
        if not file_id:
            return []
        content = await self.api.files.content(file_id)
        out = []
        for raw in content.text.splitlines():
            if not raw.strip():
                continue
            line = json.loads(raw)
            response = line.get("response") or {}
            error = line.get("error")
            out.append(LineResult(
                custom_id=str(line.get("custom_id")),
                status_code=response.get("status_code"),
                response=response.get("body") if isinstance(response.get("body"), dict) else None,
                error=f"{error.get('code')}: {error.get('message')}" if isinstance(error, dict) else None))
        return out

    async def aclose(self) -> None:
        """Stop polling. Jobs still running stay open in the ledger for the next build."""
        if self._flusher is not None:
            self._flusher.cancel()
        for task in list(self._tasks):
            task.cancel()
        for task in [t for t in (self._flusher, *self._tasks) if t is not None]:
            with contextlib.suppress(BaseException):
                await task
        for future in list(self._by_sha.values()):
            if not future.done():
                future.cancel()


def _answer_all(answers: Mapping[str, asyncio.Future[Answer]], answer: Answer) -> None:
    for future in answers.values():
        if not future.done():
            future.set_result(answer)


class BatchTransport(httpx2.AsyncBaseTransport):
    """The openai client's transport for a role in batch mode: chat completions go to the queue."""

    def __init__(self, queue: BatchQueue) -> None:
        self.queue = queue

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or not request.url.path.endswith("/chat/completions"):
            raise httpx2.UnsupportedProtocol(f"the batch transport only carries chat completions, not "
                                             f"{request.method} {request.url.path}")
        body = json.loads(await request.aread())
        status, payload = await self.queue.submit(body, request.headers.get("x-arcticqa-role", "call"))
        return httpx2.Response(status, json=payload, request=request)
