"""The ``build-arcticqa`` Prefect flow: the build's one engine with Prefect as a thin skin.

The flow body opens a build context and runs :func:`arcticqa.pipeline.build.run_build` in it,
as ``--orchestrator local`` does; the one difference is its ``run_batch``, which runs each
batch of papers as a ``stage-batch`` task (:func:`stage_batch`). Tasks are coarse on purpose:
one per stage per batch (Prefect's SQLite server spends ~35–40 ms CPU and ~19 KB per task run,
which would dominate a per-paper design). Papers inside a batch run concurrently in asyncio.
The durable truth is our store, so resume works with or without a Prefect server.

The flow takes the :class:`Settings` as one typed parameter, ``settings`` (what :func:`run_flow`
passes, CLI overrides included); a deployment run may name a ``config`` file instead. A task
gets the same object: in the flow's own process it finds the flow's context (one gateway,
budget and connection pool) in a process-local registry and uses it; in another process (a
Dask worker: prefect-dask's ``DaskTaskRunner`` pickles the arguments) it opens a context of its
own from those settings.

Each flow run publishes artifacts (``flows/artifacts.py``): a progress artifact per stage and a
Markdown summary of the build, so the Prefect UI shows how far it is and what it rejected.

:func:`run_flow` is the orchestrator the interfaces hand to
:func:`arcticqa.pipeline.build.build` to run this flow (``pipeline`` is below ``flows`` and never
imports it). Without ``PREFECT_API_URL`` it runs the flow on the server builds share
(``flows.prefect_server``: started by ``arcticqa prefect start`` or by the first build, which then
waits for it with one progress line) or, with ``[prefect] server = "temporary"``, on Prefect's
ephemeral one. Run it yourself: ``python -m flows.build_arcticqa [--config FILE] [--resume]
[--task-runner dask]``; serve it: ``flows/serve.py``; work pool deployment: ``flows/deploy.py``
and ``docs/scale-out.md``.
"""

# No ``from __future__ import annotations`` here: a deployment's runner loads this file and
# validates the flow's parameters against its annotations, which must then be the classes
# themselves (``Settings``), not strings it cannot resolve.
import argparse
import asyncio
import json
import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from prefect import Flow, State, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.context import FlowRunContext
from prefect.settings import (
    PREFECT_API_URL,
    PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS,
    get_current_settings,
    temporary_settings,
)
from prefect.states import Failed

from arcticqa.config import Settings, find_config_file, load_settings
from arcticqa.errors import ArcticQAError, ConfigError
from arcticqa.pipeline.build import BuildOptions, BuildSummary, RunBatch, build, run_build
from arcticqa.pipeline.runner import (
    BatchReport,
    BuildContext,
    StageSpec,
    live_context,
    open_build_context,
    run_stage_batch,
    shared_context,
)
from arcticqa.pipeline.stages import BUILD_STAGES
from flows.artifacts import StageProgress, publish_summary
from flows.prefect_server import running_server, start_server, using_server, wait_for_server, waiting_line

__all__ = ["build_arcticqa", "stage_batch", "settings_overrides", "flow_for", "dask_task_runner", "run_flow"]


@task(name="stage-batch", cache_policy=NO_CACHE, task_run_name="{stage}-batch-{batch_no}")
async def stage_batch(run_id: str, settings: Settings, retry_rejected: list[str], stage: str, batch_no: int,
                      paper_ids: list[str]) -> BatchReport:
    """One stage over one batch of papers (:func:`run_stage_batch`), in the build context of flow
    run ``run_id`` when this is its process, else in a context of its own."""
    spec = next(s for s in BUILD_STAGES if s.name == stage)
    ctx = live_context(run_id)
    if ctx is not None:  # same process as the flow: share its gateway, budget and store
        return await run_stage_batch(ctx, spec, paper_ids)
    # another process (a Dask worker): a context of our own, closed with the task, because its
    # HTTP clients belong to this task's event loop
    async with open_build_context(settings, retry_rejected=retry_rejected) as own:
        return await run_stage_batch(own, spec, paper_ids)


def settings_overrides(source: str | None = None, store_url: str | None = None) -> dict[str, Any]:
    """The ``source`` and ``store_url`` flow parameters as :func:`load_settings` overrides."""
    overrides: dict[str, Any] = {}
    if source:
        overrides["build"] = {"source": source}
    if store_url:
        overrides["store"] = {"url": store_url}
    return overrides


def _uses_dask() -> bool:
    ctx = FlowRunContext.get()
    return ctx is not None and type(ctx.task_runner).__name__ == "DaskTaskRunner"


