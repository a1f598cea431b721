"""The ledger of model calls and Batch API jobs: what every model request asked and got back.

The store owns the persisted shape. :class:`ModelCallFields` and :class:`BatchLineFields` name
the fields an ``llm_call`` row and a batch line are written from; the gateway's own records
(``arcticqa.llm``) meet them structurally, so the store imports nothing of ``llm`` and the
pipeline (``arcticqa.pipeline.ledger``) hands them over without copying (the call record is on
the hot path of every model call). mypy checks that the two shapes fit where they meet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import bindparam, case, func, insert, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col, select

from arcticqa.store.db import read_session, reconnecting, write_connection
from arcticqa.store.tables import LLMBatch, LLMBatchRequest, LLMCall, LLMSent, utcnow

__all__ = ["ModelLedger", "ModelCallFields", "BatchLineFields", "OpenBatch", "CallTotals", "SentRow", "CALL_FIELDS",
           "insert_calls"]

_CALL = LLMCall.__table__  # type: ignore[attr-defined]
_BATCH = LLMBatch.__table__  # type: ignore[attr-defined]
_BATCH_LINE = LLMBatchRequest.__table__  # type: ignore[attr-defined]
_SENT = LLMSent.__table__  # type: ignore[attr-defined]
#: the ``llm_call`` columns a call record fills (the ledger adds ``id``, ``run_id``, ``created_at``)
CALL_FIELDS = ("request_hash", "attempt", "role", "provider", "model", "prompt_version", "subject", "request",
               "raw_response", "parsed", "tokens_in", "tokens_out", "cost_usd", "latency_s", "cache_hit", "error")

# Hot-path statements are built once with bound parameters (see arcticqa.store.runs)
_CACHED_OUTPUT = select(_CALL.c.parsed).where(
    _CALL.c.request_hash == bindparam("request_hash"), _CALL.c.error.is_(None), _CALL.c.parsed.is_not(None),
    _CALL.c.cache_hit.is_(False)).limit(1)
_ANSWERED = select(_CALL.c.request_hash).where(_CALL.c.error.is_(None), _CALL.c.parsed.is_not(None),
                                               _CALL.c.cache_hit.is_(False))
_INSERT_CALL = insert(_CALL)
_INSERT_SENT = insert(_SENT)
_SENT_OF = select(_SENT.c.send_id, _SENT.c.worker, _SENT.c.run_id, _SENT.c.sent_at).where(
    _SENT.c.request_hash == bindparam("request_hash")).order_by(_SENT.c.id)
_ANSWER_LINE = update(_BATCH_LINE).where(_BATCH_LINE.c.batch_id == bindparam("b_batch"),
                                         _BATCH_LINE.c.custom_id == bindparam("b_custom"))


def _aware(value: datetime) -> datetime:
    # SQLite gives back naive datetimes for what was written as UTC
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class ModelCallFields(Protocol):
    """One attempt (or cache hit) of one role call, as an ``llm_call`` row is written from it."""

    @property
    def request_hash(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def role(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def prompt_version(self) -> str: ...
    @property
    def subject(self) -> str | None: ...
    @property
    def request(self) -> dict[str, Any]: ...
    @property
    def raw_response(self) -> dict[str, Any] | None: ...
    @property
    def parsed(self) -> dict[str, Any] | None: ...
    @property
    def tokens_in(self) -> int: ...
    @property
    def tokens_out(self) -> int: ...
    @property
    def cost_usd(self) -> float: ...
    @property
    def latency_s(self) -> float: ...
    @property
    def cache_hit(self) -> bool: ...
    @property
    def error(self) -> str | None: ...


class BatchLineFields(Protocol):
    """What came back for one line of a batch job."""

    @property
    def custom_id(self) -> str: ...
    @property
    def status_code(self) -> int | None: ...
    @property
    def response(self) -> dict[str, Any] | None: ...
    @property
    def error(self) -> str | None: ...


def insert_calls(conn: Connection, records: Sequence[ModelCallFields], run_id: str | None) -> None:
    """``llm_call`` rows for ``records``, in the caller's transaction (one statement for all)."""
    if records:
        created = utcnow()
        conn.execute(_INSERT_CALL, [{**{k: getattr(r, k) for k in CALL_FIELDS}, "run_id": run_id, "created_at": created}
                                    for r in records])


@dataclass(frozen=True)
class SentRow:
    """A request written as sent (``llm_sent``); ``sent_at`` in epoch seconds."""

    request_hash: str
    send_id: str
    worker: str
    run_id: str | None
    sent_at: float


@dataclass(frozen=True)
class OpenBatch:
    """A submitted job whose results are not stored yet; ``lines`` maps custom_id → request body hash."""

    job: LLMBatch
    lines: dict[str, str]


@dataclass(frozen=True)
class CallTotals:
    """What :meth:`ModelLedger.call_totals` counts for one role."""

    calls: int
    cache_hits: int
    cost_usd: float


