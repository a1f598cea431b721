"""The provider's Batch API as a transport: build roles in ``batch`` mode (``arcticqa build --batch``).

A role in batch mode is asked exactly like a live one: instructor builds the request, parses
and validates the answer and re-asks; the gateway caches, budgets and records every attempt. Only
the last hop differs. The openai client of such a role sends through ``BatchTransport``,
which does not put ``POST /chat/completions`` on the wire but queues its body in a
``BatchQueue`` (both in :mod:`arcticqa.llm.providers.openai_batch`). Once no new request has arrived for ``batch_linger_s`` (or
``batch_max_requests`` are waiting) the queue writes the JSONL batch file, uploads it
(``POST /v1/files``), creates the job (``POST /v1/batches``), polls it, downloads the output
and error files and answers every waiting request with its own line. Papers of a stage batch
advance together, so each construction step of all of them is one job.

A line that failed (429, 5xx, expired or failed job) is answered with that status, so the usual
transport retries queue it again for the next job; a malformed answer is re-asked the same way.

Durability: each job and the hash of every request body in it are written to the ledger (the
store's ``llm_batch`` tables) before polling starts, and results when they arrive. A build that
stops while jobs are running leaves them open; the next build polls those jobs again rather than
sending their requests a second time, and answers any request whose exact body already has a
stored answer without sending it at all.

This module is the provider-independent half that the gateway and the store share: the job
records and the ledger protocol (:class:`MemoryLedger` without a store).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BatchJob", "LineResult", "BatchLedger", "MemoryLedger", "body_hash", "TERMINAL"]

#: provider statuses after which a job changes no more
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})


def body_hash(body: Mapping[str, Any]) -> str:
    """Identity of a request: the same body is the same request, whichever run sends it."""
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@dataclass
class BatchJob:
    """A submitted job as the ledger keeps it: ``lines`` maps custom_id → request body hash."""

    id: str
    endpoint: str
    model: str
    status: str
    input_file_id: str
    lines: dict[str, str] = field(default_factory=dict)
    run_id: str | None = None


@dataclass
class LineResult:
    custom_id: str
    status_code: int | None
    response: dict[str, Any] | None
    error: str | None = None


class BatchLedger(Protocol):
    """Where jobs and their results are kept (the store; :class:`MemoryLedger` without one)."""

    def batch_answer(self, body_sha256: str) -> dict[str, Any] | None: ...

    def open_batches(self, endpoint: str) -> list[BatchJob]: ...

    def record_batch(self, job: BatchJob) -> None: ...

    def update_batch(self, batch_id: str, status: str) -> None: ...

    def ingest_batch(self, batch_id: str, status: str, results: list[LineResult], *,
                     output_file_id: str | None, error_file_id: str | None, error: str | None) -> None: ...


class MemoryLedger:
    """An in-process ledger: nothing survives the process (one-off commands, unit tests)."""

    def __init__(self) -> None:
        self.jobs: dict[str, BatchJob] = {}
        self.answers: dict[str, dict[str, Any]] = {}

    def batch_answer(self, body_sha256: str) -> dict[str, Any] | None:
        return self.answers.get(body_sha256)

    def open_batches(self, endpoint: str) -> list[BatchJob]:
        return [j for j in self.jobs.values() if j.endpoint == endpoint and j.status != "ingested"]

    def record_batch(self, job: BatchJob) -> None:
        self.jobs[job.id] = job

    def update_batch(self, batch_id: str, status: str) -> None:
        self.jobs[batch_id].status = status

    def ingest_batch(self, batch_id: str, status: str, results: list[LineResult], *,
                     output_file_id: str | None, error_file_id: str | None, error: str | None) -> None:
        job = self.jobs[batch_id]
        job.status = "ingested"
        for r in results:
            if r.status_code == 200 and r.response is not None and r.custom_id in job.lines:
                self.answers[job.lines[r.custom_id]] = r.response
