"""Early stages: the first build of a session runs discovery and the stages that call no model,
then the later stages until the server answers, while the shared Prefect server it started is
still starting (``[prefect] early_stages``). Which papers the model stages reach before the server
answers depends on the machine's speed; tests/test_early_work.py puts the hand-over at a chosen
paper, without Prefect.

Real server processes, each test with a PREFECT_HOME of its own (stopped afterwards, no process
left behind), builds run as a user runs them (``python -m flows.build_arcticqa``, ``arcticqa build``):

1. A cold build on the shared server gives the same summary (spend included), store and release
   as the same build without Prefect; the attempts of the stages that call no model carry the
   early run's id, the model stages' that id or the flow's, and no stage was attempted twice.
2. The flow did not discover again: its summary's discovery is the early one (a second
   discovery of the same source would find every page done and report no new records), and
   the flow's ``discover`` task and the tasks of every stage with early attempts say in their
   logs how many of their papers were done before the flow run.
3. A server that cannot start fails the build with the error of the shared server's log,
   after the early work (which stops once the server has exited), which stays in the store: a
   resume without Prefect finishes the build.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from arcticqa.config import load_settings
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import StageRun
from flows.prefect_server import SharedServer, running_server, stop_server
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config

REPO = Path(__file__).resolve().parent.parent
EARLY = ("prefilter", "fetch_fulltext", "extract_text")  # build.site_extractor is "when_undecided"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "ARCTICQA_TEST_KEY": "sk-test-early-stages", "PREFECT_HOME": str(home),
            "ARCTICQA_PREFECT__SERVER": "shared", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
            # the tasks' INFO lines reach the server's log (tests/conftest.py sets WARNING)
            "PREFECT_LOGGING_LEVEL": "INFO", **extra}


def _flow_build(home: Path, config: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``python -m flows.build_arcticqa``: the flow through the Prefect orchestrator; prints the
    build's summary as JSON on stdout."""
    return subprocess.run([sys.executable, "-m", "flows.build_arcticqa", "--config", str(config)],
                          env=_env(home, **extra), cwd=REPO, capture_output=True, text=True, timeout=400)


def _cli(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arcticqa", *args, "-c", str(config)],
                          env=env or {**os.environ, "ARCTICQA_TEST_KEY": "sk-test-early-stages"}, cwd=REPO,
                          capture_output=True, text=True, timeout=400)


