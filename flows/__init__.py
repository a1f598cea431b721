"""Prefect flows. Importing this package prepares Prefect's environment first: analytics off (so
nothing tries to reach the internet) and ``PREFECT_HOME`` created, since Prefect's ephemeral
server cannot open its database in a folder that does not exist yet."""

import os
from pathlib import Path

__all__: list[str] = []  # the flows are imported by module: flows.build_arcticqa, ...

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
if os.environ.get("PREFECT_HOME"):
    Path(os.environ["PREFECT_HOME"]).expanduser().mkdir(parents=True, exist_ok=True)
