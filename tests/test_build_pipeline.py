"""The build end to end: every stage, resume after kill -9, idempotence, a failing model, secrets.

Papers are real PDFs rendered by the tests; the models are a prompt-reading stand-in behind the
OpenAI-compatible loopback server, reached through the real openai + instructor path.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from arcticqa.config import load_settings
from arcticqa.pipeline.export import export_from_store
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.validate import validate_release
from arcticqa.standins.replies import Fault, Reply, json_reply, role_of
from arcticqa.standins.scripted import prompt_spans, results_finding
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import (
    DocumentRow,
    FetchRow,
    FindingRow,
    ItemRow,
    QuestionRow,
    ReconstructionRow,
    ScreeningDecision,
    SpanRow,
    StageRun,
    VerificationRow,
)
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config

SECRET = "sk-test-SECRET-build-4b1d"
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", SECRET)


def _cli(config: Path, *args: str, **kw: Any) -> subprocess.Popen[str]:
    env = {**os.environ, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1"}
    return subprocess.Popen([sys.executable, "-m", "arcticqa", *args, "-c", str(config)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO, **kw)


def _items(store: Store) -> list[dict[str, Any]]:
    return sorted((dict(row.payload or {}) for row in store.items()), key=lambda p: p["item_id"])


def _chat_requests(server: FakeOpenAIServer) -> list[str]:
    return [json.dumps(r.body["messages"], sort_keys=True) for r in server.requests]


def test_build_records_every_stage_and_model_call(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        summary = build_in_process(config)
    assert summary["stages"]["construct"] == {"succeeded": 3}
    store = Store(load_settings(config).store.url)
    with read_session(store.engine) as s:
        for table in (ScreeningDecision, FetchRow, DocumentRow, SpanRow, FindingRow, QuestionRow,
                      ReconstructionRow, VerificationRow, ItemRow):
            assert s.exec(select(table)).first() is not None, table.__tablename__
        stages = {r.stage for r in s.exec(select(StageRun)).all()}
    assert {"prefilter", "fetch_fulltext", "extract_text", "eligibility", "construct", "findings",
            "question", "reconstruct", "verify", "distractors", "option_check", "accept"} <= stages
    calls = store.llm_calls()
    assert {c.role for c in calls} >= {"finding_extractor", "question_writer", "reconstructor", "verifier",
                                       "distractor_writer"}
    assert all(c.prompt_version and c.request and c.raw_response for c in calls)
    items = _items(store)
    assert len(items) == 3
    assert all(len(i["distractors"]) == 4 for i in items)


def test_second_build_sends_no_requests_and_adds_no_rows(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        build_in_process(config)
        sent = len(srv.requests)
        store = Store(load_settings(config).store.url)
        with read_session(store.engine) as s:
            before = {t.__tablename__: len(s.exec(select(t)).all()) for t in (StageRun, ItemRow, SpanRow)}
        summary = build_in_process(config)
        assert len(srv.requests) == sent
    with read_session(store.engine) as s:
        after = {t.__tablename__: len(s.exec(select(t)).all()) for t in (StageRun, ItemRow, SpanRow)}
    assert after == before
    assert summary["stages"]["construct"] == {"skipped": 3}
    assert len(store.llm_calls()) == sent


def test_failing_model_marks_the_stage_failed_and_resume_completes_it(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    model = ScriptedModel()
    model.fail_when, model.failing = "Fram Strait", True
    with FakeOpenAIServer(model) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        summary = build_in_process(config)
        assert summary["stages"]["construct"] == {"succeeded": 2, "failed": 1}
        store = Store(load_settings(config).store.url)
        failed = store.runs(stage="construct", status="failed")
        assert len(failed) == 1 and failed[0].error_class == "LLMTransportError"
        assert "500" in (failed[0].error_message or "")
        model.failing = False  # the endpoint recovers
        done = _cli(config, "resume", "--orchestrator", "local")
        out, _ = done.communicate(timeout=120)
        assert done.returncode == 0, out
    assert {r.status for r in store.runs(stage="construct")} == {"succeeded"}
    assert len(_items(store)) == 3


def test_kill_minus_nine_then_resume_equals_an_uninterrupted_build(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        reference = write_config(tmp_path / "reference", base_url=srv.base_url, corpus=corpus)
        build_in_process(reference)
        expected = _items(Store(load_settings(reference).store.url))

    with FakeOpenAIServer(ScriptedModel(), latency=0.25) as srv:
        work = tmp_path / "killed"
        work.mkdir()
        config = write_config(work, base_url=srv.base_url, corpus=corpus)
        proc = _cli(config, "build", "--orchestrator", "local")
        deadline = time.monotonic() + 60
        while len(srv.requests) < 6 and time.monotonic() < deadline:  # mid-construction
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        time.sleep(0.3)  # let in-flight requests reach the log
        before_kill = len(srv.requests)
        store = Store(load_settings(config).store.url)
        answered = {json.dumps(c.request["messages"], sort_keys=True) for c in store.llm_calls()
                    if c.parsed is not None and c.request}
        succeeded_before = {(r.paper_id, r.stage, r.subject) for r in store.runs(status="succeeded")}
        assert answered, "the build was killed before any model answer was recorded"
        assert any(r.status == "running" for r in store.runs()) or len(_items(store)) < 3

        resumed = _cli(config, "resume", "--orchestrator", "local")
        out, _ = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, out

        after_kill = _chat_requests(srv)[before_kill:]
        assert not answered & set(after_kill), "a request whose answer was recorded was sent again"

    assert _items(store) == expected
    with read_session(store.engine) as s:
        runs = s.exec(select(StageRun)).all()
    reran = Counter((r.paper_id, r.stage, r.subject) for r in runs if r.status == "succeeded")
    assert all(n == 1 for n in reran.values()), "a succeeded stage ran again"
    assert succeeded_before <= set(reran)


def test_api_key_never_in_store_or_logs(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    model = ScriptedModel()
    model.fail_when, model.failing = "Nansen Basin", True
    with FakeOpenAIServer(model) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        proc = _cli(config, "build", "--orchestrator", "local")
        out, _ = proc.communicate(timeout=120)
        status = _cli(config, "status", "--json")
        out2, _ = status.communicate(timeout=60)
        assert srv.requests and all(r.headers["authorization"] == f"Bearer {SECRET}" for r in srv.requests)
    assert "LLMTransportError" in out  # the failure was reported ...
    assert SECRET not in out and SECRET not in out2  # ... without the key
    scanned = 0
    for f in tmp_path.rglob("*"):
        if f.is_file():
            scanned += 1
            assert SECRET.encode() not in f.read_bytes(), f
    assert scanned > 5


def test_export_validate_audit_and_funnel_from_a_built_store(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    model = ScriptedModel()
    model.fail_when, model.failing = "Kongsfjorden", True  # one paper fails, so the audit has content
    with FakeOpenAIServer(model) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        build_in_process(config)
    out = tmp_path / "out"
    for args in (["export", "--out", str(out / "release")], ["audit", "--html", str(out / "audit.html")],
                 ["funnel", "--out", str(out / "funnel.svg")]):
        proc = _cli(config, *args)
        text, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, (args, text)
    check = subprocess.run([sys.executable, "-m", "arcticqa", "validate-release", str(out / "release")],
                           capture_output=True, text=True, cwd=REPO, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr
    lines = (out / "release" / "items.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    item = json.loads(lines[0])
    assert item["status"] == "machine_accepted_unverified" and len(item["distractors"]) == 4
    assert all("text" not in e or e["text"] is None for e in item.get("evidence", []))  # licence-safe default
    manifest = json.loads((out / "release" / "MANIFEST.json").read_text(encoding="utf-8"))
    assert manifest["counts"]["items"] == 2 and "metadata" in manifest["policy_hashes"]
    html = (out / "audit.html").read_text(encoding="utf-8")
    assert "construct" in html and "<svg" in (out / "funnel.svg").read_text(encoding="utf-8")
    store = Store(load_settings(config).store.url)
    funnel = {s.name: s.count for s in funnel_counts(store).steps}
    assert funnel["discovered"] == 3 and funnel["accepted"] == 2


class _VerifierJudgesFramStrait(ScriptedModel):
    """The scripted model, except that the blind reconstruction of the Fram Strait paper answers in
    words the answer matcher cannot decide ("just under a quarter" for 23%), and the verifier, asked
    to judge equivalence, says they are equivalent: that item's answer match is the model's."""

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        reply = super().__call__(body, headers)
        role = role_of(headers)
        if isinstance(reply, Reply) and role in ("reconstructor", "verifier") and reply.content:
            sid, site, _pct = results_finding(prompt_spans(body))
            if site == "Fram Strait":
                content = json.loads(reply.content)
                if role == "reconstructor":
                    content["answer"] = "just under a quarter"
                else:
                    content["answers_equivalent"] = True
                return json_reply(content)
        return reply


def test_the_release_says_who_decided_the_answer_match(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)  # Nansen Basin 18%, Fram Strait 23%
    with FakeOpenAIServer(_VerifierJudgesFramStrait()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        build_in_process(config)
        # the verifier is asked to judge equivalence only where the matcher could not decide
        asked = sorted("means the same as the gold answer" in json.dumps(r.body["messages"])
                       for r in srv.requests_for("verifier"))
    assert asked == [False, True]
    settings = load_settings(config)
    store = Store(settings.store.url)
    stored = {p["gold_answer"]: p["answer_match_confidence"] for p in _items(store)}
    assert stored == {"18%": "deterministic", "23%": "model"}
    out = export_from_store(store, settings, tmp_path / "release")
    assert validate_release(out).ok
    rows = {r["gold_answer"]: r for r in map(json.loads, (out / "items.jsonl").read_text(encoding="utf-8").splitlines())}
    assert rows["18%"]["answer_match"] == "deterministic-match"  # "18 %" is 18%: the matcher decided
    assert rows["23%"]["answer_match"] == "model-verified"  # "just under a quarter": the verifier judged
    # the numeric distractors are proved wrong by rule in both items, so only the 18% item is rule-decided throughout
    assert {d["verification"] for r in rows.values() for d in r["distractors"]} == {"deterministic-contradiction"}
    counts = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))["counts"]
    assert counts["items_by_answer_match"] == {"deterministic-match": 1, "model-verified": 1}
    assert counts["distractors_by_verification"] == {"deterministic-contradiction": 8}
    assert counts["items_all_deterministic"] == 1
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| Answer match (2 items) | 1 `deterministic-match` | 1 `model-verified` |" in card
    assert "| 8 `deterministic-contradiction` | 0 `model-verified` |" in card
    assert "1 of 2 items had every part decided by a rule" in card


def test_resume_finishes_an_interrupted_discovery_and_starts_no_new_one(tmp_path: Path) -> None:
    from arcticqa.pipeline.discovery import StoreCheckpoint
    from arcticqa.stages.discover import DiscoveryOptions, discover

    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        settings = load_settings(config)
        store = Store(settings.store.url)
        # a discovery killed after its first page: one of three records recorded
        asyncio.run(discover([], source=settings.build.source, checkpoint=StoreCheckpoint(store),
                             options=DiscoveryOptions(page_size=1, max_pages=1)))
        assert len(StoreCheckpoint(store).all_records()) == 1
        summary = build_in_process(config, resume=True)
        assert summary["discovered"] is not None and summary["discovered"]["new_papers"] == 3
        assert summary["stages"]["construct"] == {"succeeded": 3}
        again = build_in_process(config, resume=True)
        assert again["discovered"] is None  # nothing unfinished: resume starts no discovery


def test_stage_batches_hold_the_papers_the_stage_before_passed_and_stages_overlap(tmp_path: Path) -> None:
    from arcticqa.pipeline.build import run_build
    from arcticqa.pipeline.runner import BatchReport, StageSpec, open_build_context, run_stage_batch

    corpus = make_corpus(tmp_path / "corpus", n=6)
    # most discovered papers stop at the prefilter (no Arctic keyword), as they do at scale
    with corpus.open("a", encoding="utf-8") as out:
        for i in range(12):
            out.write(json.dumps({"paperId": f"grass{i:02d}", "title": f"Soil respiration in grazed grassland {i}",
                                  "abstract": "We measured soil respiration in temperate grassland plots.",
                                  "year": 2020, "publicationTypes": ["JournalArticle"]}) + "\n")
    batches: list[tuple[str, list[str], BatchReport, float, float]] = []
    with FakeOpenAIServer(ScriptedModel()) as srv:
        settings = load_settings(write_config(tmp_path, base_url=srv.base_url, corpus=corpus))

        async def build() -> Any:
            async with open_build_context(settings) as ctx:
                async def run_batch(spec: StageSpec, ids: list[str]) -> BatchReport:
                    started = time.monotonic()
                    report = await run_stage_batch(ctx, spec, ids)
                    batches.append((spec.name, ids, report, started, time.monotonic()))
                    return report
                return await run_build(ctx, run_batch)

        summary = asyncio.run(build())
    order = ["prefilter", "fetch_fulltext", "extract_text", "eligibility", "construct"]
    passed: dict[str, set[str]] = {stage: set() for stage in order}
    for stage, ids, report, _, _ in batches:
        assert len(ids) <= settings.build.batch_size
        passed[stage] |= set(report.passed)
        before = order[order.index(stage) - 1] if stage != "prefilter" else None
        if before is not None:  # a batch holds only papers the stage before passed
            assert set(ids) <= passed[before], (stage, ids)
    assert len(passed["prefilter"]) == 6 and len(passed["construct"]) == 6
    # a paper that did not reach a stage counts as blocked there, as the stage would have found it
    assert summary.stages["prefilter"] == {"succeeded": 6, "rejected": 12}
    assert summary.stages["fetch_fulltext"] == {"succeeded": 6, "blocked": 12}
    assert summary.stages["construct"] == {"succeeded": 6, "blocked": 12}
    # stages overlap: construction starts before the last PDF is extracted
    first_construct = min(t0 for stage, _, _, t0, _ in batches if stage == "construct")
    last_extract = max(t1 for stage, _, _, _, t1 in batches if stage == "extract_text")
    assert first_construct < last_extract
