"""Scaling the build with Prefect's own engines: a process work pool, and prefect-dask.

1. A ``prefect server`` backed by PostgreSQL (asyncpg), a process work pool, two ``prefect
   worker`` processes and two concurrent runs of the ``build-arcticqa/pool`` deployment on one
   PostgreSQL evidence store: both builds complete, and every paper stage ran exactly once.
2. The flow with ``DaskTaskRunner`` on a LocalCluster of two processes: stage batches run in the
   Dask worker processes, each opening its own build context.

Prefect start-up and deployment runs take seconds each (``/work/shared/design/stack-notes.md``),
so there are only these two tests, both ``slow``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlmodel import select

from arcticqa.config import load_settings
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import StageRun
from tests.pipeline_fixtures import (
    AnswerWhenAllConstruct,
    ScriptedModel,
    _free_port,
    make_corpus,
    postgres_server,
    write_config,
)

pytestmark = pytest.mark.slow

SECRET = "sk-test-SECRET-prefect-5c3e"
REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    return {**env, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", **extra}


def _check_store(url: str, *, n_papers: int) -> tuple[list[StageRun], Store]:
    store = Store(url)
    with read_session(store.engine) as s:
        runs = list(s.exec(select(StageRun)).all())
    attempts = Counter((r.paper_id, r.stage, r.subject) for r in runs)
    assert attempts and all(n == 1 for n in attempts.values()), [k for k, n in attempts.items() if n > 1][:5]
    assert {r.status for r in runs} <= {"succeeded", "rejected"}
    assert len(store.items()) == n_papers
    return runs, store


def _wait_healthy(api: str, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"prefect server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError("prefect server did not become healthy")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _construct_claimants(dsn: str) -> Callable[[], int]:
    """How many build processes have claimed a construction in the PostgreSQL store ``dsn``.

    The two deployment runs must share the work by construction, not by timing: a run that
    started a few seconds before the other could finish all four papers alone (it did in a
    clean-clone CI once builds got faster), so the stand-in holds answers until both claimed.
    """
    def claimed() -> int:
        import psycopg

        try:
            with psycopg.connect(dsn, connect_timeout=5) as c:
                row = c.execute("SELECT count(DISTINCT worker_id) FROM stage_run WHERE stage = 'construct'").fetchone()
                return int(row[0]) if row else 0
        except psycopg.Error:  # the build has not created the table yet
            return 0
    return claimed


def test_two_process_workers_on_a_postgresql_backed_prefect_server(tmp_path: Path) -> None:
    import psycopg

    n_papers = 4
    corpus = make_corpus(tmp_path / "corpus", n=n_papers)
    with postgres_server("postgres") as pg:
        base = pg.rsplit("/", 1)[0]
        gate = AnswerWhenAllConstruct(
            ScriptedModel(), _construct_claimants(base.replace("postgresql+psycopg", "postgresql") + "/store"),
            workers=2, hold_s=6.0)
        with FakeOpenAIServer(gate, latency=0.3) as srv:
            with psycopg.connect(base.replace("postgresql+psycopg", "postgresql") + "/postgres",
                                 autocommit=True) as c:
                c.execute("CREATE DATABASE prefect")
                c.execute("CREATE DATABASE store")
            store_url = f"{base}/store"
            config = write_config(tmp_path / "work", base_url=srv.base_url, corpus=corpus, store_url=store_url,
                                  extra="claim_poll_s = 0.5")
            port = _free_port()
            api = f"http://127.0.0.1:{port}/api"
            env = _env(tmp_path, PREFECT_API_URL=api,
                       PREFECT_API_DATABASE_CONNECTION_URL=f"{base.replace('+psycopg', '+asyncpg')}/prefect",
                       PREFECT_WORKER_QUERY_SECONDS="1", PREFECT_WORKER_HEARTBEAT_SECONDS="5")
            timings: dict[str, float] = {}
            t0 = time.monotonic()
            server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                                       str(port), "--no-ui", "--analytics-off"], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            workers: list[subprocess.Popen[str]] = []
            try:
                _wait_healthy(api, server)
                timings["server_ready_s"] = time.monotonic() - t0
                subprocess.run([str(BIN / "prefect"), "work-pool", "create", "arcticqa", "--type", "process"],
                               env=env, cwd=tmp_path, check=True, capture_output=True, timeout=120)
                subprocess.run([sys.executable, "-m", "flows.deploy", "--pool", "arcticqa", "--name", "pool"],
                               env=env, cwd=REPO, check=True, capture_output=True, timeout=120)
                workers = [subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "arcticqa",
                                             "--limit", "1", "--name", f"w{i}"], env=env, cwd=tmp_path,
                                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                           for i in range(2)]
                t1 = time.monotonic()
                runs = [subprocess.Popen([str(BIN / "prefect"), "deployment", "run", "build-arcticqa/pool",
                                          "--param", f"config={config}", "--watch"], env=env, cwd=tmp_path,
                                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                        for _ in range(2)]
                outs = [r.communicate(timeout=400)[0] for r in runs]
                timings["two_runs_s"] = time.monotonic() - t1
                for r, out in zip(runs, outs, strict=True):
                    assert r.returncode == 0 and "Completed" in out, out
            finally:
                for proc in [*workers, server]:
                    _stop(proc)
            worker_logs = [w.stdout.read() if w.stdout else "" for w in workers]
            # each worker (--limit 1) started one of the two runs in a subprocess of its own
            assert all("submitted to infrastructure" in log for log in worker_logs), worker_logs
            runs_, store = _check_store(store_url, n_papers=n_papers)
            pids = {w.pid for w in store.workers() if w.id in {r.worker_id for r in runs_}}
            assert len(pids) == 2, pids  # two flow-run processes shared the work
            store.close()
    print(json.dumps({k: round(v, 1) for k, v in timings.items()}))


def test_dask_task_runner_runs_stage_batches_in_a_local_cluster(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=3)  # batch_size 2: two batches per stage
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = write_config(tmp_path / "work", base_url=srv.base_url, corpus=corpus,
                              extra='task_runner = "dask"\ndask_workers = 2')
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "flows.build_arcticqa", "--config", str(config)],
                              env=_env(tmp_path), cwd=REPO, capture_output=True, text=True, timeout=400)
        elapsed = time.monotonic() - t0
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert summary["stages"]["construct"] == {"succeeded": 3}
    runs, store = _check_store(load_settings(config).store.url, n_papers=3)
    owners = {w.id: w.pid for w in store.workers()}
    pids = {owners[r.worker_id] for r in runs if r.worker_id}
    # per-paper stages ran in the two Dask worker processes, not in the flow's own process
    flow_pid = min(store.workers(), key=lambda w: w.started_at).pid
    assert flow_pid not in pids and len(pids) == 2, (flow_pid, pids)
    store.close()
    print(json.dumps({"dask_build_s": round(elapsed, 1)}))
