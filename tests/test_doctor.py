"""`arcticqa doctor`: keys present (never printed), endpoints reachable, the store's schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from arcticqa.standins.replies import Reply, by_role
from arcticqa.standins.server import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent


def _doctor(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "arcticqa", "doctor", "-c", str(config), *args],
                          capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**env, "COLUMNS": "250"})


def test_doctor_reports_keys_endpoints_and_schema(tmp_path: Path) -> None:
    import os

    with FakeOpenAIServer(by_role({"m": Reply("{}")})) as srv:
        config = tmp_path / "a.toml"
        config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n'
                          f'[models.remote]\nprovider = "openai"\nbase_url = "{srv.base_url}"\nmodel = "m"\n'
                          f'api_key_env = "ARCTICQA_DOCTOR_KEY"\n[roles]\nverifier = "remote"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if k != "ARCTICQA_DOCTOR_KEY"}
        missing = _doctor(config, env)
        assert missing.returncode == 1
        assert "ARCTICQA_DOCTOR_KEY unset" in missing.stdout
        # never built: said plainly, not a problem (doctor runs before the first build), and not created
        assert "s.db: none yet" in missing.stdout
        assert not (tmp_path / "s.db").exists()
        ok = _doctor(config, {**env, "ARCTICQA_DOCTOR_KEY": "sk-doctor-secret-99"})
        assert "sk-doctor-secret-99" not in ok.stdout + ok.stderr
        assert "HTTP 200" in ok.stdout  # the endpoint answered /models
        assert ok.returncode == 0, ok.stdout + ok.stderr
    down = _doctor(config, {**env, "ARCTICQA_DOCTOR_KEY": "sk-doctor-secret-99"})
    assert down.returncode == 1 and "unreachable" in down.stdout
