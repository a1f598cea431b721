"""The store on a PostgreSQL server that goes away: a store method waits for it and runs again,
or stops with one line; and the fault rehearsal (``bench.bench_faults``) at a tiny scale: a
build by two processes whose server is restarted and one of which is SIGKILLed ends, after
``arcticqa resume``, with the undisturbed build's release, one answered ``llm_call`` row per
request the model stand-in answered, and no request answered twice but those in flight to the
killed process.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from arcticqa.errors import StoreError
from arcticqa.store.store import Store
from bench.bench_faults import PostgresServer, StandIns, postgres_unavailable, run_faults

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(postgres_unavailable() is not None, reason=str(postgres_unavailable()))]


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with PostgresServer() as pg:
        yield pg


def test_a_store_method_waits_for_a_server_that_comes_back(server: PostgresServer,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    store = Store(server.create_database("back"))
    first = store.register_worker()
    server.restart()  # every pooled connection is dead now
    store.heartbeat(first)
    server.halt()
    starter = threading.Timer(1.5, server.start)
    starter.start()
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="arcticqa.store.db"):
        second = store.register_worker()  # refused until the server is up again, then written once
    waited = time.monotonic() - started
    starter.join()
    assert waited >= 1.0
    assert {w.id for w in store.workers()} == {first, second}
    assert [r.message for r in caplog.records if "went away" in r.message][0].count("\n") == 0
    store.close()


def test_a_store_whose_server_stays_away_stops_with_one_line(server: PostgresServer) -> None:
    store = Store(server.create_database("gone"), busy_timeout_s=1.0)
    store.register_worker()
    server.halt()
    started = time.monotonic()
    with pytest.raises(StoreError) as caught:
        store.workers()
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert "did not answer for" in message and "/gone" in message and "\n" not in message
    started = time.monotonic()
    with pytest.raises(StoreError) as again:  # once given up, the way out does not wait again
        store.register_worker()
    assert time.monotonic() - started < 1.0 and str(again.value) == message
    store.close()


def test_a_build_disturbed_by_a_restart_and_a_kill_ends_with_the_undisturbed_release(tmp_path: Path) -> None:
    figures = run_faults(tmp_path, scale=0.003, restart_at=0.25, kill_at=0.5,
                         options=StandIns(latency_median_s=0.5, latency_p99_s=2.0, error_rate=0.0, timeout_rate=0.0),
                         client_timeout_s=10.0, timeout_s=900.0)
    a, b = figures["runs"]["A"], figures["runs"]["B"]
    assert figures["diff"]["equal"], figures["diff"]
    assert a["store"]["answered_rows"] == b["store"]["answered_rows"] == b["model"]["distinct_answered"] > 0
    assert "restart" in b["fault_at"], b["events"]
    assert all(p["exit"] == 0 for name, p in b["processes"].items() if name != "B-worker2"), b["processes"]
    # recover_in_flight on (the bench's default): what the killed process had in flight (when the kill
    # came before the build ended) is looked up among the stand-in's stored completions, so no request
    # reaches the model twice
    assert b["model"]["twice_at"] == [], b["model"]["twice_at"]
    assert b["store"]["sends_written"] >= b["store"]["answered_rows"]


def test_a_build_whose_server_stays_away_stops_with_one_line(tmp_path: Path) -> None:
    """The server stops while construct has papers in flight and stays away longer than the store
    waits (``store.busy_timeout_s``): the build ends with the one error line naming the store,
    exit 1, and no traceback of the other papers' tasks (the first store error stops them, rather
    than each raising its own at ``asyncio.run()``'s shutdown)."""
    from bench.bench_faults import count_rows, stand_ins, write_config
    from bench.bench_scale import Funnel, make_corpus

    corpus = tmp_path / "corpus"
    make_corpus(corpus, Funnel.at(0.003, 0.58), seed=1)  # 255 records, 13 PDFs, 8 eligible
    with PostgresServer() as server, \
            stand_ins(corpus, StandIns(latency_median_s=2.0, latency_p99_s=10.0, error_rate=0.0,
                                       timeout_rate=0.0, hang_s=30.0)) as (model_url, s2_url, conn):
        url = server.create_database("away")
        config = write_config(tmp_path / "build", store_url=url, model_url=model_url, s2_url=s2_url,
                              corpus=corpus, client_timeout_s=10.0, s2_rate=5.0)
        config.write_text(config.read_text(encoding="utf-8").replace(
            "[store]\n", "[store]\nbusy_timeout_s = 3\n", 1), encoding="utf-8")
        build = subprocess.Popen([sys.executable, "-m", "arcticqa", "build", "--orchestrator", "local", "-c",
                                  str(config)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 cwd=tmp_path)
        deadline = time.monotonic() + 240
        while build.poll() is None and (count_rows(url) or 0) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)  # until construct's first answers are stored: its papers are in flight
        assert build.poll() is None, build.communicate()
        server.halt()
        try:
            out, err = build.communicate(timeout=120)
        finally:
            build.kill()
        conn.send("next run")
        conn.recv()
    assert build.returncode == 1, (build.returncode, err[-3000:])
    # nothing else: the outcome writer does not fall back to writing each outcome alone either
    lines = err.splitlines()
    assert len(lines) == 1, f"{len(lines)} lines on stderr:\n" + "\n".join(lines[:40])
    assert lines[0].startswith("error: StoreUnavailable: the store at ") and "/away" in lines[0], lines
