"""Group commit for the outcomes of concurrent papers' attempts.

Every attempt's outcome is written in one transaction, and its caller goes on only when that
transaction has committed, so resume sees every attempt that returned: the construction steps of
a first attempt (written once, finished: :class:`~arcticqa.store.runs.FinishedStep`) and the
stage attempts the runner claimed and now closes (:class:`~arcticqa.store.runs.ClosedAttempt`).
A transaction's fixed cost (the write lock, the commit, the pooled connection) is a large share
of such a write, and a build runs many papers at once, so :class:`OutcomeWriter` lets every
outcome that is ready in the same turn of the event loop share one transaction. The contract for
the caller is unchanged: ``await write(outcome)`` returns the ``stage_run`` row's id once it is
committed, or raises what writing that outcome alone raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from arcticqa.errors import StoreUnavailable
from arcticqa.store.runs import ClosedAttempt, FinishedStep
from arcticqa.store.store import Store

__all__ = ["OutcomeWriter", "write_alone"]

_log = logging.getLogger(__name__)
_Outcome = FinishedStep | ClosedAttempt
_Pending = list[tuple[_Outcome, "asyncio.Future[int]"]]


class OutcomeWriter:
    """Writes attempt outcomes for one store, a turn of the event loop at a time."""

    def __init__(self, store: Store) -> None:
        self.store = store
        # per event loop: a Prefect task may run its coroutine on a loop of its own
        self._pending: dict[asyncio.AbstractEventLoop, _Pending] = {}
        #: how many transactions wrote how many outcomes (``bench.bench_pipeline`` reports it)
        self.transactions = 0
        self.outcomes = 0

    async def write(self, outcome: _Outcome) -> int:
        """The id of ``outcome``'s ``stage_run`` row, once the transaction that wrote it has committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        pending = self._pending.setdefault(loop, [])
        pending.append((outcome, future))
        if len(pending) == 1:
            # after the callbacks already due in this turn, which may finish further attempts
            # (waiting a few milliseconds more for larger groups was measured: slower)
            loop.call_soon(self._flush, loop)
        # shielded: a caller cancelled while it waits does not take its outcome out of the group
        return await asyncio.shield(future)

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        group = self._pending.pop(loop, [])
        if not group:
            return
        try:
            ids = self.store.record_outcomes([outcome for outcome, _ in group])
        except StoreUnavailable as exc:
            # the server is gone: writing each alone would fail the same way, once per outcome
            for _, future in group:
                if not future.done():
                    future.set_exception(exc)
            return
        except Exception as exc:  # noqa: BLE001 - one bad outcome must fail only its own caller
            _log.warning("%d attempt outcomes could not be written together (%s: %s); writing each alone",
                         len(group), type(exc).__name__, exc)
            self._one_by_one(group)
            return
        self.transactions += 1
        self.outcomes += len(group)
        for (_, future), row_id in zip(group, ids, strict=True):
            if not future.done():
                future.set_result(row_id)

    def _one_by_one(self, group: _Pending) -> None:
        for outcome, future in group:
            try:
                row_id = write_alone(self.store, outcome)
            except Exception as exc:  # noqa: BLE001 - handed to the outcome's caller
                if not future.done():
                    future.set_exception(exc)
                continue
            self.transactions += 1
            self.outcomes += 1
            if not future.done():
                future.set_result(row_id)


def write_alone(store: Store, outcome: _Outcome) -> int:
    """Write one outcome in a transaction of its own; its row's id.

    If the row cannot be written, the attempt's model calls are kept all the same (they were
    paid for) and the row's error is raised.
    """
    try:
        return store.record_outcomes([outcome])[0]
    except Exception:
        with contextlib.suppress(Exception):
            store.record_calls(outcome.calls, run_id=outcome.run_id)
        raise
