"""The Prefect server builds share (``flows/prefect_server.py``), with real server processes.

1. ``arcticqa prefect start --no-wait`` starts the server and returns; an ``arcticqa build`` with
   ``[prefect] server = "shared"`` started meanwhile uses that server (waiting for it, if need be),
   a second build reuses the same process without waiting (the flow runs of both are in its
   database); the API key of the build is not in the server's environment; ``arcticqa prefect
   start`` finds it running, ``arcticqa prefect status`` shows it and ``arcticqa prefect stop``
   ends it, leaving no process behind.
2. Two processes that ask for the server at the same moment get one server between them; it
   stays up while a build process is registered as its user, and stops by itself once idle.
3. A server whose state file is gone (its temporary PREFECT_HOME was removed) stops by itself.
4. A state file whose pid now belongs to another process is not taken for a server: nothing is
   signalled, and the stale file goes.
5. ``wait_for_server`` calls its ``waiting`` (the build's progress line) until the server answers.
"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from arcticqa.standins.server import FakeOpenAIServer
from flows.prefect_server import (
    SharedServer,
    ensure_server,
    running_server,
    stop_server,
    using_server,
    wait_for_server,
)
from tests.pipeline_fixtures import ScriptedModel, make_corpus, write_config

REPO = Path(__file__).resolve().parent.parent
SECRET = "sk-test-SECRET-shared-prefect-71d0"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A PREFECT_HOME of the test's own; whatever server is left in it is stopped afterwards."""
    path = tmp_path / "prefect-home"
    path.mkdir()
    yield path
    left = stop_server(path)
    assert left is None or not _alive(left.pid)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_HOME": str(home),
            "ARCTICQA_PREFECT__SERVER": "shared", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arcticqa", *args], env=_env(home), cwd=REPO,
                          capture_output=True, text=True, timeout=400)


def _flow_runs(server: SharedServer) -> list[dict[str, object]]:
    request = urllib.request.Request(f"{server.api_url}/flow_runs/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        runs: list[dict[str, object]] = json.loads(response.read())
    return runs


@pytest.mark.slow
def test_builds_reuse_one_server_until_it_is_stopped(tmp_path: Path, home: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    started = time.monotonic()
    starting = _cli(home, "prefect", "start", "--no-wait")
    assert starting.returncode == 0 and "shared Prefect server starting: pid" in starting.stdout, starting.stdout
    assert time.monotonic() - started < 15, "--no-wait waited for the server"
    pid = int(starting.stdout.split("pid ", 1)[1].split(",", 1)[0])
    with FakeOpenAIServer(ScriptedModel()) as endpoint:
        first = _cli(home, "build", "-c", str(write_config(tmp_path / "one", base_url=endpoint.base_url,
                                                           corpus=corpus)))
        assert first.returncode == 0, first.stdout + first.stderr
        # it waited for the server `prefect start` had started (unless that answered first: a fast
        # machine), in one line
        waited = [line for line in first.stderr.splitlines() if "waiting for the Prefect server" in line]
        assert len(waited) <= 1 and all(f"pid {pid}," in line for line in waited), first.stderr
        server = running_server(home)
        assert server is not None and server.pid == pid, "the first build did not use the server prefect start started"
        second = _cli(home, "build", "-c", str(write_config(tmp_path / "two", base_url=endpoint.base_url,
                                                            corpus=corpus)))
        assert second.returncode == 0, second.stdout + second.stderr
        assert "waiting for the Prefect server" not in second.stderr
    assert running_server(home) == server, "the second build did not reuse the first build's server"
    again = _cli(home, "prefect", "start")
    assert again.returncode == 0 and f"already running: pid {server.pid}," in again.stdout, again.stdout
    runs = _flow_runs(server)
    assert [r["state_type"] for r in runs] == ["COMPLETED", "COMPLETED"]
    assert {r["flow_id"] for r in runs} and len({r["id"] for r in runs}) == 2
    environ = Path(f"/proc/{server.pid}/environ").read_bytes()
    assert SECRET.encode() not in environ and b"ARCTICQA_TEST_KEY" not in environ
    assert b"PREFECT_HOME=" + str(home).encode() in environ

    status = _cli(home, "prefect", "status")
    assert status.returncode == 0 and f"pid {server.pid}" in status.stdout and server.api_url in status.stdout
    stopped = _cli(home, "prefect", "stop")
    assert stopped.returncode == 0 and f"pid {server.pid}" in stopped.stdout
    assert not _alive(server.pid)
    assert not (home / "arcticqa-server.json").exists()
    again = _cli(home, "prefect", "status")
    assert again.returncode == 1 and "no shared Prefect server" in again.stdout


def _ask(home: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(ensure_server(idle_shutdown_s=1.0, timeout_s=120, home=Path(home)).pid)


@pytest.mark.slow
def test_concurrent_builds_share_one_server_which_stops_when_idle(home: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with using_server(home):  # this process counts as a running build: no idle shutdown yet
        askers = [ctx.Process(target=_ask, args=(str(home), queue)) for _ in range(2)]
        for asker in askers:
            asker.start()
        pids = {queue.get(timeout=180) for _ in askers}
        for asker in askers:
            asker.join(30)
        assert len(pids) == 1, f"two builds started two servers: {pids}"
        (pid,) = pids
        # a build that was killed before it could remove its mark: an exited process's pid
        (home / "arcticqa-server.users" / str(askers[0].pid)).write_text("")
        time.sleep(4)  # four idle periods: it stays, a build is still using it
        assert _alive(pid) and running_server(home) is not None
        assert [m.name for m in (home / "arcticqa-server.users").iterdir()] == [str(os.getpid())]
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(pid), "the idle server did not stop by itself"
    assert not (home / "arcticqa-server.json").exists()


@pytest.mark.slow
def test_a_server_whose_prefect_home_is_gone_stops(home: Path) -> None:
    # a long idle time: only the missing state file can stop it within the test
    server = ensure_server(idle_shutdown_s=3600.0, timeout_s=120, home=home)
    (home / "arcticqa-server.json").unlink()  # what removing a temporary PREFECT_HOME does
    deadline = time.monotonic() + 60
    while _alive(server.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    stayed = _alive(server.pid)
    if stayed:  # no orphan, whatever the outcome
        os.kill(server.pid, signal.SIGKILL)
    assert not stayed, "a server no build can find any more kept running"


def test_a_pid_reused_by_another_process_is_not_a_server(home: Path) -> None:
    (home / "arcticqa-server.json").write_text(json.dumps({"pid": os.getpid(), "port": 9}))
    assert running_server(home) is None
    assert stop_server(home) is None  # this test process was not signalled: it is still running
    assert not (home / "arcticqa-server.json").exists()


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_wait_for_server_reports_while_it_waits(home: Path) -> None:
    # answers after a while: a loopback HTTP server with Prefect's health route, in this (live)
    # process, started once the wait has begun
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
    calls: list[float] = []
    servers: list[http.server.ThreadingHTTPServer] = []

    def waiting() -> None:
        calls.append(time.monotonic())
        if len(calls) == 5:  # about half a second in
            health = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Health)
            threading.Thread(target=health.serve_forever, daemon=True).start()
            servers.append(health)

    try:
        server = SharedServer(pid=os.getpid(), port=port)
        assert wait_for_server(server, 60.0, timeout_s=30, home=home, waiting=waiting) == server
        assert 5 <= len(calls) < 100
    finally:
        for health in servers:
            health.shutdown()
            health.server_close()
