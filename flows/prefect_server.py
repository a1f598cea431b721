"""A Prefect API server that builds share, so only the first build of a session pays its start-up.

Without ``PREFECT_API_URL``, Prefect starts a temporary server subprocess in every build process
and stops it at exit: 8–10 s (most of it importing Prefect's server: FastAPI, SQLAlchemy, the
ORM models, docket) before the flow's first task, on a 2-core machine, whatever the size of the
build (docs/performance.md, "What is in the way"). With ``[prefect] server = "shared"`` (the
default) a build instead looks for the server an earlier build (or ``arcticqa prefect start``)
left running for the same ``PREFECT_HOME`` (so the same database), health-checks it and uses
it; if there is none, it starts one in the background that outlives the build and waits for it:
:func:`ensure_server` does both under the lock; :func:`start_server` and :func:`wait_for_server`
split the two, so a waiting build can say how long it has waited (``flows.build_arcticqa``) and
``arcticqa prefect start --no-wait`` can return at once.

Where it is written down, all under ``$PREFECT_HOME`` (the database it serves lives there too):

- ``arcticqa-server.json``: the server's pid, port and API URL (temp file + rename);
- ``arcticqa-server.lock``: an ``flock`` held while a build checks or starts the server, so two
  builds that start at once share one server instead of starting two;
- ``arcticqa-server.users/<pid>``: one file per build process using the server; the server does
  not stop while one of those processes is alive (a long stage makes no API calls for minutes);
- ``arcticqa-server.log``: the server's own output (why it did not start, if it did not).

The server stops itself after ``prefect.idle_shutdown_s`` without a request and without a
live build, or on ``arcticqa prefect stop``. It is the same server Prefect's temporary one is
(``prefect.server.api.server:create_app`` under uvicorn, ephemeral services), run by
``python -m flows.prefect_server``, except that it serves Prefect's UI beside the API (at
:attr:`SharedServer.ui_url`: the flow runs and their artifacts) and has served one API request to
itself before it answers health checks (:func:`_first_request`).

This module imports no Prefect at import time: a build that finds the server running never
imports Prefect's server package (the temporary route imports it in the build process as well).
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcticqa.errors import BuildFailed

__all__ = ["SharedServer", "prefect_home", "running_server", "startup_timeout_s", "ensure_server",
           "start_server", "wait_for_server", "waiting_line", "stop_server", "using_server"]

_STATE = "arcticqa-server.json"
_LOCK = "arcticqa-server.lock"
_USERS = "arcticqa-server.users"
_LOG = "arcticqa-server.log"
#: the switches Prefect's SubprocessASGIServer gives its temporary server (its services, one app),
#: but with the UI on (``_serve``)
_SERVER_ENV = {"PREFECT_UI_ENABLED": "1", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
_ENV_PREFIXES = ("PREFECT_", "LC_")
_ENV_KEEP = frozenset({"PATH", "HOME", "LANG", "TZ", "TMPDIR", "DO_NOT_TRACK", "VIRTUAL_ENV", "PYTHONPATH",
                       "SSL_CERT_FILE", "SSL_CERT_DIR"})

#: no proxy from the environment for a loopback health check
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class SharedServer:
    pid: int
    port: int

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def ui_url(self) -> str:
        """Prefect's UI, which this server serves beside its API (the flow runs, their artifacts)."""
        return f"http://127.0.0.1:{self.port}/"


def prefect_home() -> Path:
    """Prefect's own ``PREFECT_HOME`` rule: the variable, else ``~/.prefect``."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser().resolve()


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / _LOCK, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (our own child that exited, not yet reaped) is not a server
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def _ours(pid: int) -> bool:
    """``pid`` is alive and is a shared server (not another process that got its pid since)."""
    try:
        return _alive(pid) and b"flows.prefect_server" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _read_state(home: Path) -> SharedServer | None:
    try:
        raw = json.loads((home / _STATE).read_text())
        return SharedServer(pid=int(raw["pid"]), port=int(raw["port"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_state(home: Path, server: SharedServer) -> None:
    tmp = home / f".{_STATE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"pid": server.pid, "port": server.port, "api_url": server.api_url}))
    tmp.replace(home / _STATE)


def _forget(home: Path, pid: int) -> None:
    """Remove the state file if it still names ``pid`` (a newer server's file stays)."""
    state = _read_state(home)
    if state is not None and state.pid == pid:
        (home / _STATE).unlink(missing_ok=True)


def _healthy(server: SharedServer, timeout: float = 2.0) -> bool:
    try:
        with _LOOPBACK.open(f"{server.api_url}/health", timeout=timeout) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def running_server(home: Path | None = None) -> SharedServer | None:
    """The shared server of ``home`` (default: ``PREFECT_HOME``) if it is alive and healthy."""
    home = home or prefect_home()
    state = _read_state(home)
    if state is not None and _ours(state.pid) and _healthy(state):
        return state
    return None


def startup_timeout_s() -> float:
    """How long a build waits for a starting server: ``PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS``
    (which importing ``flows`` sets to 90 unless the user did), read without importing Prefect."""
    return float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 90)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn(home: Path, idle_shutdown_s: float) -> SharedServer:
    port = _free_port()
    # Prefect's settings and what an interpreter needs, nothing else: this process outlives the
    # build that starts it, and must not keep that build's API keys in its environment
    env = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) or k in _ENV_KEEP}
    env.update({**_SERVER_ENV, "PREFECT_HOME": str(home)})
    env.pop("PREFECT_API_URL", None)
    with open(home / _LOG, "ab") as log:
        # a session of its own: Ctrl-C in the build's terminal must not stop a server other
        # builds may be using
        process = subprocess.Popen([sys.executable, "-m", "flows.prefect_server", "--port", str(port),
                                    "--idle-shutdown", str(idle_shutdown_s)],
                                   env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=str(Path(__file__).resolve().parent.parent))
    server = SharedServer(pid=process.pid, port=port)
    _write_state(home, server)
    return server


