"""Opening the evidence store and the one write path every module uses.

SQLite by default (WAL, foreign keys, busy timeout); any SQLAlchemy URL works. Writes go
through :func:`write_session`, which on SQLite starts ``BEGIN IMMEDIATE``: measured here, plain
``BEGIN`` with two read-then-write writers gave hundreds of ``database is locked`` errors
(lock upgrade deadlock), ``BEGIN IMMEDIATE`` none.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, create_engine

__all__ = ["make_engine", "write_session", "write_connection", "read_session", "is_sqlite",
           "EXIT_AFTER_COMMIT_ENV"]

#: Test hook: with this set to k, the process dies (``os._exit(137)``, as under SIGKILL) right
#: after its k-th write commit. tests/test_kill_windows.py uses it to stop a build at every
#: commit boundary in turn, which a timed ``kill -9`` can only hit by chance.
EXIT_AFTER_COMMIT_ENV = "ARCTICQA_TEST_EXIT_AFTER_COMMIT"
_commits_so_far = 0


def _committed() -> None:
    global _commits_so_far
    limit = os.environ.get(EXIT_AFTER_COMMIT_ENV)
    if not limit:
        return
    _commits_so_far += 1
    if _commits_so_far >= int(limit):
        os._exit(137)


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


def make_engine(url: str, *, busy_timeout_s: float = 30.0) -> Engine:
    """An engine with our connection settings. Creates the SQLite file's folder if needed."""
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).expanduser().parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": busy_timeout_s, "check_same_thread": False})

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            # Take transaction control from pysqlite so BEGIN IMMEDIATE is ours to issue.
            dbapi_connection.isolation_level = None
            cur = dbapi_connection.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            mode = conn.info.get("arcticqa_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine
    return create_engine(url, pool_pre_ping=True)


@contextmanager
def write_session(engine: Engine) -> Iterator[Session]:
    """A session whose transaction takes the write lock up front; commits on success."""
    if not is_sqlite(engine):
        with Session(engine, expire_on_commit=False) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
        _committed()
        return
    with engine.connect() as conn:
        conn.info["arcticqa_begin"] = "IMMEDIATE"
        try:
            with Session(bind=conn, expire_on_commit=False) as session:
                try:
                    yield session
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
        finally:
            conn.info.pop("arcticqa_begin", None)
    _committed()


@contextmanager
def write_connection(engine: Engine) -> Iterator[Connection]:
    """The same write path without the ORM, for the per-step hot path of a build.

    An ORM session's unit of work (flush, identity map, refresh) costs about 2.4x the SQL it
    issues on a one-row write; the build writes several rows per model call, so the stage runner's
    bookkeeping uses SQLAlchemy Core statements through this instead (same lock, same commit).
    """
    with engine.connect() as conn:
        if is_sqlite(engine):
            conn.info["arcticqa_begin"] = "IMMEDIATE"
        try:
            with conn.begin():
                yield conn
        finally:
            conn.info.pop("arcticqa_begin", None)
    _committed()


@contextmanager
def read_session(engine: Engine) -> Iterator[Session]:
    with Session(engine, expire_on_commit=False) as session:
        yield session
