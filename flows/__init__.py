"""Prefect flows. Importing this package prepares Prefect's environment first: analytics off (so
nothing tries to reach the internet), ``PREFECT_HOME`` created, since Prefect's ephemeral
server cannot open its database in a folder that does not exist yet, and a longer wait for a
server to start. Nothing in ``arcticqa`` imports Prefect, so this runs before Prefect reads its
settings (tests/test_flows_env.py)."""

import os
from pathlib import Path

__all__: list[str] = []  # the flows are imported by module: flows.build_arcticqa, ...

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
# Prefect gives a starting server 20 s to answer; it took 7-25 s on an idle 2-core machine here,
# and a CI run under load failed at 20 s (2026-12-04). A value the user set wins.
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
if os.environ.get("PREFECT_HOME"):
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
