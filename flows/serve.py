"""Serve the ``build-arcticqa`` flow as deployment ``build-arcticqa/local``.

With a Prefect server running (``prefect server start``) and ``PREFECT_API_URL`` pointing at it:

    python -m flows.serve                      # registers the deployment and waits for runs
    prefect deployment run 'build-arcticqa/local' --param config=arcticqa.toml --watch

Prefect requires the ``<flow>/<deployment>`` form; the bare deployment name is rejected.

``serve`` runs flow runs in this one process. To spread builds over several machines or
processes, deploy to a process work pool instead (``flows/deploy.py``, ``docs/scale-out.md``).
"""

from __future__ import annotations

import argparse

from flows.build_arcticqa import build_arcticqa

__all__ = ["DEPLOYMENT_NAME", "main"]

DEPLOYMENT_NAME = "local"


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve build-arcticqa as a Prefect deployment.")
    parser.add_argument("--name", default=DEPLOYMENT_NAME)
    parser.add_argument("--limit", type=int, default=1, help="concurrent flow runs")
    args = parser.parse_args()
    build_arcticqa.serve(name=args.name, limit=args.limit, tags=["arcticqa"],
                         description="Build an ArcticQA release from the configured source.")


if __name__ == "__main__":
    main()
