"""Opening the evidence store and the one write path every module uses.

SQLite by default (WAL, foreign keys, busy timeout); any SQLAlchemy URL works. Writes go
through :func:`write_session`, which on SQLite starts ``BEGIN IMMEDIATE``: measured here, plain
``BEGIN`` with two read-then-write writers gave hundreds of ``database is locked`` errors
(lock upgrade deadlock), ``BEGIN IMMEDIATE`` none.

A database server may go away for a moment (a restart, a failover) while a build runs. Every
store method is one transaction and is wrapped in :func:`reconnecting`: when the connection is
lost or the server refuses connections, the method runs again from the start once the server
answers, for up to the store's ``busy_timeout_s``; after that it raises :class:`~arcticqa.errors.StoreUnavailable`,
one line naming the store and the driver's reason. A transaction cut off before its commit was
rolled back by the server, so running it again writes it once. Pooled connections are checked
before use (``pool_pre_ping``), so the first statement after a restart does not meet a dead one.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session, create_engine
from tenacity import Retrying, retry_if_exception, stop_after_delay, wait_exponential

from arcticqa.errors import StoreUnavailable

__all__ = ["make_engine", "write_session", "write_connection", "read_session", "is_sqlite",
           "EXIT_AFTER_COMMIT_ENV", "reconnecting", "is_disconnect", "retrying_after_disconnect"]

#: Test hook: with this set to k, the process dies (``os._exit(137)``, as under SIGKILL) right
#: after its k-th write commit. tests/test_kill_windows.py uses it to stop a build at every
#: commit boundary in turn, which a timed ``kill -9`` can only hit by chance.
EXIT_AFTER_COMMIT_ENV = "ARCTICQA_TEST_EXIT_AFTER_COMMIT"
_log = logging.getLogger(__name__)
_commits_so_far = 0


def _committed() -> None:
    global _commits_so_far
    limit = os.environ.get(EXIT_AFTER_COMMIT_ENV)
    if not limit:
        return
    _commits_so_far += 1
    if _commits_so_far >= int(limit):
        os._exit(137)


#: the server's own words for "not now" on connecting (PostgreSQL; psycopg gives these no SQLSTATE)
_UNAVAILABLE = ("connection refused", "the database system is shutting down", "the database system is starting up",
                "the database system is in recovery mode", "the database system is not yet accepting connections",
                "server closed the connection unexpectedly", "terminating connection due to administrator command",
                "no such file or directory", "could not connect to server", "timeout expired")
#: SQLSTATEs of a lost or refused connection: class 08 and the admin/crash shutdown codes
_UNAVAILABLE_STATES = ("57P01", "57P02", "57P03")


def is_disconnect(exc: BaseException) -> bool:
    """Whether ``exc`` says the database server went away or is not accepting connections yet
    (worth waiting for), as opposed to a refused login, a bad statement or a constraint."""
    if not isinstance(exc, DBAPIError) or exc.orig is None:
        return False
    if exc.connection_invalidated:
        return True
    state = getattr(exc.orig, "sqlstate", None)
    if isinstance(state, str) and (state.startswith("08") or state in _UNAVAILABLE_STATES):
        return True
    text = str(exc.orig).lower()
    return state is None and any(marker in text for marker in _UNAVAILABLE)


_retrying: contextvars.ContextVar[bool] = contextvars.ContextVar("arcticqa_store_retrying", default=False)


def retrying_after_disconnect() -> bool:
    """True inside a store method that runs again after a lost connection: its first run may have
    committed just before the connection went (the acknowledgement lost), which a method whose
    write is not idempotent checks for (:meth:`arcticqa.store.runs.RunLog.claim_run`)."""
    return _retrying.get()


F = TypeVar("F", bound=Callable[..., Any])


def reconnecting(method: F) -> F:
    """Run a store method (one transaction) again when the database connection is lost, until the
    server answers or the store's ``reconnect_s`` has passed; then raise :class:`~arcticqa.errors.StoreUnavailable`.

    The first run costs one ``try``: the retry machinery starts only after a disconnect.
    """

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except DBAPIError as exc:
            if not is_disconnect(exc):
                raise
            first = exc
        return _run_again(self, method, first, args, kwargs)

    return cast(F, wrapper)


def _run_again(store: Any, method: Callable[..., Any], first: DBAPIError, args: Any, kwargs: Any) -> Any:
    window = float(getattr(store, "reconnect_s", 0.0))
    url = store.engine.url.render_as_string(hide_password=True)
    gave_up = getattr(store, "_gave_up_at", None)
    if window <= 0:
        raise StoreUnavailable(f"the store at {url} is unreachable: {_reason(first)}") from first
    if gave_up is not None and time.monotonic() - gave_up[0] < window:
        # once a wait ran out, the store is down: the calls on the way out (closing open attempts,
        # stopping the worker) fail at once, with the same line, instead of waiting a window each
        raise StoreUnavailable(gave_up[1]) from first
    started = time.monotonic()
    token = _retrying.set(True)
    try:
        for attempt in Retrying(stop=stop_after_delay(window), wait=wait_exponential(multiplier=0.1, max=2.0),
                                retry=retry_if_exception(is_disconnect), reraise=True):
            with attempt:
                result = method(store, *args, **kwargs)
            outcome = attempt.retry_state.outcome
            if outcome is None or outcome.failed:  # swallowed by the attempt: the loop waits and runs it again
                continue
            _log.warning("the store at %s went away (%s); back after %.1f s, the transaction ran again",
                         url, _reason(first), time.monotonic() - started)
            return result
    except DBAPIError as exc:
        if not is_disconnect(exc):
            raise
        message = (f"the store at {url} did not answer for {time.monotonic() - started:.0f} s "
                   f"(store.busy_timeout_s): {_reason(exc)}")
        store._gave_up_at = (time.monotonic(), message)
        raise StoreUnavailable(message) from exc
    finally:
        _retrying.reset(token)
    raise StoreUnavailable(f"the store at {url} is unreachable: {_reason(first)}")  # not reached: Retrying returns or raises


def _reason(exc: DBAPIError) -> str:
    """The driver's first line, without SQLAlchemy's statement and footer."""
    lines = str(exc.orig or exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


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
    logging.getLogger("psycopg").addFilter(_quiet_lost_pipeline)
    return create_engine(url, pool_pre_ping=True)


def _quiet_lost_pipeline(record: logging.LogRecord) -> bool:
    """psycopg warns when it closes a connection the server already ended; :func:`reconnecting`
    says what happened in its own one line, so that second line is left out."""
    return not str(record.msg).startswith("error ignored terminating")


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
