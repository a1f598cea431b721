"""Reading and writing the evaluator's store rows (table ``eval_response``, :class:`~arcticqa.store.tables.EvalResponseRow`).

One row per cell of the design (eval set, model, item, condition, trial); the unique constraint
makes a duplicate impossible, and inserts ignore a cell that is already there, so a resumed or
repeated run never records a cell twice. The store's Alembic migrations (revision 0002;
``protocol`` and ``details`` since 0003e) create the table; :func:`ensure_tables` migrates.

Every protocol shares the table: rows carry ``protocol``, a protocol-namespaced ``eval_set``
(``abstainqa:<set>``) for the protocols other than ArcticAbstain so their cells never collide, the
prompt variant or condition in ``condition`` and, for Abstain-QA and Know2Guess, the scored record
in ``details``. A protocol's ``records`` module converts its record to and from a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import delete, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine

from arcticqa.store.db import is_sqlite, read_session, write_session
from arcticqa.store.store import migrate_engine
from arcticqa.store.tables import EvalResponseRow

__all__ = ["ensure_tables", "insert_responses", "completed_cells", "load_protocol_rows", "forget_run"]

_TABLE = EvalResponseRow.__table__  # type: ignore[attr-defined]


def ensure_tables(engine: Engine) -> None:
    """Migrate the store behind ``engine`` (the evaluator table is part of its schema)."""
    migrate_engine(engine)


def insert_responses(engine: Engine, rows: Sequence[dict[str, Any]]) -> int:
    """Insert rows (column dicts), skipping cells already recorded. Returns how many were new."""
    if not rows:
        return 0
    with write_session(engine) as session:
        if is_sqlite(engine):
            inserted = 0
            # A multi-row INSERT takes its columns from its first row, so rows with other columns
            # (an ArcticAbstain variant's ``details`` beside the reference's none) go in their own
            # statements; chunks keep each under SQLite's bound-parameter limit.
            by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
            for row in rows:
                by_columns.setdefault(tuple(sorted(row)), []).append(row)
            for group in by_columns.values():
                for start in range(0, len(group), 500):
                    statement = sqlite_insert(_TABLE).values(group[start:start + 500]).on_conflict_do_nothing()
                    result: Any = session.execute(statement)
                    inserted += int(result.rowcount or 0)
            return inserted
        # Other backends: insert one by one inside the transaction, skipping known cells.
        done = _cells(session, {r["eval_set"] for r in rows})
        new = [r for r in rows if (r["eval_set"], r["model"], r["item_id"], r["condition"], r["trial"]) not in done]
        if new:
            session.execute(_TABLE.insert(), new)
        return len(new)


def _cells(session: Any, eval_sets: Iterable[str]) -> set[tuple[str, str, str, str, int]]:
    t = _TABLE
    query = select(t.c.eval_set, t.c.model, t.c.item_id, t.c.condition, t.c.trial).where(
        t.c.eval_set.in_(list(eval_sets)))
    return {cast(tuple[str, str, str, str, int], tuple(row)) for row in session.execute(query)}


def completed_cells(engine: Engine, eval_sets: Iterable[str]) -> set[tuple[str, str, str, str, int]]:
    """(eval_set, model, item_id, condition, trial) of every recorded cell."""
    with read_session(engine) as session:
        return _cells(session, eval_sets)


def load_protocol_rows(engine: Engine, protocol: str, columns: Sequence[str], *,
                       models: Sequence[str] | None = None, run_id: str | None = None) -> list[dict[str, Any]]:
    """``columns`` of every row of ``protocol`` (of ``models`` / ``run_id`` only, when given), in model
    order (the run configuration's) then recording order: the one reader of the evaluator's rows."""
    ensure_tables(engine)
    t = _TABLE
    query = select(*(t.c[name] for name in columns)).where(t.c.protocol == protocol).order_by(
        t.c.model_position, t.c.id)
    if models:
        query = query.where(t.c.model.in_(list(models)))
    if run_id:
        query = query.where(t.c.run_id == run_id)
    with read_session(engine) as session:
        return [dict(row._mapping) for row in session.execute(query)]


def forget_run(engine: Engine, run_id: str) -> int:
    """Delete the rows one run recorded (a run in which no call got an answer keeps nothing, so
    running it again asks again); how many were deleted."""
    with write_session(engine) as session:
        result: Any = session.execute(delete(_TABLE).where(_TABLE.c.run_id == run_id))
        return int(result.rowcount or 0)
