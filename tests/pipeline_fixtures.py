"""Fixture papers and a prompt-reading scripted model for whole-pipeline tests.

The papers are real PDFs rendered by the project's typesetter; the "model" answers each role by
reading the rendered prompt the gateway sent (span ids and all), like a real model would, so the
tests drive the real openai + instructor path over loopback HTTP.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import Settings, load_settings
from arcticqa.pipeline.build import build
from arcticqa.standins.scripted import ScriptedModel, prompt_spans, results_finding
from arcticqa.standins.synthetic import mooring_paper, stand_in_config, write_corpus
from arcticqa.text.render import PaperSource

__all__ = ["SITES", "MORE_SITES", "make_corpus", "ScriptedModel", "AnswerWhenAllConstruct", "write_config",
           "build_in_process",
           "postgres_server"]

#: (site name, latitude, longitude, percent decrease) per fixture paper
SITES = [
    ("Nansen Basin", 84.0, 30.0, 18),
    ("Fram Strait", 79.0, 2.0, 23),
    ("Kongsfjorden", 78.95, 11.9, 12),
]

#: further Arctic sites, so scale-out tests can build more than three papers (papers 3, 4, ...)
MORE_SITES = [
    ("Barents Sea", 76.0, 35.0, 15),
    ("Laptev Sea", 76.5, 125.0, 21),
    ("Kara Sea", 75.0, 70.0, 14),
    ("East Siberian Sea", 74.0, 160.0, 19),
    ("Hinlopen Strait", 79.5, 19.0, 16),
]

def _paper(i: int) -> tuple[dict[str, Any], PaperSource]:
    site, lat, lon, pct = (SITES + MORE_SITES)[i]
    return mooring_paper(i, site=site, lat=lat, lon=lon, pct=pct)


def make_corpus(directory: Path, n: int = 3) -> Path:
    """Render ``n`` (at most ``len(SITES + MORE_SITES)``) fixture papers and their S2-shaped
    snapshot; returns the JSONL path."""
    return write_corpus(directory, (_paper(i) for i in range(n)))


# the prompt readers, under the names the tests import
_spans = prompt_spans
_result = results_finding


def write_config(directory: Path, *, base_url: str, corpus: Path, api_key_env: str = "ARCTICQA_TEST_KEY",
                 extra: str = "", store_url: str | None = None, model_extra: str = "") -> Path:
    """An arcticqa.toml that sends every role to the stand-in server (``extra``: more [build] keys;
    ``model_extra``: more keys of the model config; ``store_url``: a store other than
    ``<directory>/arcticqa.db``)."""
    return stand_in_config(directory, base_url=base_url, corpus=corpus, api_key_env=api_key_env,
                           store_url=store_url, build=f"batch_size = 2\npaper_concurrency = 2\n{extra}",
                           model="max_retries = 2\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\n"
                                 f"timeout_s = 10\n{model_extra}")


class AnswerWhenAllConstruct:
    """A stand-in responder that holds every completion until ``workers`` build processes have
    each claimed a paper's construction (``claimed()`` counts them in the store, read by the test
    with its own driver, so the test never migrates the store under the build).

    Tests of several build processes on one store need it: without it, a process that starts a
    few seconds before the other can finish every paper alone, and the work is shared by timing
    only. A process claims a paper before it asks the model about it, so the gate cannot lock.
    Each answer waits at most ``hold_s``, inside the client's timeout (a timed-out request would
    be sent again); until the gate opens, answers are slow, which leaves the others time to start.
    """

    def __init__(self, inner: Callable[[dict[str, Any], Mapping[str, str]], Any], claimed: Callable[[], int], *,
                 workers: int, hold_s: float = 4.0) -> None:
        self.inner, self.claimed, self.workers, self.hold_s = inner, claimed, workers, hold_s
        self._open = threading.Event()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        deadline = time.monotonic() + self.hold_s
        while not self._open.is_set() and time.monotonic() < deadline:
            if self.claimed() >= self.workers:
                self._open.set()
            else:
                time.sleep(0.2)
        return self.inner(body, headers)


def build_in_process(config: Path | Settings, *, resume: bool = False) -> dict[str, Any]:
    """One whole build (``resume``: without discovery) in this process; its summary as JSON data."""
    settings = config if isinstance(config, Settings) else load_settings(config)
    return build(settings, resume=resume).model_dump(mode="json")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server(db: str = "arcticqa") -> Iterator[str]:
    """A throwaway PostgreSQL server on a free loopback port; yields the SQLAlchemy URL of ``db``.

    Uses the Debian packages' binaries (``apt-get install -y postgresql``) and skips when they
    are absent. PostgreSQL refuses to run as root, so as root the cluster belongs to the
    ``postgres`` user, in a fresh folder under the system temp dir (pytest's tmp_path is
    root-only). Durability is switched off: the data dies with the test.
    """
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    bindir = next((Path(b) for b in reversed(bindirs) if (Path(b) / "initdb").exists()), None)
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                    "(apt-get install -y postgresql)")
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root and shutil.which("runuser") is None:
        pytest.skip("running as root, and runuser (util-linux) is missing to start PostgreSQL as postgres")
    base = Path(tempfile.mkdtemp(prefix="arcticqa-pg-"))
    if as_root:
        shutil.chown(base, user="postgres", group="postgres")
    data, port = base / "data", _free_port()

    def run(*args: str) -> None:
        proc = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)
        if proc.returncode != 0:
            log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
            raise RuntimeError(f"{args[0]} failed: {proc.stdout}{proc.stderr}{log}")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--no-sync", "--no-instructions")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
            "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off "
                  "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200", "start")
        started = True
        if db != "postgres":  # initdb made that one
            run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", db)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{db}"
    finally:
        if started:
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60, cwd=base)
        shutil.rmtree(base, ignore_errors=True)
