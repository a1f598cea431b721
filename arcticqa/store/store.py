"""The evidence store: one object over the database that holds everything the build and evaluator record.

:class:`Store` is a thin facade composed of three parts, each in its own module and working on
the engine alone: :class:`~arcticqa.store.papers.PaperArchive` (papers, discovery, documents,
spans, items), :class:`~arcticqa.store.runs.RunLog` (stage attempts, claims, workers) and
:class:`~arcticqa.store.ledger.ModelLedger` (model calls and Batch API jobs). This module adds
the schema (Alembic migrations) and opening a store from the settings. Every write goes through
``arcticqa.store.db`` (``write_session``/``write_connection``). Stage functions never see the
store; ``arcticqa.pipeline`` reads and writes it for them.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Engine

from arcticqa.config import Settings
from arcticqa.errors import InputError, StoreError, StoreMissing
from arcticqa.store.db import make_engine
from arcticqa.store.ledger import ModelLedger
from arcticqa.store.papers import PaperArchive
from arcticqa.store.runs import RunLog

__all__ = ["Store", "open_store", "open_existing_store", "sqlite_file", "migrate_engine", "MIGRATIONS_DIR"]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: PostgreSQL advisory lock id held while migrating ("arcticqa" in ASCII, fits a bigint)
_MIGRATION_LOCK = 0x6172637469637161


def _alembic_config(engine: Engine) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["engine"] = engine
    return cfg


def migrate_engine(engine: Engine) -> None:
    """Bring the schema behind ``engine`` to the code's head revision (Alembic)."""
    cfg = _alembic_config(engine)
    try:
        with engine.connect() as conn:
            # several workers may start on a fresh store at once: serialise the migration so
            # the second one finds the schema at head instead of racing to create it. The
            # transaction is begun here, before Alembic looks at the connection: Alembic then
            # runs every revision inside it. Left to itself on SQLite (no transactional DDL in
            # its book), it committed after each revision, and a second worker could take the
            # lock in between, read a half-migrated version and create a table again
            # ("table eval_response already exists", seen once in CI)
            if engine.dialect.name == "sqlite":
                conn.info["arcticqa_begin"] = "IMMEDIATE"
            conn.begin()
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK})
            cfg.attributes["connection"] = conn
            try:
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                conn.info.pop("arcticqa_begin", None)
    except Exception as exc:  # noqa: BLE001 - reported as a store error with the URL
        url = engine.url.render_as_string(hide_password=True)
        cause = getattr(exc, "orig", None) or exc  # the driver's one line, not SQLAlchemy's footer
        if "file is not a database" in str(cause):
            # the user pointed the store at some other file (a thesis, a PDF): bad input, left untouched
            raise InputError(f"{url}: the file is not an SQLite database, so not an arcticqa store; "
                             "give [store] url a new path or an existing store") from exc
        raise StoreError(f"cannot migrate the store at {url}: {cause}") from exc


class Store(PaperArchive, RunLog, ModelLedger):
    """Open with :func:`open_store`. Methods are synchronous and short; call them from async
    code freely (each is one small transaction).

    One object rather than three, because the runner, the stage adapters, the CLI and the tests
    all hold one store and use all three parts of it; the parts stay separate modules so each
    concern reads (and is reviewed) on its own.
    """

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0, migrate: bool = True,
                 stale_after_s: float = 30.0) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout_s=busy_timeout_s)
        self.stale_after_s = stale_after_s
        #: how long a store method waits for a database server that went away (arcticqa.store.db.reconnecting);
        #: SQLite's own wait for the write lock is the same setting
        self.reconnect_s = busy_timeout_s
        #: when (monotonic s) and with what line a wait for the server last ran out
        self._gave_up_at: tuple[float, str] | None = None
        if migrate:
            self.migrate()

    # -- schema -------------------------------------------------------------------------------
    def migrate(self) -> None:
        migrate_engine(self.engine)

    def schema_version(self) -> tuple[str | None, str | None]:
        """(the store's revision, the code's head revision)."""
        with self.engine.connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
        head = ScriptDirectory.from_config(_alembic_config(self.engine)).get_current_head()
        return current, head

    def _safe_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()


def open_store(settings: Settings) -> Store:
    return Store(settings.store.url, busy_timeout_s=settings.store.busy_timeout_s,
                 stale_after_s=settings.store.stale_after_s)


def sqlite_file(url: str) -> Path | None:
    """The file a ``sqlite:///`` URL names (None for in-memory or other databases)."""
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return None
    return Path(url.removeprefix("sqlite:///").split("?", 1)[0]).expanduser()


def open_existing_store(settings: Settings) -> Store:
    """The store of a command that only reads it: a missing SQLite file is an error, not created.

    Opening with :func:`open_store` would create an empty ``arcticqa.db`` wherever the user
    happened to be and report an empty build, which hides the real mistake (wrong folder or
    missing ``-c``). A zero-byte file is not a store either (nothing was ever built into it).
    """
    path = sqlite_file(settings.store.url)
    if path is not None and (not path.is_file() or path.stat().st_size == 0):
        raise StoreMissing(f"no store at {path} (run `arcticqa build`, or pass -c CONFIG)")
    return open_store(settings)
