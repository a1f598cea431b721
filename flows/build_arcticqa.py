"""The ``build-arcticqa`` Prefect flow.

Tasks are coarse on purpose: one task per stage per batch of papers (measured here, Prefect's
SQLite server spends ~35–40 ms CPU and ~19 KB per task run, which would dominate a per-paper
design). Papers inside a batch run concurrently in asyncio. The durable truth is our store, so
resume works with or without a Prefect server.

Task arguments are plain data (the settings as JSON, a stage name, paper ids), never a live
:class:`~arcticqa.pipeline.runner.BuildContext`: a distributed task runner (prefect-dask's
``DaskTaskRunner``) pickles arguments to ship them to other processes, where the task opens its
own context (store, gateway, worker heartbeat). In the flow's own process the task finds the
flow's context in a process-local registry instead, so the default path keeps one gateway and
one connection pool.

Run without a server: ``python -m flows.build_arcticqa [--config FILE] [--resume]
[--task-runner dask]`` (Prefect's ephemeral mode), or ``arcticqa build``. Serve:
``flows/serve.py``; work pool deployment: ``flows/deploy.py`` and ``docs/scale-out.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any, cast

from prefect import Flow, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.states import Failed

from arcticqa.config import Settings, load_settings
from arcticqa.errors import ArcticQAError
from arcticqa.pipeline.build import run_build
from arcticqa.pipeline.runner import (
    BatchReport,
    BuildContext,
    StageSpec,
    live_context,
    open_build_context,
    run_stage_batch,
    shared_context,
)

__all__ = ["build_arcticqa", "settings_overrides", "flow_for", "dask_task_runner"]

def _spec(name: str) -> StageSpec:
    from arcticqa.pipeline.stages import BUILD_STAGES

    return next(s for s in BUILD_STAGES if s.name == name)


@task(name="stage-batch", cache_policy=NO_CACHE, task_run_name="{stage_name}-batch-{batch_no}")
async def _stage_batch(run_key: str, settings: dict[str, Any], retry_rejected: list[str], stage_name: str,
                       batch_no: int, paper_ids: list[str]) -> dict[str, Any]:
    spec = _spec(stage_name)
    ctx = live_context(run_key)
    if ctx is not None:  # same process as the flow: share its gateway, budget and store
        return (await run_stage_batch(ctx, spec, paper_ids)).as_dict()
    # another process (a Dask worker): a context of our own, closed with the task, because its
    # HTTP clients belong to this task's event loop
    async with open_build_context(Settings.model_validate(settings), retry_rejected=retry_rejected) as own:
        report = await run_stage_batch(own, spec, paper_ids)
        own.store.close()
        return report.as_dict()


@task(name="discover", cache_policy=NO_CACHE)
async def _discover(run_key: str) -> dict[str, Any] | None:
    from arcticqa.pipeline.stages import discover_papers

    ctx = live_context(run_key)
    assert ctx is not None, "discovery runs in the flow's process"
    return await discover_papers(ctx)


def settings_overrides(source: str | None = None, store_url: str | None = None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if source:
        overrides.setdefault("build", {})["source"] = source
    if store_url:
        overrides["store"] = {"url": store_url}
    return overrides


def _uses_dask() -> bool:
    ctx = FlowRunContext.get()
    return ctx is not None and type(ctx.task_runner).__name__ == "DaskTaskRunner"


@flow(name="build-arcticqa", log_prints=True)
async def build_arcticqa(config: str | None = None, resume: bool = False,
                         retry_rejected: list[str] | None = None, source: str | None = None,
                         store_url: str | None = None) -> Any:
    """Discover papers (unless resuming) and run every stage that is not done yet.

    An arcticqa error ends the run in a Failed state whose message is the error's one line
    (``prefect deployment run --watch`` and the UI show it; a traceback would only reach the
    serving terminal). Called directly, the flow still raises that error.
    """
    try:
        return await _build(config, resume, retry_rejected, source, store_url)
    except ArcticQAError as exc:
        return Failed(data=exc, message=f"{type(exc).__name__}: {exc}")


async def _build(config: str | None, resume: bool, retry_rejected: list[str] | None, source: str | None,
                 store_url: str | None) -> dict[str, Any]:
    settings = load_settings(config)
    if source or store_url:
        data = settings.model_dump()
        for key, value in settings_overrides(source, store_url).items():
            data[key] = {**data[key], **value}
        settings = type(settings).model_validate(data)
    distributed = _uses_dask()
    settings_json = settings.model_dump(mode="json")
    rejected = list(retry_rejected or ())
    # (the flow function may itself be pickled by value for a Dask cluster, globals included:
    # it must not reference the registry of live contexts directly)
    async with open_build_context(settings, retry_rejected=rejected) as ctx:

        async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
            args = (ctx.run_id, settings_json, rejected, spec.name, batch_no, ids)
            if distributed:
                # submit() hands the task to the Dask cluster; wait off the event loop so the
                # other batches of this window are submitted and awaited concurrently
                future = _stage_batch.submit(*args)
                raw: dict[str, Any] = cast(dict[str, Any], await asyncio.to_thread(future.result))
            else:
                raw = await _stage_batch(*args)
            return BatchReport.from_dict(raw)

        async def discover(c: BuildContext) -> dict[str, Any] | None:
            return await _discover(c.run_id)

        parallel = max(settings.build.dask_workers, 1) if distributed else 1
        with shared_context(ctx):
            summary = await run_build(ctx, discover=not resume, dispatch=dispatch, discover_fn=discover,
                                      batch_parallelism=parallel)
    return summary.model_dump(mode="json")


def dask_task_runner(settings: Settings) -> Any:
    """prefect-dask's DaskTaskRunner: the configured scheduler, or a LocalCluster of processes."""
    from prefect_dask.task_runners import DaskTaskRunner

    build = settings.build
    if build.dask_address:
        return DaskTaskRunner(address=build.dask_address)
    # one thread per worker process: our tasks are asyncio inside; processes give the parallelism
    return DaskTaskRunner(cluster_kwargs={"n_workers": build.dask_workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": None})


def flow_for(settings: Settings) -> Flow[..., Any]:
    """The flow with the task runner ``build.task_runner`` selects."""
    if settings.build.task_runner == "dask":
        return build_arcticqa.with_options(task_runner=dask_task_runner(settings))
    return build_arcticqa


def __getattr__(name: str) -> Any:
    # ``flows/build_arcticqa.py:build_arcticqa_dask`` as a deployment entrypoint, built on first
    # access so the default path never imports dask
    if name == "build_arcticqa_dask":
        settings = load_settings()
        settings.build.task_runner = "dask"
        return flow_for(settings)
    raise AttributeError(name)


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the build-arcticqa flow (no Prefect server needed).")
    parser.add_argument("--config")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--retry-rejected", action="append", default=[])
    parser.add_argument("--source")
    parser.add_argument("--store-url")
    parser.add_argument("--task-runner", choices=["default", "dask"], help="overrides build.task_runner")
    args = parser.parse_args()
    settings = load_settings(args.config)
    if args.task_runner:
        settings.build.task_runner = args.task_runner
    # the importable module's flow, not __main__'s: Dask pickles __main__ functions by value
    from flows.build_arcticqa import flow_for as importable_flow_for

    run: Any = importable_flow_for(settings)(config=args.config, resume=args.resume,
                                             retry_rejected=args.retry_rejected, source=args.source,
                                             store_url=args.store_url)
    result = asyncio.run(run)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
