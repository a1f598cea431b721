"""CLI commands of the build: build, resume, status, rules, doctor."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from arcticqa.cli.app import (
    ConfigOption,
    Text,
    app,
    config_flag,
    console,
    err_console,
    handle_errors,
    load_cli_settings,
)
from arcticqa.errors import FailureThresholdExceeded

__all__: list[str] = []

STATUSES = ("pending", "running", "succeeded", "rejected", "failed")


class Orchestrator(StrEnum):
    prefect = "prefect"
    local = "local"


OrchestratorOption = Annotated[
    Orchestrator,
    typer.Option("--orchestrator", help="prefect: run the build-arcticqa flow (on $PREFECT_API_URL, or a "
                 "server the first build starts and later ones reuse: `arcticqa prefect stop` ends it); "
                 "local: the same stages without Prefect (fastest start-up)."),
]
RetryRejected = Annotated[
    list[str] | None,
    typer.Option("--retry-rejected", help="Re-run this stage for papers it rejected (repeatable)."),
]
KeywordsOption = Annotated[
    Path | None,
    typer.Option("--keywords", help="Query file for --source s2 (one bulk-search query per line; "
                 "default data/keywords/arctic.txt or build.keywords_file)."),
]
BatchOption = Annotated[
    bool,
    typer.Option("--batch", help="Send the build roles (build.batch_roles) through the provider's Batch API: "
                 "about half the price, answers within the completion window (docs/batch.md)."),
]
WorkersOption = Annotated[
    int,
    typer.Option("--workers", min=1, help="Build processes sharing the store (--orchestrator local): this one plus "
                 "N-1 started for it; they claim paper stages, so each runs once (docs/scale-out.md)."),
]
YesOption = Annotated[
    bool,
    typer.Option("--yes", help="Start even when the estimate's cost is above the budget "
                 "(estimate.confirm_above_usd, else build.budget_usd; docs/estimate.md)."),
]
SourceOption = Annotated[
    str | None,
    typer.Option("--source", help="Paper source: snapshot:PATH | s2-datasets:DIR | s2 (overrides config)."),
]


def _run(config: Any, *, resume: bool, orchestrator: Orchestrator, retry_rejected: list[str] | None,
         source: str | None, keywords: Path | None = None, batch: bool = False, workers: int = 1,
         yes: bool = True) -> None:
    # imported here, not at the top: every CLI command starts faster without the build's imports
    from arcticqa.pipeline.build import Orchestrator as BuildOrchestrator
    from arcticqa.pipeline.build import build as pipeline_build
    from arcticqa.pipeline.build import check_workers

    # the options travel as settings, never through the environment
    overrides: dict[str, Any] = {}
    if source:
        overrides["source"] = source
    if keywords is not None:
        overrides["keywords_file"] = keywords
    settings = load_cli_settings(config, **({"build": overrides} if overrides else {}))
    route: BuildOrchestrator | None = None  # local: the stages in this process
    if orchestrator is Orchestrator.prefect:
        # imported only on this route: importing Prefect costs seconds the local route never pays
        from flows.build_arcticqa import run_flow

        route = run_flow
    check_workers(route, workers)
    # before the store is opened (or created) and before a Prefect server starts: a wrong path, a
    # missing key, no network or a wrong base_url is one line and exit 1/2, not minutes of retries
    from arcticqa.pipeline.preflight import preflight_build

    preflight_build(settings)
    if not resume:
        _check_estimate(settings, batch=batch, yes=yes)
    try:
        summary = pipeline_build(settings, resume=resume, orchestrator=route, workers=workers, batch=batch,
                                 retry_rejected=retry_rejected or ())
    except FailureThresholdExceeded as exc:
        err_console.print(Text.assemble(("build stopped:", "bold red"), f" {exc}"), soft_wrap=True)
        raise typer.Exit(1) from exc
    _print_summary(summary.model_dump(mode="json"))
    if summary.stopped:
        err_console.print(Text.assemble(("stopped early:", "yellow"), f" {summary.stopped} (finished work is "
                                        "kept; raise the cap and run `arcticqa resume`)"))
        raise typer.Exit(3)
    _print_next(config_flag(settings), failed=any(c.get("failed") for c in summary.stages.values()))


def _check_estimate(settings: Any, *, batch: bool, yes: bool) -> None:
    """Print the estimate; stop (exit 3) when its cost is above the budget and ``--yes`` was not given."""
    # imported here, not at the top: every CLI command starts faster without the estimate's imports
    from arcticqa.cli.estimate import render_short
    from arcticqa.pipeline.estimate import estimate_for_settings

    if batch and not settings.build.batch:
        settings = settings.model_copy(update={"build": settings.build.model_copy(update={"batch": True})})
    est, why = estimate_for_settings(settings)
    console.print(render_short(est, why), highlight=False, soft_wrap=True)
    limit = settings.estimate.confirm_above_usd
    name = "estimate.confirm_above_usd"
    if limit is None and settings.build.budget_usd is not None:
        limit, name = settings.build.budget_usd, "build.budget_usd"
    if limit is not None and est.cost_usd.mid > limit and not yes:
        err_console.print(Text.assemble(("not started:", "bold red"), f" the estimated cost USD {est.cost_usd.mid:,.2f} "
                                        f"is above the budget of USD {limit:,.2f} ({name}); run again with --yes "
                                        f"to start anyway, or raise {name}"), highlight=False, soft_wrap=True)
        raise typer.Exit(3)


def _print_next(flag: str, *, failed: bool) -> None:
    """What to run after a build, as the user would type it (``flag``: the ``-c`` of the config the
    build used)."""
    steps = [(f"arcticqa status{flag}", "the newest attempt of every stage"),
             (f"arcticqa audit{flag}", "every rejection with its rule, message and evidence"),
             (f"arcticqa export{flag} --out release", "write the release (it says what it holds and left out)")]
    if failed:
        steps.insert(0, (f"arcticqa resume{flag}", "run the failed stages again"))
    width = max(len(command) for command, _ in steps)
    console.print("next:", highlight=False)
    for command, what in steps:
        console.print(f"  {command:{width}}   {what}", highlight=False, soft_wrap=True)


def _print_summary(summary: dict[str, Any]) -> None:
    table = Table(title=f"build run {summary.get('run_id')}")
    cols = ("succeeded", "rejected", "failed", "skipped", "blocked", "claimed_elsewhere", "not_started")
    table.add_column("stage")
    for c in cols:
        table.add_column(c, justify="right")
    for stage, counts in summary.get("stages", {}).items():
        table.add_row(stage, *(str(counts.get(c, 0)) for c in cols))
    if summary.get("discovered"):
        console.print(f"discovered: {json.dumps(summary['discovered'])}")
    console.print(table)
    for stage, errs in summary.get("errors", {}).items():
        for pid, msg in list(errs.items())[:5]:
            err_console.print(Text.assemble((stage, "red"), f" {pid}: {msg[:300]}"), highlight=False)


@app.command()
@handle_errors
def build(config: ConfigOption = None, orchestrator: OrchestratorOption = Orchestrator.prefect,
          source: SourceOption = None, keywords: KeywordsOption = None,
          retry_rejected: RetryRejected = None, batch: BatchOption = False, workers: WorkersOption = 1,
          yes: YesOption = False) -> None:
    """Discover papers and run every stage that has not finished (idempotent). It prints the
    estimate first, and stops there when its cost is above the budget unless given --yes."""
    _run(config, resume=False, orchestrator=orchestrator, retry_rejected=retry_rejected, source=source,
         keywords=keywords, batch=batch, workers=workers, yes=yes)


@app.command()
@handle_errors
def resume(config: ConfigOption = None, orchestrator: OrchestratorOption = Orchestrator.prefect,
           retry_rejected: RetryRejected = None, batch: BatchOption = False, workers: WorkersOption = 1) -> None:
    """Finish what a stopped or killed build started: discovery (every configured query not yet
    done, and papers discovered but not yet added), then, per paper, only stages that failed or
    never ran. Batch API jobs a stopped build left running are polled, not resent."""
    _run(config, resume=True, orchestrator=orchestrator, retry_rejected=retry_rejected, source=None, batch=batch,
         workers=workers)


def _unit(stage: str) -> str:
    """What a status row counts: construct's findings step runs once per paper, its later steps once
    per candidate item."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.stages.construct import STAGES as CONSTRUCT_STEPS

    return "candidates" if stage in CONSTRUCT_STEPS[1:] else "papers"


