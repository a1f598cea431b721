"""Crash consistency: SIGKILL the build at 20 seeded points, resume, and get the same store.

Each run starts ``python -m arcticqa build --orchestrator local`` on the fixture corpus (the
model stand-in adds latency so the kill can land anywhere), kills it with SIGKILL once the
store holds a seeded number of ``stage_run`` rows (plus a seeded few milliseconds), then runs
``python -m arcticqa resume --orchestrator local``. The final items must equal an uninterrupted
build's; ``PRAGMA integrity_check`` must be ok; no (paper, stage, subject) may have succeeded
twice; no item, span or successful model answer may be duplicated; and no request whose answer
was recorded before the kill may be sent again. Also: a disk that fills up during ``export``
leaves the target folder exactly as it was.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import load_settings
from arcticqa.errors import OutputError
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config
from tests.release_factories import export, make_item
from tests.test_build_pipeline import _items

SECRET = "sk-test-crash"
REPO = Path(__file__).resolve().parent.parent
RUNS = 20


def _cli(config: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    return subprocess.Popen([sys.executable, "-m", "arcticqa", *args, "-c", str(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)


def _stage_rows(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2) as con:
            return int(con.execute("SELECT count(*) FROM stage_run").fetchone()[0])
    except sqlite3.Error:  # not migrated yet, or busy for a moment
        return 0


#: tables whose rows are attempts (more after a crash is expected); every other table must hold
#: exactly as many rows as after an uninterrupted build
_ATTEMPT_TABLES = {"stage_run", "llm_call", "worker", "alembic_version"}


def _row_counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                for t in tables if t not in _ATTEMPT_TABLES and not t.startswith("sqlite_")}


def _check_store(store: Store, db: Path, expected_counts: dict[str, int]) -> None:
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    counts = _row_counts(db)
    assert counts == expected_counts, {t: (n, expected_counts.get(t)) for t, n in counts.items()
                                       if n != expected_counts.get(t)}
    succeeded = Counter((r.paper_id, r.stage, r.subject) for r in store.runs(status="succeeded"))
    assert all(n == 1 for n in succeeded.values()), "a succeeded stage ran again"
    assert not store.runs(status="running"), "a running row survived the resume"
    answers = Counter(c.request_hash for c in store.llm_calls() if c.parsed is not None and not c.cache_hit)
    assert all(n == 1 for n in answers.values()), "a model answer was paid for twice"


@pytest.mark.slow
def test_twenty_seeded_sigkills_then_resume_equal_an_uninterrupted_build(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = write_config(tmp_path / "reference", base_url=srv.base_url, corpus=corpus)
        build_in_process(reference)
        ref_store = Store(load_settings(reference).store.url)
        expected = _items(ref_store)
        total_rows = len(ref_store.runs())
        expected_counts = _row_counts(tmp_path / "reference" / "arcticqa.db")
    assert len(expected) == 3 and total_rows > 20

    outcomes: list[dict[str, Any]] = []
    for seed in range(RUNS):
        rng = random.Random(seed)
        kill_at = rng.randint(1, total_rows - 1)
        extra_s = rng.uniform(0.0, 0.05)
        work = tmp_path / f"run-{seed:02d}"
        with FakeOpenAIServer(ScriptedModel(), latency=0.03) as srv:
            config = write_config(work, base_url=srv.base_url, corpus=corpus)
            # the store is what is under test here; the extractor's child process only adds start-up
            # time (its isolation has its own tests in test_hostile_pdfs.py)
            config.write_text(config.read_text(encoding="utf-8") + "\n[extraction]\nisolate = false\n",
                              encoding="utf-8")
            db = work / "arcticqa.db"
            proc = _cli(config, "build", "--orchestrator", "local")
            deadline = time.monotonic() + 90
            while _stage_rows(db) < kill_at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(extra_s)
            finished_first = proc.poll() is not None
            if not finished_first:
                os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
            time.sleep(0.1)  # let in-flight requests reach the server's log
            sent_before = len(srv.requests)
            store = Store(load_settings(config).store.url)
            rows_at_kill = len(store.runs())
            answered = {json.dumps(c.request["messages"], sort_keys=True) for c in store.llm_calls()
                        if c.parsed is not None and c.request and not c.cache_hit}

            resumed = _cli(config, "resume", "--orchestrator", "local")
            out, _ = resumed.communicate(timeout=180)
            assert resumed.returncode == 0, (seed, out)
            resent = {json.dumps(r.body["messages"], sort_keys=True) for r in srv.requests[sent_before:]}
        assert not answered & resent, f"seed {seed}: a request whose answer was recorded was sent again"
        assert _items(store) == expected, f"seed {seed}: the resumed store differs"
        _check_store(store, db, expected_counts)
        store.close()
        outcomes.append({"seed": seed, "kill_at": kill_at, "rows_at_kill": rows_at_kill,
                         "killed": not finished_first, "answers_before": len(answered)})
    # the seeds really spread the kills over the build, early stages and model calls alike
    killed = [o for o in outcomes if o["killed"]]
    assert len(killed) >= RUNS - 2, outcomes
    assert min(o["rows_at_kill"] for o in killed) < total_rows // 4, outcomes
    assert any(o["answers_before"] > 0 for o in killed) and any(o["answers_before"] == 0 for o in killed)


# --- disk full during export ---------------------------------------------------------------

def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(path.rglob("*"))}


def test_disk_full_during_export_leaves_the_target_untouched(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    target = export([make_item(1)], tmp_path / "out" / "release")
    before = _tree(tmp_path / "out")
    real_write = Path.write_bytes
    written: list[str] = []

    def full_disk(self: Path, data: bytes) -> int:  # type: ignore[override]
        # the device fills up on the third file: a few bytes land, then ENOSPC
        if len(written) == 2:
            with self.open("wb") as fh:
                fh.write(data[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        written.append(self.name)
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with pytest.raises(OutputError, match="No space left on device") as info:  # one line, exit 2
        export([make_item(1), make_item(2)], target, overwrite=True)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
    monkeypatch.undo()
    assert _tree(tmp_path / "out") == before  # the old release as it was, no temp folder left
    fresh = tmp_path / "fresh"
    monkeypatch.setattr(Path, "write_bytes", full_disk)
    written.clear()
    with pytest.raises(OutputError, match="No space left on device"):
        export([make_item(1)], fresh / "release")
    monkeypatch.undo()
    assert not (fresh / "release").exists() and list(fresh.iterdir()) == []


def _mount_tiny_tmpfs(where: Path) -> bool:
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)], capture_output=True)
    return done.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_export_to_a_really_full_tmpfs_is_atomic(tmp_path: Path) -> None:
    mount = tmp_path / "tiny"
    if not _mount_tiny_tmpfs(mount):
        pytest.skip("cannot mount a tmpfs here (no CAP_SYS_ADMIN)")
    try:
        small = export([make_item(1)], mount / "release")
        before = _tree(mount)
        big = "x" * 4000  # many items with long evidence: more than 256 KiB in all
        with pytest.raises(OutputError, match="No space left on device") as info:
            export([make_item(i, evidence_text=f"{big} {i}") for i in range(1, 90)], small, overwrite=True,
                   include_evidence=True)
        assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
        assert _tree(mount) == before
    finally:
        subprocess.run(["umount", str(mount)], check=False)
