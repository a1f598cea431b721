"""The evidence store: the one write path for everything the build and evaluator record.

Stage functions never see this module. The runner (``arcticqa.pipeline``) asks it to open a
stage attempt, then to close it with the stage's typed result, its rejections and evidence
rows in a single transaction, so a crash leaves either the whole attempt or a ``running`` row
that resume treats as not done.

Several build processes may share one store (``docs/scale-out.md``). Each registers a
:class:`~arcticqa.store.tables.Worker` and heartbeats it; work is taken with :meth:`Store.claim_run`,
one write transaction that reads the newest attempt and inserts the next one as ``running``. A
``running`` attempt whose worker is alive is left alone; one whose worker is gone (pid dead on
this host, heartbeat stale, or cleanly stopped) is taken over by a new attempt.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from pydantic import BaseModel
from sqlalchemy import and_, bindparam, func, insert, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel, col, select

from arcticqa import __version__
from arcticqa.config import Settings
from arcticqa.errors import InputError, StoreError, StoreMissing
from arcticqa.evidence import Document
from arcticqa.llm.batch import BatchJob, LineResult
from arcticqa.llm.gateway import CallRecord
from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection
from arcticqa.store.db import make_engine, read_session, write_connection, write_session
from arcticqa.store.tables import (
    DiscoveryPage,
    DocumentRow,
    ItemRow,
    LLMBatch,
    LLMBatchRequest,
    LLMCall,
    Paper,
    RawRecord,
    RejectionRow,
    SpanRow,
    StageRun,
    Worker,
    utcnow,
)

__all__ = ["Store", "Claim", "open_store", "open_existing_store", "sqlite_file", "input_hash", "migrate_engine",
           "MIGRATIONS_DIR", "HOST", "pid_alive"]

# Core tables for the per-step hot path (see arcticqa.store.db.write_connection)
_RUN = StageRun.__table__  # type: ignore[attr-defined]
_CALL = LLMCall.__table__  # type: ignore[attr-defined]
_WORKER = Worker.__table__  # type: ignore[attr-defined]
_REJECTION = RejectionRow.__table__  # type: ignore[attr-defined]
_DOCUMENT = DocumentRow.__table__  # type: ignore[attr-defined]
_SPAN = SpanRow.__table__  # type: ignore[attr-defined]
_BATCH = LLMBatch.__table__  # type: ignore[attr-defined]
_BATCH_LINE = LLMBatchRequest.__table__  # type: ignore[attr-defined]
_CALL_FIELDS = ("request_hash", "attempt", "role", "provider", "model", "prompt_version", "subject", "request",
                "raw_response", "parsed", "tokens_in", "tokens_out", "cost_usd", "latency_s", "cache_hit", "error")

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: PostgreSQL advisory lock id held while migrating ("arcticqa" in ASCII, fits a bigint)
_MIGRATION_LOCK = 0x6172637469637161


# Hot-path statements are built once with bound parameters: building a SQLAlchemy expression
# costs more CPU than executing its cached compiled form.
_WHERE_STEP = and_(_RUN.c.paper_id == bindparam("paper_id"), _RUN.c.stage == bindparam("stage"),
                   _RUN.c.subject == bindparam("subject"))
_NEWEST_RUN = select(_RUN).where(_WHERE_STEP).order_by(_RUN.c.attempt.desc()).limit(1)
_LAST_ATTEMPT = select(func.max(_RUN.c.attempt)).where(_WHERE_STEP)
_INSERT_RUN = insert(_RUN)
_CLOSE_RUN = update(_RUN).where(_RUN.c.id == bindparam("b_id"))  # SET takes the columns given
_CACHED_OUTPUT = select(_CALL.c.parsed).where(
    _CALL.c.request_hash == bindparam("request_hash"), _CALL.c.error.is_(None), _CALL.c.parsed.is_not(None),
    _CALL.c.cache_hit.is_(False)).limit(1)
_INSERT_CALL = insert(_CALL)
_INSERT_REJECTION = insert(_REJECTION)
_ANSWER_LINE = update(_BATCH_LINE).where(_BATCH_LINE.c.batch_id == bindparam("b_batch"),
                                         _BATCH_LINE.c.custom_id == bindparam("b_custom"))


def _newest_run(conn: Connection, paper_id: str, stage: str, subject: str) -> StageRun | None:
    row = conn.execute(_NEWEST_RUN, {"paper_id": paper_id, "stage": stage, "subject": subject}).first()
    return StageRun(**row._mapping) if row is not None else None


def _outcome(status: str, output: BaseModel | dict[str, Any] | None, error: BaseException | None,
             prompt_version: str | None) -> dict[str, Any]:
    """The columns that close an attempt."""
    if status not in ("succeeded", "rejected", "failed"):
        raise ValueError(f"bad final status {status!r}")
    payload = output.model_dump(mode="json") if isinstance(output, BaseModel) else output
    changes: dict[str, Any] = {"status": status, "output": payload, "finished_at": utcnow()}
    if prompt_version:
        changes["prompt_version"] = prompt_version
    if error is not None:
        changes["error_class"] = type(error).__name__
        changes["error_message"] = str(error)[:4000]
    return changes


def _write_evidence(conn: Connection, run_id: int, paper_id: str, subject: str, rejections: Sequence[Rejection],
                    evidence: Sequence[SQLModel], document: Document | None) -> None:
    """An attempt's rejections, evidence rows and extracted document, owned by ``run_id``."""
    owner = {"stage_run_id": run_id, "paper_id": paper_id, "subject": subject}
    if rejections:
        conn.execute(_INSERT_REJECTION, [
            {**owner, "stage": r.stage, "rule_id": r.rule_id, "message": r.message,
             "evidence": json.loads(json.dumps(r.evidence, default=str)), "created_at": utcnow()}
            for r in rejections])
    for ev in evidence:
        table = type(ev).__table__  # type: ignore[attr-defined]
        row = {c.name: getattr(ev, c.name) for c in table.columns if c.name != "id"}
        for key, value in owner.items():
            if key in row and row[key] in (None, "", 0):
                row[key] = value
        conn.execute(_insert(table), row)
    if document is not None:
        doc_id = _new_id(conn.execute(insert(_DOCUMENT).values(
            **owner, sha256=document.sha256, status=document.status, pages=document.pages,
            text=document.text, payload=document.model_dump(mode="json"), created_at=utcnow())))
        if document.spans:
            conn.execute(insert(_SPAN), [
                {"document_id": doc_id, "span_id": sp.id, "section": sp.section, "page": sp.page,
                 "start": sp.start, "end": sp.end, "sha256": sp.sha256, "text": sp.text}
                for sp in document.spans])


