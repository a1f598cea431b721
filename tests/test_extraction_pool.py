"""The extraction pool (``arcticqa.text.pool``): same documents as the isolated child, caps per
document, and no process left behind however the parent ends.

The documents are the sample corpus's PDFs (a scan, a corrupt file, Russian text, one and two
columns) and PDFs typeset by real LaTeX classes: the journal-layout fixtures
(``tests/data/journal_layouts``) where present, and the TeX Live documentation
(``/usr/share/doc/texlive-doc``) where the machine has it, which nobody here wrote.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arcticqa.errors import StageError
from arcticqa.evidence import Document
from arcticqa.stages.extract_text import ExtractionLimits, extract_document
from arcticqa.text.isolate import extract_isolated
from arcticqa.text.pool import ExtractionPool, pool_supported, shared_pool
from tests.test_hostile_pdfs import bomb_pdf

REPO = Path(__file__).resolve().parent.parent
SAMPLE_PDFS = sorted((REPO / "data" / "sample_corpus" / "pdf").glob("*.pdf"))
TEXLIVE_DOCS = Path("/usr/share/doc/texlive-doc")
#: journal-class layouts typeset by LaTeX (the journal-layout fixtures, where this checkout has them)
JOURNAL_PDFS = sorted((REPO / "tests" / "data" / "journal_layouts").glob("*.pdf"))

pytestmark = pytest.mark.skipif(not pool_supported(), reason="the extraction pool needs Linux (pidfd, fork)")


def _texlive_pdfs(n: int = 8) -> list[Path]:
    small = sorted(p for p in TEXLIVE_DOCS.rglob("*.pdf") if p.stat().st_size < 200_000)
    return small[:: max(1, len(small) // n)][:n]


def _comparable(document: Document) -> dict[str, Any]:
    """Everything but the timings, which differ between any two runs."""
    dumped = document.model_dump(mode="json")
    dumped["stats"] = {k: v for k, v in dumped["stats"].items() if not k.startswith("time_")}
    return dumped


@pytest.fixture
def pool() -> Iterator[ExtractionPool]:
    own = ExtractionPool(2)
    yield own
    own.close()


def _same_documents(paths: list[Path], pool: ExtractionPool) -> None:
    limits = ExtractionLimits()
    for path in paths:
        data = path.read_bytes()
        old, new = extract_isolated(data, limits), pool.extract(data, limits)
        assert _comparable(new) == _comparable(old), path


def test_the_pool_gives_the_isolated_childs_documents_for_the_sample_corpus(pool: ExtractionPool) -> None:
    assert len(SAMPLE_PDFS) >= 10
    with_statuses = {extract_document(p, ExtractionLimits(isolate=False)).status for p in SAMPLE_PDFS}
    assert "ok" in with_statuses and len(with_statuses) > 1  # good and failing documents both
    _same_documents(SAMPLE_PDFS, pool)


def test_the_pool_gives_the_isolated_childs_documents_for_latex_typeset_pdfs(pool: ExtractionPool) -> None:
    pdfs = JOURNAL_PDFS + _texlive_pdfs()
    if not pdfs:
        pytest.skip(f"no LaTeX-typeset PDFs here: no tests/data/journal_layouts, none under {TEXLIVE_DOCS}")
    _same_documents(pdfs, pool)


def test_many_threads_share_the_capped_pool(pool: ExtractionPool) -> None:
    expected = {p: _comparable(extract_document(p, ExtractionLimits(isolate=False))) for p in SAMPLE_PDFS}
    results: dict[Path, dict[str, Any]] = {}
    peak = 0
    lock = threading.Lock()

    def work(path: Path) -> None:
        document = pool.extract(path.read_bytes(), ExtractionLimits())
        with lock:
            results[path] = _comparable(document)

    def watch(stop: threading.Event) -> None:
        nonlocal peak
        while not stop.is_set():
            zygote = pool.zygote_pid
            if zygote is not None:
                peak = max(peak, len(_children(zygote)))
            time.sleep(0.002)

    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stop,))
    watcher.start()
    try:
        threads = [threading.Thread(target=work, args=(p,)) for p in SAMPLE_PDFS * 2]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        stop.set()
        watcher.join()
    for path in SAMPLE_PDFS:
        assert results[path]["stats"].pop("isolated") is True
        assert results[path] == expected[path], path
    assert 1 <= peak <= 2  # never more children than slots


def _extract_in_fork(path: str, conn: Any) -> None:
    pool = shared_pool()
    conn.send((pool.extract(Path(path).read_bytes(), ExtractionLimits()).text, pool.zygote_pid))


def test_a_forked_build_process_starts_its_own_zygote_and_leaves_the_parents_alone() -> None:
    import multiprocessing

    good = SAMPLE_PDFS[0]
    pool = shared_pool()
    text = pool.extract(good.read_bytes(), ExtractionLimits()).text
    zygote = pool.zygote_pid
    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_extract_in_fork, args=(str(good), theirs))
    child.start()
    child_text, child_zygote = ours.recv()
    child.join(30)
    assert child.exitcode == 0 and child_text == text
    assert child_zygote not in (None, zygote)
    assert _wait_gone([child_zygote]) == []  # the fork's own zygote ended with it
    assert pool.extract(good.read_bytes(), ExtractionLimits()).text == text and pool.zygote_pid == zygote


# -- processes ---------------------------------------------------------------------------------------
def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a dead process nobody reaped is not running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], seconds: float = 15.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p for p in pids if _running(p)]
        if not alive:
            return []
        time.sleep(0.05)
    return [p for p in pids if _running(p)]


_DRIVER = (
    "import json, sys, threading, time\n"
    "from arcticqa.stages.extract_text import ExtractionLimits\n"
    "from arcticqa.text.pool import shared_pool\n"
    "pool = shared_pool(2)\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    # the bomb takes seconds in the child, long enough to be caught mid-extraction
    "limits = ExtractionLimits(memory_limit_mb=4096, time_limit_s=600)\n"
    "threading.Thread(target=pool.extract, args=(data, limits), daemon=True).start()\n"
    "while pool.zygote_pid is None:\n"
    "    time.sleep(0.01)\n"
    "print(json.dumps({'zygote': pool.zygote_pid}), flush=True)\n"
    "time.sleep(600)\n"
)


def _start_driver(tmp_path: Path) -> tuple[subprocess.Popen[str], int, int]:
    """A process with a pool extracting a bomb; returns it, its zygote and the (stopped) child."""
    pdf = tmp_path / "bomb.pdf"
    pdf.write_bytes(bomb_pdf(512))
    driver = subprocess.Popen([sys.executable, "-c", _DRIVER, str(pdf)], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    assert driver.stdout is not None
    zygote = json.loads(driver.stdout.readline())["zygote"]
    deadline = time.monotonic() + 30
    while not (children := _children(zygote)):
        assert time.monotonic() < deadline, "the zygote never forked the extraction child"
        time.sleep(0.005)
    child = children[0]
    # stopped, the child cannot finish (or fail) by itself: only a kill can end it now
    os.kill(child, signal.SIGSTOP)
    return driver, zygote, child


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    started = _start_driver(tmp_path)
    yield started
    for pid in started[1:]:  # whatever the test's outcome, leave nothing behind
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    started[0].kill()
    started[0].wait()


def test_no_extraction_outlives_a_killed_parent(driver: tuple[subprocess.Popen[str], int, int]) -> None:
    parent, zygote, child = driver
    assert _running(zygote) and _running(child)
    parent.kill()
    parent.wait()
    assert _wait_gone([zygote, child]) == []


def test_a_child_dies_with_its_zygote_even_if_nobody_cleans_up(driver: tuple[subprocess.Popen[str], int, int]
                                                               ) -> None:
    # SIGKILL to the zygote too: it has no chance to kill its children; the parent-death signal does
    _, zygote, child = driver
    os.kill(zygote, signal.SIGKILL)
    assert _wait_gone([child]) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_and_sigterm_end_the_parent_and_its_pool(driver: tuple[subprocess.Popen[str], int, int],
                                                        sig: signal.Signals) -> None:
    parent, zygote, child = driver
    parent.send_signal(sig)
    parent.wait(timeout=30)  # SIGINT: KeyboardInterrupt, the pool closes at exit; SIGTERM: killed
    assert parent.returncode != 0
    assert _wait_gone([zygote, child]) == []


def test_a_dead_zygote_is_replaced_and_an_interrupted_child_is_an_error_not_a_status() -> None:
    good = SAMPLE_PDFS[0].read_bytes()
    pool = ExtractionPool(1)
    try:
        first = pool.extract(good, ExtractionLimits())
        zygote = pool.zygote_pid
        assert zygote is not None
        os.kill(zygote, signal.SIGTERM)
        assert _wait_gone([zygote]) == []
        assert _comparable(pool.extract(good, ExtractionLimits())) == _comparable(first)
        assert pool.zygote_pid not in (None, zygote)

        # a Ctrl-C that reached the child: the build must not record "corrupt" for a good PDF
        result: list[BaseException | Document] = []
        slow = bomb_pdf(512)

        def work() -> None:
            try:
                result.append(pool.extract(slow, ExtractionLimits(memory_limit_mb=4096)))
            except BaseException as exc:  # noqa: BLE001 - the test inspects it
                result.append(exc)

        worker = threading.Thread(target=work)
        worker.start()
        zygote = pool.zygote_pid
        assert zygote is not None
        deadline = time.monotonic() + 30
        while not (children := _children(zygote)):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(children[0], signal.SIGINT)
        worker.join(30)
        assert len(result) == 1 and isinstance(result[0], StageError), result
        assert "interrupted" in str(result[0])

        # the zygote killed under an extraction in flight: an error too, and the pool recovers
        result.clear()
        worker = threading.Thread(target=work)
        worker.start()
        zygote = pool.zygote_pid
        assert zygote is not None
        while not _children(zygote):
            assert time.monotonic() < deadline + 30
            time.sleep(0.005)
        os.kill(zygote, signal.SIGKILL)
        worker.join(30)
        assert len(result) == 1 and isinstance(result[0], StageError), result
        assert "pool stopped" in str(result[0])
        assert _comparable(pool.extract(good, ExtractionLimits())) == _comparable(first)
    finally:
        pool.close()
