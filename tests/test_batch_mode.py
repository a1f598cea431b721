"""Build roles through the OpenAI Batch API (``arcticqa build --batch``), against the stand-in's
files + batches endpoints on loopback, with the real openai + instructor clients.

What must hold: the same items as a live build with zero live chat requests, one job per
construction round, every call recorded (with the batch price), failed / expired jobs and failed
lines retried in later jobs, and a build stopped while a job runs resumes by polling that job
instead of sending its requests again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import load_settings
from arcticqa.standins.replies import Fault
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config

KEY = "sk-test-batch-key-77"
REPO = Path(__file__).resolve().parent.parent
FAST_BATCH = "batch_linger_s = 0.3\nbatch_poll_s = 0.05\n"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", KEY)


def _build(config: Path, *, batch: bool) -> dict[str, Any]:
    settings = load_settings(config)
    settings.build.batch = batch
    settings.build.batch_size = 10  # the three papers in one stage batch: one job per round
    return build_in_process(settings)


def _items(config: Path) -> list[dict[str, Any]]:
    store = Store(load_settings(config).store.url)
    try:
        items = [dict(row.payload or {}) for row in store.items()]
    finally:
        store.close()
    # the same question, options and evidence; ids and provenance depend on the run
    return sorted(({k: item[k] for k in ("question", "options", "answer_index", "evidence") if k in item}
                   for item in items), key=lambda i: json.dumps(i, sort_keys=True))


def _chat_posts(server: FakeOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.rstrip("/").endswith("/chat/completions"))


def test_batch_build_matches_a_live_build_without_live_calls(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as live_srv:
        live = write_config(tmp_path / "live", base_url=live_srv.base_url, corpus=corpus)
        _build(live, batch=False)
        live_calls = _chat_posts(live_srv)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        cfg = write_config(tmp_path / "batch", base_url=srv.base_url, corpus=corpus, model_extra=FAST_BATCH)
        summary = _build(cfg, batch=True)
        assert _chat_posts(srv) == 0, "a batch-mode role sent a live chat request"
        assert srv.batches_created >= 1
        assert len(srv.batch_lines) == live_calls  # the same requests, carried by jobs
        # papers advance together: one job per construction round (findings, question,
        # reconstruct, verify, distractors), not one per paper
        assert srv.batches_created <= 6, srv.batches_created
        assert all(line["url"] == "/v1/chat/completions" for line in srv.batch_lines)
        assert {line["custom_id"].split("|")[0] for line in srv.batch_lines} >= {
            "finding_extractor", "question_writer", "reconstructor", "verifier", "distractor_writer"}
    assert summary["stages"]["construct"].get("succeeded") == 3
    assert _items(cfg) == _items(live) and _items(cfg)

    store = Store(load_settings(cfg).store.url)
    try:
        calls = [c for c in store.llm_calls() if not c.cache_hit]
        jobs = store.batches()
    finally:
        store.close()
    assert len(calls) == live_calls and all(c.parsed is not None and c.error is None for c in calls)
    assert all((c.request or {}).get("via") == "batch" for c in calls)
    # the batch price: half of what the same tokens cost live (stand-in prices 1 and 2 USD/Mtok)
    assert all(c.cost_usd == pytest.approx((c.tokens_in * 1.0 + c.tokens_out * 2.0) / 1e6 * 0.5) for c in calls)
    assert len(jobs) == srv.batches_created and all(j.status == "ingested" and j.error is None for j in jobs)
    assert sum(j.request_count for j in jobs) == live_calls == sum(j.answered for j in jobs)
    files = sorted((load_settings(cfg).build.data_dir / "batches").glob("batch-*.jsonl"))
    assert len(files) == len(jobs)  # the JSONL batch files are kept for the audit
    assert sum(len(f.read_text().splitlines()) for f in files) == live_calls

    # a second batch build over the same store asks nothing: every step is done
    with FakeOpenAIServer(ScriptedModel()) as again:
        cfg2 = write_config(tmp_path / "batch", base_url=again.base_url, corpus=corpus, model_extra=FAST_BATCH)
        _build(cfg2, batch=True)
        assert again.batches_created == 0 and _chat_posts(again) == 0


def test_failed_and_expired_jobs_and_failed_lines_are_retried_in_later_jobs(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    model = ScriptedModel()
    first_verifier = {"left": 1}

    def responder(body: dict[str, Any], headers: Any) -> Any:
        # one verifier line answers 500 once; its retry must go out in a later job
        if headers.get("x-arcticqa-role") == "verifier" and first_verifier["left"]:
            first_verifier["left"] -= 1
            return Fault(500)
        return model(body, headers)

    fates = {1: "failed", 2: "expired"}
    with FakeOpenAIServer(responder, batch_fate=lambda n: fates.get(n)) as srv:
        cfg = write_config(tmp_path, base_url=srv.base_url, corpus=corpus, model_extra=FAST_BATCH)
        summary = _build(cfg, batch=True)
        created = srv.batches_created
    assert summary["stages"]["construct"].get("succeeded") == 3, summary
    # more jobs than the 5 rounds: the failed job's, the expired half's and the 500 line's requests
    # went out again (retries share a job with the next round's requests when they coincide)
    assert created >= 6, created
    store = Store(load_settings(cfg).store.url)
    try:
        jobs = store.batches()
        calls = store.llm_calls()
    finally:
        store.close()
    notes = [j.error or "" for j in jobs]
    assert any(n.startswith("failed") for n in notes) and any(n.startswith("expired") for n in notes)
    failed_attempts = [c for c in calls if c.error]
    assert failed_attempts and all("batch" in (c.error or "") or "500" in (c.error or "") or "Internal" in
                                   (c.error or "") for c in failed_attempts)
    assert len(_items(cfg)) == 3


@pytest.mark.slow
def test_a_build_stopped_during_a_job_resumes_by_polling_it_not_resending(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel(), batch_latency=4.0) as srv:
        cfg = write_config(tmp_path, base_url=srv.base_url, corpus=corpus,
                           model_extra="batch_linger_s = 0.3\nbatch_poll_s = 0.1\n")
        env = {**os.environ, "ARCTICQA_TEST_KEY": KEY, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
               "DO_NOT_TRACK": "1", "ARCTICQA_BUILD__BATCH_SIZE": "10"}
        proc = subprocess.Popen([sys.executable, "-m", "arcticqa", "build", "--orchestrator", "local", "--batch",
                                 "-c", str(cfg)], env=env, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while srv.batches_created == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srv.batches_created == 1, "no job was submitted"
        time.sleep(0.5)  # the job is recorded and in progress (4 s at the stand-in)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        first_lines = len(srv.batch_lines)
        assert first_lines == 3  # the three papers' finding requests

        resumed = subprocess.run([sys.executable, "-m", "arcticqa", "resume", "--orchestrator", "local", "--batch",
                                  "-c", str(cfg)], env=env, cwd=REPO, capture_output=True, text=True, timeout=180)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        bodies = [json.dumps(line["body"], sort_keys=True) for line in srv.batch_lines]
        assert len(bodies) == len(set(bodies)), "a request that was in the killed build's job was sent again"
        assert _chat_posts(srv) == 0
    assert len(_items(cfg)) == 3
