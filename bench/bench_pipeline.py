"""The build's own overhead, and endpoint saturation.

Generates ``--papers`` distinct fixture PDFs, serves the prompt-reading stand-in model from a
separate process (it stands in for a remote endpoint, so its CPU is not ours), and runs the
whole build (discovery → prefilter → fetch → extract → eligibility → construct):

1. **overhead** (server latency 0, or ``--overhead-latency``): our own CPU per paper per stage,
   measured as this process's CPU time over each stage divided by the papers it attempted (the
   server's CPU is in another process, so what is left is ours: stage code, store, openai +
   instructor client). Text extraction (PDF parsing) is shown but excluded from the target.
   With ``--prefect`` the same
   build also runs as the ``build-arcticqa`` Prefect flow, and the difference is Prefect's
   share: on ``PREFECT_API_URL`` if set, else side by side: Prefect's temporary server; the
   shared server's first build, which starts it and waits for it (``--cold-runs`` times); a
   build that finds it running (what ``arcticqa prefect start`` before a build gives).
   Prefect's share is printed two ways: the flow's wall minus the same build without Prefect
   (the median of ``--baseline-runs`` more builds after the overhead build, so that this process
   is as warm as for the flows), and the flow's wall minus its task bodies and discovery.
   Target: <= 50 ms per paper per stage; Prefect's share <= 10%.
   ``--overhead-latency S`` gives every model call of this build S seconds at the endpoint: at 0
   the build is our CPU alone (the worst case for Prefect's share), while real model calls take
   seconds, beside which a server's start-up is small.
2. **saturation** (server latency ``--latency`` s, at most ``--endpoint-concurrency`` requests
   in progress at the server): achieved calls/s during the model-calling stages against the
   ideal ``concurrency / latency``. Target: >= 80%.

    .venv/bin/python -m bench.bench_pipeline [--papers 200] [--mode both] [--prefect]
        [--cold-runs 1] [--baseline-runs 3] [--overhead-latency 0] [--batch-size 200]
        [--paper-concurrency 128] [--latency 0.2] [--endpoint-concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import multiprocessing
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from bench._fixtures import ScriptedModel, make_corpus, write_config

__all__ = ["main", "StageTiming", "run_local"]

TARGET_MS = 50.0
TARGET_RATIO = 0.80
#: the extraction pool's extract_text wall against the interpreter-per-PDF path
TARGET_EXTRACTION = 5.0
#: our CPU in construct per paper and per model call; Prefect's share of the flow's wall
TARGET_CONSTRUCT_MS = 25.0
TARGET_CALL_MS = 3.0
TARGET_PREFECT_SHARE = 0.10
#: saturation with two build processes
TARGET_RATIO_TWO = 0.90
_STORE_METHODS = ("latest_run", "latest_runs", "latest_output", "start_run", "claim_run", "finish_run", "record_run",
                  "record_outcomes", "record_calls", "cached_output", "get_paper", "get_document", "paper_row",
                  "family_items", "paper_ids")


@dataclass
class StageTiming:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    store_s: float = 0.0  # wall time inside synchronous store calls (the event loop is blocked then)
    gc_s: float = 0.0  # CPU time in the garbage collector (part of cpu_s)
    papers: int = 0
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class ServerView:
    """What the endpoint saw: its answers, when they left (monotonic s), and its own CPU."""

    completions: int = 0
    first_answer: float = 0.0
    last_answer: float = 0.0
    cpu_s: float = 0.0

    def rate(self, latency: float) -> tuple[float, float]:
        """(calls/s, window s): the window runs from the first request's start (its answer
        minus the latency) to the last answer, i.e. the time the build kept the endpoint busy."""
        window = self.last_answer - self.first_answer + latency
        return (self.completions / window if window > 0 else 0.0), window


def _serve(latency: float, cap: int | None, conn: Connection) -> None:
    from arcticqa.standins.server import FakeOpenAIServer

    model = ScriptedModel()
    answered: list[float] = []

    def responder(body: dict[str, Any], headers: Any) -> Any:
        answered.append(time.monotonic())  # called after the latency, inside the endpoint's slot
        return model(body, headers)

    with FakeOpenAIServer(responder, latency=latency, max_concurrency=cap) as server:
        conn.send(server.base_url)
        conn.recv()  # block until the parent is done
        conn.send(ServerView(server.completions, min(answered, default=0.0), max(answered, default=0.0),
                             time.process_time()))


@contextlib.contextmanager
def _server(latency: float, cap: int | None) -> Iterator[tuple[str, Callable[[], ServerView]]]:
    """The stand-in endpoint in its own process; yields (base_url, getter of its view after exit)."""
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(latency, cap, child), daemon=True)
    process.start()
    base_url = parent.recv()
    done: list[ServerView] = []

    def view() -> ServerView:
        return done[0] if done else ServerView()

    try:
        yield base_url, view
    finally:
        parent.send("stop")
        done.append(parent.recv())
        process.join(10)


class _GCTimer:
    """CPU time spent in the cyclic garbage collector, summed over every collection (gc.callbacks)."""

    def __init__(self) -> None:
        self.spent = 0.0
        self._started = 0.0

    def __enter__(self) -> _GCTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.spent += time.process_time() - self._started


class _StoreTimer:
    """Wraps the store's methods on one instance, charging their wall time to the current stage."""

    def __init__(self, store: Any) -> None:
        self.stage = "discover"
        self.spent: dict[str, float] = defaultdict(float)
        self._inside = False
        for name in _STORE_METHODS:
            setattr(store, name, self._wrap(getattr(store, name)))

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._inside:  # a store method calling another (record_run -> record_outcomes): counted once
                return fn(*args, **kwargs)
            self._inside = True
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self._inside = False
                self.spent[self.stage] += time.perf_counter() - started
        return timed