class ModelLedger:
    """Model calls and Batch API jobs; a part of :class:`arcticqa.store.Store`."""

    engine: Engine

    # -- model calls ------------------------------------------------------------------------------
    @reconnecting
    def cached_output(self, request_hash: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            parsed = conn.execute(_CACHED_OUTPUT, {"request_hash": request_hash}).scalar()
            return parsed if isinstance(parsed, dict) else None

    def answered_requests(self) -> Iterator[str]:
        """The request hash of every stored answer :meth:`cached_output` would return."""
        with self.engine.connect() as conn:
            yield from conn.execute(_ANSWERED).scalars()

    @reconnecting
    def record_calls(self, records: Sequence[ModelCallFields], *, run_id: str | None = None) -> None:
        if not records:
            return
        with write_connection(self.engine) as conn:
            insert_calls(conn, records, run_id)

    @reconnecting
    def mark_sent(self, row: SentRow) -> None:
        """Write that ``row.request_hash`` is about to be sent (committed before it leaves)."""
        with write_connection(self.engine) as conn:
            conn.execute(_INSERT_SENT, {"request_hash": row.request_hash, "send_id": row.send_id,
                                        "worker": row.worker, "run_id": row.run_id,
                                        "sent_at": datetime.fromtimestamp(row.sent_at, UTC)})

    @reconnecting
    def sent_rows(self, request_hash: str) -> list[SentRow]:
        """Every send of this request written by :meth:`mark_sent`, oldest first."""
        with self.engine.connect() as conn:
            return [SentRow(request_hash, send_id, worker, run_id, _aware(sent_at).timestamp())
                    for send_id, worker, run_id, sent_at in conn.execute(_SENT_OF, {"request_hash": request_hash})]

    @reconnecting
    def llm_calls(self) -> list[LLMCall]:
        with read_session(self.engine) as s:
            return list(s.exec(select(LLMCall).order_by(col(LLMCall.id))).all())

    @reconnecting
    def call_totals(self) -> dict[str, CallTotals]:
        """Per role: the model calls recorded, how many the cache answered, and their cost (one
        aggregate query; the rows themselves, requests and answers, are not read)."""
        query = select(_CALL.c.role, func.count(), func.sum(case((_CALL.c.cache_hit, 1), else_=0)),
                       func.sum(_CALL.c.cost_usd)).group_by(_CALL.c.role).order_by(_CALL.c.role)
        with self.engine.connect() as conn:
            return {str(role): CallTotals(int(n), int(hits or 0), float(cost or 0.0))
                    for role, n, hits, cost in conn.execute(query)}

    # -- Batch API jobs ---------------------------------------------------------------------------
    @reconnecting
    def batch_answer(self, body_sha256: str) -> dict[str, Any] | None:
        """The stored 200 answer to a request with exactly this body, from any ingested job."""
        with self.engine.connect() as conn:
            response = conn.execute(select(_BATCH_LINE.c.response).where(
                _BATCH_LINE.c.body_sha256 == body_sha256, _BATCH_LINE.c.status_code == 200,
                _BATCH_LINE.c.response.is_not(None)).limit(1)).scalar()
            return response if isinstance(response, dict) else None

    @reconnecting
    def open_batches(self, endpoint: str) -> list[OpenBatch]:
        """Jobs submitted to ``endpoint`` whose results are not stored yet (a build stopped first)."""
        with self.engine.connect() as conn:
            jobs = conn.execute(select(_BATCH).where(_BATCH.c.endpoint == endpoint,
                                                     _BATCH.c.status != "ingested")).all()
            out = []
            for job in jobs:
                lines = conn.execute(select(_BATCH_LINE.c.custom_id, _BATCH_LINE.c.body_sha256).where(
                    _BATCH_LINE.c.batch_id == job.id)).all()
                out.append(OpenBatch(LLMBatch(**job._mapping), {c: h for c, h in lines}))
            return out

    @reconnecting
    def record_batch(self, batch_id: str, *, endpoint: str, model: str, status: str, input_file_id: str,
                     lines: Mapping[str, str], run_id: str | None) -> None:
        """A submitted job and the body hash of each of its lines (custom_id → hash)."""
        with write_connection(self.engine) as conn:
            conn.execute(insert(_BATCH).values(id=batch_id, endpoint=endpoint, model=model, status=status,
                                               input_file_id=input_file_id, request_count=len(lines),
                                               answered=0, run_id=run_id, created_at=utcnow()))
            conn.execute(insert(_BATCH_LINE), [{"batch_id": batch_id, "custom_id": c, "body_sha256": h}
                                               for c, h in lines.items()])

    @reconnecting
    def update_batch(self, batch_id: str, status: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(update(_BATCH).where(_BATCH.c.id == batch_id, _BATCH.c.status != "ingested")
                         .values(status=status))

    @reconnecting
    def ingest_batch(self, batch_id: str, status: str, results: Sequence[BatchLineFields], *,
                     output_file_id: str | None, error_file_id: str | None, error: str | None) -> None:
        """A job's results, in one transaction; the job is ``ingested`` (its provider status is
        kept in ``error`` when it did not complete)."""
        with write_connection(self.engine) as conn:
            if results:  # one statement for every line (a job may have 50,000)
                conn.execute(_ANSWER_LINE, [{"b_batch": batch_id, "b_custom": r.custom_id, "status_code": r.status_code,
                                             "response": r.response, "error": r.error} for r in results])
            note = None if status == "completed" else f"{status}: {error or 'see the lines'}"
            conn.execute(update(_BATCH).where(_BATCH.c.id == batch_id).values(
                status="ingested", output_file_id=output_file_id, error_file_id=error_file_id,
                answered=sum(1 for r in results if r.status_code == 200), error=note, finished_at=utcnow()))

    @reconnecting
    def batches(self) -> list[LLMBatch]:
        with read_session(self.engine) as s:
            return list(s.exec(select(LLMBatch).order_by(col(LLMBatch.created_at))).all())
