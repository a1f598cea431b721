"""The one build entry point (``arcticqa.pipeline.build.build``): CLI overrides reach the
Prefect flow as settings, never through the process environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prefect.settings import (
    PREFECT_HOME,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    temporary_settings,
)
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.config import load_settings
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, make_corpus, write_config

KEY = "sk-test-build-entry-31"


def _arcticqa_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k.startswith("ARCTICQA_")}


@pytest.mark.slow
def test_cli_overrides_reach_the_prefect_flow_as_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", KEY)
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        # the config names a corpus that does not exist: only the --source override can build
        config = write_config(tmp_path, base_url=srv.base_url, corpus=tmp_path / "missing.jsonl",
                              model_extra="batch_linger_s = 0.3\nbatch_poll_s = 0.05\n")
        before = _arcticqa_env()
        # Prefect's own settings API: environment variables set now would not reach a Prefect
        # imported earlier in the session (its settings are read once); a loaded machine needs
        # more than the default 20 s for the ephemeral server to start
        with temporary_settings({PREFECT_HOME: tmp_path / "prefect",
                                 PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 120}):
            result = CliRunner().invoke(app, ["build", "-c", str(config), "--orchestrator", "prefect",
                                              "--source", f"snapshot:{corpus}", "--batch"])
        after = _arcticqa_env()
        chat = sum(1 for r in srv.requests if r.path.rstrip("/").endswith("/chat/completions"))
        batches = srv.batches_created
    assert result.exit_code == 0, result.output
    assert after == before, "the CLI put an override into the environment"
    store = Store(load_settings(config).store.url)
    try:
        assert len(store.paper_ids()) == 2  # --source took effect inside the flow
        assert len(store.items()) == 2
    finally:
        store.close()
    assert chat == 0 and batches > 0  # --batch took effect: every model call went through the Batch API
