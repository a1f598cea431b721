"""Several build workers on one store: claim semantics, liveness, and two concurrent builds (SQLite).

The PostgreSQL version of the two-worker build is in ``test_postgres_workers.py`` and reuses
:func:`run_two_workers` from here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from sqlmodel import select

from arcticqa.config import load_settings
from arcticqa.pipeline.runner import frozen_heap, open_build_context
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import read_session, write_session
from arcticqa.store.runs import HOST, FinishedStep
from arcticqa.store.store import Store
from arcticqa.store.tables import StageRun, Worker, utcnow
from tests.pipeline_fixtures import (
    AnswerWhenAllConstruct,
    ScriptedModel,
    build_in_process,
    make_corpus,
    write_config,
)

__all__ = ["run_two_workers", "claim_race"]

SECRET = "sk-test-SECRET-workers-77aa"
REPO = Path(__file__).resolve().parent.parent


def _done(run: StageRun) -> bool:
    return run.status == "succeeded"


def _claim(store: Store, worker: str | None, key: str = "p1") -> str:
    return store.claim_run(key, "findings", "", input_hash="h", worker_id=worker, done=_done).status


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def claim_race(store: Store, n_threads: int = 8) -> Counter[str]:
    """``n_threads`` workers claim the same paper stage at the same instant; returns the outcomes."""
    workers = [store.register_worker() for _ in range(n_threads)]
    barrier = threading.Barrier(n_threads)
    outcomes: Counter[str] = Counter()
    lock = threading.Lock()

    def go(worker: str) -> None:
        barrier.wait()
        status = _claim(store, worker, key="race")
        with lock:
            outcomes[status] += 1

    threads = [threading.Thread(target=go, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcomes


def test_a_live_workers_claim_is_held_and_a_stopped_ones_is_taken_over(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    a, b = store.register_worker(), store.register_worker()
    assert _claim(store, a) == "claimed"
    assert _claim(store, b) == "held"  # a is this very (live) process, heartbeat fresh
    store.stop_worker(a)
    assert _claim(store, b) == "claimed"
    runs = store.runs()
    assert [(r.attempt, r.worker_id, r.status) for r in runs] == [(2, b, "running")]
    store.finish_run(runs[0], status="succeeded")
    assert _claim(store, a) == "done"


@pytest.mark.parametrize("case", ["dead_pid", "stale_heartbeat", "unknown_worker", "no_worker"])
def test_a_dead_workers_running_attempt_is_taken_over(tmp_path: Path, case: str) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", stale_after_s=30)
    holder: str | None = "gone"
    with write_session(store.engine) as s:
        if case == "dead_pid":  # killed on this host: noticed at once, no heartbeat wait
            s.add(Worker(id="gone", host=HOST, pid=_dead_pid()))
        elif case == "stale_heartbeat":  # on another host: only the heartbeat can tell
            s.add(Worker(id="gone", host="other-host", pid=1, heartbeat_at=utcnow() - timedelta(seconds=31)))
        elif case == "no_worker":  # a crashed build from before workers were recorded
            holder = None
    with write_session(store.engine) as s:
        s.add(StageRun(paper_id="p1", stage="findings", status="running", worker_id=holder))
    assert _claim(store, store.register_worker()) == "claimed"


def test_a_live_worker_on_another_host_is_trusted_until_its_heartbeat_goes_stale(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}", stale_after_s=30)
    with write_session(store.engine) as s:
        # pid 1 on *this* host would be alive anyway; on another host the pid is not checked
        s.add(Worker(id="far", host="other-host", pid=999_999_999, heartbeat_at=utcnow() - timedelta(seconds=5)))
    with write_session(store.engine) as s:
        s.add(StageRun(paper_id="p1", stage="findings", status="running", worker_id="far"))
    assert _claim(store, store.register_worker()) == "held"


def test_concurrent_claims_on_sqlite_have_exactly_one_winner(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    assert claim_race(store) == Counter({"claimed": 1, "held": 7})
    assert len([r for r in store.runs() if r.paper_id == "race"]) == 1


def test_a_screened_batch_writes_only_what_no_live_worker_holds_or_did(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    live, me = store.register_worker(), store.register_worker()
    with write_session(store.engine) as s:
        s.add(Worker(id="gone", host=HOST, pid=_dead_pid()))
    with write_session(store.engine) as s:
        s.add(StageRun(paper_id="held", stage="prefilter", status="running", worker_id=live))
        s.add(StageRun(paper_id="orphan", stage="prefilter", status="running", worker_id="gone"))
        s.add(StageRun(paper_id="done", stage="prefilter", status="succeeded"))
    steps = [FinishedStep(pid, "prefilter", "", input_hash="h", status="rejected", worker_id=me)
             for pid in ("fresh", "held", "orphan", "done")]
    claims = store.record_screened(steps, done=_done)
    assert [c.status for c in claims] == ["claimed", "held", "claimed", "done"]
    newest = {r.paper_id: (r.attempt, r.status, r.worker_id) for r in store.runs(stage="prefilter")}
    assert newest == {"fresh": (1, "rejected", me), "held": (1, "running", live), "orphan": (2, "rejected", me),
                      "done": (1, "succeeded", None)}
    assert [c.status for c in store.record_screened(steps, done=lambda r: r.status != "running")] == \
        ["done", "held", "done", "done"]


def test_build_context_heartbeats_and_stops_its_worker(tmp_path: Path) -> None:
    settings = load_settings(None, store={"url": f"sqlite:///{tmp_path / 's.db'}", "heartbeat_s": 0.05})

    async def go() -> tuple[Any, Any]:
        async with open_build_context(settings) as ctx:
            first = ctx.store.workers()[0].heartbeat_at
            await asyncio.sleep(0.3)
            return first, ctx.store.workers()[0]

    first, during = asyncio.run(go())
    store = Store(settings.store.url)
    [after] = store.workers()
    assert during.heartbeat_at > first and during.stopped_at is None and during.pid == os.getpid()
    assert after.stopped_at is not None


# -- two concurrent builds ------------------------------------------------------------------------
def _items(store: Store) -> list[dict[str, Any]]:
    return sorted((dict(row.payload or {}) for row in store.items()), key=lambda p: p["item_id"])


def _bodies(server: FakeOpenAIServer) -> Counter[str]:
    return Counter(json.dumps(r.body, sort_keys=True) for r in server.requests)


def _worker(config: Path, command: str, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    return subprocess.Popen([sys.executable, "-m", "arcticqa", command, "--orchestrator", "local", *extra,
                             "-c", str(config)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=REPO)


def run_two_workers(tmp_path: Path, store_url: str | None, *, n_papers: int = 8) -> dict[str, Any]:
    """Two ``arcticqa build`` processes on one store and one model stand-in, against a single
    in-process build of the same corpus. Returns timings and counts for the caller to report."""
    corpus = make_corpus(tmp_path / "corpus", n=n_papers)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = write_config(tmp_path / "reference", base_url=srv.base_url, corpus=corpus)
        build_in_process(reference)
        expected_items = _items(Store(load_settings(reference).store.url))
        expected_bodies = _bodies(srv)
    assert len(expected_items) == n_papers

    with FakeOpenAIServer(ScriptedModel(), latency=0.05) as srv:
        config = write_config(tmp_path / "workers", base_url=srv.base_url, corpus=corpus, store_url=store_url,
                              extra="claim_poll_s = 0.2")
        started = time.monotonic()
        procs = [_worker(config, "build") for _ in range(2)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
        elapsed = time.monotonic() - started
        for proc, out in zip(procs, outs, strict=True):
            assert proc.returncode == 0, out
        bodies = _bodies(srv)

    duplicates = {b: n for b, n in bodies.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} request bodies were sent more than once"
    assert set(bodies) == set(expected_bodies)  # the same work as one worker, no more, no less

    store = Store(load_settings(config).store.url)
    with read_session(store.engine) as s:
        runs = list(s.exec(select(StageRun)).all())
    attempts = Counter((r.paper_id, r.stage, r.subject) for r in runs)
    assert attempts and all(n == 1 for n in attempts.values()), \
        [k for k, n in attempts.items() if n > 1][:5]
    assert {r.status for r in runs} <= {"succeeded", "rejected"}
    by_worker = Counter(r.worker_id for r in runs)
    assert len(by_worker) == 2 and None not in by_worker, by_worker  # both workers did part of it
    assert all(w.stopped_at is not None for w in store.workers())
    assert _items(store) == expected_items
    store.close()
    return {"elapsed_s": round(elapsed, 1), "stage_runs": len(runs), "by_worker": sorted(by_worker.values())}


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)


def test_two_workers_on_one_sqlite_store_run_every_stage_exactly_once(tmp_path: Path) -> None:
    stats = run_two_workers(tmp_path, None)
    print(stats)


def test_when_one_of_two_workers_is_killed_the_other_finishes_its_papers(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=4)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = write_config(tmp_path / "reference", base_url=srv.base_url, corpus=corpus)
        build_in_process(reference)
        expected_items = _items(Store(load_settings(reference).store.url))

    with FakeOpenAIServer(ScriptedModel(), latency=0.2) as srv:
        config = write_config(tmp_path / "workers", base_url=srv.base_url, corpus=corpus,
                              extra="claim_poll_s = 0.2")
        victim, survivor = _worker(config, "build"), _worker(config, "build")
        store = Store(load_settings(config).store.url)
        deadline = time.monotonic() + 120
        # kill the victim mid-paper: it holds a paper's construct stage and has finished some of
        # its steps (a first attempt's steps are written once, finished; the stage row is the claim)
        while time.monotonic() < deadline:
            owners = {w.id: w.pid for w in store.workers()}
            runs = store.runs()
            stepped = {r.paper_id for r in runs if r.subject and r.status != "running"}
            if any(r.status == "running" and r.stage == "construct" and r.paper_id in stepped
                   and owners.get(r.worker_id or "") == victim.pid for r in runs):
                break
            time.sleep(0.05)
        else:
            pytest.fail("the victim never held a construction mid-paper")
        os.kill(victim.pid, 9)
        victim.wait(timeout=10)
        out = survivor.communicate(timeout=300)[0]
        assert survivor.returncode == 0, out

    runs = store.runs()
    assert {r.status for r in runs} <= {"succeeded", "rejected"}, "the survivor left work unfinished"
    with read_session(store.engine) as s:
        every = list(s.exec(select(StageRun)).all())
    finished = Counter((r.paper_id, r.stage, r.subject) for r in every if r.status != "running")
    assert all(n == 1 for n in finished.values()), "a finished stage ran again"
    victim_ids = {w.id for w in store.workers() if w.pid == victim.pid}
    taken_over = [r for r in every if r.status == "running" and r.worker_id in victim_ids]
    assert taken_over, "the victim was killed holding nothing"
    assert _items(store) == expected_items


def _construct_claimants(db: Path) -> Callable[[], int]:
    """How many build processes have claimed a construction in the SQLite store ``db`` (plain
    sqlite3, read-only)."""
    def claimed() -> int:
        if not db.exists():
            return 0
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return int(con.execute("SELECT count(DISTINCT worker_id) FROM stage_run WHERE stage = 'construct'")
                       .fetchone()[0])
        except sqlite3.OperationalError:  # the build has not created the table yet
            return 0
        finally:
            con.close()
    return claimed


def test_build_workers_flag_runs_helper_processes_on_the_same_store(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=6)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = write_config(tmp_path / "reference", base_url=srv.base_url, corpus=corpus)
        build_in_process(reference)
        expected_items = _items(Store(load_settings(reference).store.url))
    config = write_config(tmp_path / "workers", base_url="http://127.0.0.1:9/v1", corpus=corpus)
    # No model answer until the helper process has claimed construction work: on a loaded machine its start-up
    # (seconds of imports) used to outlast the whole construction, so "the helper did no
    # construction" failed by timing, not by a fault.
    gated = AnswerWhenAllConstruct(
        ScriptedModel(), _construct_claimants(Path(str(make_url(load_settings(config).store.url).database))), workers=2)
    with FakeOpenAIServer(gated, latency=0.2) as srv:
        config = write_config(tmp_path / "workers", base_url=srv.base_url, corpus=corpus)
        build = _worker(config, "build", "--workers", "2")
        out = build.communicate(timeout=300)[0]
        assert build.returncode == 0, out
        sent = _bodies(srv)
    store = Store(load_settings(config).store.url)
    with read_session(store.engine) as s:
        every = list(s.exec(select(StageRun)).all())
    assert Counter((r.paper_id, r.stage, r.subject) for r in every).most_common(1)[0][1] == 1, \
        "a stage ran twice"
    assert {r.status for r in every} <= {"succeeded", "rejected"}
    assert len({w.pid for w in store.workers()}) == 2  # this process and the one it started
    assert len({r.worker_id for r in every if r.stage == "construct"}) == 2, "the helper did no construction"
    assert max(sent.values()) == 1, "a model request was sent twice"
    assert _items(store) == expected_items


def test_build_workers_flag_needs_the_local_orchestrator(tmp_path: Path) -> None:
    config = write_config(tmp_path, base_url="http://127.0.0.1:9/v1", corpus=make_corpus(tmp_path / "corpus", n=1))
    done = subprocess.run([sys.executable, "-m", "arcticqa", "build", "--workers", "2", "-c", str(config)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--orchestrator local" in done.stdout + done.stderr


def test_a_build_freezes_the_heap_it_starts_with_and_gives_it_back(tmp_path: Path) -> None:
    """While a build context is open, what was alive when it opened is out of the garbage
    collector's reach and the young generation is collected less often; both are undone when
    the outermost context closes (a process that runs many builds, like this test session, keeps
    collecting what they leave)."""
    import gc

    settings = load_settings(None, store={"url": f"sqlite:///{tmp_path / 's.db'}"})
    before = (gc.get_threshold(), gc.get_freeze_count())

    async def go() -> list[tuple[tuple[int, int, int], int]]:
        seen = []
        async with open_build_context(settings):
            seen.append((gc.get_threshold(), gc.get_freeze_count()))
            async with open_build_context(settings):  # a nested build changes nothing more
                seen.append((gc.get_threshold(), gc.get_freeze_count()))
            seen.append((gc.get_threshold(), gc.get_freeze_count()))
        return seen

    outer, inner, after_inner = asyncio.run(go())
    assert outer[0][0] > before[0][0]
    assert inner[0] == outer[0] and after_inner[0] == outer[0]
    # frozen objects still die by reference counting, so the count only roughly stays
    assert all(count > before[1] + 10_000 for _, count in (outer, inner, after_inner))
    assert (gc.get_threshold(), gc.get_freeze_count()) == before


def test_a_held_frozen_heap_spares_the_next_build_context_a_full_collection(tmp_path: Path) -> None:
    """A caller that opens one build context after another holds the frozen heap around both:
    the heap is frozen (and collected in full) once, not again between them."""
    import gc

    settings = load_settings(None, store={"url": f"sqlite:///{tmp_path / 's.db'}"})
    full: list[str] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(phase)

    async def one_build() -> None:
        async with open_build_context(settings):
            pass

    gc.callbacks.append(count)
    try:
        asyncio.run(one_build())
        alone = len(full)
        with frozen_heap():
            held = len(full)
            asyncio.run(one_build())
            asyncio.run(one_build())
            after = len(full)
    finally:
        gc.callbacks.remove(count)
    assert alone >= 1  # a build context on its own collects in full before it freezes
    assert held == alone + 1 and after == held  # held: once, when the hold began; none inside
