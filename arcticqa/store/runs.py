"""Stage attempts, claims and workers: the part of the store the runner writes on every step.

Each (paper, stage, subject) attempt is a ``stage_run`` row. The runner opens one, then closes it
with the stage's typed result, its rejections and evidence rows in a single transaction, so a
crash leaves either the whole attempt or a ``running`` row that resume treats as not done.

Several build processes may share one store (``docs/scale-out.md``). Each registers a
:class:`~arcticqa.store.tables.Worker` and heartbeats it; work is taken with :meth:`RunLog.claim_run`,
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast

from pydantic import BaseModel
from sqlalchemy import and_, bindparam, func, insert, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import SQLModel, col, select

from arcticqa import __version__
from arcticqa.errors import StoreError
from arcticqa.evidence import Document
from arcticqa.rules import Rejection
from arcticqa.store.db import (
    read_session,
    reconnecting,
    retrying_after_disconnect,
    write_connection,
    write_session,
)
from arcticqa.store.ledger import ModelCallFields, insert_calls
from arcticqa.store.tables import DocumentRow, RejectionRow, SpanRow, StageRun, Worker, utcnow

__all__ = ["RunLog", "Claim", "EvidenceValues", "AttemptOutcome", "FinishedStep", "ClosedAttempt", "input_hash", "HOST", "pid_alive",
           "INTERRUPTED"]

# Core tables for the per-step hot path (see arcticqa.store.db.write_connection)
_RUN = StageRun.__table__  # type: ignore[attr-defined]
_WORKER = Worker.__table__  # type: ignore[attr-defined]
_REJECTION = RejectionRow.__table__  # type: ignore[attr-defined]
_DOCUMENT = DocumentRow.__table__  # type: ignore[attr-defined]
_SPAN = SpanRow.__table__  # type: ignore[attr-defined]


# Hot-path statements are built once with bound parameters: building a SQLAlchemy expression
# costs more CPU than executing its cached compiled form.
_WHERE_STEP = and_(_RUN.c.paper_id == bindparam("paper_id"), _RUN.c.stage == bindparam("stage"),
                   _RUN.c.subject == bindparam("subject"))
_NEWEST_RUN = select(_RUN).where(_WHERE_STEP).order_by(_RUN.c.attempt.desc()).limit(1)
_NEWEST_OUTPUT = select(_RUN.c.output).where(_WHERE_STEP).order_by(_RUN.c.attempt.desc()).limit(1)
_INSERT_RUN = insert(_RUN)
#: several rows in one statement, their ids in the order of the rows given
_INSERT_RUNS = insert(_RUN).returning(_RUN.c.id, sort_by_parameter_order=True)
_OLDER = _RUN.alias("older")
#: the newest attempt of each of several stages of one paper, in one statement
_NEWEST_RUNS = select(_RUN).where(
    _RUN.c.paper_id == bindparam("paper_id"), _RUN.c.subject == bindparam("subject"),
    _RUN.c.stage.in_(bindparam("stages", expanding=True)),
    _RUN.c.attempt == select(func.max(_OLDER.c.attempt)).where(
        _OLDER.c.paper_id == _RUN.c.paper_id, _OLDER.c.stage == _RUN.c.stage,
        _OLDER.c.subject == _RUN.c.subject).scalar_subquery())
#: newest attempts by stage and status: an attempt is the newest when no later attempt of its
#: (paper, stage, subject) exists (the unique key makes that one row per step)
_LATER = _RUN.alias("later")
_STATUS_COUNTS = select(_RUN.c.stage, _RUN.c.status, func.count()).where(
    ~select(_LATER.c.id).where(_LATER.c.paper_id == _RUN.c.paper_id, _LATER.c.stage == _RUN.c.stage,
                               _LATER.c.subject == _RUN.c.subject, _LATER.c.attempt > _RUN.c.attempt).exists()
).group_by(_RUN.c.stage, _RUN.c.status).order_by(_RUN.c.stage, _RUN.c.status)
#: the same for many papers (a screening stage's batch)
_NEWEST_RUNS_OF = select(_RUN).where(
    _RUN.c.paper_id.in_(bindparam("papers", expanding=True)), _RUN.c.subject == bindparam("subject"),
    _RUN.c.stage.in_(bindparam("stages", expanding=True)),
    _RUN.c.attempt == select(func.max(_OLDER.c.attempt)).where(
        _OLDER.c.paper_id == _RUN.c.paper_id, _OLDER.c.stage == _RUN.c.stage,
        _OLDER.c.subject == _RUN.c.subject).scalar_subquery())
_LAST_ATTEMPTS = select(_RUN.c.paper_id, _RUN.c.stage, _RUN.c.subject, func.max(_RUN.c.attempt).label("attempt")).where(
    _RUN.c.paper_id.in_(bindparam("papers", expanding=True))).group_by(_RUN.c.paper_id, _RUN.c.stage, _RUN.c.subject)
_CLOSE_RUN = update(_RUN).where(_RUN.c.id == bindparam("b_id"))  # SET takes the columns given
_INSERT_REJECTION = insert(_REJECTION)


def _newest_run(conn: Connection, paper_id: str, stage: str, subject: str) -> StageRun | None:
    row = conn.execute(_NEWEST_RUN, {"paper_id": paper_id, "stage": stage, "subject": subject}).first()
    return StageRun(**row._mapping) if row is not None else None


#: the status of an attempt its build stopped before it finished (:meth:`RunLog.interrupt_runs`)
INTERRUPTED = "interrupted"

#: the columns :func:`_outcome` sets only when there is something to say
_UNSET_OUTCOME: dict[str, Any] = {"prompt_version": None, "error_class": None, "error_message": None}


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


@dataclass(frozen=True)
class EvidenceValues:
    """An evidence row as its column values, for the per-step hot path.

    Building the SQLModel instance (SQLAlchemy's instrumentation of every attribute) cost more
    CPU than inserting the row (~6% of the construct stage's samples); columns not given get the
    model's defaults, as the instance would have.
    """

    table: type[SQLModel]
    values: dict[str, Any]

    def row(self) -> dict[str, Any]:
        fixed, made = _column_defaults(self.table)
        return {**fixed, **{name: make() for name, make in made}, **self.values}


@dataclass(frozen=True, kw_only=True)
class AttemptOutcome:
    """What an attempt ended with, as :meth:`RunLog.record_outcomes` writes it: status, output,
    rejections, evidence rows and the model calls it made."""

    status: str
    output: BaseModel | dict[str, Any] | None = None
    rejections: Sequence[Rejection] = ()
    evidence: Sequence[SQLModel | EvidenceValues] = ()
    error: BaseException | None = None
    prompt_version: str | None = None
    calls: Sequence[ModelCallFields] = ()


@dataclass(frozen=True)
class FinishedStep(AttemptOutcome):
    """An attempt written once, finished (the arguments of :meth:`RunLog.record_run`)."""

    paper_id: str
    stage: str
    subject: str
    input_hash: str
    run_id: str | None = None
    worker_id: str | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class ClosedAttempt(AttemptOutcome):
    """A claimed attempt's outcome (the arguments of :meth:`RunLog.finish_run`)."""

    run: StageRun
    document: Document | None = None

    @property
    def run_id(self) -> str | None:
        return self.run.run_id


@functools.lru_cache(maxsize=64)
def _column_defaults(model: type[SQLModel]) -> tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...]]:
    """``model``'s columns but the id, with what the model would fill in: fixed defaults, and the
    factories (``created_at``) called for each row. A required column (the owner's ids) is left
    empty for :func:`_write_evidence` to fill."""
    fixed: dict[str, Any] = {}
    made: list[tuple[str, Callable[[], Any]]] = []
    for column in model.__table__.columns:  # type: ignore[attr-defined]
        field = model.model_fields[column.name]
        if column.name == "id":
            continue
        if field.default_factory is not None:
            made.append((column.name, cast(Callable[[], Any], field.default_factory)))
        else:
            fixed[column.name] = None if field.is_required() else field.default
    return fixed, tuple(made)