@functools.lru_cache(maxsize=64)
def _insert(table: Any) -> Any:
    return insert(table)


def _new_id(result: Any) -> int:
    key = result.inserted_primary_key
    if key is None:
        raise StoreError("the database did not return the new row's id")
    return int(key[0])


def _host_identity() -> str:
    """This machine *and* pid namespace: two containers on one box may reuse the same pids."""
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = ""
    return f"{socket.gethostname()}/{ns}" if ns else socket.gethostname()


#: identifies where a worker's pid can be checked with ``os.kill(pid, 0)``
HOST = _host_identity()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists here (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    try:  # a killed child that its parent has not reaped yet is still "there" for kill(0)
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


@dataclass
class Claim:
    """The outcome of :meth:`Store.claim_run`.

    ``claimed``: ``run`` is our new ``running`` attempt. ``done``: the newest attempt already
    satisfies the caller (``run`` is it). ``held``: another live worker is running it.
    """

    status: Literal["claimed", "done", "held"]
    run: StageRun | None


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def input_hash(value: Any) -> str:
    """Hash of a stage's inputs: pydantic models and plain JSON alike, key order ignored."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
                          .encode()).hexdigest()


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
            # the second one finds the schema at head instead of racing to create it
            if engine.dialect.name == "sqlite":
                conn.info["arcticqa_begin"] = "IMMEDIATE"
            elif engine.dialect.name == "postgresql":
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


class Store:
    """Open with :func:`open_store`. Methods are synchronous and short; call them from async
    code freely (each is one small transaction)."""

    def __init__(self, url: str, *, busy_timeout_s: float = 30.0, migrate: bool = True,
                 stale_after_s: float = 30.0) -> None:
        self.url = url
        self.engine = make_engine(url, busy_timeout_s=busy_timeout_s)
        self.stale_after_s = stale_after_s
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

    # -- papers -------------------------------------------------------------------------------
    def add_papers(self, papers: Iterable[tuple[PaperRecord, dict[str, Any]]]) -> int:
        """Insert papers not yet stored (``extra``: family_id, duplicate_of, source). Returns new count."""
        todo = list(papers)
        for attempt in range(3):
            new = 0
            try:
                with write_session(self.engine) as s:
                    existing = set(s.exec(select(Paper.paper_id)).all())
                    for record, extra in todo:
                        if record.paperId in existing:
                            continue
                        existing.add(record.paperId)
                        s.add(Paper(paper_id=record.paperId, doi=record.doi, title=record.title,
                                    year=record.year,
                                    record=record.model_dump(mode="json", exclude_none=True), **extra))
                        new += 1
                return new
            except IntegrityError:
                # PostgreSQL: another worker discovering the same source inserted some of these
                # papers after we read; read again (SQLite's BEGIN IMMEDIATE cannot get here)
                if attempt == 2:
                    raise
        return 0

    def add_raw_records(self, rows: Sequence[RawRecord]) -> None:
        with write_session(self.engine) as s:
            s.add_all(list(rows))

    def paper_ids(self, *, include_duplicates: bool = False) -> list[str]:
        with read_session(self.engine) as s:
            q = select(Paper.paper_id).order_by(Paper.paper_id)
            if not include_duplicates:
                q = q.where(col(Paper.duplicate_of).is_(None))
            return list(s.exec(q).all())

    def get_paper(self, paper_id: str) -> PaperRecord | None:
        with read_session(self.engine) as s:
            row = s.get(Paper, paper_id)
            return PaperRecord.model_validate(row.record) if row and row.record else None

    def paper_row(self, paper_id: str) -> Paper | None:
        with read_session(self.engine) as s:
            return s.get(Paper, paper_id)

    def get_document(self, paper_id: str) -> Document | None:
        """The newest successfully extracted document of a paper."""
        with read_session(self.engine) as s:
            row = s.exec(select(DocumentRow).where(DocumentRow.paper_id == paper_id)
                         .order_by(col(DocumentRow.id).desc())).first()
            return Document.model_validate(row.payload) if row and row.payload else None

    def family_items(self, family_id: str) -> list[str]:
        """Item ids already accepted for a paper family."""
        with read_session(self.engine) as s:
            return list(s.exec(select(ItemRow.item_id).where(ItemRow.family_id == family_id)
                               .order_by(col(ItemRow.item_id))).all())

    def items(self) -> list[ItemRow]:
        with read_session(self.engine) as s:
            return list(s.exec(select(ItemRow).order_by(col(ItemRow.item_id))).all())

    # -- discovery checkpoint -------------------------------------------------------------------
    def discovery_pages(self, source: str, query: str) -> list[DiscoveryPage]:
        with read_session(self.engine) as s:
            return list(s.exec(select(DiscoveryPage).where(DiscoveryPage.source == source,
                                                           DiscoveryPage.query == query)
                               .order_by(col(DiscoveryPage.page_no))).all())

    def record_discovery_page(self, page: DiscoveryPage, raw: Sequence[RawRecord]) -> None:
        """Record a page with its raw records; a page another worker already recorded is skipped."""
        try:
            with write_session(self.engine) as s:
                s.add(page)
                s.add_all(list(raw))
        except IntegrityError:
            # (source, query, page_no) is unique: a concurrent build fetched the same page first,
            # and its rows (same page, same records) are already there
            pass

    # -- stage runs ---------------------------------------------------------------------------
    def latest_run(self, paper_id: str, stage: str, subject: str = "") -> StageRun | None:
        with self.engine.connect() as conn:
            return _newest_run(conn, paper_id, stage, subject)

    def start_run(self, paper_id: str, stage: str, subject: str, *, input_hash: str,
                  run_id: str | None = None, prompt_version: str | None = None) -> StageRun:
        with write_session(self.engine) as s:
            last = s.exec(select(func.max(StageRun.attempt)).where(
                StageRun.paper_id == paper_id, StageRun.stage == stage, StageRun.subject == subject)).one()
            row = StageRun(paper_id=paper_id, stage=stage, subject=subject, attempt=(last or 0) + 1,
                           status="running", input_hash=input_hash, code_version=__version__,
                           prompt_version=prompt_version, run_id=run_id, started_at=utcnow())
            s.add(row)
            s.flush()
            s.refresh(row)
            return row

    # -- workers and claims (several build processes on one store) -------------------------------
    def register_worker(self) -> str:
        """Record this process as a worker; returns its id (put on every attempt it claims)."""
        worker_id = uuid.uuid4().hex
        with write_session(self.engine) as s:
            s.add(Worker(id=worker_id, host=HOST, pid=os.getpid()))
        return worker_id

    def heartbeat(self, worker_id: str) -> None:
        with write_session(self.engine) as s:
            s.execute(update(Worker).where(col(Worker.id) == worker_id).values(heartbeat_at=utcnow()))

    def stop_worker(self, worker_id: str) -> None:
        """A clean exit: whatever this worker still has ``running`` is free to take at once."""
        with write_session(self.engine) as s:
            s.execute(update(Worker).where(col(Worker.id) == worker_id).values(stopped_at=utcnow()))

    def workers(self) -> list[Worker]:
        with read_session(self.engine) as s:
            return list(s.exec(select(Worker).order_by(col(Worker.started_at))).all())

    def worker_alive(self, worker: Worker | None) -> bool:
        if worker is None or worker.stopped_at is not None:
            return False
        if worker.host == HOST and not pid_alive(worker.pid):
            return False  # killed here: no need to wait for the heartbeat to go stale
        return utcnow() - _aware(worker.heartbeat_at) < timedelta(seconds=self.stale_after_s)

    def run_is_live(self, run: StageRun, conn: Connection | None = None) -> bool:
        """Whether a ``running`` attempt is still being worked on by a live worker."""
        if run.status != "running" or run.worker_id is None:
            return False  # attempts from before workers existed, or crashed single-process builds
        if conn is None:
            with self.engine.connect() as conn2:
                return self.run_is_live(run, conn2)
        row = conn.execute(select(_WORKER).where(_WORKER.c.id == run.worker_id)).first()
        return self.worker_alive(Worker(**row._mapping) if row is not None else None)

    def claim_run(self, paper_id: str, stage: str, subject: str, *, input_hash: str, worker_id: str | None,
                  run_id: str | None = None, done: Callable[[StageRun], bool]) -> Claim:
        """Take (paper, stage, subject) for this worker unless it is done or held by a live worker.

        One write transaction: read the newest attempt, decide, insert attempt+1 as ``running``.
        SQLite's ``BEGIN IMMEDIATE`` serialises the whole read-decide-insert. On PostgreSQL
        (READ COMMITTED) two workers may both read attempt n; the unique constraint on
        (paper_id, stage, subject, attempt) lets exactly one insert n+1 and the other gets an
        ``IntegrityError``, which means "claimed by another worker".
        """
        try:
            with write_connection(self.engine) as conn:
                last = _newest_run(conn, paper_id, stage, subject)
                if last is not None and done(last):
                    return Claim("done", last)
                if last is not None and last.status == "running" and self.run_is_live(last, conn):
                    return Claim("held", last)
                values: dict[str, Any] = dict(paper_id=paper_id, stage=stage, subject=subject,
                              attempt=(last.attempt if last else 0) + 1, status="running",
                              input_hash=input_hash, code_version=__version__, run_id=run_id,
                              worker_id=worker_id, started_at=utcnow())
                new_id = _new_id(conn.execute(_INSERT_RUN, values))
                return Claim("claimed", StageRun(id=new_id, **values))
        except IntegrityError:
            return Claim("held", self.latest_run(paper_id, stage, subject))

    def finish_run(self, run: StageRun, *, status: str, output: BaseModel | dict[str, Any] | None = None,
                   rejections: Sequence[Rejection] = (), evidence: Sequence[SQLModel] = (),
                   document: Document | None = None, error: BaseException | None = None,
                   prompt_version: str | None = None) -> StageRun:
        """Close an attempt: status, output, rejections and evidence rows in one transaction."""
        if run.id is None:
            raise StoreError("finish_run needs a stored attempt (one returned by claim_run/start_run)")
        changes = _outcome(status, output, error, prompt_version)
        with write_connection(self.engine) as conn:
            if conn.execute(_CLOSE_RUN, {"b_id": run.id, **changes}).rowcount != 1:
                raise StoreError(f"stage run {run.id} vanished")
            _write_evidence(conn, run.id, run.paper_id, run.subject, rejections, evidence, document)
        return StageRun(**{**{c.name: getattr(run, c.name) for c in _RUN.columns}, **changes})

    def record_run(self, paper_id: str, stage: str, subject: str, *, input_hash: str, status: str,
                   output: BaseModel | dict[str, Any] | None = None, rejections: Sequence[Rejection] = (),
                   evidence: Sequence[SQLModel] = (), error: BaseException | None = None,
                   prompt_version: str | None = None, run_id: str | None = None,
                   worker_id: str | None = None, started_at: datetime | None = None) -> StageRun:
        """Write a finished attempt in one transaction, without a ``running`` row first.

        For steps that cannot be contended: the construction steps of a paper whose construct
        stage this worker has claimed for the first time (the paper-level claim already keeps
        other workers out). Half the writes of claim + finish; a crash mid-step leaves no row for
        that step, and resume runs it again (its answered model calls come from the cache).
        """
        changes = _outcome(status, output, error, prompt_version)
        with write_connection(self.engine) as conn:
            last = conn.execute(_LAST_ATTEMPT, {"paper_id": paper_id, "stage": stage, "subject": subject}).scalar()
            values: dict[str, Any] = dict(paper_id=paper_id, stage=stage, subject=subject,
                                          attempt=(last or 0) + 1, input_hash=input_hash,
                                          code_version=__version__, run_id=run_id, worker_id=worker_id,
                                          started_at=started_at or changes["finished_at"], **changes)
            new_id = _new_id(conn.execute(_INSERT_RUN, values))
            _write_evidence(conn, new_id, paper_id, subject, rejections, evidence, None)
        return StageRun(id=new_id, **values)

    def runs(self, *, stage: str | None = None, status: str | None = None) -> list[StageRun]:
        """The newest attempt of every (paper, stage, subject)."""
        with read_session(self.engine) as s:
            newest = (select(StageRun.paper_id, StageRun.stage, StageRun.subject,
                             func.max(StageRun.attempt).label("attempt"))
                      .group_by(StageRun.paper_id, StageRun.stage, StageRun.subject).subquery())
            q = select(StageRun).join(newest, and_(col(StageRun.paper_id) == newest.c.paper_id,
                                                   col(StageRun.stage) == newest.c.stage,
                                                   col(StageRun.subject) == newest.c.subject,
                                                   col(StageRun.attempt) == newest.c.attempt))
            if stage:
                q = q.where(StageRun.stage == stage)
            if status:
                q = q.where(StageRun.status == status)
            return list(s.exec(q.order_by(StageRun.paper_id, StageRun.stage, StageRun.subject)).all())

    def status_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for run in self.runs():
            counts.setdefault(run.stage, {}).setdefault(run.status, 0)
            counts[run.stage][run.status] += 1
        return counts

    def rejections(self, *, stage: str | None = None, rule: str | None = None,
                   paper: str | None = None) -> list[RejectionRow]:
        with read_session(self.engine) as s:
            q = select(RejectionRow)
            if stage:
                q = q.where(RejectionRow.stage == stage)
            if rule:
                q = q.where(RejectionRow.rule_id == rule)
            if paper:
                q = q.where(RejectionRow.paper_id == paper)
            return list(s.exec(q.order_by(col(RejectionRow.id))).all())

    # -- llm calls (CallRecorder) ---------------------------------------------------------------
    run_id: str | None = None

    def cached_output(self, request_hash: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            parsed = conn.execute(_CACHED_OUTPUT, {"request_hash": request_hash}).scalar()
            return parsed if isinstance(parsed, dict) else None

    def record_calls(self, records: list[CallRecord]) -> None:
        if not records:
            return
        created = utcnow()
        with write_connection(self.engine) as conn:
            conn.execute(_INSERT_CALL, [
                {**{k: getattr(r, k) for k in _CALL_FIELDS}, "run_id": self.run_id, "created_at": created}
                for r in records])

    # -- Batch API jobs (BatchLedger, arcticqa.llm.batch) ----------------------------------------
    def batch_answer(self, body_sha256: str) -> dict[str, Any] | None:
        """The stored 200 answer to a request with exactly this body, from any ingested job."""
        with self.engine.connect() as conn:
            response = conn.execute(select(_BATCH_LINE.c.response).where(
                _BATCH_LINE.c.body_sha256 == body_sha256, _BATCH_LINE.c.status_code == 200,
                _BATCH_LINE.c.response.is_not(None)).limit(1)).scalar()
            return response if isinstance(response, dict) else None

    def open_batches(self, endpoint: str) -> list[BatchJob]:
        """Jobs submitted to ``endpoint`` whose results are not stored yet (a build stopped first)."""
        with self.engine.connect() as conn:
            jobs = conn.execute(select(_BATCH).where(_BATCH.c.endpoint == endpoint,
                                                     _BATCH.c.status != "ingested")).all()
            out = []
            for job in jobs:
                lines = conn.execute(select(_BATCH_LINE.c.custom_id, _BATCH_LINE.c.body_sha256).where(
                    _BATCH_LINE.c.batch_id == job.id)).all()
                out.append(BatchJob(id=job.id, endpoint=job.endpoint, model=job.model, status=job.status,
                                    input_file_id=job.input_file_id, run_id=job.run_id,
                                    lines={c: h for c, h in lines}))
            return out

    def record_batch(self, job: BatchJob) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(insert(_BATCH).values(id=job.id, endpoint=job.endpoint, model=job.model, status=job.status,
                                               input_file_id=job.input_file_id, request_count=len(job.lines),
                                               answered=0, run_id=job.run_id, created_at=utcnow()))
            conn.execute(insert(_BATCH_LINE), [{"batch_id": job.id, "custom_id": c, "body_sha256": h}
                                               for c, h in job.lines.items()])

    def update_batch(self, batch_id: str, status: str) -> None:
        with write_connection(self.engine) as conn:
            conn.execute(update(_BATCH).where(_BATCH.c.id == batch_id, _BATCH.c.status != "ingested")
                         .values(status=status))

    def ingest_batch(self, batch_id: str, status: str, results: list[LineResult], *,
                     output_file_id: str | None, error_file_id: str | None, error: str | None) -> None:
        """A job's results, in one transaction; the job is ``ingested`` (its provider status is
        kept in ``error`` when it did not complete)."""
        with write_connection(self.engine) as conn:
            if results:  # one statement for every line (a job may have 50,000)
                conn.execute(_ANSWER_LINE, [{"b_batch": batch_id, "b_custom": r.custom_id, "status_code": r.status_code,
                                             "response": r.response, "error": r.error} for r in results])
            note = None if status == "completed" else f"{status}: {error or 'see the lines'}"
            conn.execute(update(_BATCH).where(_BATCH.c.id == batch_id).values(
                status="ingested", output_file_id=output_file_id, error_file_id=error_file_id,
                answered=sum(1 for r in results if r.status_code == 200), error=note, finished_at=utcnow()))

    def batches(self) -> list[LLMBatch]:
        with read_session(self.engine) as s:
            return list(s.exec(select(LLMBatch).order_by(col(LLMBatch.created_at))).all())

    # -- release, audit and funnel views (arcticqa.store.views) ---------------------------------
    def release_items(self) -> list[Any]:
        from arcticqa.store.views import release_items

        return release_items(self)

    def funnel_counts(self) -> Any:
        from arcticqa.store.views import funnel_counts

        return funnel_counts(self)

    def audit_data(self, stage: str | None = None, rule: str | None = None, paper: str | None = None) -> Any:
        from arcticqa.store.views import audit_data

        return audit_data(self, stage=stage, rule=rule, paper=paper)

    def release_prompt(self) -> dict[str, Any]:
        """The evaluation prompt a release ships (``prompts/arcticabstain/v1.json``)."""
        from arcticqa.llm.prompts import PROMPTS_DIR

        return dict(json.loads((PROMPTS_DIR / "arcticabstain" / "v1.json").read_text(encoding="utf-8")))

    def attach_pdf(self, ingested: Sequence[Any]) -> list[str]:
        """Record user-supplied PDFs (``arcticqa ingest-pdfs``) as the papers' fetched full text.

        Each becomes a succeeded ``fetch_fulltext`` attempt, so the build extracts it next.
        Papers are matched by paperId, else DOI; an unmatched row is an error naming it.
        """
        from arcticqa.store.tables import FetchRow

        with read_session(self.engine) as s:
            by_doi = {p.doi: p.paper_id for p in s.exec(select(Paper)).all() if p.doi}
            known = set(s.exec(select(Paper.paper_id)).all())
        targets: list[tuple[str, Any]] = []
        for row in ingested:
            pid = row.paper_id if row.paper_id in known else by_doi.get((row.doi or "").lower())
            if pid is None:
                raise InputError(f"no paper in the store has paperId {row.paper_id!r} or DOI {row.doi!r}",
                                 path=row.file, field="doi/paper_id")
            targets.append((pid, row))
        for pid, row in targets:
            payload = {"status": "ok", "url": Path(row.source).as_uri(), "final_url": row.path,
                       "sha256": row.sha256, "bytes": row.bytes, "license": None, "path": row.path,
                       "message": "attached with arcticqa ingest-pdfs"}
            run = self.start_run(pid, "fetch_fulltext", "", input_hash=input_hash(payload))
            self.finish_run(run, status="succeeded", output=payload, evidence=[FetchRow(
                stage_run_id=0, paper_id=pid, status="ok", url=payload["url"], final_url=row.path,
                sha256=row.sha256, bytes=row.bytes, payload=payload)])
        return [pid for pid, _ in targets]

    def policy_hashes(self) -> dict[str, str]:
        """The policy file hashes recorded on screening decisions (name → sha256)."""
        hashes: dict[str, str] = {}
        for run in self.runs():
            out = run.output or {}
            if run.stage == "prefilter" and out.get("policy_sha256"):
                hashes["metadata"] = out["policy_sha256"]
            if run.stage == "eligibility":
                for key in ("policy_sha256", "regions_sha256", "gazetteer_sha256"):
                    if out.get(key):
                        hashes[f"eligibility.{key.removesuffix('_sha256')}"] = out[key]
        return dict(sorted(hashes.items()))

    def llm_calls(self) -> list[LLMCall]:
        with read_session(self.engine) as s:
            return list(s.exec(select(LLMCall).order_by(col(LLMCall.id))).all())


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
