"""The documented deployment route, end to end (slow): a ``prefect server`` on a free loopback
port with a temporary PREFECT_HOME, ``python -m flows.serve`` serving ``build-arcticqa/local``,
``prefect deployment run 'build-arcticqa/local' --param config=... --watch``, and the build's
items in the store afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from arcticqa.config import load_settings
from arcticqa.standins.server import FakeOpenAIServer
from tests.pipeline_fixtures import ScriptedModel, _free_port, make_corpus, write_config
from tests.test_prefect_scale import BIN, REPO, _check_store, _env, _stop, _wait_healthy

pytestmark = pytest.mark.slow


def test_served_deployment_runs_a_build(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    # the README's server settings: flow-run logs stream to `deployment run --watch`
    env = _env(tmp_path, PREFECT_API_URL=api, PREFECT_RUNNER_POLL_FREQUENCY="2",
               PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED="true", PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED="true")
    server = subprocess.Popen([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port",
                               str(port), "--no-ui", "--analytics-off"], env=env, cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    serve: subprocess.Popen[str] | None = None
    try:
        _wait_healthy(api, server)
        with FakeOpenAIServer(ScriptedModel()) as model:
            config = write_config(tmp_path / "work", base_url=model.base_url, corpus=corpus)
            serve = subprocess.Popen([str(BIN / "python"), "-m", "flows.serve", "--name", "local"], env=env,
                                     cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            run = None
            for _ in range(60):  # the deployment exists once serve has registered it
                run = subprocess.run([str(BIN / "prefect"), "deployment", "run", "build-arcticqa/local",
                                      "--param", f"config={config}", "--watch", "--watch-timeout", "300"],
                                     env=env, cwd=REPO, capture_output=True, text=True, timeout=400)
                if "not found" not in (run.stdout + run.stderr).lower():
                    break
                subprocess.run(["sleep", "1"], check=True)
            assert run is not None and run.returncode == 0, run.stdout + run.stderr if run else ""
            assert "Completed" in run.stdout + run.stderr
            # a failed run says why in this terminal, in one line, not only "Failed"
            missing = tmp_path / "no-such.toml"
            failed = subprocess.run([str(BIN / "prefect"), "deployment", "run", "build-arcticqa/local",
                                     "--param", f"config={missing}", "--watch", "--watch-timeout", "300"],
                                    env={**env, "COLUMNS": "300"}, cwd=REPO, capture_output=True, text=True,
                                    timeout=400)
            assert failed.returncode == 1
            assert f"Failed('ConfigError: {missing}: config file not found')" in failed.stdout + failed.stderr
    finally:
        if serve is not None:
            _stop(serve)
        _stop(server)
    _check_store(load_settings(config).store.url, n_papers=2)
