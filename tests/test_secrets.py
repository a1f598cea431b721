"""API keys come only from the environment and never reach a file, a log, a row or a message.

A recognisable fake key goes through a full build (local and Prefect orchestrators, with one
paper failing at the endpoint), export, audit, funnel and status; then every file under the
test's folder — the store, the PDF cache, the release, the audit page, Prefect's own database
and logs (``PREFECT_HOME`` points inside it) — and every command's output is scanned for it.
A second test has the endpoint echo the key back in its error body, as real providers do
("Incorrect API key provided: sk-…"), and checks that the echo is not recorded either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arcticqa.config import load_settings
from arcticqa.standins.replies import Fault
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, make_corpus, write_config

SECRET = "sk-test-SECRET-9f2c-arcticqa-key-do-not-store"
REPO = Path(__file__).resolve().parent.parent


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "ARCTICQA_TEST_KEY": SECRET, "PREFECT_HOME": str(tmp_path / "prefect-home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
            "PREFECT_LOGGING_LEVEL": "DEBUG"}


def _cli(tmp_path: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "arcticqa", *args], env=_env(tmp_path), cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    assert SECRET not in output, args
    return output


def _scan(root: Path) -> int:
    scanned = 0
    for f in root.rglob("*"):
        if f.is_file() and not f.is_symlink():
            scanned += 1
            data = f.read_bytes()
            assert SECRET.encode() not in data, f
            assert SECRET.encode("utf-16-le") not in data, f  # e.g. a key in a UTF-16 log
    return scanned


@pytest.mark.slow
def test_a_fake_key_appears_in_no_artifact(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    model = ScriptedModel()
    model.fail_when, model.failing = "Kongsfjorden", True  # one paper's calls fail: errors are recorded
    with FakeOpenAIServer(model) as srv:
        local = write_config(tmp_path / "local", base_url=srv.base_url, corpus=corpus)
        out = _cli(tmp_path, "build", "--orchestrator", "local", "-c", str(local))
        assert "LLMTransportError" in out
        flow = write_config(tmp_path / "flow", base_url=srv.base_url, corpus=corpus)
        out = _cli(tmp_path, "build", "--orchestrator", "prefect", "-c", str(flow))
        assert "LLMTransportError" in out
        assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in srv.requests)  # it was used
        for config in (local, flow):
            _cli(tmp_path, "status", "--json", "-c", str(config))
            _cli(tmp_path, "doctor", "--offline", "-c", str(config))
        _cli(tmp_path, "export", "--out", str(tmp_path / "release"), "--include-evidence", "-c", str(local))
        _cli(tmp_path, "audit", "--html", str(tmp_path / "audit.html"), "-c", str(local))
        _cli(tmp_path, "audit", "--json", "-c", str(local))
        _cli(tmp_path, "funnel", "--out", str(tmp_path / "funnel.svg"), "-c", str(local))
    assert (tmp_path / "release" / "items.jsonl").is_file() and (tmp_path / "audit.html").is_file()
    assert any((tmp_path / "prefect-home").rglob("*.db")), "the Prefect run left no database to scan"
    failed = Store(load_settings(flow).store.url).runs(status="failed")
    assert failed and all(SECRET not in (r.error_message or "") for r in failed)
    assert _scan(tmp_path) > 20


class EchoingEndpoint(ScriptedModel):
    """An endpoint that rejects the key and quotes it back, like real providers' 401 bodies."""

    def __call__(self, body, headers):  # type: ignore[no-untyped-def]
        key = headers.get("authorization", "").removeprefix("Bearer ")
        return Fault(401, body=json.dumps({"error": {"message": f"Incorrect API key provided: {key}.",
                                                     "type": "invalid_request_error", "code": "invalid_api_key"}}))


def test_an_endpoint_that_echoes_the_key_does_not_get_it_stored(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=1)
    with FakeOpenAIServer(EchoingEndpoint()) as srv:
        config = write_config(tmp_path / "work", base_url=srv.base_url, corpus=corpus)
        out = _cli(tmp_path, "build", "--orchestrator", "local", "-c", str(config))
        assert srv.requests
    assert "401" in out or "AuthenticationError" in out or "LLMError" in out
    _scan(tmp_path)