@dataclass
class _TimedBuild:
    """The build without Prefect (``run_build`` in this process), each stage timed (wall, CPU,
    store, GC) in its ``run_batch``, discovery as the time before the first batch; when it ends,
    the model calls it sent are counted."""

    count_calls: bool = True
    #: run one batch at a time (the build runs stages side by side), so the process's CPU, store
    #: and GC time while a batch runs is its stage's alone: the overhead figures
    alone: bool = False
    timings: dict[str, StageTiming] = field(default_factory=lambda: defaultdict(StageTiming))
    calls: dict[str, tuple[int, int]] = field(default_factory=dict)  # role → (sent, failed)
    #: (outcomes, transactions) of the attempts' group commit
    outcome_writes: tuple[int, int] = (0, 0)

    async def run(self, settings: Any) -> Any:
        from arcticqa.pipeline.build import run_build
        from arcticqa.pipeline.runner import BatchReport, StageSpec, open_build_context, run_stage_batch

        timings = self.timings
        async with open_build_context(settings) as ctx:
            timer = _StoreTimer(ctx.store)
            collector = _GCTimer()
            discovery: list[float] = [time.perf_counter(), time.process_time()]

            one_at_a_time = asyncio.Lock() if self.alone else contextlib.nullcontext()

            async def run_batch(spec: StageSpec, ids: list[str]) -> BatchReport:
                async with one_at_a_time:
                    return await timed_batch(spec, ids)

            async def timed_batch(spec: StageSpec, ids: list[str]) -> BatchReport:
                if discovery:  # the first batch: discovery has ended
                    timings["discover"].wall_s += time.perf_counter() - discovery[0]
                    timings["discover"].cpu_s += time.process_time() - discovery[1]
                    discovery.clear()
                timer.stage = spec.name
                t0, c0, g0 = time.perf_counter(), time.process_time(), collector.spent
                report = await run_stage_batch(ctx, spec, ids)
                t = timings[spec.name]
                t.wall_s += time.perf_counter() - t0
                t.cpu_s += time.process_time() - c0
                t.gc_s += collector.spent - g0
                t.papers += report.attempted
                for k, v in report.counts.items():
                    t.counts[k] = t.counts.get(k, 0) + v
                return report

            with collector:
                summary = await run_build(ctx, run_batch)
            for stage, spent in timer.spent.items():
                timings[stage].store_s = spent
            writes = ctx.outcomes
            if writes is not None:
                self.outcome_writes = (writes.outcomes, writes.transactions)
            if self.count_calls:
                self.calls = _sent_calls(ctx.store)
        return summary