def _write_evidence(conn: Connection, run_id: int, paper_id: str, subject: str, rejections: Sequence[Rejection],
                    evidence: Sequence[SQLModel | EvidenceValues], document: Document | None) -> None:
    """An attempt's rejections, evidence rows and extracted document, owned by ``run_id``."""
    rejection_rows: list[dict[str, Any]] = []
    evidence_rows: dict[Any, list[dict[str, Any]]] = {}
    _evidence_rows(run_id, paper_id, subject, rejections, evidence, rejection_rows, evidence_rows)
    _insert_evidence(conn, rejection_rows, evidence_rows)
    if document is not None:
        owner = {"stage_run_id": run_id, "paper_id": paper_id, "subject": subject}
        doc_id = _new_id(conn.execute(insert(_DOCUMENT).values(
            **owner, sha256=document.sha256, status=document.status, pages=document.pages,
            text=document.text, payload=document.model_dump(mode="json"), created_at=utcnow())))
        if document.spans:
            conn.execute(insert(_SPAN), [
                {"document_id": doc_id, "span_id": sp.id, "section": sp.section, "page": sp.page,
                 "start": sp.start, "end": sp.end, "sha256": sp.sha256, "text": sp.text}
                for sp in document.spans])


def _evidence_rows(run_id: int, paper_id: str, subject: str, rejections: Sequence[Rejection],
                   evidence: Sequence[SQLModel | EvidenceValues], rejection_rows: list[dict[str, Any]],
                   evidence_rows: dict[Any, list[dict[str, Any]]]) -> None:
    """Add an attempt's rejection and evidence rows (by table) to the lists given."""
    owner = {"stage_run_id": run_id, "paper_id": paper_id, "subject": subject}
    rejection_rows.extend(
        {**owner, "stage": r.stage, "rule_id": r.rule_id, "message": r.message,
         "evidence": json.loads(json.dumps(r.evidence, default=str)), "created_at": utcnow()}
        for r in rejections)
    for ev in evidence:
        if isinstance(ev, EvidenceValues):
            table, row = ev.table.__table__, ev.row()  # type: ignore[attr-defined]
        else:
            table = type(ev).__table__  # type: ignore[attr-defined]
            row = {c.name: getattr(ev, c.name) for c in table.columns if c.name != "id"}
        for key, value in owner.items():
            if key in row and row[key] in (None, "", 0):
                row[key] = value
        evidence_rows.setdefault(table, []).append(row)