def _pipeline_order(counts: dict[str, Any]) -> list[str]:
    """The stages in the order the build runs them (construct's steps right after it); a stage this
    code does not know goes last."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.pipeline.stages import BUILD_STAGES
    from arcticqa.stages.construct import STAGES as CONSTRUCT_STEPS

    known = [spec.name for spec in BUILD_STAGES]
    at = known.index("construct") + 1
    known[at:at] = list(CONSTRUCT_STEPS)
    return [s for s in known if s in counts] + sorted(s for s in counts if s not in known)


@app.command()
@handle_errors
def status(config: ConfigOption = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """Newest attempts by stage and status, in pipeline order, each row counting papers or candidates."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.stages.construct import STAGES as CONSTRUCT_STEPS
    from arcticqa.store.store import open_existing_store

    store = open_existing_store(load_cli_settings(config))
    try:
        counts = store.status_counts()
        totals = store.call_totals().values()  # one aggregate query, not every llm_call row
    finally:
        store.close()
    calls, hits, cost = sum(t.calls for t in totals), sum(t.cache_hits for t in totals), sum(t.cost_usd for t in totals)
    order = _pipeline_order(counts)
    if as_json:
        print(json.dumps({"stages": counts, "units": {stage: _unit(stage) for stage in order},
                          "llm_calls": calls, "cost_usd": round(cost, 6)}, sort_keys=True))
        return
    from rich import box

    # no vertical rules, so the seven columns fit 80 characters without cutting a header
    table = Table(title="newest attempt per stage × status", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    table.add_column("stage", no_wrap=True)
    table.add_column("counts", no_wrap=True)
    # "interrupted" (a build stopped by Ctrl-C or SIGTERM) only when there is one, so the usual table
    # still fits 80 columns
    shown = STATUSES + tuple(s for s in ("interrupted",) if any(c.get(s) for c in counts.values()))
    for s in shown:
        table.add_column(s, justify="right", no_wrap=True)
    for stage in order:
        # construct's steps are indented under it: they run inside it, one paper at a time
        name = f"  {stage}" if stage in CONSTRUCT_STEPS else stage
        table.add_row(name, _unit(stage), *(str(counts[stage].get(s, 0)) for s in shown))
    console.print(table)
    if len(shown) > len(STATUSES):
        console.print("interrupted: attempts a stopped build left unfinished (`arcticqa resume` runs them again)",
                      highlight=False)
    console.print(f"llm calls: {calls} (cache hits {hits}), cost USD {cost:.4f}")


@app.command()
def rules(as_json: Annotated[bool, typer.Option("--json", help="Print one JSON list of {id, summary}.")] = False
          ) -> None:
    """List every rejection rule id with its summary."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    import arcticqa.pipeline.stages  # noqa: F401  (imports every stage, which declares its rules)
    from arcticqa.rules import all_rules

    listed = all_rules()
    if as_json:
        print(json.dumps([r.model_dump() for r in listed]))
        return
    for r in listed:
        console.print(f"{r.id:45} {r.summary}", highlight=False)


@app.command()
@handle_errors
def doctor(config: ConfigOption = None,
           offline: Annotated[bool, typer.Option("--offline", help="Skip endpoint reachability checks.")] = False
           ) -> None:
    """Check the config, that API keys are present (never printed), endpoints and the store schema."""
    import httpx

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import ROLES
    from arcticqa.errors import ConfigError
    from arcticqa.store.store import Store, sqlite_file

    settings = load_cli_settings(config)
    problems = 0
    from rich import box

    # names and env-var names are folded, never cut with "…": a user copies them into the config
    table = Table(title="roles", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("role", "model config", "provider", "model", "key", "endpoint"):
        table.add_column(col, overflow="fold", no_wrap=col == "role")
    seen_endpoints: dict[str, str | Text] = {}
    for role in ROLES:
        # loading the settings has already checked that every role names a defined model config
        name = settings.roles[role]
        cfg = settings.models[name]
        key: str | Text = "n/a"
        secret = ""  # read the way a client reads it: the variable the config names, or the env file
        if cfg.provider == "openai" and cfg.api_key_env:
            try:
                secret = cfg.api_key()
            except ConfigError:
                secret = ""
            key = Text("set", style="green") if secret else Text(f"{cfg.api_key_env} unset", style="red")
            problems += 0 if secret else 1
        endpoint: str | Text = "n/a"
        if cfg.provider == "openai":
            base = cfg.base_url or "https://api.openai.com/v1"
            if offline:
                endpoint = "skipped"
            elif base not in seen_endpoints:
                try:
                    r = httpx.get(base.rstrip("/") + "/models", timeout=5.0, headers={
                        "Authorization": f"Bearer {secret}"})
                    seen_endpoints[base] = f"HTTP {r.status_code}"
                except httpx.HTTPError as exc:
                    seen_endpoints[base] = Text(f"unreachable: {type(exc).__name__}", style="red")
                    problems += 1
            endpoint = seen_endpoints.get(base, endpoint)
        table.add_row(role, name, cfg.provider, cfg.model, key, endpoint)
    console.print(table)
    if settings.build.source.strip() == "s2" and not offline:
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.errors import EndpointUnreachable
        from arcticqa.pipeline.preflight import check_endpoints, s2_endpoint

        s2 = s2_endpoint(settings)
        try:
            check_endpoints([s2], timeout_s=5.0)
            console.print(f"source s2: {s2.url} answers", highlight=False)
        except EndpointUnreachable as exc:
            problems += 1
            console.print(Text(f"source s2: {str(exc).split('; nothing', 1)[0]}", style="red"), highlight=False)
    store_file = sqlite_file(settings.store.url)
    if store_file is not None and not store_file.is_file():
        # doctor runs before the first build, so no store yet is news, not a problem
        console.print(f"store {store_file}: none yet (`arcticqa build` creates it)", highlight=False)
    else:
        store = Store(settings.store.url, migrate=False)
        try:
            current, head = store.schema_version()
            shown = store.engine.url.render_as_string(hide_password=True)
        finally:
            store.close()
        ok = current == head
        problems += 0 if ok else 1
        console.print(f"store {shown}: schema {current or 'empty'} (code expects {head})"
                      f"{'' if ok else ' — run any build command to migrate'}", highlight=False)
    if problems:
        err_console.print(f"{problems} problem(s) found", style="red")
        raise typer.Exit(1)
    console.print("all checks passed", style="green")