def _sent_calls(store: Any) -> dict[str, tuple[int, int]]:
    """Per role, the model calls sent (cache hits left out) and how many failed: one aggregate
    query, not every ``llm_call`` row with its request and answer."""
    from sqlalchemy import case, func, not_, select

    from arcticqa.store.tables import LLMCall

    table = LLMCall.__table__  # type: ignore[attr-defined]
    query = select(table.c.role, func.count(), func.sum(case((table.c.error.is_not(None), 1), else_=0))).where(
        not_(table.c.cache_hit)).group_by(table.c.role)
    with store.engine.connect() as conn:
        return {str(role): (int(n), int(failed or 0)) for role, n, failed in conn.execute(query)}


def _local_build(config: Path, *, count_calls: bool = True, alone: bool = False
                 ) -> tuple[dict[str, StageTiming], dict[str, Any]]:
    from arcticqa.config import load_settings

    timed = _TimedBuild(count_calls=count_calls, alone=alone)
    summary = asyncio.run(timed.run(load_settings(config)))
    calls = timed.calls
    extra = {"summary": summary.model_dump(mode="json"), "http_calls": sum(n for n, _ in calls.values()),
             "calls_by_role": {role: n for role, (n, _) in sorted(calls.items())},
             "failed_calls": sum(f for _, f in calls.values()), "outcome_writes": timed.outcome_writes}
    return dict(timed.timings), extra


def run_local(work: Path, corpus: Path, base_url: str, args: argparse.Namespace, *, alone: bool = False
              ) -> tuple[float, dict[str, StageTiming], dict[str, Any]]:
    config = write_config(work, base_url=base_url, corpus=corpus, batch_size=args.batch_size,
                          paper_concurrency=args.paper_concurrency, max_concurrency=args.model_concurrency,
                          extra_model=args.extra_model)
    started = time.perf_counter()
    timings, extra = _local_build(config, alone=alone)
    return time.perf_counter() - started, timings, extra


def _worker(config: Path, conn: Connection) -> None:
    timings, extra = _local_build(config, count_calls=False)
    conn.send((timings, extra))


def run_workers(work: Path, corpus: Path, base_url: str, args: argparse.Namespace
                ) -> tuple[float, list[dict[str, StageTiming]]]:
    """``args.workers`` build processes on one store (claiming shares the papers out)."""
    config = write_config(work, base_url=base_url, corpus=corpus, batch_size=args.batch_size,
                          paper_concurrency=args.paper_concurrency, max_concurrency=args.model_concurrency,
                          extra_model=args.extra_model)
    ctx = multiprocessing.get_context("fork")
    pipes, processes = [], []
    started = time.perf_counter()
    for _ in range(args.workers):
        parent, child = ctx.Pipe()
        process = ctx.Process(target=_worker, args=(config, child))
        process.start()
        pipes.append(parent)
        processes.append(process)
    results = [pipe.recv() for pipe in pipes]
    for process in processes:
        process.join(30)
    return time.perf_counter() - started, [timings for timings, _ in results]


