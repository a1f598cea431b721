"""Migration 0003 (workers and claims): upgrade from the previous head, downgrade, upgrade again.

SQLite here; ``test_postgres_workers.py`` runs the same round trip on PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import inspect

from arcticqa.store.db import make_engine
from arcticqa.store.store import Store, _alembic_config

__all__ = ["migration_round_trip"]


def _columns(engine: object, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}  # type: ignore[arg-type]


def migration_round_trip(url: str) -> None:
    """Head → 0003e (drops the worker table and stage_run.worker_id) → head, data kept."""
    store = Store(url)
    run = store.start_run("p1", "prefilter", "", input_hash="h")
    store.finish_run(run, status="succeeded", output={"ok": True})
    engine = make_engine(url)
    cfg = _alembic_config(engine)
    for target in ("0003e", "head"):
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            (command.downgrade if target != "head" else command.upgrade)(cfg, target)
            conn.commit()
        if target == "0003e":
            assert "worker" not in inspect(engine).get_table_names()
            assert "worker_id" not in _columns(engine, "stage_run")
    assert "worker_id" in _columns(engine, "stage_run")
    current, head = store.schema_version()
    assert current == head
    assert [(r.paper_id, r.status, r.output) for r in store.runs()] == [("p1", "succeeded", {"ok": True})]
    engine.dispose()
    store.close()


def test_migration_0003_round_trip_on_sqlite(tmp_path: Path) -> None:
    migration_round_trip(f"sqlite:///{tmp_path / 's.db'}")
