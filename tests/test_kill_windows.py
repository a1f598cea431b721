"""A build killed at every commit boundary, in turn, resumes to the reference release.

``$ARCTICQA_TEST_EXIT_AFTER_COMMIT=k`` (``arcticqa/store/db.py``) makes the build process die
with ``os._exit(137)`` right after its k-th write commit, as SIGKILL would: no cleanup, no
flush. k runs from 1 until the build finishes first, so every window is hit once: after each
discovery page and after its papers' insert (the stages start on them while discovery goes on),
after each ``stage_run`` and each ``llm_call`` row. Each killed store is then resumed (``run_build`` with
``discover=False``, what ``arcticqa resume`` runs) and must export byte-for-byte the reference
release, with ``PRAGMA integrity_check`` ok, no duplicate rows, and no request sent again after
its answer was stored. The killed build runs in a forked child to save an interpreter start per
window; tests/test_build_pipeline.py covers the ``arcticqa resume`` command itself.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path

import pytest

from arcticqa.config import load_settings
from arcticqa.pipeline.export import export_from_store
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import EXIT_AFTER_COMMIT_ENV
from arcticqa.store.store import Store, open_store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config
from tests.test_crash_consistency import _check_store, _row_counts

SECRET = "sk-test-kill-windows"


def _killed_build(config: Path, k: int) -> int:
    """Build in a forked child (no interpreter start-up to pay per window) that dies after its
    k-th commit; returns its exit code (137: killed, 0: finished first)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.environ[EXIT_AFTER_COMMIT_ENV] = str(k)
            build_in_process(config)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _config(work: Path, base_url: str, corpus: Path) -> Path:
    config = write_config(work, base_url=base_url, corpus=corpus)
    # one record a discovery page, so the snapshot takes two page commits; the extractor's child
    # process only adds start-up time here (its isolation has its own tests)
    config.write_text(config.read_text(encoding="utf-8")
                      + "\n[discovery]\npage_size = 1\n\n[extraction]\nisolate = false\n", encoding="utf-8")
    return config


def _release(config: Path, out: Path) -> dict[str, bytes]:
    settings = load_settings(config)
    store = open_store(settings)
    try:
        export_from_store(store, settings, out, release_id="kill-windows")
    finally:
        store.close()
    return {name: (out / name).read_bytes() for name in ("items.jsonl", "conditions.jsonl")}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_kill_after_every_commit_resumes_to_the_reference_release(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)
    monkeypatch.delenv(EXIT_AFTER_COMMIT_ENV, raising=False)
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = _config(tmp_path / "reference", srv.base_url, corpus)
        build_in_process(reference)
        expected = _release(reference, tmp_path / "reference-release")
        expected_counts = _row_counts(tmp_path / "reference" / "arcticqa.db")
    assert expected["items.jsonl"].count(b"\n") == 2

    windows: list[dict[str, int]] = []
    for k in range(1, 500):
        work = tmp_path / f"kill-{k:03d}"
        with FakeOpenAIServer(ScriptedModel()) as srv:
            config = _config(work, srv.base_url, corpus)
            code = _killed_build(config, k)
            if code == 0:
                break  # the build finished before its k-th commit: every boundary was hit
            assert code == 137, f"kill after commit {k}: the build failed by itself (exit {code})"
            store = Store(load_settings(config).store.url)
            answered = {json.dumps(c.request["messages"], sort_keys=True) for c in store.llm_calls()
                        if c.parsed is not None and c.request and not c.cache_hit}
            papers_at_kill = len(store.paper_ids(include_duplicates=True))
            with sqlite3.connect(work / "arcticqa.db") as con:
                discovery_done = con.execute("SELECT count(*) FROM discovery_page WHERE token_out IS NULL"
                                             ).fetchone()[0] > 0
            sent_before = len(srv.requests)
            summary = build_in_process(config, resume=True)  # what `arcticqa resume` runs
            assert not summary["errors"] and not summary["stopped"], (k, summary)
            resent = {json.dumps(r.body["messages"], sort_keys=True) for r in srv.requests[sent_before:]}
        assert not answered & resent, f"kill after commit {k}: a request whose answer was stored was sent again"
        _check_store(store, work / "arcticqa.db", expected_counts)
        store.close()
        assert _release(config, work / "release") == expected, f"kill after commit {k}: another release"
        windows.append({"k": k, "papers": papers_at_kill, "discovery_done": discovery_done,
                        "answers": len(answered)})
    else:
        pytest.fail("the build never finished: the exit hook fired on every run")
    print(f"{len(windows)} commit boundaries killed and resumed")  # the figure docs/reliability.md quotes
    # the boundaries really covered the build: discovery half done with no paper added, papers added
    # while discovery still ran (the stages start on each page's papers), discovery done before any
    # answer, papers added but no answer stored, and answers stored (a resume after the last page
    # but before its papers were added: the test below)
    assert len(windows) >= 20, windows
    assert any(w["papers"] == 0 and not w["discovery_done"] for w in windows), windows
    assert any(w["papers"] > 0 and not w["discovery_done"] for w in windows), windows
    assert any(w["discovery_done"] and w["answers"] == 0 for w in windows), windows
    assert any(w["papers"] > 0 and w["answers"] == 0 for w in windows), windows
    assert any(w["answers"] > 0 for w in windows), windows


def test_resume_adds_the_papers_of_a_discovery_killed_after_its_last_page(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from arcticqa.pipeline.discovery import StoreCheckpoint
    from arcticqa.stages.discover import discover

    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = _config(tmp_path / "work", srv.base_url, corpus)
        settings = load_settings(config)
        store = Store(settings.store.url)
        # every page recorded and marked done, then the kill: no paper added
        asyncio.run(discover([], source=settings.build.source, checkpoint=StoreCheckpoint(store)))
        assert store.paper_ids() == [] and len(StoreCheckpoint(store).all_records()) == 2
        summary = build_in_process(config, resume=True)
        assert summary["discovered"]["new_papers"] == 2 and summary["discovered"]["records_this_run"] == 0
        assert summary["stages"]["construct"] == {"succeeded": 2}
        assert build_in_process(config, resume=True)["discovered"] is None  # nothing left to finish
        store.close()


def test_resume_of_a_build_killed_before_any_discovery_runs_the_whole_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = _config(tmp_path / "work", srv.base_url, corpus)
        Store(load_settings(config).store.url).close()  # the store was created, then the kill
        summary = build_in_process(config, resume=True)
    assert summary["discovered"]["new_papers"] == 2
    assert summary["stages"]["construct"] == {"succeeded": 2}
