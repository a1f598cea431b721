"""Faults at scale: a rehearsal build on PostgreSQL by two build processes, with the database
server restarted and one build process killed mid-build, against the same build undisturbed.

On a throwaway PostgreSQL server (:class:`PostgresServer`) and the rehearsal's stand-ins
(``bench.bench_scale``'s corpus at ``--scale F``: S2 records, generated PDFs, the model endpoint
with its latency and injected 5xx/timeouts), it runs:

* **A**, undisturbed: two ``arcticqa build --orchestrator local`` processes on a fresh
  database, then ``arcticqa export``;
* **B**, disturbed: the same two processes on another fresh database; once the store holds
  ``--restart-at`` of A's model-call rows, the server is restarted (``pg_ctl restart -m fast``:
  every connection is cut, the server is gone for a moment); once it holds ``--kill-at`` of
  them, the second build process is SIGKILLed. The survivor goes on; then
  ``arcticqa resume`` finishes whatever is left, and ``arcticqa export`` writes release B.
  With ``--outage S`` the server is stopped for S seconds instead of restarted: longer than the
  store waits for it (``store.busy_timeout_s``, 30 s), the build processes stop with one line.

Every role's model config has ``recover_in_flight`` on (``--no-recover``: off): a request the
killed process sent and never recorded is recovered from the stand-in's stored completions by
whoever asks it next.

It prints: whether release B equals release A (byte for byte, file by file; where a file
differs, which fields do), the ``llm_call`` rows holding an answer against the requests the
model stand-in answered in each run (distinct, and how many it answered more than once: a call
sent twice), what each process printed about the fault and its exit code, and the wall times.
The stand-in is one server for both runs (its address is part of every request, so the two
runs ask the same requests); it counts each run's answers apart.

    .venv/bin/python -m bench.bench_faults [--scale 0.01] [--restart-at 0.3] [--kill-at 0.6] [--outage S]
        [--latency-median 0.4] [--error-rate 0.02] [--timeout-rate 0.01] [--no-recover] [--keep DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench.bench_scale import PAGE_SIZE, Funnel, make_corpus, serve_corpus

__all__ = ["PostgresServer", "postgres_unavailable", "FaultRun", "run_faults", "compare_releases", "main"]


# -- a PostgreSQL server the bench can restart -----------------------------------------------------------------

def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    return next((Path(b) for b in reversed(found) if (Path(b) / "initdb").exists()), None)


def postgres_unavailable() -> str | None:
    """Why no throwaway PostgreSQL server can be started here (None: one can)."""
    if _bindir() is None:
        return ("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                "(apt-get install -y postgresql)")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root, and runuser (util-linux) is missing to start PostgreSQL as postgres"
    try:
        import psycopg  # noqa: F401 - the store's PostgreSQL driver
    except ImportError:
        return 'psycopg is not installed (pip install "psycopg[binary]")'
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A throwaway cluster on a free loopback port that can be restarted while clients use it.

    As ``tests.pipeline_fixtures.postgres_server`` does, it runs as the ``postgres`` user when
    this process is root (PostgreSQL refuses root) and turns durability off (the data dies with
    it); a fast restart still writes a shutdown checkpoint, so committed work survives it.
    """

    def __init__(self) -> None:
        reason = postgres_unavailable()
        if reason is not None:
            raise RuntimeError(reason)
        self.bindir = _bindir()
        self.prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.base = Path(tempfile.mkdtemp(prefix="arcticqa-pgfault-"))
        if os.geteuid() == 0:
            shutil.chown(self.base, user="postgres", group="postgres")
        self.data, self.port = self.base / "data", _free_port()
        self.started = False

    def _run(self, *args: str) -> float:
        started = time.perf_counter()
        proc = subprocess.run([*self.prefix, *args], capture_output=True, text=True, timeout=120, cwd=self.base)
        if proc.returncode != 0:
            log = (self.base / "server.log").read_text() if (self.base / "server.log").exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed: {proc.stdout}{proc.stderr}{log[-2000:]}")
        return time.perf_counter() - started

    def _pg_ctl(self, action: str, *extra: str) -> float:
        assert self.bindir is not None
        return self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.base / "server.log"),
                         "-w", "-t", "60", "-o",
                         f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off "
                         "-c full_page_writes=off -c max_connections=200", *extra, action)

    def start(self) -> PostgresServer:
        """Create the cluster (the first time) and start the server."""
        assert self.bindir is not None
        if not (self.data / "PG_VERSION").exists():
            self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E",
                      "UTF8", "--no-sync", "--no-instructions")
        self._pg_ctl("start")
        self.started = True
        return self

    def restart(self) -> float:
        """``pg_ctl restart -m fast``: every session is ended, the server stops and starts; seconds taken."""
        return self._pg_ctl("restart", "-m", "fast")

    def halt(self) -> None:
        """``pg_ctl stop -m fast``: the server is gone until :meth:`start`."""
        self._pg_ctl("stop", "-m", "fast")

    def create_database(self, name: str, *, migrate: bool = False) -> str:
        """A fresh database (``migrate``: with the store's schema); its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{name}"
        if migrate:
            from arcticqa.store.store import Store

            Store(url).close()
        return url

    def stop(self) -> None:
        if self.started:
            assert self.bindir is not None
            subprocess.run([*self.prefix, str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, timeout=60, cwd=self.base)
            self.started = False
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the stand-ins, in a process of their own: one model endpoint for both runs, counted per run -------------------

@dataclass(frozen=True)
class StandIns:
    latency_median_s: float = 0.4
    latency_p99_s: float = 2.0
    error_rate: float = 0.02
    timeout_rate: float = 0.01
    hang_s: float = 12.0
    seed: int = 1
    s2_rate: float = 5.0


def _serve(corpus: Path, options: StandIns, conn: Connection) -> None:
    from arcticqa.standins.limits import LimitedResponder, ProviderLimits
    from arcticqa.standins.s2 import S2StandIn
    from arcticqa.standins.scripted import ScriptedModel
    from arcticqa.standins.server import FakeOpenAIServer

    files, by_query = serve_corpus(corpus)
    limits = ProviderLimits(latency_median_s=options.latency_median_s, latency_p99_s=options.latency_p99_s,
                            latency_cap_s=options.hang_s / 2, error_rate=options.error_rate,
                            timeout_rate=options.timeout_rate, hang_s=options.hang_s, seed=options.seed)

    def fresh() -> _Timed:  # the same faults for the same requests in every run
        return _Timed(LimitedResponder(ScriptedModel(), limits))

    limited = fresh()
    with FakeOpenAIServer(limited, keep_requests=False) as model, \
            S2StandIn(by_query, page_size=PAGE_SIZE, rate_per_s=options.s2_rate, keep_requests=False) as s2:
        conn.send((model.base_url, s2.url))
        while (command := conn.recv()) != "stop":
            if command == "next run":  # this run's answers are counted, and the next run's apart
                conn.send({**limited.inner.stats.summary(),
                           "twice_at": [times for times in limited.answers.values() if len(times) > 1]})
                limited = fresh()
                model.responder = limited
                model.clear_stored()  # the next run finds only the completions it stored itself
    files.shutdown()


class _Timed:
    """The limited responder, noting when each request body's answers leave the endpoint (epoch s),
    so a body answered twice can be placed against the faults."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.answers: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Any) -> Any:
        from arcticqa.standins.limits import body_key
        from arcticqa.standins.replies import Hang, Reply

        response = self.inner(body, headers)
        delay, reply = (response.seconds, response.then) if isinstance(response, Hang) else (0.0, response)
        if isinstance(reply, Reply):
            key = body_key(body)  # a request sent again under another metadata name is the same request
            with self._lock:
                self.answers.setdefault(key, []).append(time.time() + delay)
        return response