def _summary(stdout: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(stdout[stdout.index("{\n"):])
    return summary


def _attempts(config: Path) -> list[StageRun]:
    store = Store(load_settings(config).store.url)
    try:
        with read_session(store.engine) as s:
            return list(s.exec(select(StageRun)).all())
    finally:
        store.close()


def _api(server: SharedServer, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    request = urllib.request.Request(f"{server.api_url}/{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        found: list[dict[str, Any]] = json.loads(response.read())
    return found


@dataclass
class Builds:
    local: dict[str, Any]
    flow: dict[str, Any]
    local_config: Path
    flow_config: Path
    server: SharedServer | None
    task_runs: list[dict[str, Any]]
    log_lines: list[str]


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builds]:
    """The same 3-paper build twice: without Prefect, and as the flow on a shared server this
    build starts (a fresh PREFECT_HOME: cold, so with early stages)."""
    tmp = tmp_path_factory.mktemp("early")
    home = tmp / "prefect-home"
    corpus = make_corpus(tmp / "corpus")
    try:
        with FakeOpenAIServer(ScriptedModel()) as endpoint:
            local_config = write_config(tmp / "local", base_url=endpoint.base_url, corpus=corpus)
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("ARCTICQA_TEST_KEY", "sk-test-early-stages")
                local = build_in_process(local_config)
            flow_config = write_config(tmp / "flow", base_url=endpoint.base_url, corpus=corpus)
            flow = _flow_build(home, flow_config)
            assert flow.returncode == 0, flow.stdout + flow.stderr
        server = running_server(home)
        runs, lines = [], []
        if server is not None:
            runs = _api(server, "task_runs/filter", {})
            lines = [str(r["message"]) for r in _api(server, "logs/filter", {})]
        yield Builds(local=local, flow=_summary(flow.stdout), local_config=local_config,
                     flow_config=flow_config, server=server, task_runs=runs, log_lines=lines)
    finally:
        left = stop_server(home)
        assert left is None or not _alive(left.pid), "the shared server outlived the test"


@pytest.mark.slow
def test_a_cold_build_with_early_stages_equals_the_build_without_prefect(builds: Builds, tmp_path: Path) -> None:
    assert builds.server is not None, "the build left no shared server running"
    flow = {k: v for k, v in builds.flow.items() if k not in ("run_id", "llm_spent_usd")}
    assert flow == {k: v for k, v in builds.local.items() if k not in ("run_id", "llm_spent_usd")}
    assert builds.flow["stages"]["construct"] == {"succeeded": 3}
    assert builds.flow["llm_spent_usd"] == pytest.approx(builds.local["llm_spent_usd"])

    def attempts(config: Path) -> Counter[tuple[str, str, str, int, str]]:
        return Counter((r.paper_id, r.stage, r.subject, r.attempt, r.status) for r in _attempts(config))

    # the same attempts, none twice (a flow that ran an early stage again would add attempt 2)
    assert attempts(builds.flow_config) == attempts(builds.local_config)
    by_stage: dict[str, set[str | None]] = {}
    for run in _attempts(builds.flow_config):
        by_stage.setdefault(run.stage, set()).add(run.run_id)
    early_ids = set().union(*(by_stage[s] for s in EARLY))
    assert len(early_ids) == 1 and builds.flow["run_id"] not in early_ids, by_stage
    # the model stages ran early until the server answered; the flow did the rest
    assert by_stage["eligibility"] | by_stage["construct"] <= early_ids | {builds.flow["run_id"]}, by_stage

    releases = []
    for name, config in (("local", builds.local_config), ("flow", builds.flow_config)):
        out = tmp_path / name
        done = _cli(config, "export", "--out", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        releases.append((out / "items.jsonl").read_bytes())
    assert releases[0] == releases[1] and releases[0].count(b"\n") == 3


@pytest.mark.slow
def test_the_flow_does_not_discover_again_and_its_tasks_say_what_was_done_early(builds: Builds) -> None:
    discovered = builds.flow["discovered"]
    # a discovery of the same snapshot inside the flow would find its pages done: 0 and 0
    assert discovered["records_this_run"] == 3 and discovered["new_papers"] == 3, discovered
    names = Counter(str(r["name"]).rsplit("-", 1)[0] if str(r["name"]).startswith("discover") else
                    str(r["name"]).rsplit("-batch-", 1)[0] for r in builds.task_runs)
    assert names["discover"] == 1, names
    assert all(names[s] >= 1 for s in (*EARLY, "eligibility", "construct")), names
    assert {r["state_type"] for r in builds.task_runs} == {"COMPLETED"}
    assert sum("discovery was done before this flow run" in line for line in builds.log_lines) == 1
    early_papers = Counter(r.stage for r in _attempts(builds.flow_config)
                           if not r.subject and r.run_id != builds.flow["run_id"])
    assert all(early_papers[s] == 3 for s in EARLY), early_papers
    said: Counter[str] = Counter()
    for line in builds.log_lines:
        found = re.match(r"(\w+): (\d+) of \d+ papers were done before this flow run", line)
        if found:
            said[found[1]] += int(found[2])
    # each task (a batch) says how many of its papers the early work did, if any
    assert said == early_papers, (said, early_papers, builds.log_lines)


@pytest.mark.slow
def test_a_server_that_cannot_start_fails_the_build_and_keeps_the_early_work(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as endpoint:
        config = write_config(tmp_path / "b", base_url=endpoint.base_url, corpus=corpus)
        try:
            # a database the server cannot open: it exits at start-up, and once more when replaced
            failed = _cli(config, "build", env=_env(
                home, PREFECT_API_DATABASE_CONNECTION_URL="sqlite+aiosqlite:////dev/null/prefect.db"))
            # one line: the error, and the end of the server's log saying why
            assert failed.returncode == 1, failed.stdout + failed.stderr
            error = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
            assert len(error) == 1 and "BuildFailed: the shared Prefect server" in error[0], failed.stderr
            assert "unable to open database file" in error[0]
            assert running_server(home) is None
        finally:
            left = stop_server(home)
            assert left is None or not _alive(left.pid)
        # the early work is kept: the stages that call no model, and whatever the model stages
        # finished before the server exited (all of it, on a fast machine)
        kept = Counter((r.stage, r.status) for r in _attempts(config))
        assert all(kept[(s, "succeeded")] == 3 for s in EARLY) and {st for _, st in kept} == {"succeeded"}, kept
        resumed = _cli(config, "resume", "--orchestrator", "local")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    finished = Counter((r.stage, r.status) for r in _attempts(config) if r.stage in (*EARLY, "construct"))
    assert finished == {**{(s, "succeeded"): 3 for s in EARLY}, ("construct", "succeeded"): 3}, finished
