"""Migration 0005 (review plans, assignments, verdicts) on SQLite and PostgreSQL: upgrade from
0004, the migrated schema equals the models, verdict rows round-trip, downgrade and upgrade again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

from arcticqa.store.db import make_engine
from arcticqa.store.reviews import add_verdict, plan_verdicts, save_plan
from arcticqa.store.store import Store, _alembic_config
from arcticqa.store.tables import ReviewAssignment, ReviewPlan, ReviewVerdict
from tests.pipeline_fixtures import postgres_server

REVIEW_TABLES = {"review_plan", "review_assignment", "review_verdict"}


def review_round_trip(url: str) -> None:
    store = Store(url)
    save_plan(store.engine, ReviewPlan(id="main", seed=20, reviewers=["ana"], strata={"accepted": {"s": 1}}),
              [ReviewAssignment(plan_id="main", item_key="aqa-1", population="accepted", stratum="s",
                                reviewer="ana", content_hash="h")])
    add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key="aqa-1", reviewer="ana", verdict="reject",
                                            failure_types=["review.distractor_true:2"], note="<script>x</script>",
                                            content_hash="h"))
    engine = make_engine(url)
    with engine.connect() as conn:  # the migrated schema is exactly the models' (no drift)
        diff = compare_metadata(MigrationContext.configure(conn), SQLModel.metadata)
    assert not [d for d in diff if REVIEW_TABLES & {getattr(x, "name", None) for x in _tables(d)}], diff
    cfg = _alembic_config(engine)
    for target in ("0004", "head"):
        with engine.connect() as conn:
            cfg.attributes["connection"] = conn
            (command.downgrade if target != "head" else command.upgrade)(cfg, target)
            conn.commit()
        if target == "0004":
            assert not REVIEW_TABLES & set(inspect(engine).get_table_names())
    assert REVIEW_TABLES <= set(inspect(engine).get_table_names())
    current, head = store.schema_version()
    assert current == head and head >= "0005"  # back at the newest revision (0005 or a later one)
    assert plan_verdicts(store.engine, "main") == []  # the downgrade dropped them, as it says
    engine.dispose()
    store.close()


def _tables(diff: object) -> list[object]:
    """The table objects a compare_metadata entry is about (entries are tuples or lists of tuples)."""
    items = diff if isinstance(diff, list) else [diff]
    out = []
    for entry in items:
        for part in entry if isinstance(entry, tuple) else ():
            table = getattr(part, "table", part)
            out.append(table)
    return out


def test_migration_0005_on_sqlite(tmp_path: Path) -> None:
    review_round_trip(f"sqlite:///{tmp_path / 's.db'}")


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with postgres_server("arcticqa_review") as url:
        yield url


@pytest.mark.slow
def test_migration_0005_on_postgresql(pg_url: str) -> None:
    review_round_trip(pg_url)


def test_verdict_rows_are_kept_in_full(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    save_plan(store.engine, ReviewPlan(id="main", seed=1, reviewers=["ana"]), [])
    for verdict in ("accept", "reject"):
        add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key="aqa-1", reviewer="ana", verdict=verdict,
                                                failure_types=["review.ambiguous"] if verdict == "reject" else [],
                                                note="<script>alert(1)</script>", content_hash="h"))
    rows = plan_verdicts(store.engine, "main")
    assert [(r.verdict, r.failure_types, r.note) for r in rows] == [
        ("accept", [], "<script>alert(1)</script>"), ("reject", ["review.ambiguous"], "<script>alert(1)</script>")]
    store.close()
