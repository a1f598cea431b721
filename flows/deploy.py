"""Deploy ``build-arcticqa`` to a Prefect *process* work pool (no Docker image).

With a Prefect server running and ``PREFECT_API_URL`` pointing at it (``docs/scale-out.md``):

    prefect work-pool create arcticqa --type process
    python -m flows.deploy --pool arcticqa --name pool [--task-runner dask]
    prefect worker start --pool arcticqa          # as many as you like, on any host with the repo
    prefect deployment run 'build-arcticqa/pool' --param config=/abs/path/arcticqa.toml --watch

The code comes from this checkout (``flow.from_source`` on the repository folder), so every
worker host needs the repository at the same path and the project's venv; workers then run
each flow run in a subprocess of their own.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from prefect import Flow

__all__ = ["REPO", "deploy"]

REPO = Path(__file__).resolve().parent.parent


def deploy(*, pool: str, name: str = "pool", task_runner: str = "default",
           parameters: dict[str, Any] | None = None) -> str:
    """Register the deployment; returns its id. ``task_runner="dask"`` deploys the DaskTaskRunner
    variant (its cluster is configured by the worker's ``ARCTICQA_CONFIG``/environment)."""
    entry = "build_arcticqa_dask" if task_runner == "dask" else "build_arcticqa"
    # from_source is sync-compatible: called from sync code it returns the Flow itself
    flow = cast(Flow[..., Any], Flow.from_source(source=str(REPO), entrypoint=f"flows/build_arcticqa.py:{entry}"))
    deployment_id = flow.deploy(name=name, work_pool_name=pool, parameters=parameters or {},
                                tags=["arcticqa"], print_next_steps=False,
                                description="Build an ArcticQA release from the configured source.")
    return str(deployment_id)


def main() -> None:
    parser = argparse.ArgumentParser(description="Deploy build-arcticqa to a process work pool.")
    parser.add_argument("--pool", default="arcticqa")
    parser.add_argument("--name", default="pool")
    parser.add_argument("--task-runner", choices=["default", "dask"], default="default")
    args = parser.parse_args()
    print(deploy(pool=args.pool, name=args.name, task_runner=args.task_runner))


if __name__ == "__main__":
    main()
