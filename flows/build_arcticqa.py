"""The ``build-arcticqa`` Prefect flow.

Tasks are coarse on purpose: one task per stage per batch of papers (measured here, Prefect's
SQLite server spends ~35–40 ms CPU and ~19 KB per task run, which would dominate a per-paper
design). Papers inside a batch run concurrently in asyncio. The durable truth is our store, so
resume works with or without a Prefect server.

Run without a server: ``python -m flows.build_arcticqa [--config FILE] [--resume]`` (Prefect's
ephemeral mode), or ``arcticqa build``. Deploy: see ``flows/serve.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
from typing import Any

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from arcticqa.config import load_settings  # noqa: E402
from arcticqa.pipeline.build import run_build  # noqa: E402
from arcticqa.pipeline.runner import BatchReport, BuildContext, StageSpec, open_build_context, run_stage_batch  # noqa: E402

__all__ = ["build_arcticqa", "settings_overrides"]


@task(name="stage-batch", cache_policy=NO_CACHE, task_run_name="{stage_name}-batch-{batch_no}")
async def _stage_batch(ctx: BuildContext, spec: StageSpec, stage_name: str, batch_no: int,
                       paper_ids: list[str]) -> dict[str, Any]:
    report = await run_stage_batch(ctx, spec, paper_ids)
    return report.as_dict()


@task(name="discover", cache_policy=NO_CACHE)
async def _discover(ctx: BuildContext) -> dict[str, Any]:
    from arcticqa.pipeline.stages import discover_papers

    return await discover_papers(ctx)


def settings_overrides(source: str | None = None, store_url: str | None = None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if source:
        overrides.setdefault("build", {})["source"] = source
    if store_url:
        overrides["store"] = {"url": store_url}
    return overrides


@flow(name="build-arcticqa", log_prints=True)
async def build_arcticqa(config: str | None = None, resume: bool = False,
                         retry_rejected: list[str] | None = None, source: str | None = None,
                         store_url: str | None = None) -> dict[str, Any]:
    """Discover papers (unless resuming) and run every stage that is not done yet."""
    settings = load_settings(config)
    if source or store_url:
        data = settings.model_dump()
        for key, value in settings_overrides(source, store_url).items():
            data[key] = {**data[key], **value}
        settings = type(settings).model_validate(data)
    async with open_build_context(settings, retry_rejected=retry_rejected or ()) as ctx:

        async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
            raw = await _stage_batch(ctx, spec, spec.name, batch_no, ids)
            report = BatchReport(stage=raw["stage"])
            report.counts.update(raw["counts"])
            report.errors.update(raw["errors"])
            return report

        async def discover(c: BuildContext) -> dict[str, Any]:
            return await _discover(c)

        summary = await run_build(ctx, discover=not resume, dispatch=dispatch, discover_fn=discover)
    return summary.model_dump(mode="json")


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the build-arcticqa flow (no Prefect server needed).")
    parser.add_argument("--config")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--retry-rejected", action="append", default=[])
    parser.add_argument("--source")
    parser.add_argument("--store-url")
    args = parser.parse_args()
    result = asyncio.run(build_arcticqa(config=args.config, resume=args.resume,
                                        retry_rejected=args.retry_rejected, source=args.source,
                                        store_url=args.store_url))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