@flow(name="build-arcticqa", log_prints=True)
async def build_arcticqa(settings: Settings | None = None, config: str | None = None, resume: bool = False,
                         retry_rejected: list[str] | None = None, source: str | None = None,
                         store_url: str | None = None) -> BuildSummary | State[Any]:
    """Discover papers (unless resuming) and run every stage that is not done yet.

    ``settings``: the whole :class:`Settings` (what :func:`run_flow` passes, CLI overrides
    included); without it the flow loads ``config`` (a deployment run) with the ``source`` and
    ``store_url`` overrides.

    An arcticqa error ends the run in a Failed state whose message is the error's one line
    (``prefect deployment run --watch`` and the UI show it; a traceback would only reach the
    serving terminal), after the run's summary artifact says where the build got to. Called
    directly, the flow still raises that error.
    """
    try:
        if settings is None:
            # a deployment run: this worker process is the entry point, so its environment counts
            settings = load_settings(find_config_file(config, os.environ), environ=os.environ,
                                     **settings_overrides(source, store_url))
        elif config or source or store_url:
            raise ConfigError("build-arcticqa: pass either settings or config/source/store_url, not both")
        rejected = list(retry_rejected or ())
        async with open_build_context(settings, retry_rejected=rejected) as ctx:
            with shared_context(ctx):  # the tasks of this process find the context by its run id
                distributed = _uses_dask()
                try:
                    summary = await run_build(ctx, _task_batches(ctx, settings, rejected, distributed),
                                              resume=resume,
                                              parallelism=max(settings.build.dask_workers, 1) if distributed else 1)
                except ArcticQAError as exc:
                    await publish_summary(ctx, None, exc)
                    raise
                await publish_summary(ctx, summary)
                return summary
    except ArcticQAError as exc:
        return Failed(data=exc, message=f"{type(exc).__name__}: {exc}")


def _task_batches(ctx: BuildContext, settings: Settings, retry_rejected: list[str], distributed: bool) -> RunBatch:
    """The flow's ``run_batch``: each batch as one ``stage-batch`` task, each stage's progress
    artifact moved after it.

    Task arguments are plain data or the settings, never the live context (a distributed runner
    pickles them; the flow function itself may be pickled by value for a Dask cluster, globals
    included, so the tasks reach the context through :func:`live_context`, an importable
    function, not the registry itself)."""
    numbers: Counter[str] = Counter()
    progress = StageProgress(ctx, [spec.name for spec in BUILD_STAGES])

    async def run_batch(spec: StageSpec, paper_ids: list[str]) -> BatchReport:
        await progress.start()
        numbers[spec.name] += 1
        args = (ctx.run_id, settings, retry_rejected, spec.name, numbers[spec.name] - 1, paper_ids)
        if distributed:
            # submit() hands the task to the Dask cluster; wait off the event loop so the other
            # batches of this window are submitted and awaited concurrently
            future = stage_batch.submit(*args)
            report = cast(BatchReport, await asyncio.to_thread(future.result))
        else:
            report = await stage_batch(*args)
        await progress.advance(report)
        return report

    return run_batch


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


def run_flow(settings: Settings, options: BuildOptions) -> BuildSummary:
    """``--orchestrator prefect``: the ``build-arcticqa`` flow (on ``PREFECT_API_URL``, else on the
    server builds share, ``flows.prefect_server``, or Prefect's temporary one), with the task
    runner ``build.task_runner`` selects and the settings as its parameter. ``options.workers``
    is the local route's (:func:`arcticqa.pipeline.build.build` refuses it here); scale out with
    ``build.task_runner = "dask"`` or a process work pool instead."""
    with _api_server(settings):
        # Flow.__call__ is typed for sync flows; this one is async, so it returns a coroutine
        run: Any = flow_for(settings)(settings=settings, resume=options.resume,
                                      retry_rejected=list(options.retry_rejected))
        summary: BuildSummary = asyncio.run(run)
        return summary


@contextmanager
def _api_server(settings: Settings) -> Iterator[None]:
    """The API the flow reports to: ``PREFECT_API_URL`` if set; else the shared server of
    ``flows.prefect_server`` (``[prefect] server = "shared"``), or Prefect's temporary one. The
    build counts as the shared server's user while it runs, so the server does not idle out; a
    shared server that is not answering yet (started now, or by ``arcticqa prefect start
    --no-wait`` or another build a moment ago) is waited for with one progress line on stderr.
    """
    if get_current_settings().api.url or settings.prefect.server != "shared":
        yield
        return
    idle, timeout = settings.prefect.idle_shutdown_s, float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    with using_server():
        server = running_server()
        if server is None:
            starting, started = start_server(idle)
            with waiting_line(starting, advice=started) as waiting:
                server = wait_for_server(starting, idle, timeout_s=timeout, waiting=waiting)
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            yield


def __getattr__(name: str) -> Any:
    # ``flows/build_arcticqa.py:build_arcticqa_dask`` as a deployment entrypoint, built on first
    # access so the default path never imports dask
    if name == "build_arcticqa_dask":
        settings = load_settings(find_config_file(None, os.environ), environ=os.environ)
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
    overrides = settings_overrides(args.source, args.store_url)
    if args.task_runner:
        overrides.setdefault("build", {})["task_runner"] = args.task_runner
    settings = load_settings(find_config_file(args.config, os.environ), environ=os.environ, **overrides)
    # the importable module's orchestrator and flow, not __main__'s: Dask pickles __main__
    # functions by value (a function-level import on purpose: this file may run as __main__)
    from flows.build_arcticqa import run_flow as importable

    summary = build(settings, resume=args.resume, orchestrator=importable, retry_rejected=args.retry_rejected)
    print(json.dumps(summary.model_dump(mode="json"), indent=2))


if __name__ == "__main__":
    main()
