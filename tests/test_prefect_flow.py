"""The ``build-arcticqa`` flow on a real shared Prefect server, read back through the server's API.

Real server processes, a PREFECT_HOME of the module's own (stopped afterwards, no process left
behind), builds run as a user runs them (``python -m flows.build_arcticqa``, ``arcticqa build``):

1. A cold build (no server yet: it starts the shared server and waits for it, saying so in one
   line) gives the same summary (spend included), attempts and release as the same build
   without Prefect; every attempt is the flow run's, none was made twice.
2. The flow run publishes its artifacts: a progress artifact per stage, at 100% once the build
   is done, and a Markdown summary with the funnel, the accepted items, rejections by rule id,
   model calls and cost, and the store; the shared server serves the Prefect UI that shows them.
3. A build that fails (every model call refused: the failure threshold) still publishes its
   summary, saying why it failed; its flow run ends Failed with that one line.
4. A server that cannot start fails the build with the end of the shared server's log, before
   the store is opened; a build without Prefect then builds everything.
"""

from __future__ import annotations

import json
import os
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
from arcticqa.pipeline.stages import BUILD_STAGES
from arcticqa.standins.replies import Fault
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import StageRun
from flows.artifacts import SUMMARY_KEY, progress_key
from flows.prefect_server import SharedServer, running_server, stop_server
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config

REPO = Path(__file__).resolve().parent.parent
STAGES = [spec.name for spec in BUILD_STAGES]


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "ARCTICQA_TEST_KEY": "sk-test-prefect-flow", "PREFECT_HOME": str(home),
            "ARCTICQA_PREFECT__SERVER": "shared", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1", "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120", **extra}


def _shared(config: Path) -> Path:
    """The config with ``[prefect] server = "shared"`` in the file itself (tests/conftest.py sets
    the temporary server through the environment)."""
    with config.open("a", encoding="utf-8") as handle:
        handle.write('\n[prefect]\nserver = "shared"\n')
    return config


