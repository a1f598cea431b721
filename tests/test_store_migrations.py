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


def _transactions_of_a_migration(url: str) -> list[str]:
    from sqlalchemy import event

    from arcticqa.store.store import migrate_engine

    engine = make_engine(url)
    seen: list[str] = []
    event.listen(engine, "begin", lambda conn: seen.append("begin"))
    event.listen(engine, "commit", lambda conn: seen.append("commit"))
    migrate_engine(engine)
    engine.dispose()
    return seen


def test_a_migration_is_one_transaction_so_a_second_worker_never_sees_half_of_it(tmp_path: Path) -> None:
    """Every revision runs inside the one write transaction ``migrate_engine`` begins, from a
    fresh file and from an older revision. Alembic on its own committed after each revision on
    SQLite; a worker starting beside another could then take the lock in between, read a
    half-migrated version and create a table a second time (``table eval_response already
    exists``, once in CI, in tests/test_workers.py)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert _transactions_of_a_migration(url) == ["begin", "commit"]
    engine = make_engine(url)
    with engine.connect() as conn:  # back to an older revision: several revisions to apply again
        cfg = _alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0002")
        conn.commit()
    engine.dispose()
    assert _transactions_of_a_migration(url) == ["begin", "commit"]
    current, head = Store(url).schema_version()
    assert current == head


def test_workers_that_start_together_on_a_fresh_store_all_open_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    code = "import sys; from arcticqa.store import Store; Store(f'sqlite:///{sys.argv[1]}').close()"
    for round_no in range(3):
        db = tmp_path / f"fresh-{round_no}.db"
        workers = [subprocess.Popen([sys.executable, "-c", code, str(db)], stderr=subprocess.PIPE, text=True)
                   for _ in range(3)]
        errors = [(w.wait(timeout=120), w.stderr.read() if w.stderr else "") for w in workers]
        assert [rc for rc, _ in errors] == [0, 0, 0], errors