def run_prefect(work: Path, corpus: Path, base_url: str, args: argparse.Namespace,
                server: str = "temporary") -> dict[str, Any]:
    """The same build as the ``build-arcticqa`` flow; task bodies timed from inside. ``server``:
    the ``[prefect]`` setting."""
    import psutil

    import flows.build_arcticqa as flow_module
    from arcticqa.config import load_settings
    from arcticqa.pipeline.build import build

    config = write_config(work, base_url=base_url, corpus=corpus, batch_size=args.batch_size,
                          paper_concurrency=args.paper_concurrency, max_concurrency=args.model_concurrency,
                          extra_model=args.extra_model)
    bodies: list[tuple[float, float, float]] = []  # (start, wall, cpu)
    # every stage-batch task's body: its batch run
    original = flow_module.run_stage_batch  # type: ignore[attr-defined]
    original_wait = flow_module.wait_for_server  # type: ignore[attr-defined]
    original_publish = flow_module.publish_summary  # type: ignore[attr-defined]
    progress = flow_module.StageProgress  # type: ignore[attr-defined]
    original_start, original_advance = progress.start, progress.advance
    marks: dict[str, float] = {}  # when the server answered (a cold shared server)
    artifacts: list[float] = []  # wall of each artifact call (the summary's includes reading the store)

    async def timed(*a: Any, **kw: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return await original(*a, **kw)
        finally:
            bodies.append((t0, time.perf_counter() - t0, time.process_time() - c0))

    def waited(*a: Any, **kw: Any) -> Any:
        try:
            return original_wait(*a, **kw)
        finally:
            marks["answered"] = time.perf_counter()

    def timed_artifact(fn: Callable[..., Any]) -> Callable[..., Any]:
        async def timed_call(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await fn(*a, **kw)
            finally:
                artifacts.append(time.perf_counter() - t0)
        return timed_call

    def server_cpu() -> dict[int, float]:
        # the temporary server and the shared one are both this process's children
        return {p.pid: sum(p.cpu_times()[:2]) for p in psutil.Process().children(recursive=True)
                if "prefect" in " ".join(_cmdline(p))}

    flow_module.run_stage_batch = timed  # type: ignore[attr-defined]
    flow_module.wait_for_server = waited  # type: ignore[attr-defined]
    flow_module.publish_summary = timed_artifact(original_publish)  # type: ignore[attr-defined]
    progress.start, progress.advance = timed_artifact(original_start), timed_artifact(original_advance)  # type: ignore[method-assign]
    settings = load_settings(config, prefect={"server": server})
    try:
        before = server_cpu()
        started, cpu0 = time.perf_counter(), time.process_time()
        build(settings, orchestrator=flow_module.run_flow)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
        after = server_cpu()
    finally:
        flow_module.run_stage_batch = original  # type: ignore[attr-defined]
        flow_module.wait_for_server = original_wait  # type: ignore[attr-defined]
        flow_module.publish_summary = original_publish  # type: ignore[attr-defined]
        progress.start, progress.advance = original_start, original_advance  # type: ignore[method-assign]
    first = min(b[0] for b in bodies) - started
    return {"wall_s": wall, "cpu_s": cpu, "tasks": len(bodies), "bodies_wall_s": sum(b[1] for b in bodies),
            "bodies_cpu_s": sum(b[2] for b in bodies), "startup_s": first,
            "server_cpu_s": sum(c - before.get(pid, 0.0) for pid, c in after.items()),
            "marks": {k: v - started for k, v in marks.items()}, "artifacts_s": sum(artifacts)}


def run_prefect_routes(work: Path, corpus: Path, base_url: str, args: argparse.Namespace
                       ) -> list[tuple[str, dict[str, Any]]]:
    """The flow side by side: Prefect's temporary server; the shared server's first build (it
    starts the server and waits for it: cold), ``args.cold_runs`` times; then a build that finds
    it running (warm: the build after ``arcticqa prefect start``, or after another build). The
    shared server gets a PREFECT_HOME of its own, whose database is created (and the server
    stopped) before the cold runs, so that, like the temporary server here, it starts on an
    existing database."""
    from prefect.server.api.server import SubprocessASGIServer

    from flows.prefect_server import ensure_server, stop_server

    routes = [("temporary server", run_prefect(work / "temporary", corpus, base_url, args, "temporary"))]
    # Prefect keeps its temporary server until this process exits; stopped here so that its
    # clean-up does not run beside the shared server's builds. Its log worker goes first: it
    # would send the next runs' log lines to the stopped server ("Error logging to API")
    _drain_prefect()
    SubprocessASGIServer().stop()
    home = work / "shared-home"
    before = os.environ.get("PREFECT_HOME")
    os.environ["PREFECT_HOME"] = str(home)
    try:
        ensure_server(60.0, timeout_s=float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]))
        for i in range(args.cold_runs):
            _drain_prefect()
            stop_server()
            routes.append(("shared server, first build (starts it, waits for it)",
                           run_prefect(work / f"shared-cold-{i}", corpus, base_url, args, "shared")))
        routes.append(("shared server, next build (warm)",
                       run_prefect(work / "shared-warm", corpus, base_url, args, "shared")))
    finally:
        try:
            # the flows' last log lines go to the shared server before it stops, not to a closed port
            _drain_prefect()
        finally:
            stop_server()
        if before is None:
            os.environ.pop("PREFECT_HOME", None)
        else:
            os.environ["PREFECT_HOME"] = before
    return routes


