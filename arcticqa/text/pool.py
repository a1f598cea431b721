"""A capped pool of PDF extraction workers: a zygote that imported PyMuPDF once forks one child per PDF.

:mod:`arcticqa.text.isolate` starts a fresh interpreter per PDF; its start-up (interpreter,
pydantic, PyMuPDF) costs ~0.35 s of CPU, about fifty times the parsing of a typical paper. Here a
*zygote* process (``python -m arcticqa.text.pool``, started once per pool with the same minimal
environment as the isolated child) imports the extractor once and forks a child per document. The
child does what the isolated child does: it caps its own address space (``RLIMIT_AS``) and CPU time
(``RLIMIT_CPU``) before it reads a byte, extracts, and writes the Document as JSON. So every
document still gets a fresh, capped process, and one killed by a cap costs that document only: the
next request forks a new child. Persistent workers that parse many documents were measured too and
rejected (``docs/performance.md``): they save ~3 ms per PDF over a fork, but a document that hit a
cap leaves the worker in an unknown state, and a CPU limit per document is not expressible with
``RLIMIT_CPU``, which counts the process's whole life.

Protocol. The parent talks to the zygote over a ``SOCK_SEQPACKET`` control socket: per document
it sends ``{"op": "extract", "id", "limits"}`` together with one end of a fresh socket pair
(``SCM_RIGHTS``); the zygote forks a child that owns that socket, reads the PDF from it and writes
the result back on it, so the zygote never touches untrusted bytes. The zygote reports the child's
exit (``{"id", "exit", "maxrss_kb", "cpu_s"}``, from ``wait4``); the parent asks it to kill a
child whose wall-clock time ran out (``{"op": "kill", "id"}``; the zygote signals through a pidfd,
so a recycled pid is never hit).

Lifetime. The zygote ignores SIGINT (the parent decides), kills its children and exits on SIGTERM,
on end-of-file on the control socket (the parent closed the pool or died) and when its parent
process changes. Each child has ``PR_SET_PDEATHSIG = SIGKILL`` towards the (single-threaded)
zygote, so no extraction outlives the pool.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import hashlib
import itertools
import json
import math
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

if __name__ == "__main__":
    # as in arcticqa.text.isolate: the extractor never uses pymupdf's optional layout package
    sys.modules.setdefault("pymupdf.layout", None)  # type: ignore[arg-type]

from pydantic import ValidationError  # noqa: E402

from arcticqa.config import ExtractionLimits  # noqa: E402
from arcticqa.errors import StageError  # noqa: E402
from arcticqa.evidence import Document  # noqa: E402
from arcticqa.text.extract import extract_pdf_bytes  # noqa: E402
from arcticqa.text.isolate import _child_env, _failed, _limit_self  # noqa: E402

__all__ = ["ExtractionPool", "ChildUsage", "shared_pool", "pool_supported", "default_workers", "KILL_GRACE_S"]

#: wall-clock allowance on top of ``time_limit_s``: a forked child starts in milliseconds, so this
#: covers only moving the bytes and the machine's load
KILL_GRACE_S = 5.0
#: how long to wait for the zygote's exit report once the child's socket is closed
_REPORT_WAIT_S = 30.0
#: how long the zygote may take to import the extractor on a loaded machine
_START_WAIT_S = 60.0
#: the child's exit code when Python raised MemoryError under the address-space cap
_EXIT_MEMORY = 3
_EXIT_ERROR = 4
_ERROR_MARK = b"\x00error\x00"
_MEMORY_SIGNALS = {signal.SIGKILL, signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS}
_PR_SET_PDEATHSIG = 1
_MAX_MESSAGE = 65536


def pool_supported() -> bool:
    """Whether this platform has what the zygote needs (Linux: fork, pidfd, ``SCM_RIGHTS``)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def default_workers() -> int:
    """One worker per core this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class ChildUsage:
    """What the zygote measured of one extraction child (``wait4``): its exit and its own peak."""

    exit: int  # a returncode: negative for the signal that ended it
    maxrss_kb: int
    cpu_s: float


class _Pending:
    __slots__ = ("done", "usage")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.usage: ChildUsage | None = None


class ExtractionPool:
    """At most ``workers`` capped extraction children at a time, forked from one zygote.

    Thread-safe: :meth:`extract` may be called from many threads (the build's stage runner calls it
    through ``asyncio.to_thread``); calls beyond ``workers`` wait for a free slot.
    """

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()
        self._slots = threading.BoundedSemaphore(self.workers)
        self._lock = threading.Lock()  # zygote start/stop, sends on the control socket, ``_pending``
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        self._control: socket.socket | None = None
        self._zygote: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        _ALL_POOLS.add(self)

    # -- lifetime -------------------------------------------------------------------------------
    def _start(self) -> socket.socket:
        """The control socket of a running zygote, starting one if needed (caller holds ``_lock``)."""
        if self._control is not None and self._zygote is not None and self._zygote.poll() is None:
            return self._control
        self._stop_locked()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        errors = tempfile.TemporaryFile()
        try:
            zygote = subprocess.Popen(
                [sys.executable, "-m", "arcticqa.text.pool", str(theirs.fileno())], pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, env=_child_env())
        finally:
            theirs.close()
        ours.settimeout(_START_WAIT_S)
        try:
            ready = ours.recv(_MAX_MESSAGE)  # the zygote says so once the extractor is imported
        except TimeoutError:
            ready = b""
        ours.settimeout(None)
        if ready != b'{"ready": true}':
            zygote.kill()
            zygote.wait()
            errors.seek(0)
            tail = errors.read().decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            errors.close()
            ours.close()
            raise StageError(f"the PDF extraction pool did not start: {tail[0][:300]}")
        errors.close()
        self._control, self._zygote = ours, zygote
        self._reader = threading.Thread(target=self._read_reports, args=(ours,), name="extraction-pool",
                                        daemon=True)
        self._reader.start()
        return ours

    def _stop_locked(self) -> None:
        control, zygote = self._control, self._zygote
        self._control = self._zygote = None
        if control is not None:
            # shutdown, not just close: it wakes the reader thread blocked in recv and gives the
            # zygote its end-of-file (it kills its children and exits)
            try:
                control.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            control.close()
        if zygote is not None:
            try:
                zygote.wait(timeout=5)
            except subprocess.TimeoutExpired:
                zygote.kill()
                zygote.wait()
        for pending in self._pending.values():
            pending.done.set()  # no report will come; the caller says so
        self._pending.clear()

    def _forget_after_fork(self) -> None:
        """In a process forked from the pool's owner: drop the owner's zygote without touching it.

        The control socket is shared with the owner, so it is closed, never shut down (that would
        cut the owner's pool off); this process starts its own zygote when it extracts."""
        if self._control is not None:
            self._control.close()
        self._control = self._zygote = self._reader = None
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(self.workers)
        self._pending = {}

    def close(self) -> None:
        """Kill any running extraction and stop the zygote; later calls start a new one."""
        with self._lock:
            self._stop_locked()

    @property
    def zygote_pid(self) -> int | None:
        zygote = self._zygote
        return zygote.pid if zygote is not None else None

    def _read_reports(self, control: socket.socket) -> None:
        while True:
            try:
                message = control.recv(_MAX_MESSAGE)
            except OSError:
                message = b""
            if not message:  # the zygote is gone: nobody will report on what is pending
                with self._lock:
                    if self._control is control:
                        for pending in self._pending.values():
                            pending.done.set()
                        self._pending.clear()
                return
            report = json.loads(message)
            with self._lock:
                waiting = self._pending.pop(int(report["id"]), None)
            if waiting is not None:
                waiting.usage = ChildUsage(exit=report["exit"], maxrss_kb=report["maxrss_kb"], cpu_s=report["cpu_s"])
                waiting.done.set()

    # -- one document ---------------------------------------------------------------------------
    def extract(self, data: bytes, limits: ExtractionLimits) -> Document:
        """Extract ``data`` in a fresh capped child; failures are statuses, as in ``extract_isolated``."""
        return self.extract_measured(data, limits)[0]

    def extract_measured(self, data: bytes, limits: ExtractionLimits) -> tuple[Document, ChildUsage | None]:
        """:meth:`extract` and the child's own exit, peak RSS and CPU (``None`` if the zygote died).

        Raises :class:`~arcticqa.errors.StageError` when the child was interrupted (SIGINT/SIGTERM)
        or the zygote died under it: a failed run (retried on resume), not a status of the PDF.
        """
        sha = hashlib.sha256(data).hexdigest()
        wall = limits.time_limit_s + KILL_GRACE_S
        with self._slots:
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                request_id, pending = self._submit(limits, theirs)
            finally:
                theirs.close()
            with ours:
                deadline = time.monotonic() + wall
                output = self._exchange(ours, data, deadline)
            if output is None:  # out of wall-clock time: have it killed, then collect the report
                self._kill(request_id)
            pending.done.wait(_REPORT_WAIT_S)
        usage = pending.usage
        if output is None:
            return _failed(sha, "timeout", f"extraction killed after {wall:.0f}s (time limit "
                           f"{limits.time_limit_s}s plus {KILL_GRACE_S:.0f}s)"), usage
        if usage is None:  # the zygote died (or the pool was closed): nothing is known about the PDF
            raise StageError(f"the extraction pool stopped before {sha[:12]} was extracted")
        return _document(sha, usage, output, limits), usage

    def _submit(self, limits: ExtractionLimits, theirs: socket.socket) -> tuple[int, _Pending]:
        request = {"op": "extract", "limits": limits.model_dump(mode="json")}
        with self._lock:
            control = self._start()
            request_id = next(self._ids)
            pending = self._pending[request_id] = _Pending()
            socket.send_fds(control, [json.dumps(request | {"id": request_id}).encode()], [theirs.fileno()])
        return request_id, pending

    def _kill(self, request_id: int) -> None:
        with self._lock:
            if self._control is not None and request_id in self._pending:
                try:
                    self._control.send(json.dumps({"op": "kill", "id": request_id}).encode())
                except OSError:
                    pass  # the zygote is gone, and its children with it

    @staticmethod
    def _exchange(sock: socket.socket, data: bytes, deadline: float) -> bytes | None:
        """Send the PDF, read what the child answers until it closes; ``None`` when time ran out."""
        chunks: list[bytes] = []
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            try:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the child died before reading it all (a cap at start-up): its exit says why
            while True:
                sock.settimeout(max(0.001, deadline - time.monotonic()))
                try:
                    chunk = sock.recv(1 << 20)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            return None
        return b"".join(chunks)


def _document(sha: str, usage: ChildUsage, output: bytes, limits: ExtractionLimits) -> Document:
    """The Document for one finished child, with the same statuses and messages as the isolated child."""
    code = usage.exit
    if code == 0:
        try:
            document = Document.model_validate_json(output)
        except ValidationError as exc:
            return _failed(sha, "corrupt", f"the extractor's output was unreadable: {exc.errors()[0]['msg']}")
        document.stats["isolated"] = True
        return document
    tail = output.partition(_ERROR_MARK)[2].decode("utf-8", "replace").strip()
    if code in (-signal.SIGINT, -signal.SIGTERM):
        # stopped from outside, not by a cap: the document says nothing about the PDF, so the run
        # fails (and is retried on resume) instead of recording a rejection
        raise StageError(f"the extraction of {sha[:12]} was interrupted (signal {-code})")
    if code == -signal.SIGXCPU:
        return _failed(sha, "timeout", f"extraction used more than {math.ceil(limits.time_limit_s)}s of CPU")
    if code == _EXIT_MEMORY or (code < 0 and -code in _MEMORY_SIGNALS):
        return _failed(sha, "too_large", f"extraction exceeded the memory limit of {limits.memory_limit_mb} "
                       f"MB (exit {code}) {tail[:200]}".strip())
    return _failed(sha, "corrupt", f"the extractor process failed (exit {code}): {tail[:300]}")


# -- one pool per worker count and process ------------------------------------------------------------
_ALL_POOLS: weakref.WeakSet[ExtractionPool] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # a fork of the build process (bench workers, multiprocessing "fork") must not hold the
    # parent's control socket open (the zygote would outlive the parent) nor reuse its zygote
    global _SHARED_LOCK
    _SHARED_LOCK = threading.Lock()  # it may have been held by another thread at the fork
    for pool in list(_ALL_POOLS):
        pool._forget_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
_SHARED: dict[int, ExtractionPool] = {}
_SHARED_LOCK = threading.Lock()


def shared_pool(workers: int | None = None) -> ExtractionPool:
    """This process's pool with ``workers`` slots (default: one per core), stopped at exit."""
    count = workers or default_workers()
    with _SHARED_LOCK:
        pool = _SHARED.get(count)
        if pool is None:
            if not _SHARED:
                atexit.register(_close_shared)
            pool = _SHARED[count] = ExtractionPool(count)
        return pool


def _close_shared() -> None:
    with _SHARED_LOCK:
        for pool in _SHARED.values():
            pool.close()
        _SHARED.clear()


# -- the zygote --------------------------------------------------------------------------------------
def _set_parent_death_signal() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        os._exit(_EXIT_ERROR)


def _child(sock: socket.socket, limits: ExtractionLimits, zygote: int) -> None:
    """In the forked child: cap, read the PDF, extract, answer; never returns."""
    code = 0
    try:
        # Ctrl-C reaches the whole process group: an extraction in flight ends at once (and the
        # parent reports it as interrupted), while the zygote, which ignores SIGINT, waits for the
        # parent to close the pool
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        _set_parent_death_signal()
        if os.getppid() != zygote:  # the zygote died between fork and prctl
            os._exit(_EXIT_ERROR)
        _limit_self(limits)  # before the untrusted bytes are even read
        chunks = []
        while chunk := sock.recv(1 << 20):
            chunks.append(chunk)
        document = extract_pdf_bytes(b"".join(chunks), limits.model_copy(update={"isolate": False}))
        sock.sendall(document.model_dump_json().encode("utf-8"))
    except MemoryError:
        code = _EXIT_MEMORY
    except BaseException as exc:  # noqa: BLE001 - the parent turns any failure into a status
        code = _EXIT_ERROR
        try:
            sock.sendall(_ERROR_MARK + f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
        except BaseException:  # noqa: BLE001
            pass
    finally:
        os._exit(code)


def _warm_up() -> None:
    """Extract one small generated PDF in the zygote, so that MuPDF's lazily built state (the base
    fonts, glyph caches) and Python's first-use caches are built once and shared with every child
    rather than rebuilt in each."""
    import pymupdf

    with pymupdf.open() as doc:
        page = doc.new_page()
        for n, font in enumerate(("helv", "tiro", "cour")):
            page.insert_text((72, 72 + 14 * n), "Warm-up: sea-ice extent 12.5% (n = 3).", fontname=font, fontsize=9)
        data = doc.tobytes()
    extract_pdf_bytes(data, ExtractionLimits(isolate=False)).model_dump_json()


def _serve(control: socket.socket) -> None:
    """The zygote's loop: fork a child per request, report each exit, kill on request."""
    me, parent = os.getpid(), os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    children: dict[int, tuple[int, int]] = {}  # pidfd -> (request id, pid)
    by_request: dict[int, int] = {}  # request id -> pidfd
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)

    def stop(*_: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    # a forked child shares the zygote's pages until it writes to them; a collection in the child
    # would write to every tracked object (the GC header) and copy most of the heap: move the
    # zygote's objects out of the collector's sight once, before the first fork
    _warm_up()
    gc.collect()
    gc.freeze()
    try:
        control.send(b'{"ready": true}')
        # from here on nobody reads the zygote's stderr (the parent's capture file is gone), and
        # children report their errors on their own sockets: MuPDF's messages go nowhere
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
        while True:
            events = selector.select(timeout=1.0)
            if os.getppid() != parent:
                return
            for key, _ in events:
                if key.fileobj is control:
                    message, fds, _flags, _addr = socket.recv_fds(control, _MAX_MESSAGE, 1)
                    if not message:
                        return  # the parent closed the pool or died
                    request = json.loads(message)
                    if request["op"] == "kill":
                        pidfd = by_request.get(request["id"])
                        if pidfd is not None:
                            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                        continue
                    sock = socket.socket(fileno=fds[0])
                    limits = ExtractionLimits.model_validate(request["limits"])
                    pid = os.fork()
                    if pid == 0:
                        selector.close()
                        control.close()
                        for sibling in children:
                            os.close(sibling)
                        _child(sock, limits, me)
                    sock.close()
                    pidfd = os.pidfd_open(pid)
                    children[pidfd] = (request["id"], pid)
                    by_request[request["id"]] = pidfd
                    selector.register(pidfd, selectors.EVENT_READ)
                else:
                    pidfd = key.fd
                    request_id, pid = children.pop(pidfd)
                    by_request.pop(request_id, None)
                    selector.unregister(pidfd)
                    os.close(pidfd)
                    _, status, usage = os.wait4(pid, 0)
                    report = {"id": request_id, "exit": os.waitstatus_to_exitcode(status),
                              "maxrss_kb": usage.ru_maxrss, "cpu_s": usage.ru_utime + usage.ru_stime}
                    try:
                        control.send(json.dumps(report).encode())
                    except OSError:
                        return
    finally:
        for pidfd, (_, pid) in children.items():
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass


def _main(argv: list[str]) -> int:
    control = socket.socket(fileno=int(argv[1]))
    _serve(control)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