def _answers_within(server: SharedServer, timeout_s: float, waiting: Callable[[], None] | None = None) -> bool:
    """Whether ``server`` answers its health check within ``timeout_s`` (False as soon as it exits);
    ``waiting`` is called before each check."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(server.pid):
        if waiting is not None:
            waiting()
        if _healthy(server):
            return True
        time.sleep(0.1)
    return False


def _no_answer(home: Path, server: SharedServer, timeout_s: float) -> BuildFailed:
    log = (home / _LOG).read_text(errors="replace").strip().splitlines()[-5:] if (home / _LOG).exists() else []
    return BuildFailed(f"the shared Prefect server (pid {server.pid}, {server.api_url}) did not answer within "
                       f"{timeout_s:.0f} s; its log {home / _LOG} ends: {' | '.join(log) or '(empty)'}")


def ensure_server(idle_shutdown_s: float, timeout_s: float = 90.0, home: Path | None = None) -> SharedServer:
    """The shared server of ``home``, healthy: the running one, or one started now.

    Holds the lock while it waits, so a second build that starts meanwhile waits for this
    server instead of starting its own. A server that exits while starting (its port was taken
    in between) is started once more on another port.
    """
    return _ensure(home or prefect_home(), idle_shutdown_s, timeout_s, attempts=2)


def _ensure(home: Path, idle_shutdown_s: float, timeout_s: float, *, attempts: int) -> SharedServer:
    with _locked(home):
        for _attempt in range(attempts):
            found = _read_state(home)
            state = found if found is not None and _ours(found.pid) else _spawn(home, idle_shutdown_s)
            if _answers_within(state, timeout_s):
                return state
            if _alive(state.pid):
                break  # alive but never healthy within the timeout: do not start another one
            _forget(home, state.pid)
        raise _no_answer(home, state, timeout_s)


def start_server(idle_shutdown_s: float, home: Path | None = None) -> tuple[SharedServer, bool]:
    """The shared server of ``home``, started now unless one is there, without waiting for it to
    answer (one that is there may be answering already, or still starting); and whether this
    call started it.

    The state file names a new server before the lock is released, so a build that starts
    meanwhile waits for this server instead of starting its own.
    """
    home = home or prefect_home()
    with _locked(home):
        found = _read_state(home)
        if found is not None and _ours(found.pid):
            return found, False
        return _spawn(home, idle_shutdown_s), True


def wait_for_server(server: SharedServer, idle_shutdown_s: float, timeout_s: float = 90.0,
                    home: Path | None = None, waiting: Callable[[], None] | None = None) -> SharedServer:
    """``server`` (from :func:`start_server`) once it answers, waiting up to ``timeout_s`` from now
    and calling ``waiting`` every 0.1 s meanwhile (a progress line).

    A server that exited while starting is replaced as :func:`ensure_server` does (once, on
    another port); one that is alive but does not answer in time is an error, the same one.
    """
    home = home or prefect_home()
    if _answers_within(server, timeout_s, waiting):
        return server
    if _alive(server.pid):
        raise _no_answer(home, server, timeout_s)
    return _ensure(home, idle_shutdown_s, timeout_s, attempts=1)


@contextmanager
def waiting_line(server: SharedServer, *, advice: bool = True) -> Iterator[Callable[[], None]]:
    """A ``waiting`` for :func:`wait_for_server`: one line on stderr while a build (or ``arcticqa
    prefect start``) waits for the shared server; on a terminal it counts the seconds in place and
    says when the server answered, elsewhere it is written once. ``advice``: the line says how to
    start the server ahead of a build."""
    started = time.monotonic()
    tty = sys.stderr.isatty()
    shown: list[int] = []
    what = (f"waiting for the Prefect server to start (pid {server.pid}, {server.api_url}"
            + ("; `arcticqa prefect start` starts it ahead of a build)" if advice else ")"))

    def waiting() -> None:
        seconds = int(time.monotonic() - started)
        if not shown or (tty and seconds != shown[-1]):
            sys.stderr.write(f"\r{what}: {seconds} s" if tty else f"{what}\n")
            sys.stderr.flush()
            shown.append(seconds)

    answered = False
    try:
        yield waiting
        answered = True
    finally:
        if shown and tty:
            end = f": answered after {time.monotonic() - started:.1f} s" if answered else ""
            sys.stderr.write(f"\r{what}{end}\n" if end else "\n")
            sys.stderr.flush()


@contextmanager
def using_server(home: Path | None = None) -> Iterator[None]:
    """Mark this process as a user of the shared server while the block runs (it does not idle
    out meanwhile); enter it before :func:`ensure_server`, so there is no gap."""
    users = (home or prefect_home()) / _USERS
    users.mkdir(parents=True, exist_ok=True)
    mark = users / str(os.getpid())
    mark.write_text("")
    try:
        yield
    finally:
        mark.unlink(missing_ok=True)


def stop_server(home: Path | None = None, timeout_s: float = 20.0) -> SharedServer | None:
    """Stop the shared server of ``home`` (SIGTERM, then SIGKILL after ``timeout_s``); returns the
    server stopped, or None if none was running."""
    home = home or prefect_home()
    with _locked(home):
        state = _read_state(home)
        if state is None:
            return None
        if not _ours(state.pid):
            _forget(home, state.pid)
            return None
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while _alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
            while _alive(state.pid):
                time.sleep(0.05)
        _forget(home, state.pid)
        return state


def _live_users(home: Path) -> int:
    users = home / _USERS
    live = 0
    for mark in users.glob("*") if users.is_dir() else ():
        try:
            pid = int(mark.name)
        except ValueError:
            continue
        if _alive(pid):
            live += 1
        else:  # a build killed without cleaning up
            mark.unlink(missing_ok=True)
    return live


def _serve(port: int, idle_shutdown_s: float) -> None:
    """The server process: Prefect's API app under uvicorn, Prefect's UI beside it, plus the idle
    watch."""
    # the UI asks the API at this server's own address (Prefect's default is port 4200)
    os.environ.update({**_SERVER_ENV, "PREFECT_UI_API_URL": f"http://127.0.0.1:{port}/api"})
    # imported here: the build processes that import this module never load Prefect's server
    import uvicorn
    from prefect.server.api.server import create_app, create_ui_app

    home = prefect_home()
    # the API app as Prefect's temporary server runs it (its services, no UI), and the UI app as
    # `prefect server start` serves it (~0.3 s more start-up; the static files are copied once)
    app = create_app()
    ui = create_ui_app(ephemeral=False)
    last_request = [time.monotonic()]

    async def activity(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            last_request[0] = time.monotonic()  # the UI open in a browser keeps it up too
        if scope["type"] != "lifespan" and not str(scope.get("path", "")).startswith("/api"):
            await ui(scope, receive, send)
            return
        await app(scope, receive, send)

    server = uvicorn.Server(uvicorn.Config(activity, host="127.0.0.1", port=port, log_level="error",
                                           lifespan="on"))

    async def watch_idle() -> None:
        unlisted = 0
        while not server.should_exit:
            await asyncio.sleep(min(5.0, max(idle_shutdown_s / 4, 0.2)))
            state = _read_state(home)
            # twice in a row, not once: the state file is written just after this process starts
            unlisted = unlisted + 1 if state is None or state.pid != os.getpid() else 0
            if unlisted >= 2:
                # its PREFECT_HOME was removed (a temporary folder) or names another server: no
                # build can find this one any more
                server.should_exit = True
            elif _live_users(home):
                last_request[0] = time.monotonic()
            elif time.monotonic() - last_request[0] > idle_shutdown_s:
                server.should_exit = True

    async def run() -> None:
        await _first_request(app)
        watcher = asyncio.create_task(watch_idle())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    try:
        asyncio.run(run())
    finally:
        # no lock here: ``stop_server`` holds it while it waits for this process to end; and no
        # newer server can have replaced the state file while this one is alive
        _forget(home, os.getpid())


async def _first_request(app: Any) -> None:
    """One API request to the app in this process before it serves: FastAPI works out every
    route's request handling on the first request the API app matches (~0.5 s of CPU for
    Prefect's ~180 routes, measured with curl on a fresh server: the first API request 0.54 s, the
    next 4 ms). Paid here, before the server answers its health checks, it is not paid by the
    first API call of the flow run that waited for it.
    (``/api/health`` does not count: it is answered before the API app.)"""
    import httpx

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        await client.get("/api/admin/version")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The Prefect API server builds share (started by arcticqa build).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--idle-shutdown", type=float, default=600.0, help="seconds without a request or a build")
    args = parser.parse_args(argv)
    _serve(args.port, args.idle_shutdown)


if __name__ == "__main__":
    main()