def _insert_evidence(conn: Connection, rejection_rows: list[dict[str, Any]],
                     evidence_rows: dict[Any, list[dict[str, Any]]]) -> None:
    if rejection_rows:
        conn.execute(_INSERT_REJECTION, rejection_rows)
    for table, rows in evidence_rows.items():
        conn.execute(_insert(table), rows)


@functools.lru_cache(maxsize=64)
def _insert(table: Any) -> Any:
    return insert(table)


def _new_id(result: Any) -> int:
    key = result.inserted_primary_key
    if key is None:
        raise StoreError("the database did not return the new row's id")
    return int(key[0])


def _insert_steps(conn: Connection, steps: Sequence[FinishedStep]) -> list[int]:
    """``stage_run`` rows for finished attempts, with their evidence and calls; their ids."""
    # one statement of each kind for the whole group: per statement, SQLAlchemy's own
    # CPU is several times SQLite's
    attempts = {(row.paper_id, row.stage, row.subject): row.attempt for row in conn.execute(
        _LAST_ATTEMPTS, {"papers": sorted({step.paper_id for step in steps})})}
    runs: list[dict[str, Any]] = []
    for step in steps:
        key = (step.paper_id, step.stage, step.subject)
        attempts[key] = attempts.get(key, 0) + 1
        changes = _outcome(step.status, step.output, step.error, step.prompt_version)
        # one statement for many rows needs the same columns in each
        runs.append({**_UNSET_OUTCOME, **changes, **dict(
            paper_id=step.paper_id, stage=step.stage, subject=step.subject, attempt=attempts[key],
            input_hash=step.input_hash, code_version=__version__, run_id=step.run_id,
            worker_id=step.worker_id, started_at=step.started_at or changes["finished_at"])})
    ids = [int(row_id) for row_id in conn.execute(_INSERT_RUNS, runs).scalars()]
    if len(ids) != len(steps):
        raise StoreError("the database did not return the new rows' ids")
    rejection_rows: list[dict[str, Any]] = []
    evidence_rows: dict[Any, list[dict[str, Any]]] = {}
    calls: dict[str | None, list[ModelCallFields]] = {}
    for step, new_id in zip(steps, ids, strict=True):
        _evidence_rows(new_id, step.paper_id, step.subject, step.rejections, step.evidence,
                       rejection_rows, evidence_rows)
        calls.setdefault(step.run_id, []).extend(step.calls)
    _insert_evidence(conn, rejection_rows, evidence_rows)
    for run_id, records in calls.items():
        insert_calls(conn, records, run_id)
    return ids