def _drain_prefect() -> None:
    """Send the last runs' log lines and events before their server stops: Prefect's workers
    would otherwise retry them against a closed port (7 s each) during the next run."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=5)
    EventsWorker.drain_all(timeout=5)


def _document_digest(document: Any) -> str:
    """A hash of what a document says (status, text, sections, spans, chunks, warnings), not of its
    timings."""
    import hashlib
    import json

    dumped = document.model_dump(mode="json", include={"sha256", "status", "message", "pages", "text", "sections",
                                                        "spans", "chunks", "warnings"})
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


def compare_extraction(pdfs: list[Path]) -> dict[str, Any]:
    """``extract_text`` over the same PDFs, old path (an interpreter per PDF) and the pool, with the
    build's own thread count (``asyncio.to_thread``'s default executor); the pool's zygote
    start-up is inside the new path's wall time."""
    from concurrent.futures import ThreadPoolExecutor

    from arcticqa.stages.extract_text import ExtractionLimits
    from arcticqa.text.isolate import extract_isolated
    from arcticqa.text.pool import ExtractionPool

    limits = ExtractionLimits()
    threads = min(32, (os.cpu_count() or 1) + 4)
    pool = ExtractionPool()

    def run(extract: Callable[[bytes, Any], Any]) -> tuple[float, list[str]]:
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as executor:
            documents = list(executor.map(lambda p: extract(p.read_bytes(), limits), pdfs))
        return time.perf_counter() - started, [_document_digest(d) for d in documents]

    try:
        new_wall, new = run(pool.extract)
        old_wall, old = run(extract_isolated)
    finally:
        pool.close()
    return {"pdfs": len(pdfs), "threads": threads, "workers": pool.workers, "old_s": old_wall, "new_s": new_wall,
            "identical": sum(a == b for a, b in zip(old, new, strict=True))}


def _report_extraction(result: dict[str, Any], build_stage_s: float | None) -> float:
    ratio = result["old_s"] / result["new_s"]
    print(f"\n== extraction: {result['pdfs']} PDFs, {result['threads']} threads as in the build ==")
    print(f"old path (an interpreter per PDF) {result['old_s']:.2f} s; pool ({result['workers']} workers, zygote "
          f"start-up included) {result['new_s']:.2f} s: {ratio:.1f}x less wall (target >= {TARGET_EXTRACTION:g}x: "
          f"{'met' if ratio >= TARGET_EXTRACTION else 'NOT met'}); identical documents "
          f"{result['identical']}/{result['pdfs']}" + (f"; in the build above extract_text took {build_stage_s:.2f} s"
                                                        if build_stage_s is not None else ""))
    return ratio