def _flow_build(home: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """``python -m flows.build_arcticqa``: the flow through its orchestrator; prints the build's
    summary as JSON on stdout."""
    return subprocess.run([sys.executable, "-m", "flows.build_arcticqa", "--config", str(config)],
                          env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=400)


def _cli(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arcticqa", *args, "-c", str(config)],
                          env=env or {**os.environ, "ARCTICQA_TEST_KEY": "sk-test-prefect-flow"}, cwd=REPO,
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
    flow_stderr: str
    local_config: Path
    flow_config: Path
    failed: subprocess.CompletedProcess[str]
    server: SharedServer | None
    #: flow run id → its state type (in the order they started), and its artifacts
    runs: dict[str, str]
    artifacts: dict[str, list[dict[str, Any]]]


def _refuse(body: dict[str, Any], headers: Any) -> Fault:
    return Fault(400, body='{"error": {"message": "refused by the test", "type": "invalid_request_error"}}')


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Builds]:
    """The same 3-paper build without Prefect and as the flow on a shared server the flow build
    starts (a fresh PREFECT_HOME: cold); then, on that server, a build whose every model call is
    refused."""
    tmp = tmp_path_factory.mktemp("flow")
    home = tmp / "prefect-home"
    corpus = make_corpus(tmp / "corpus")
    try:
        with FakeOpenAIServer(ScriptedModel()) as endpoint:
            local_config = write_config(tmp / "local", base_url=endpoint.base_url, corpus=corpus)
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("ARCTICQA_TEST_KEY", "sk-test-prefect-flow")
                local = build_in_process(local_config)
            flow_config = _shared(write_config(tmp / "flow", base_url=endpoint.base_url, corpus=corpus))
            flow = _flow_build(home, flow_config)
            assert flow.returncode == 0, flow.stdout + flow.stderr
        with FakeOpenAIServer(_refuse) as refusing:
            failed = _flow_build(home, _shared(write_config(tmp / "failed", base_url=refusing.base_url,
                                                            corpus=corpus)))
        server = running_server(home)
        runs: dict[str, str] = {}
        artifacts: dict[str, list[dict[str, Any]]] = {}
        if server is not None:
            for run in _api(server, "flow_runs/filter", {"sort": "START_TIME_ASC"}):
                runs[run["id"]] = run["state_type"]
                artifacts[run["id"]] = _api(server, "artifacts/filter", {
                    "artifacts": {"flow_run_id": {"any_": [run["id"]]}}, "sort": "KEY_ASC"})
        yield Builds(local=local, flow=_summary(flow.stdout), flow_stderr=flow.stderr, local_config=local_config,
                     flow_config=flow_config, failed=failed, server=server, runs=runs, artifacts=artifacts)
    finally:
        left = stop_server(home)
        assert left is None or not _alive(left.pid), "the shared server outlived the test"


@pytest.mark.slow
def test_a_cold_flow_build_equals_the_build_without_prefect(builds: Builds, tmp_path: Path) -> None:
    assert builds.server is not None, "the build left no shared server running"
    # it waited for the server it started, in one line
    waiting = [line for line in builds.flow_stderr.splitlines() if "waiting for the Prefect server to start" in line]
    assert len(waiting) == 1 and f"pid {builds.server.pid}" in waiting[0], builds.flow_stderr
    flow = {k: v for k, v in builds.flow.items() if k != "run_id"}
    assert flow == {k: v for k, v in builds.local.items() if k != "run_id"}
    assert builds.flow["stages"]["construct"] == {"succeeded": 3}
    assert builds.flow["discovered"]["new_papers"] == 3

    def attempts(config: Path) -> Counter[tuple[str, str, str, int, str]]:
        return Counter((r.paper_id, r.stage, r.subject, r.attempt, r.status) for r in _attempts(config))

    # the same attempts, none twice (a stage run again would add attempt 2), all of the flow's run
    assert attempts(builds.flow_config) == attempts(builds.local_config)
    assert {r.run_id for r in _attempts(builds.flow_config)} == {builds.flow["run_id"]}

    releases = []
    for name, config in (("local", builds.local_config), ("flow", builds.flow_config)):
        out = tmp_path / name
        done = _cli(config, "export", "--out", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        releases.append((out / "items.jsonl").read_bytes())
    assert releases[0] == releases[1] and releases[0].count(b"\n") == 3


@pytest.mark.slow
def test_the_flow_run_publishes_its_progress_and_summary_as_artifacts(builds: Builds) -> None:
    assert builds.server is not None
    (finished, failed) = builds.runs  # the built one, then the refused one
    assert builds.runs[finished] == "COMPLETED"
    artifacts = builds.artifacts[finished]
    progress = {a["key"]: a for a in artifacts if a["type"] == "progress"}
    # one per stage, each at 100% once the build is done, saying how many papers
    assert sorted(progress) == sorted(progress_key(s) for s in STAGES)
    for stage in STAGES:
        shown = progress[progress_key(stage)]
        assert shown["data"] == 100.0 and shown["description"] == f"{stage}: 3 of 3 papers", shown
    (summary,) = [a for a in artifacts if a["type"] == "markdown"]
    assert summary["key"] == SUMMARY_KEY and summary["description"].endswith(": finished")
    text = summary["data"]
    assert text.startswith(f"# build-arcticqa run {builds.flow['run_id']}\n") and "**Finished**" in text
    # the funnel, as `arcticqa funnel` counts it
    assert "| discovered | papers | 3 | 0 |" in text and "| accepted | candidates | 3 | 0 |" in text
    assert "3 accepted items from 3 papers" in text
    assert "## Rejections by rule id" in text
    # the accepted items, each with its question
    store = Store(load_settings(builds.flow_config).store.url)
    try:
        items = store.items()
        calls = [c for c in store.llm_calls()]
        url = store.engine.url.render_as_string(hide_password=True)
    finally:
        store.close()
    assert len(items) == 3 and all(f"`{row.item_id}`" in text for row in items)
    # model calls and cost, as the store records them; the store's path
    assert f"{len(calls)} calls recorded in the store" in text
    assert f"USD {sum(c.cost_usd for c in calls):.4f} in all" in text
    assert f"`{url}`" in text
    assert f"`arcticqa export -c {builds.flow_config} --out DIR`" in text  # the config the build read
    # the shared server serves Prefect's UI, asking the API at its own address
    with urllib.request.urlopen(builds.server.ui_url, timeout=30) as page:
        assert page.status == 200 and b"<!DOCTYPE html>" in page.read(200)
    with urllib.request.urlopen(builds.server.ui_url + "ui-settings", timeout=30) as answer:
        assert json.loads(answer.read())["api_url"] == builds.server.api_url
    # the refused build's flow run failed, saying why, and still published where the build got to
    assert builds.runs[failed] == "FAILED"
    assert builds.failed.returncode != 0 and "FailureThresholdExceeded" in builds.failed.stderr
    (failed_summary,) = [a for a in builds.artifacts[failed] if a["type"] == "markdown"]
    assert failed_summary["description"].endswith(": failed")
    assert "**Failed**: FailureThresholdExceeded: stage" in failed_summary["data"]
    assert "0 accepted items from 3 papers" in failed_summary["data"]


@pytest.mark.slow
def test_a_server_that_cannot_start_fails_the_build_before_the_store_is_opened(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    corpus = make_corpus(tmp_path / "corpus")
    with FakeOpenAIServer(ScriptedModel()) as endpoint:
        config = _shared(write_config(tmp_path / "b", base_url=endpoint.base_url, corpus=corpus))
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
        assert not (tmp_path / "b" / "arcticqa.db").exists()  # nothing ran
        local = _cli(config, "build", "--orchestrator", "local")
        assert local.returncode == 0, local.stdout + local.stderr
    finished = Counter((r.stage, r.status) for r in _attempts(config) if not r.subject)
    assert finished == {(s, "succeeded"): 3 for s in STAGES}, finished
