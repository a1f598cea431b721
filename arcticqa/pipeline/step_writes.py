"""Group commit for the construction steps of concurrent papers.

Each construction step of a first attempt is written once, finished (``Store.record_run``), and
its caller goes on only when the row is committed, so resume sees every step that returned. A
transaction's fixed cost (the write lock, the commit, the pooled connection) is a large share of
such a one-row write, and a build runs many papers at once, so :class:`StepWrites` lets every
step that finishes in the same turn of the event loop share one transaction. The contract for
the caller is unchanged: ``await record(step)`` returns the row's id once it is committed, or
raises what writing that step alone raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from arcticqa.store.runs import FinishedStep
from arcticqa.store.store import Store

__all__ = ["StepWrites"]

_log = logging.getLogger(__name__)
_Pending = list[tuple[FinishedStep, "asyncio.Future[int]"]]


class StepWrites:
    """Writes :class:`FinishedStep` records for one store, a turn of the event loop at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # per event loop: a Prefect task may run its coroutine on a loop of its own
        self._pending: dict[asyncio.AbstractEventLoop, _Pending] = {}
        #: how many transactions wrote how many steps (``bench.bench_pipeline`` reports it)
        self.transactions = 0
        self.steps = 0

    async def record(self, step: FinishedStep) -> int:
        """The id of ``step``'s row, once the transaction that wrote it has committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        pending = self._pending.setdefault(loop, [])
        pending.append((step, future))
        if len(pending) == 1:
            # after the callbacks already due in this turn, which may finish further steps
            loop.call_soon(self._flush, loop)
        # shielded: a caller cancelled while it waits does not take its step out of the batch
        return await asyncio.shield(future)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        batch = self._pending.pop(loop, [])
        if not batch:
            return
        try:
            ids = self.store.record_runs([step for step, _ in batch])
        except Exception as exc:  # noqa: BLE001 - one bad step must fail only its own caller: write each alone
            _log.warning("%d construction steps could not be written together (%s: %s); writing each alone",
                         len(batch), type(exc).__name__, exc)
            self._one_by_one(batch)
            return
        self.transactions += 1
        self.steps += len(batch)
        for (_, future), row_id in zip(batch, ids, strict=True):
            if not future.done():
                future.set_result(row_id)

    def _one_by_one(self, batch: _Pending) -> None:
        for step, future in batch:
            try:
                row_id = self.store.record_runs([step])[0]
            except Exception as exc:  # noqa: BLE001 - handed to the step's caller
                # the step's model calls are kept even when its row cannot be written
                with contextlib.suppress(Exception):
                    self.store.record_calls(step.calls, run_id=step.run_id)
                if not future.done():
                    future.set_exception(exc)
                continue
            self.transactions += 1
            self.steps += 1
            if not future.done():
                future.set_result(row_id)