def _cmdline(p: Any) -> list[str]:
    try:
        return list(p.cmdline())
    except Exception:  # noqa: BLE001 - a child may exit while we look
        return []


def _met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def _report_overhead(n: int, wall: float, timings: dict[str, StageTiming], extra: dict[str, Any],
                     prefect: dict[str, Any] | None, latency: float = 0.0) -> None:
    print(f"\n== 1. pipeline overhead: {n} papers, server latency {latency:g} s (separate process) ==")
    print(f"build wall {wall:.2f} s; HTTP calls {extra['http_calls']} ({extra['failed_calls']} failed); "
          f"by role {extra['calls_by_role']}")
    print(f"{'stage':<16}{'papers':>7}{'wall s':>9}{'CPU s':>8}{'CPU ms/paper':>14}{'store ms/paper':>16}"
          f"{'GC ms/paper':>13}{'vs 50 ms':>10}  outcome")
    worst = 0.0
    for stage, t in timings.items():
        papers = t.papers if stage != "discover" else n
        per = 1000 * t.cpu_s / papers if papers else 0.0
        store = 1000 * t.store_s / papers if papers else 0.0
        collected = 1000 * t.gc_s / papers if papers else 0.0
        excluded = stage in ("discover", "extract_text")
        if not excluded:
            worst = max(worst, per)
        note = "(PDF parsing: excluded)" if stage == "extract_text" else (
            "(batch level)" if stage == "discover" else "")
        print(f"{stage:<16}{papers:>7}{t.wall_s:>9.2f}{t.cpu_s:>8.2f}{per:>14.1f}{store:>16.1f}{collected:>13.1f}"
              f"{per / TARGET_MS:>9.2f}x  {t.counts or ''} {note}")
    print(f"worst stage (excluding PDF parsing): {worst:.1f} ms/paper = {worst / TARGET_MS:.2f} of the "
          f"{TARGET_MS:.0f} ms target ({'met' if worst <= TARGET_MS else 'NOT met'})")
    construct = timings.get("construct")
    if construct is not None and construct.papers:
        per_paper = 1000 * construct.cpu_s / construct.papers
        per_call = 1000 * construct.cpu_s / max(extra["http_calls"], 1)
        print(f"construct: {per_paper:.1f} ms of our CPU per paper (target <= {TARGET_CONSTRUCT_MS:g}: "
              f"{_met(per_paper <= TARGET_CONSTRUCT_MS)}), {per_call:.2f} ms per model call (target <= "
              f"{TARGET_CALL_MS:g}: {_met(per_call <= TARGET_CALL_MS)})")
    _report_outcome_writes(extra)
    if prefect is not None:
        _report_prefect(n, wall, timings, prefect)


def _report_outcome_writes(extra: dict[str, Any]) -> None:
    outcomes, transactions = extra.get("outcome_writes") or (0, 0)
    if transactions:
        print(f"attempt outcomes written (all stages): {outcomes} in {transactions} transactions "
              f"({outcomes / transactions:.1f} a commit; arcticqa.pipeline.outcomes)")


