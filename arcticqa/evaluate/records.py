"""The evaluator's store tables (``eval_`` prefix) and reading/writing them.

One ``eval_response`` row per cell of the design (eval set, model, item, condition, trial);
the unique constraint makes a duplicate impossible, and inserts ignore a cell that is already
there, so a resumed or repeated run never records a cell twice. The store's Alembic
migrations (revision 0002; ``protocol`` and ``details`` since 0003e) create the table;
:func:`ensure_tables` migrates.

Other protocols (Abstain-QA, Know2Guess) share the table: their rows carry ``protocol``, a
protocol-namespaced ``eval_set`` (``abstainqa:<set>``) so their cells never collide with
ArcticAbstain's, the prompt variant in ``condition`` and their scored record in ``details``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Engine
from sqlmodel import Field, SQLModel

from arcticqa.evaluate.responses import ResponseRecord
from arcticqa.store.db import is_sqlite, read_session, write_session

__all__ = ["EvalResponseRow", "EVAL_TABLES", "ensure_tables", "insert_responses", "completed_cells",
           "load_store_responses", "load_protocol_details"]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class EvalResponseRow(SQLModel, table=True):
    """One recorded call: what it showed, what came back, and how it scored."""

    __tablename__ = "eval_response"
    __table_args__ = (UniqueConstraint("eval_set", "model", "item_id", "condition", "trial",
                                       name="uq_eval_response_cell"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    #: which evaluation protocol recorded the row (arcticabstain | abstainqa | know2guess)
    protocol: str = Field(default="arcticabstain", index=True,
                          sa_column_kwargs={"server_default": "arcticabstain"})
    eval_set: str = Field(index=True)
    model: str = Field(index=True)  # the configured label (the design's model id)
    #: the model's place in the run's configuration: reports list models in this order
    model_position: int = 0
    model_label: str
    api_model: str
    item_id: str = Field(index=True)
    condition: str
    trial: int
    order_seed: str
    #: [{letter, kind, text, option_id}] in the order shown
    options: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    correct_letter: str
    prompt_version: str
    prompt_sha256: str
    raw_response_text: str | None = None
    chosen_letter: str | None = None
    chosen_kind: str | None = None
    parser: str | None = None  # which parser found a letter: strict | lenient | None
    lenient_letter: str | None = None
    outcome: str
    lenient_outcome: str
    cause: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    latency_s: float = 0.0
    attempts: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    #: the protocol's scored record (decision, answer, confidence, item facts); None for ArcticAbstain
    details: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    recorded_at: datetime = Field(default_factory=_utcnow)


EVAL_TABLES = [EvalResponseRow.__table__]  # type: ignore[attr-defined]


def ensure_tables(engine: Engine) -> None:
    """Migrate the store behind ``engine`` (the evaluator tables are part of its schema)."""
    from arcticqa.store.store import migrate_engine

    migrate_engine(engine)


def insert_responses(engine: Engine, rows: Sequence[dict[str, Any]]) -> int:
    """Insert rows (column dicts), skipping cells already recorded. Returns how many were new."""
    if not rows:
        return 0
    table = EvalResponseRow.__table__  # type: ignore[attr-defined]
    with write_session(engine) as session:
        if is_sqlite(engine):
            inserted = 0
            # Chunks keep a multi-row INSERT under SQLite's bound-parameter limit.
            for start in range(0, len(rows), 500):
                statement = sqlite_insert(table).values(list(rows[start:start + 500])).on_conflict_do_nothing()
                result: Any = session.execute(statement)
                inserted += int(result.rowcount or 0)
            return inserted
        # Other backends: insert one by one inside the transaction, skipping known cells.
        done = _cells(session, {r["eval_set"] for r in rows})
        new = [r for r in rows if (r["eval_set"], r["model"], r["item_id"], r["condition"], r["trial"]) not in done]
        if new:
            session.execute(table.insert(), new)
        return len(new)


def _cells(session: Any, eval_sets: Iterable[str]) -> set[tuple[str, str, str, str, int]]:
    t = EvalResponseRow.__table__  # type: ignore[attr-defined]
    query = select(t.c.eval_set, t.c.model, t.c.item_id, t.c.condition, t.c.trial).where(
        t.c.eval_set.in_(list(eval_sets)))
    return {tuple(row) for row in session.execute(query)}  # type: ignore[misc]


def completed_cells(engine: Engine, eval_sets: Iterable[str]) -> set[tuple[str, str, str, str, int]]:
    """(eval_set, model, item_id, condition, trial) of every recorded cell."""
    with read_session(engine) as session:
        return _cells(session, eval_sets)


def load_store_responses(engine: Engine, *, models: Sequence[str] | None = None,
                         run_id: str | None = None) -> list[ResponseRecord]:
    """Recorded responses as report records, in recording order (so models keep config order)."""
    ensure_tables(engine)
    t = EvalResponseRow.__table__  # type: ignore[attr-defined]
    query = select(t.c.model, t.c.model_label, t.c.item_id, t.c.condition, t.c.trial, t.c.outcome,
                   t.c.lenient_outcome, t.c.cause, t.c.raw_response_text).order_by(
                       t.c.model_position, t.c.id).where(t.c.protocol == "arcticabstain")
    if models:
        query = query.where(t.c.model.in_(list(models)))
    if run_id:
        query = query.where(t.c.run_id == run_id)
    with read_session(engine) as session:
        rows = session.execute(query).all()
    return [ResponseRecord(model=r[0], model_label=r[1], item_id=r[2], condition=r[3], trial=int(r[4]),
                           outcome=r[5], lenient_outcome=r[6], cause=r[7], raw_response_text=r[8])
            for r in rows]


def load_protocol_details(engine: Engine, protocol: str, *, models: Sequence[str] | None = None,
                          run_id: str | None = None) -> list[dict[str, Any]]:
    """The ``details`` of every row of ``protocol``, in model order then recording order."""
    ensure_tables(engine)
    t = EvalResponseRow.__table__  # type: ignore[attr-defined]
    query = select(t.c.details).where(t.c.protocol == protocol).order_by(t.c.model_position, t.c.id)
    if models:
        query = query.where(t.c.model.in_(list(models)))
    if run_id:
        query = query.where(t.c.run_id == run_id)
    with read_session(engine) as session:
        return [dict(row[0] or {}) for row in session.execute(query)]
