"""The gateway's sinks wired to the store: model call records and Batch API jobs.

``arcticqa.llm`` declares what it needs (``CallRecorder`` for call records and the answer cache,
``BatchLedger`` for batch jobs) and the store declares what it persists
(``arcticqa.store.ledger``); neither imports the other. :class:`StoreLedger` joins them for a
build: call records pass through unchanged (the store reads the fields it keeps), batch jobs are
translated between the two shapes, and every record is stamped with the build's run id.

Inside :meth:`StoreLedger.held` (the stage runner opens one around each construction step) the
call records of the task wait for the step's own write, which stores them in the step's
transaction: one commit a step instead of one per model call plus one for the step.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

from arcticqa.llm.batch import BatchJob, LineResult
from arcticqa.llm.gateway import CallRecord, SentMark
from arcticqa.store import Store
from arcticqa.store.ledger import SentRow

__all__ = ["StoreLedger"]

#: the call records of the current step, not written yet (None outside a step)
_held: contextvars.ContextVar[list[CallRecord] | None] = contextvars.ContextVar("arcticqa_held_calls",
                                                                                default=None)


def _key(request_hash: str) -> int:
    # the string's hash (this process only, like the set): a small int instead of a 64-character
    # string per stored answer; a collision only costs a query
    return hash(request_hash)


class StoreLedger:
    """Implements ``arcticqa.llm.gateway.CallRecorder``, ``arcticqa.llm.gateway.SendJournal`` and
    ``arcticqa.llm.batch.BatchLedger`` on a store, for one build run (``run_id``)."""

    def __init__(self, store: Store, run_id: str | None = None) -> None:
        self.store, self.run_id = store, run_id
        #: :func:`_key` of every request with a stored answer, read on the first look-up
        self._answered: set[int] | None = None

    # -- CallRecorder ---------------------------------------------------------------------------
    def cached_output(self, request_hash: str) -> dict[str, Any] | None:
        """The stored answer to this exact request, if any.

        Almost every request of a build is new, and a store query costs ~0.2 ms of CPU, so the
        store is asked only about requests whose hash it has an answer for: the hashes are read
        once, then kept up to date with this ledger's own records. Answers another build process
        stores after that first read are not looked up here: such a request is asked again
        (two processes never run the same step, so this is rare, and costs a call, not a result).
        """
        for r in reversed(_held.get() or ()):  # answered in this step, not written yet
            if r.request_hash == request_hash and r.parsed is not None and r.error is None and not r.cache_hit:
                return r.parsed
        if self._answered is None:
            self._answered = {_key(h) for h in self.store.answered_requests()}
        if _key(request_hash) not in self._answered:
            return None
        return self.store.cached_output(request_hash)

    def record_calls(self, records: list[CallRecord]) -> None:
        if self._answered is not None:
            self._answered.update(_key(r.request_hash) for r in records
                                  if r.parsed is not None and r.error is None and not r.cache_hit)
        held = _held.get()
        if held is not None:
            held.extend(records)
            return
        self.store.record_calls(records, run_id=self.run_id)

    @contextlib.contextmanager
    def held(self) -> Iterator[list[CallRecord]]:
        """Hold the call records of this task (and the tasks it starts) in the yielded list.

        The step's write takes them (``Store.record_run``/``finish_run`` with ``calls=``) and
        empties the list; whatever is still in it on the way out (the step's write failed) is
        written on its own, so a call record is never dropped. A process killed mid-step loses
        that step's records with the step itself: resume runs the step again and asks again,
        as it would for a kill between the answer and its write.
        """
        pending: list[CallRecord] = []
        token = _held.set(pending)
        try:
            yield pending
        finally:
            _held.reset(token)
            if pending:
                self.record_calls(pending)

    # -- SendJournal ----------------------------------------------------------------------------
    def mark_sent(self, mark: SentMark) -> None:
        # written at once, never held with the step: it must be committed before the request leaves
        self.store.mark_sent(SentRow(mark.request_hash, mark.send_id, mark.worker, mark.run_id, mark.sent_at))

    def sent_marks(self, request_hash: str) -> list[SentMark]:
        return [SentMark(r.request_hash, r.send_id, r.worker, r.run_id, r.sent_at)
                for r in self.store.sent_rows(request_hash)]

    def stored_output(self, request_hash: str) -> dict[str, Any] | None:
        return self.store.cached_output(request_hash)

    # -- BatchLedger ----------------------------------------------------------------------------
    def batch_answer(self, body_sha256: str) -> dict[str, Any] | None:
        return self.store.batch_answer(body_sha256)

    def open_batches(self, endpoint: str) -> list[BatchJob]:
        return [BatchJob(id=o.job.id, endpoint=o.job.endpoint, model=o.job.model, status=o.job.status,
                         input_file_id=o.job.input_file_id, run_id=o.job.run_id, lines=dict(o.lines))
                for o in self.store.open_batches(endpoint)]

    def record_batch(self, job: BatchJob) -> None:
        self.store.record_batch(job.id, endpoint=job.endpoint, model=job.model, status=job.status,
                                input_file_id=job.input_file_id, lines=job.lines, run_id=job.run_id)

    def update_batch(self, batch_id: str, status: str) -> None:
        self.store.update_batch(batch_id, status)

    def ingest_batch(self, batch_id: str, status: str, results: list[LineResult], *,
                     output_file_id: str | None, error_file_id: str | None, error: str | None) -> None:
        self.store.ingest_batch(batch_id, status, results, output_file_id=output_file_id,
                                error_file_id=error_file_id, error=error)