def _report_prefect(n: int, local_wall: float, timings: dict[str, StageTiming], prefect: dict[str, Any],
                    route: str | None = None) -> None:
    """What Prefect adds to the same build: against the build without Prefect (``local_wall``),
    and around its task bodies (server start-up, task runs)."""
    overhead = prefect["wall_s"] - prefect["bodies_wall_s"] - timings["discover"].wall_s
    api = os.environ.get("PREFECT_API_URL")
    marks = prefect.get("marks", {})
    answered = f" (the server answered {marks['answered']:.2f} s into the build)" if "answered" in marks else ""
    print(f"prefect flow, {f'PREFECT_API_URL {api}' if api else route or 'temporary server'}: wall "
          f"{prefect['wall_s']:.2f} s, {prefect['tasks']} tasks, task bodies "
          f"{prefect['bodies_wall_s']:.2f} s wall; build start until first task {prefect['startup_s']:.2f} s"
          f"{answered}; its artifacts (progress per stage, the summary) {prefect.get('artifacts_s', 0.0):.2f} s")
    plain = (prefect["wall_s"] - local_wall) / prefect["wall_s"]
    print(f"  Prefect's share, against the same build without Prefect ({local_wall:.2f} s): "
          f"{prefect['wall_s'] - local_wall:.2f} s = {plain:.0%} (target <= {TARGET_PREFECT_SHARE:.0%}: "
          f"{_met(plain <= TARGET_PREFECT_SHARE)})")
    share = overhead / prefect["wall_s"]
    print(f"  Prefect's share, flow wall minus task bodies and discovery: "
          f"{overhead:.2f} s = {share:.0%} (target <= "
          f"{TARGET_PREFECT_SHARE:.0%}: {_met(share <= TARGET_PREFECT_SHARE)}) "
          f"({1000 * (overhead - prefect['startup_s']) / prefect['tasks']:.0f} ms per task after startup); "
          f"in-process CPU outside task bodies {prefect['cpu_s'] - prefect['bodies_cpu_s']:.2f} s, "
          f"Prefect server process CPU {prefect['server_cpu_s']:.2f} s")
    print(f"  per paper: {1000 * overhead / n:.1f} ms of Prefect per paper over the whole build "
          f"({1000 * (overhead - prefect['startup_s']) / n / max(1, len(timings) - 1):.1f} ms per paper per "
          f"stage after startup)")


