"""What importing ``flows`` prepares before Prefect reads its settings, in a fresh interpreter
(the way ``arcticqa build``, ``make demo`` and ``python -m flows.build_arcticqa`` start): the
server start-up wait, analytics off and ``PREFECT_HOME`` created, with a user's own values kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

# Prefect reads its settings when ``prefect`` is first imported, so the probe imports the way
# the build does: arcticqa's entry points first (they must not import Prefect), then flows.
_PROBE = """
import json, sys
import arcticqa.cli.build, arcticqa.demo.run, arcticqa.pipeline.build
before = "prefect" in sys.modules
import flows.build_arcticqa
from prefect.settings import get_current_settings
s = get_current_settings()
print(json.dumps({"prefect_before_flows": before, "startup_timeout_s": s.server.ephemeral.startup_timeout_seconds,
                  "analytics": s.server.analytics_enabled, "home": str(s.home)}))
"""


def _probe(**env: str) -> tuple[dict[str, object], str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "DO_NOT_TRACK"}
    proc = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env}, cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_build_waits_90_s_for_a_starting_server_where_prefect_would_wait_20(tmp_path: Path) -> None:
    home = tmp_path / "not" / "yet" / "there"
    seen, stderr = _probe(PREFECT_HOME=str(home))
    assert seen == {"prefect_before_flows": False, "startup_timeout_s": 90, "analytics": False,
                    "home": str(home)}
    assert home.is_dir()
    assert "Failed to create the Prefect home directory" not in stderr, stderr


def test_the_users_own_prefect_settings_win(tmp_path: Path) -> None:
    seen, _ = _probe(PREFECT_HOME=str(tmp_path / "home"),
                     PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="7",
                     PREFECT_SERVER_ANALYTICS_ENABLED="true")
    assert seen["startup_timeout_s"] == 7 and seen["analytics"] is True