def _close(conn: Connection, close: ClosedAttempt) -> dict[str, Any]:
    """Close a claimed attempt with its outcome, evidence and calls; the columns it changed."""
    run = close.run
    if run.id is None:
        raise StoreError("finish_run needs a stored attempt (one returned by claim_run/start_run)")
    changes = _outcome(close.status, close.output, close.error, close.prompt_version)
    if conn.execute(_CLOSE_RUN, {"b_id": run.id, **changes}).rowcount != 1:
        raise StoreError(f"stage run {run.id} vanished")
    _write_evidence(conn, run.id, run.paper_id, run.subject, close.rejections, close.evidence, close.document)
    insert_calls(conn, close.calls, close.run_id)
    return changes


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


class RunLog:
    """Stage attempts, rejections, workers and claims; a part of :class:`arcticqa.store.Store`."""

    engine: Engine
    #: a worker whose heartbeat is older than this is gone, and its ``running`` attempts free
    stale_after_s: float

    # -- stage runs ---------------------------------------------------------------------------
    @reconnecting
    def latest_run(self, paper_id: str, stage: str, subject: str = "") -> StageRun | None:
        with self.engine.connect() as conn:
            return _newest_run(conn, paper_id, stage, subject)

    @reconnecting
    def latest_output(self, paper_id: str, stage: str, subject: str = "") -> dict[str, Any] | None:
        """The output of the newest attempt (None if there is none, or it has none): what
        ``latest_run(...).output`` is, without building the attempt's row object, which costs
        more than the query."""
        with self.engine.connect() as conn:
            output = conn.execute(_NEWEST_OUTPUT, {"paper_id": paper_id, "stage": stage, "subject": subject}).scalar()
            return cast(dict[str, Any] | None, output)

    @reconnecting
    def latest_runs(self, paper_id: str, stages: Sequence[str], subject: str = "") -> dict[str, StageRun]:
        """The newest attempt of each of ``stages`` that has one (one query for all)."""
        with self.engine.connect() as conn:
            rows = conn.execute(_NEWEST_RUNS, {"paper_id": paper_id, "subject": subject, "stages": list(stages)})
            return {row.stage: StageRun(**row._mapping) for row in rows}

    @reconnecting
    def newest_runs(self, paper_ids: Sequence[str], stages: Sequence[str],
                    subject: str = "") -> dict[str, dict[str, StageRun]]:
        """:meth:`latest_runs` for many papers in one query: paper → stage → newest attempt."""
        newest: dict[str, dict[str, StageRun]] = {}
        if not paper_ids:
            return newest
        with self.engine.connect() as conn:
            rows = conn.execute(_NEWEST_RUNS_OF, {"papers": list(paper_ids), "subject": subject,
                                                  "stages": list(stages)})
            for row in rows:
                newest.setdefault(row.paper_id, {})[row.stage] = StageRun(**row._mapping)
        return newest

    @reconnecting
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
    @reconnecting
    def register_worker(self) -> str:
        """Record this process as a worker; returns its id (put on every attempt it claims)."""
        worker_id = uuid.uuid4().hex
        with write_session(self.engine) as s:
            s.add(Worker(id=worker_id, host=HOST, pid=os.getpid()))
        return worker_id

    @reconnecting
    def heartbeat(self, worker_id: str) -> None:
        with write_session(self.engine) as s:
            s.execute(update(Worker).where(col(Worker.id) == worker_id).values(heartbeat_at=utcnow()))

    @reconnecting
    def stop_worker(self, worker_id: str) -> None:
        """A clean exit: whatever this worker still has ``running`` is free to take at once."""
        with write_session(self.engine) as s:
            s.execute(update(Worker).where(col(Worker.id) == worker_id).values(stopped_at=utcnow()))

    @reconnecting
    def interrupt_runs(self, worker_id: str, reason: str) -> int:
        """Close the attempts this worker still has ``running`` as ``interrupted`` (the build was
        stopped: Ctrl-C, SIGTERM, an error that ended it), with ``reason`` as their error; how many.
        Like ``failed`` they are not done: the next build or ``resume`` runs them again."""
        with write_session(self.engine) as s:
            result: Any = s.execute(update(StageRun).where(
                col(StageRun.worker_id) == worker_id, col(StageRun.status) == "running").values(
                status=INTERRUPTED, error_class="Interrupted", error_message=reason[:4000], finished_at=utcnow()))
            return int(result.rowcount or 0)

    @reconnecting
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

    @reconnecting
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
                if last is not None and last.status == "running" and worker_id is not None \
                        and last.worker_id == worker_id and last.run_id == run_id and retrying_after_disconnect():
                    # our first try committed this claim, and the connection went before we heard so
                    return Claim("claimed", last)
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

    @reconnecting
    def finish_run(self, run: StageRun, *, status: str, output: BaseModel | dict[str, Any] | None = None,
                   rejections: Sequence[Rejection] = (), evidence: Sequence[SQLModel | EvidenceValues] = (),
                   document: Document | None = None, error: BaseException | None = None,
                   prompt_version: str | None = None, calls: Sequence[ModelCallFields] = ()) -> StageRun:
        """Close an attempt: status, output, rejections, evidence rows and the model calls it made
        (``calls``, as ``llm_call`` rows of the attempt's build run) in one transaction."""
        close = ClosedAttempt(run, status=status, output=output, rejections=rejections, evidence=evidence,
                              document=document, error=error, prompt_version=prompt_version, calls=calls)
        with write_connection(self.engine) as conn:
            changes = _close(conn, close)
        return StageRun(**{**{c.name: getattr(run, c.name) for c in _RUN.columns}, **changes})

    def record_run(self, paper_id: str, stage: str, subject: str, *, input_hash: str, status: str,
                   output: BaseModel | dict[str, Any] | None = None, rejections: Sequence[Rejection] = (),
                   evidence: Sequence[SQLModel | EvidenceValues] = (), error: BaseException | None = None,
                   prompt_version: str | None = None, run_id: str | None = None,
                   worker_id: str | None = None, started_at: datetime | None = None,
                   calls: Sequence[ModelCallFields] = ()) -> int:
        """Write a finished attempt in one transaction, without a ``running`` row first; returns its id.

        For steps that cannot be contended: the construction steps of a paper whose construct
        stage this worker has claimed for the first time (the paper-level claim already keeps
        other workers out). Half the writes of claim + finish; a crash mid-step leaves no row for
        that step, and resume runs it again. ``calls``, the step's model calls, are written in
        the same transaction (one commit a step rather than one per call and one for the step);
        the row object is not built (~60 us each, and no caller reads it).
        """
        return self.record_outcomes([FinishedStep(
            paper_id, stage, subject, input_hash=input_hash, status=status, output=output, rejections=rejections,
            evidence=evidence, error=error, prompt_version=prompt_version, run_id=run_id, worker_id=worker_id,
            started_at=started_at, calls=calls)])[0]

    @reconnecting
    def record_outcomes(self, outcomes: Sequence[FinishedStep | ClosedAttempt]) -> list[int]:
        """Finished attempts (:meth:`record_run`) and closed ones (:meth:`finish_run`) in one
        transaction, all or none; the ids of their ``stage_run`` rows, in order.

        A transaction's fixed cost (the write lock, the commit, the connection) was ~40% of a
        construction step's write, measured; the build's group commit
        (``arcticqa.pipeline.outcomes``) shares it between the attempts of concurrent papers.
        """
        if not outcomes:
            return []
        with write_connection(self.engine) as conn:
            steps = [o for o in outcomes if isinstance(o, FinishedStep)]
            step_ids = iter(_insert_steps(conn, steps) if steps else [])
            ids: list[int] = []
            for outcome in outcomes:
                if isinstance(outcome, FinishedStep):
                    ids.append(next(step_ids))
                else:
                    _close(conn, outcome)
                    ids.append(cast(int, outcome.run.id))
        return ids

    @reconnecting
    def record_screened(self, steps: Sequence[FinishedStep], *, done: Callable[[StageRun], bool]) -> list[Claim]:
        """Finished attempts of a stage that decides a batch at once (the prefilter), in one
        transaction: each is written unless the newest attempt of its (paper, stage, subject)
        is ``done`` or ``running`` in a live worker. Per step, in order: ``claimed`` (written;
        ``run`` is None), ``done`` or ``held`` with the newest attempt.

        What :meth:`claim_run` and :meth:`record_run` do for one attempt, for a batch with one
        read and one write instead of two writes and a read per paper. On PostgreSQL two workers
        writing the same attempt number get an ``IntegrityError`` for the whole batch, which the
        caller takes as "decide these one at a time".
        """
        if not steps:
            return []
        stages = sorted({step.stage for step in steps})
        subjects = {step.subject for step in steps}
        if len(subjects) != 1:
            raise ValueError("record_screened takes the steps of one subject")
        claims: list[Claim] = []
        with write_connection(self.engine) as conn:
            newest: dict[tuple[str, str], StageRun] = {}
            for row in conn.execute(_NEWEST_RUNS_OF, {"papers": sorted({step.paper_id for step in steps}),
                                                      "subject": subjects.pop(), "stages": stages}):
                newest[(row.paper_id, row.stage)] = StageRun(**row._mapping)
            todo: list[FinishedStep] = []
            for step in steps:
                last = newest.get((step.paper_id, step.stage))
                if last is not None and done(last):
                    claims.append(Claim("done", last))
                elif last is not None and last.status == "running" and self.run_is_live(last, conn):
                    claims.append(Claim("held", last))
                else:
                    claims.append(Claim("claimed", None))
                    todo.append(step)
            if todo:
                _insert_steps(conn, todo)
        return claims

    @reconnecting
    def runs(self, *, stage: str | None = None, status: str | None = None,
             paper_ids: Sequence[str] | None = None) -> list[StageRun]:
        """The newest attempt of every (paper, stage, subject); ``paper_ids``: of those papers only."""
        with read_session(self.engine) as s:
            newest = select(StageRun.paper_id, StageRun.stage, StageRun.subject,
                            func.max(StageRun.attempt).label("attempt"))
            # the scope goes into the grouping too, so a batch's look-up reads its own papers' rows
            if stage:
                newest = newest.where(StageRun.stage == stage)
            if paper_ids is not None:
                newest = newest.where(col(StageRun.paper_id).in_(list(paper_ids)))
            latest = newest.group_by(StageRun.paper_id, StageRun.stage, StageRun.subject).subquery()
            q = select(StageRun).join(latest, and_(col(StageRun.paper_id) == latest.c.paper_id,
                                                   col(StageRun.stage) == latest.c.stage,
                                                   col(StageRun.subject) == latest.c.subject,
                                                   col(StageRun.attempt) == latest.c.attempt))
            if status:
                q = q.where(StageRun.status == status)
            return list(s.exec(q.order_by(StageRun.paper_id, StageRun.stage, StageRun.subject)).all())

    @reconnecting
    def status_counts(self) -> dict[str, dict[str, int]]:
        """How many (paper, stage, subject) have their newest attempt in each status, by stage:
        counted by the database (one GROUP BY over the newest attempts), no row loaded, so
        ``arcticqa status`` costs the same memory however large the build."""
        with read_session(self.engine) as s:
            counts: dict[str, dict[str, int]] = {}
            for stage, status, n in s.exec(_STATUS_COUNTS):
                counts.setdefault(stage, {})[status] = int(n)
            return counts

    @reconnecting
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

