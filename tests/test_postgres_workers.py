"""The evidence store on a real PostgreSQL server: migrations, claim races, two concurrent builds.

The server is the Debian package's (``apt-get install -y postgresql``), started per module on a
free loopback port by :func:`tests.pipeline_fixtures.postgres_server`; the tests skip with the
reason when its binaries are absent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect

from arcticqa.store.store import Store
from tests.pipeline_fixtures import postgres_server
from tests.test_store_layers import status_counts_round_trip
from tests.test_store_migrations import migration_round_trip
from tests.test_workers import SECRET, claim_race, run_two_workers

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with postgres_server("postgres") as url:
        yield url


@pytest.fixture
def pg_url(pg_server: str, request: pytest.FixtureRequest) -> str:
    """A fresh database on the module's server for each test."""
    import psycopg

    base = pg_server.rsplit("/", 1)[0]
    name = "t_" + request.node.name.lower().replace("[", "_").replace("]", "")[:50]
    with psycopg.connect(base.replace("postgresql+psycopg", "postgresql") + "/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
        c.execute(f'CREATE DATABASE "{name}"')
    return f"{base}/{name}"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)


def test_migrations_reach_head_on_postgresql(pg_url: str) -> None:
    store = Store(pg_url)
    current, head = store.schema_version()
    assert current == head
    engine = create_engine(pg_url)
    insp = inspect(engine)
    assert {"stage_run", "worker", "item", "eval_response"} <= set(insp.get_table_names())
    assert "worker_id" in {c["name"] for c in insp.get_columns("stage_run")}
    json_cols = {c["name"]: str(c["type"]) for c in insp.get_columns("stage_run")}
    assert json_cols["output"] == "JSON"
    Store(pg_url)  # a second open is a no-op migration
    engine.dispose()
    store.close()


def test_concurrent_claims_on_postgresql_have_exactly_one_winner(pg_url: str) -> None:
    store = Store(pg_url)
    assert claim_race(store) == Counter({"claimed": 1, "held": 7})
    assert len([r for r in store.runs() if r.paper_id == "race"]) == 1
    store.close()


def test_two_workers_on_one_postgresql_store_run_every_stage_exactly_once(tmp_path: Path, pg_url: str) -> None:
    stats = run_two_workers(tmp_path, pg_url)
    print(stats)


def test_migration_0003_round_trip_on_postgresql(pg_url: str) -> None:
    migration_round_trip(pg_url)


def test_status_counts_on_postgresql_counts_the_newest_attempts(pg_url: str) -> None:
    status_counts_round_trip(Store(pg_url))