@contextlib.contextmanager
def stand_ins(corpus: Path, options: StandIns) -> Iterator[tuple[str, str, Connection]]:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(corpus, options, child), daemon=True)
    process.start()
    model_url, s2_url = parent.recv()
    try:
        yield model_url, s2_url, parent
    finally:
        parent.send("stop")
        process.join(10)


def write_config(directory: Path, *, store_url: str, model_url: str, s2_url: str, corpus: Path,
                 client_timeout_s: float, s2_rate: float, recover: bool = True) -> Path:
    """The config of one run: a PostgreSQL store, every role on the stand-in (``recover``:
    with ``recover_in_flight``)."""
    from arcticqa.config import ROLES

    roles = "\n".join(f'{r} = "stand-in"' for r in ROLES)
    text = f'''
[store]
url = "{store_url}"

[build]
data_dir = "{directory / 'data'}"
source = "s2"
keywords_file = "{corpus / 'keywords.txt'}"
batch_size = 200
paper_concurrency = 64

[discovery]
api_url = "{s2_url}"
api_key_env = ""
rate_per_s = {s2_rate}

[fetch]
require_https = false

[models.stand-in]
provider = "openai"
base_url = "{model_url}"
model = "stand-in-model"
api_key_env = ""
price_in_per_mtok = 0.4
price_out_per_mtok = 1.6
max_concurrency = 32
timeout_s = {client_timeout_s}
max_retries = 6
backoff_initial_s = 0.5
backoff_max_s = 10.0
recover_in_flight = {'true' if recover else 'false'}

[roles]
{roles}
'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "arcticqa.toml"
    path.write_text(text, encoding="utf-8")
    return path


# -- the store, read from outside the builds ---------------------------------------------------------------------

def _sync_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://")


def count_rows(url: str) -> int | None:
    """Model-call rows holding an answer (None while the server does not answer)."""
    import psycopg

    try:
        with psycopg.connect(_sync_url(url), connect_timeout=2) as conn:
            row = conn.execute("SELECT count(*) FROM llm_call WHERE NOT cache_hit "
                               "AND (raw_response -> 'choices') IS NOT NULL").fetchone()
            return int(row[0]) if row else 0
    except psycopg.Error:
        return None


def read_store(url: str) -> dict[str, Any]:
    """What the store says about its model calls and attempts."""
    import psycopg

    with psycopg.connect(_sync_url(url)) as conn:
        answered, rows, distinct, failed = conn.execute(
            "SELECT count(*) FILTER (WHERE (raw_response -> 'choices') IS NOT NULL), count(*), "
            "count(DISTINCT request_hash) FILTER (WHERE (raw_response -> 'choices') IS NOT NULL), "
            "count(*) FILTER (WHERE error IS NOT NULL) FROM llm_call WHERE NOT cache_hit").fetchone() or (0, 0, 0, 0)
        recovered = conn.execute("SELECT count(*) FROM llm_call WHERE NOT cache_hit "
                                 "AND (request ->> 'via') = 'recovered'").fetchone()
        sent = conn.execute("SELECT count(*), count(DISTINCT request_hash) FROM llm_sent").fetchone() or (0, 0)
        twice = conn.execute(
            "SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM llm_call WHERE NOT cache_hit "
            "AND parsed IS NOT NULL AND error IS NULL GROUP BY request_hash HAVING count(*) > 1) t").fetchone()
        statuses: dict[str, int] = dict(conn.execute("SELECT status, count(*) FROM stage_run GROUP BY status").fetchall())
        items = conn.execute("SELECT count(*) FROM item").fetchone()
        workers = conn.execute("SELECT count(*) FROM worker").fetchone()
    return {"answered_rows": answered, "rows": rows, "distinct_answered_rows": distinct, "error_rows": failed,
            "answers_stored_twice": int(twice[0]) if twice else 0, "attempts": statuses,
            "recovered_rows": int(recovered[0]) if recovered else 0, "sends_written": int(sent[0]),
            "items": items[0] if items else 0, "workers": workers[0] if workers else 0}


# -- a run ------------------------------------------------------------------------------------------------------------

def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "arcticqa", *args]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float
    ended: float | None = None

    @property
    def code(self) -> int | None:
        return self.popen.poll()

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")


def _start(name: str, args: list[str], directory: Path) -> Process:
    log = directory / f"{name}.log"
    handle = log.open("wb")
    # a process group of its own: a SIGKILL meant for one build never reaches the bench
    popen = subprocess.Popen(_cli(*args), stdout=handle, stderr=subprocess.STDOUT, cwd=directory,
                             start_new_session=True)
    handle.close()
    return Process(name, popen, log, time.perf_counter())


def _wait(process: Process, timeout_s: float) -> int:
    try:
        code = process.popen.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.popen.kill()
        code = process.popen.wait()
    process.ended = process.ended or time.perf_counter()
    return code


@dataclass
class FaultRun:
    """What one run (A or B) did."""

    name: str
    wall_s: float = 0.0
    processes: dict[str, dict[str, Any]] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    #: epoch seconds of the restart's start and of the kill
    fault_at: dict[str, float] = field(default_factory=dict)
    store: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    release: Path | None = None


@dataclass(frozen=True)
class Faults:
    """When run B's faults strike: at so many answered ``llm_call`` rows in its store."""

    server: PostgresServer
    restart_rows: int
    kill_rows: int
    #: the kill comes at least this long after the restart, so that each fault's effects can be told apart
    gap_s: float = 3.0
    #: 0: ``pg_ctl restart``; else the server is stopped and started again this many seconds later
    #: (longer than the store's wait, ``store.busy_timeout_s`` = 30 s, the builds stop)
    outage_s: float = 0.0


def run_once(name: str, directory: Path, config: Path, store_url: str, *, faults: Faults | None,
             timeout_s: float) -> FaultRun:
    """Two build processes on one store (``faults``: restart the server, then SIGKILL the second
    process), then ``arcticqa resume`` and ``arcticqa export``."""
    run = FaultRun(name)
    started = time.perf_counter()
    build = ["build", "--orchestrator", "local", "-c", str(config)]
    workers = [_start(f"{name}-worker1", build, directory), _start(f"{name}-worker2", build, directory)]
    restarted = killed = False
    back: threading.Timer | None = None
    deadline = time.perf_counter() + timeout_s
    while any(w.code is None for w in workers) and time.perf_counter() < deadline:
        for w in workers:
            if w.code is not None and w.ended is None:
                w.ended = time.perf_counter()
        if faults:
            rows = count_rows(store_url)
            at = time.perf_counter() - started
            if not restarted and rows is not None and rows >= faults.restart_rows:
                run.fault_at["restart"] = time.time()
                if faults.outage_s:
                    faults.server.halt()
                    back = threading.Timer(faults.outage_s, faults.server.start)
                    back.start()
                    run.events.append(f"{at:.1f} s: {rows} answered rows stored; server stopped "
                                      f"(pg_ctl stop -m fast), started again {faults.outage_s:g} s later")
                else:
                    took = faults.server.restart()
                    run.events.append(f"{at:.1f} s: {rows} answered rows stored; server restarted "
                                      f"(pg_ctl restart -m fast, {took:.1f} s)")
                restarted = True
            elif restarted and not killed and rows is not None and rows >= faults.kill_rows \
                    and time.time() - run.fault_at["restart"] >= faults.gap_s + faults.outage_s:
                victim = workers[1]
                if victim.code is None:
                    os.kill(victim.popen.pid, signal.SIGKILL)
                    run.fault_at["kill"] = time.time()
                    run.events.append(f"{at:.1f} s: {rows} answered rows stored; worker2 (pid "
                                      f"{victim.popen.pid}) SIGKILLed")
                else:
                    run.events.append(f"{at:.1f} s: worker2 had already exited ({victim.code}); nothing killed")
                killed = True
        time.sleep(0.2)
    for w in workers:
        _wait(w, max(1.0, deadline - time.perf_counter()))
    if back is not None:
        back.join()  # resume needs the server
    if faults and not restarted:
        run.events.append("the build ended before the restart point: no restart")
    builds_done = time.perf_counter()
    resume = _start(f"{name}-resume", ["resume", "--orchestrator", "local", "-c", str(config)], directory)
    _wait(resume, timeout_s)
    resumed = time.perf_counter()
    run.wall_s = resumed - started
    run.release = directory / "release"
    export = subprocess.run(_cli("export", "-c", str(config), "--out", str(run.release)), capture_output=True,
                            text=True, cwd=directory, timeout=600)
    for p in (*workers, resume):
        run.processes[p.name] = {"exit": p.code, "wall_s": round((p.ended or resumed) - p.started, 1),
                                 "output": p.output()}
    run.processes[f"{name}-export"] = {"exit": export.returncode, "wall_s": None,
                                       "output": export.stdout + export.stderr}
    run.events.append(f"builds ended at {builds_done - started:.1f} s, resume at {resumed - started:.1f} s")
    run.store = read_store(store_url)
    return run


# -- releases --------------------------------------------------------------------------------------------------------

def _json_diff(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += _json_diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _json_diff(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [path or "(whole value)"]


def _parsed(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if path.suffix == ".json":
        return json.loads(text)
    return None


def compare_releases(a: Path, b: Path) -> dict[str, Any]:
    """File by file: identical bytes, or which JSON fields differ (other files: that they differ)."""
    files_a = {p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file()}
    files_b = {p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()}
    same, differ = [], {}
    for rel in sorted(files_a & files_b):
        pa, pb = a / rel, b / rel
        if pa.read_bytes() == pb.read_bytes():
            same.append(rel)
            continue
        try:
            fields = _json_diff(_parsed(pa), _parsed(pb)) if pa.suffix in (".json", ".jsonl") else ["(bytes)"]
        except ValueError:
            fields = ["(bytes)"]
        differ[rel] = fields
    return {"identical": same, "differ": differ, "only_a": sorted(files_a - files_b),
            "only_b": sorted(files_b - files_a), "equal": not differ and files_a == files_b}


# -- the report ------------------------------------------------------------------------------------------------------

def _fault_lines(output: str, limit: int = 6) -> list[str]:
    """The lines of a process's output about a fault (errors, warnings, the database), else its last lines."""
    words = ("error", "warning", "stopped", "traceback", "operational", "connection", "server", "store",
             "failed", "interrupted")
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    hits = [ln for ln in lines if any(w in ln.lower() for w in words)]
    return (hits or lines)[-limit:]


def _place(twice_at: list[list[float]], fault_at: dict[str, float]) -> str:
    """When the first answer of each request answered twice left the endpoint, against the faults."""
    firsts = sorted(times[0] for times in twice_at)
    if not fault_at:
        return f"{len(firsts)} (no fault in this run)"
    parts = []
    for fault, at in sorted(fault_at.items(), key=lambda kv: kv[1]):
        offsets = [t - at for t in firsts]
        parts.append(f"{fault}: {sum(o < 0 for o in offsets)} before it, {sum(o >= 0 for o in offsets)} after "
                     f"(offsets {min(offsets):+.1f} to {max(offsets):+.1f} s)")
    return f"{len(firsts)}; their first answer left the endpoint, against the " + "; against the ".join(parts)


def report(a: FaultRun, b: FaultRun, diff: dict[str, Any], figures: dict[str, Any]) -> None:
    print(f"\n== faults at scale {figures['scale']:g}: {figures['records']:,} records -> {figures['pdfs']} PDFs "
          f"({figures['eligible']} at an Arctic site), two build processes on PostgreSQL, recover_in_flight "
          f"{'on' if figures['recover_in_flight'] else 'off'} ==")
    for run in (a, b):
        model, store = run.model, run.store
        twice = model.get("answered_twice", 0)
        print(f"\n-- run {run.name} ({'undisturbed' if run.name == 'A' else 'server fault + SIGKILL'}): "
              f"wall {run.wall_s:.1f} s (both builds, then resume) --")
        for event in run.events:
            print(f"  {event}")
        for name, proc in run.processes.items():
            wall = f", {proc['wall_s']:.1f} s" if proc["wall_s"] is not None else ""
            print(f"  {name}: exit {proc['exit']}{wall}")
            for line in _fault_lines(proc["output"]):
                print(f"      | {line[:240]}")
        print(f"  llm_call rows holding an answer {store['answered_rows']:,} vs requests the stand-in answered "
              f"{model.get('answered', 0):,} ({model.get('distinct_answered', 0):,} distinct, {twice} answered "
              f"more than once); answers stored twice {store['answers_stored_twice']}; rows in all "
              f"{store['rows']:,} ({store['error_rows']} recording a failed attempt); injected 5xx "
              f"{model.get('errors', 0)}, timeouts {model.get('timeouts', 0)}")
        print(f"  answers recovered from the endpoint's stored completions (not asked again) "
              f"{store['recovered_rows']}; sends written ahead {store['sends_written']}")
        print(f"  attempts by status {store['attempts']}; items {store['items']}; workers registered {store['workers']}")
        if model.get("twice_at"):
            print(f"  requests answered more than once: {_place(model['twice_at'], run.fault_at)}")
    print("\n-- release B against release A --")
    print(f"  {len(diff['identical'])} files identical byte for byte"
          + (f": {', '.join(diff['identical'])}" if len(diff["identical"]) <= 12 else ""))
    for rel, fields in diff["differ"].items():
        shown = ", ".join(fields[:8]) + (f" (+{len(fields) - 8} more)" if len(fields) > 8 else "")
        print(f"  {rel} differs in {len(fields)} field(s): {shown}")
    if diff["only_a"] or diff["only_b"]:
        print(f"  only in A: {diff['only_a']}; only in B: {diff['only_b']}")
    rows_ok = b.store["answered_rows"] == b.model.get("distinct_answered") == a.store["answered_rows"]
    twice = b.model.get("twice_at", [])
    print(f"\nrelease B == release A: {'yes' if diff['equal'] else 'NO'}")
    print(f"run B: llm_call rows holding an answer = distinct requests the stand-in answered = run A's rows: "
          f"{'yes' if rows_ok else 'NO'} ({b.store['answered_rows']}, {b.model.get('distinct_answered')}, "
          f"{a.store['answered_rows']})")
    print(f"run B: requests the stand-in answered more than once: {len(twice)}"
          + (f" ({_place(twice, b.fault_at)})" if twice else ""))


def run_faults(work: Path, *, scale: float, restart_at: float, kill_at: float, options: StandIns,
               client_timeout_s: float, timeout_s: float = 1800.0, outage_s: float = 0.0,
               recover: bool = True) -> dict[str, Any]:
    """The bench's core (``tests/test_faults_postgres.py`` runs it at a tiny scale): runs A and B,
    the releases compared; returns the figures."""
    funnel = Funnel.at(scale, 0.58)
    corpus = make_corpus(work / "corpus", funnel, options.seed)
    figures: dict[str, Any] = {"scale": scale, "recover_in_flight": recover, "records": corpus["records"],
                               "pdfs": corpus["pdfs"],
                               "eligible": corpus["eligible"], "load_before": os.getloadavg()}
    with PostgresServer() as server, stand_ins(work / "corpus", options) as (model_url, s2_url, control):
        runs: list[FaultRun] = []
        for name in ("A", "B"):
            directory = work / name
            if directory.exists():
                shutil.rmtree(directory)
            # the schema is made before the clock starts: the builds' walls are their own, and a build's
            # cost estimate (which reads the store without migrating it) finds the tables
            url = server.create_database(f"faults_{name.lower()}", migrate=True)
            config = write_config(directory, store_url=url, model_url=model_url, s2_url=s2_url,
                                  corpus=work / "corpus", client_timeout_s=client_timeout_s, s2_rate=options.s2_rate,
                                  recover=recover)
            faults = None
            if name == "B":
                rows_a = runs[0].store["answered_rows"]
                faults = Faults(server, max(1, round(restart_at * rows_a)), max(2, round(kill_at * rows_a)),
                                outage_s=outage_s)
            print(f"run {name}: two build processes on {url.rsplit('@', 1)[-1]}", flush=True)
            run = run_once(name, directory, config, url, faults=faults, timeout_s=timeout_s)
            control.send("next run")
            run.model = control.recv()
            runs.append(run)
    a, b = runs
    assert a.release is not None and b.release is not None
    diff = compare_releases(a.release, b.release)
    figures["load_after"] = os.getloadavg()
    report(a, b, diff, figures)
    print(f"load average {figures['load_before'][0]:.1f} before, {figures['load_after'][0]:.1f} after")
    return {**figures, "diff": diff,
            "runs": {r.name: {"wall_s": r.wall_s, "events": r.events, "fault_at": r.fault_at, "store": r.store,
                              "model": r.model,
                              "processes": {k: {**v, "output": _fault_lines(v["output"], 20)}
                                            for k, v in r.processes.items()}} for r in runs}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.01, help="share of the reference's funnel (0.01: 850 "
                                                                   "records, 44 PDFs)")
    parser.add_argument("--restart-at", type=float, default=0.3, help="restart the server once this share of run "
                                                                      "A's answered rows is stored in B")
    parser.add_argument("--kill-at", type=float, default=0.6, help="SIGKILL the second build process at this share")
    parser.add_argument("--outage", type=float, default=0.0,
                        help="instead of a restart, stop the server for this many seconds (over 30, the store's "
                             "wait, the builds stop with one line and resume finishes)")
    parser.add_argument("--latency-median", type=float, default=0.4)
    parser.add_argument("--latency-p99", type=float, default=2.0)
    parser.add_argument("--error-rate", type=float, default=0.02)
    parser.add_argument("--timeout-rate", type=float, default=0.01)
    parser.add_argument("--hang", type=float, default=12.0, help="seconds a hanging request is held")
    parser.add_argument("--client-timeout", type=float, default=10.0)
    parser.add_argument("--s2-rate", type=float, default=5.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-recover", action="store_true",
                        help="leave recover_in_flight off (requests in flight to the killed process are sent again)")
    parser.add_argument("--keep", type=Path, help="work here and keep the corpus, logs and releases")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    reason = postgres_unavailable()
    if reason is not None:
        sys.exit(f"bench_faults needs a PostgreSQL server: {reason}")
    if not 0 < args.restart_at < args.kill_at < 1:
        parser.error("need 0 < --restart-at < --kill-at < 1")
    options = StandIns(latency_median_s=args.latency_median, latency_p99_s=args.latency_p99,
                       error_rate=args.error_rate, timeout_rate=args.timeout_rate, hang_s=args.hang, seed=args.seed,
                       s2_rate=args.s2_rate)
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="arcticqa-faults-")))
        work.mkdir(parents=True, exist_ok=True)
        figures = run_faults(work, scale=args.scale, restart_at=args.restart_at, kill_at=args.kill_at,
                             options=options, client_timeout_s=args.client_timeout, outage_s=args.outage,
                             recover=not args.no_recover)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