def _report_saturation(n: int, latency: float, cap: int, wall: float, per_worker: list[dict[str, StageTiming]],
                       server: ServerView) -> float:
    """Throughput as the endpoint saw it: answers over the time from the first request's start
    to the last answer. Same figure for one build process or several sharing the store."""
    rate, window = server.rate(latency)
    ideal = cap / latency
    target = TARGET_RATIO if len(per_worker) == 1 else TARGET_RATIO_TWO
    print(f"\n== 2. endpoint saturation: {n} papers, latency {latency:g} s, endpoint cap {cap}, "
          f"{len(per_worker)} build process(es) ==")
    print(f"build wall {wall:.2f} s; the endpoint answered {server.completions} calls in a {window:.2f} s window "
          f"(first request to last answer); endpoint process CPU {server.cpu_s:.2f} s "
          f"({1000 * server.cpu_s / max(server.completions, 1):.2f} ms per call, not ours)")
    for i, timings in enumerate(per_worker, start=1):
        for stage in ("eligibility", "construct"):
            t = timings.get(stage)
            if t is not None:
                print(f"  worker {i} {stage:<12} wall {t.wall_s:6.2f} s, CPU {t.cpu_s:6.2f} s, "
                      f"store {t.store_s:6.2f} s, {t.counts}")
    construct_cpu = sum(t["construct"].cpu_s for t in per_worker if "construct" in t)
    print(f"  our CPU in construct: {construct_cpu:.2f} s = "
          f"{1000 * construct_cpu / max(server.completions, 1):.2f} ms per call")
    print(f"throughput: {rate:.1f} calls/s; ideal {ideal:.0f} calls/s ({cap} / {latency:g} s); "
          f"ratio {rate / ideal:.2f} (target >= {target:.2f}: {_met(rate / ideal >= target)})")
    return rate / ideal


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", type=int, default=200)
    parser.add_argument("--mode", choices=("overhead", "saturation", "both"), default="both")
    parser.add_argument("--prefect", action="store_true", help="also run the overhead build as the Prefect flow")
    parser.add_argument("--cold-runs", type=int, default=1,
                        help="--prefect: first builds on the shared server (each starts it and waits for it)")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--paper-concurrency", type=int, default=128)
    parser.add_argument("--model-concurrency", type=int, default=64, help="the model config's max_concurrency")
    parser.add_argument("--extra-model", default="", help="extra TOML lines for the model config")
    parser.add_argument("--latency", type=float, default=0.2, help="saturation: seconds per model call")
    parser.add_argument("--overhead-latency", type=float, default=0.0,
                        help="overhead (and --prefect): seconds per model call at the endpoint")
    parser.add_argument("--endpoint-concurrency", type=int, default=64)
    parser.add_argument("--baseline-runs", type=int, default=3,
                        help="--prefect: builds without Prefect whose median is the baseline of Prefect's share")
    parser.add_argument("--compare-extraction", action="store_true",
                        help="overhead: also extract every PDF by the old path and the pool, side by side")
    parser.add_argument("--workers", type=int, default=1,
                        help="saturation: build processes sharing one store (docs/scale-out.md)")
    args = parser.parse_args(argv)
    if args.baseline_runs < 1:
        parser.error("--baseline-runs must be at least 1")
    os.environ.setdefault("PREFECT_HOME", str(Path(".arcticqa/prefect").resolve()))
    # after PREFECT_HOME (which it creates), before Prefect loads: analytics off, the start-up wait
    import flows  # noqa: F401
    with tempfile.TemporaryDirectory(prefix="arcticqa-bench-") as tmp_name:
        tmp = Path(tmp_name)
        started = time.perf_counter()
        corpus = make_corpus(tmp / "corpus", args.papers)
        print(f"generated {args.papers} fixture PDFs in {time.perf_counter() - started:.1f} s; batch_size "
              f"{args.batch_size}, paper_concurrency {args.paper_concurrency}, model max_concurrency "
              f"{args.model_concurrency}")
        if args.mode in ("overhead", "both"):
            with _server(args.overhead_latency, None) as (base_url, _):
                wall, timings, extra = run_local(tmp / "overhead", corpus, base_url, args, alone=True)
                _report_overhead(args.papers, wall, timings, extra, None, args.overhead_latency)
                if args.prefect:
                    # the baseline of Prefect's share: the first build above also paid this
                    # process's one-time costs (imports, the extraction zygote), the flows do not;
                    # a single run of it varies by a second or two on a 2-core machine, as much as
                    # the share being measured, so the median of several
                    walls = [run_local(tmp / f"overhead-again-{i}", corpus, base_url, args)[0]
                             for i in range(args.baseline_runs)]
                    baseline = statistics.median(walls)
                    print(f"\nthe same build without Prefect again, this process warm as for the flows below: "
                          f"median {baseline:.2f} s of {', '.join(f'{w:.2f}' for w in walls)}")
                if args.prefect and os.environ.get("PREFECT_API_URL"):
                    _report_prefect(args.papers, baseline, timings, run_prefect(tmp / "prefect", corpus, base_url,
                                                                                args))
                elif args.prefect:
                    for route, prefect in run_prefect_routes(tmp / "prefect", corpus, base_url, args):
                        _report_prefect(args.papers, baseline, timings, prefect, route)
            if args.compare_extraction:
                stage = timings.get("extract_text")
                _report_extraction(compare_extraction(sorted((tmp / "corpus").rglob("*.pdf"))),
                                   stage.wall_s if stage else None)
        if args.mode in ("saturation", "both"):
            with _server(args.latency, args.endpoint_concurrency) as (base_url, view):
                if args.workers > 1:
                    wall, per_worker = run_workers(tmp / "saturation", corpus, base_url, args)
                else:
                    wall, timings, extra = run_local(tmp / "saturation", corpus, base_url, args)
                    per_worker = [timings]
            _report_saturation(args.papers, args.latency, args.endpoint_concurrency, wall, per_worker, view())
            if args.workers == 1:
                _report_outcome_writes(extra)


if __name__ == "__main__":
    main()
