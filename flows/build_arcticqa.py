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

The flow body is :func:`arcticqa.pipeline.build.execute` with a route that runs each batch as
a task; :data:`PREFECT` is the orchestrator object the interfaces hand to
:func:`arcticqa.pipeline.build.build` to start this flow (``pipeline`` is below ``flows`` and
never imports it). The settings travel as the flow's ``settings`` parameter (``Settings`` as
JSON), CLI overrides included; a deployment run may name a ``config`` file instead.

Run without a server of your own: ``python -m flows.build_arcticqa [--config FILE] [--resume]
[--task-runner dask]`` or ``arcticqa build`` (the shared server of ``flows.prefect_server``,
started by the first build; ``[prefect] server = "temporary"``: Prefect's ephemeral mode). Serve:
``flows/serve.py``; work pool deployment: ``flows/deploy.py`` and ``docs/scale-out.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, cast

from prefect import Flow, flow, get_run_logger, task
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
from arcticqa.pipeline.build import (
    BatchPlan,
    BuildOptions,
    BuildSummary,
    EarlyWork,
    Orchestrator,
    build,
    execute,
    run_batch_after_early,
    run_early,
)
from arcticqa.pipeline.runner import (
    BatchReport,
    BuildContext,
    StageSpec,
    frozen_heap,
    live_context,
    open_build_context,
    shared_context,
)
from arcticqa.pipeline.stages import BUILD_STAGES, discover_papers, stages_without_model
from flows.prefect_server import ensure_server, start_server, using_server, wait_for_server, watch_server

__all__ = ["build_arcticqa", "settings_overrides", "flow_for", "dask_task_runner", "PrefectOrchestrator",
           "PREFECT"]


def _spec(name: str) -> StageSpec:
    return next(s for s in BUILD_STAGES if s.name == name)


@task(name="stage-batch", cache_policy=NO_CACHE, task_run_name="{stage_name}-batch-{batch_no}")
async def _stage_batch(run_key: str, settings: dict[str, Any], retry_rejected: list[str], stage_name: str,
                       batch_no: int, paper_ids: list[str], early: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = _spec(stage_name)
    ctx = live_context(run_key)
    if ctx is not None:  # same process as the flow: share its gateway, budget and store
        return (await _run_batch(ctx, spec, paper_ids, early)).as_dict()
    # another process (a Dask worker): a context of our own, closed with the task, because its
    # HTTP clients belong to this task's event loop
    async with open_build_context(Settings.model_validate(settings), retry_rejected=retry_rejected) as own:
        return (await _run_batch(own, spec, paper_ids, early)).as_dict()


async def _run_batch(ctx: BuildContext, spec: StageSpec, paper_ids: list[str], early: dict[str, Any] | None
                     ) -> BatchReport:
    """The batch's papers the early work attempted are reported as it recorded them (and said so
    in the task's log); the others run now."""
    work = EarlyWork.model_validate(early) if early is not None else None
    report, done = await run_batch_after_early(ctx, spec, paper_ids, work)
    if work is not None and done is not None and done.statuses:
        get_run_logger().info(
            "%s: %d of %d papers were done before this flow run, while the Prefect server started (run %s, "
            "%.1f s): %s", spec.name, len(done.statuses), len(paper_ids), work.run_id, work.seconds,
            dict(sorted(done.counts.items())))
    return report


@task(name="discover", cache_policy=NO_CACHE)
async def _discover(run_key: str, early: dict[str, Any] | None = None) -> dict[str, Any] | None:
    if early is not None:  # the flow does not search again: the early work's discovery is this build's
        work = EarlyWork.model_validate(early)
        get_run_logger().info("discovery was done before this flow run, while the Prefect server started "
                              "(run %s): %s", work.run_id, work.discovered)
        return work.discovered
    ctx = live_context(run_key)
    assert ctx is not None, "discovery runs in the flow's process"
    return await discover_papers(ctx)


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
async def build_arcticqa(config: str | None = None, resume: bool = False,
                         retry_rejected: list[str] | None = None, source: str | None = None,
                         store_url: str | None = None, settings: dict[str, Any] | None = None,
                         early: dict[str, Any] | None = None) -> Any:
    """Discover papers (unless resuming) and run every stage that is not done yet.

    ``settings`` is the whole :class:`Settings` as JSON (what :data:`PREFECT` passes, CLI
    overrides included); without it the flow loads ``config`` (a deployment run) with the
    ``source`` and ``store_url`` overrides. ``early`` (:class:`EarlyWork` as JSON): what
    :data:`PREFECT` did before this run while the server started; its discovery stands for the
    flow's, and its stages' tasks report its attempts instead of repeating them.

    An arcticqa error ends the run in a Failed state whose message is the error's one line
    (``prefect deployment run --watch`` and the UI show it; a traceback would only reach the
    serving terminal). Called directly, the flow still raises that error.
    """
    try:
        loaded = _flow_settings(config, source, store_url, settings)
        return await _build(loaded, resume, retry_rejected, early)
    except ArcticQAError as exc:
        return Failed(data=exc, message=f"{type(exc).__name__}: {exc}")


def _flow_settings(config: str | None, source: str | None, store_url: str | None,
                   settings: dict[str, Any] | None) -> Settings:
    if settings is None:
        # a deployment run: this worker process is the entry point, so its environment counts
        return load_settings(find_config_file(config, os.environ), environ=os.environ,
                             **settings_overrides(source, store_url))
    if config or source or store_url:
        raise ConfigError("build-arcticqa: pass either settings or config/source/store_url, not both")
    return Settings.model_validate(settings)


@dataclass(frozen=True)
class _TaskRoute:
    """Each batch as one ``stage-batch`` task, discovery as the ``discover`` task.

    Task arguments are plain data; the flow's context is found through the process-local
    registry (the flow function may itself be pickled by value for a Dask cluster, globals
    included: it must not reference the registry of live contexts directly).
    """

    settings_json: dict[str, Any]
    retry_rejected: list[str]
    distributed: bool
    parallelism: int
    early: dict[str, Any] | None = None

    @contextmanager
    def bind(self, ctx: BuildContext) -> Iterator[BatchPlan]:
        async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
            args = (ctx.run_id, self.settings_json, self.retry_rejected, spec.name, batch_no, ids, self.early)
            if self.distributed:
                # submit() hands the task to the Dask cluster; wait off the event loop so the
                # other batches of this window are submitted and awaited concurrently
                future = _stage_batch.submit(*args)
                raw: dict[str, Any] = cast(dict[str, Any], await asyncio.to_thread(future.result))
            else:
                raw = await _stage_batch(*args)
            return BatchReport.from_dict(raw)

        async def discover(c: BuildContext) -> dict[str, Any] | None:
            return await _discover(c.run_id, self.early)

        with shared_context(ctx):
            yield BatchPlan(dispatch=dispatch, discover=discover, parallelism=self.parallelism)


async def _build(settings: Settings, resume: bool, retry_rejected: list[str] | None,
                 early: dict[str, Any] | None = None) -> dict[str, Any]:
    distributed = _uses_dask()
    rejected = list(retry_rejected or ())
    route = _TaskRoute(settings_json=settings.model_dump(mode="json"), retry_rejected=rejected,
                       distributed=distributed,
                       parallelism=max(settings.build.dask_workers, 1) if distributed else 1, early=early)
    # after early work the discover task stands for the discovery it did, resume or not
    options = BuildOptions(resume=resume and early is None, retry_rejected=tuple(rejected))
    # the build's budget goes on from what the early work's model calls spent
    budget = EarlyWork.model_validate(early).budget(settings) if early is not None else None
    summary = await execute(settings, options, route, budget=budget)
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


class PrefectOrchestrator:
    """``--orchestrator prefect``: the ``build-arcticqa`` flow (on ``PREFECT_API_URL``, else on the
    server builds share, ``flows.prefect_server``, or Prefect's temporary one), with the task
    runner ``build.task_runner`` selects, the settings as its parameter."""

    name = "prefect"
    runs_workers = False  # scale out with build.task_runner = "dask" or a work pool instead

    def run(self, settings: Settings, options: BuildOptions) -> BuildSummary:
        with _api_server(settings, options) as early:
            # Flow.__call__ is typed for sync flows; this one is async, so it returns a coroutine
            run: Any = flow_for(settings)(settings=settings.model_dump(mode="json"), resume=options.resume,
                                          retry_rejected=list(options.retry_rejected),
                                          early=early.model_dump(mode="json") if early else None)
            return BuildSummary.model_validate(asyncio.run(run))


@contextmanager
def _api_server(settings: Settings, options: BuildOptions) -> Iterator[EarlyWork | None]:
    """The API the flow reports to: ``PREFECT_API_URL`` if set; else the shared server of
    ``flows.prefect_server`` (``[prefect] server = "shared"``), or Prefect's temporary one; the
    build counts as the shared server's user while it runs, so the server does not idle out.

    A shared server that is not answering yet is started without waiting for it, and the build
    runs meanwhile (``[prefect] early_stages``): discovery and the stages that call no model, then
    the later stages until the server answers (no paper starts a stage after that); yields what
    was done (None: no early work). If the server then does not answer, the build fails and the
    early work stays in the store for a later build to go on from.
    """
    if get_current_settings().api.url or settings.prefect.server != "shared":
        yield None
        return
    idle, timeout = settings.prefect.idle_shutdown_s, float(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    with using_server(), ExitStack() as stack:
        early: EarlyWork | None = None
        starting = start_server(idle) if settings.prefect.early_stages else None
        if starting is None:
            server = ensure_server(idle, timeout_s=timeout)
        else:
            # one frozen heap for the early work and the flow: the flow's build context would
            # otherwise collect the whole heap again right after the hand-over
            stack.enter_context(frozen_heap())
            answering = watch_server(starting, timeout_s=timeout)
            early = asyncio.run(run_early(settings, options, stages_without_model(settings),
                                          until=_early_until(settings, answering)))
            server = wait_for_server(starting, idle, timeout_s=timeout)
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            yield early


def _early_until(settings: Settings, answering: threading.Event) -> Callable[[], bool] | None:
    """How far the early work goes: the model stages too, until the server answers; in batch mode
    not (None: the stages that call no model only), since a model stage there waits minutes to
    hours for the provider's jobs, and that waiting belongs in the flow."""
    return None if settings.build.batch else answering.is_set


#: the Prefect orchestrator, for :func:`arcticqa.pipeline.build.build`
PREFECT: Orchestrator = PrefectOrchestrator()


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
    from flows.build_arcticqa import PREFECT as importable

    summary = build(settings, resume=args.resume, orchestrator=importable, retry_rejected=args.retry_rejected)
    print(json.dumps(summary.model_dump(mode="json"), indent=2))


if __name__ == "__main__":
    main()
