"""CLI commands: ``arcticqa evaluate run|report|score|policies`` (the ArcticAbstain evaluator).

``evaluate run`` calls the async runner directly, without Prefect; the Prefect flow
``evaluate-arcticabstain`` (flows/evaluate_arcticabstain.py) runs the same code with one task
per model. Heavy imports live inside the commands so ``arcticqa --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from arcticqa.cli.app import ConfigOption, app, console, handle_errors

__all__ = ["evaluate_app"]

evaluate_app = typer.Typer(help="Evaluate abstention (ArcticAbstain): run models, report, re-score.",
                           no_args_is_help=True)
app.add_typer(evaluate_app, name="evaluate")

OutOption = Annotated[Path, typer.Option("--out", help="Report folder (replaced as a whole).")]
ResamplesOption = Annotated[int, typer.Option("--resamples", min=1, help="Bootstrap resamples.")]
DrawsOption = Annotated[int, typer.Option("--draws", min=1, help="Sign-flip permutation draws.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and permutation draws.")]
FigureOption = Annotated[bool, typer.Option("--figure/--no-figure", help="Write Figure 1 (PNG and SVG).")]


def _db_url(value: str) -> str:
    return value if "://" in value else f"sqlite:///{value}"


def _print_report(paths: object, report: object) -> None:
    from arcticqa.evaluate.report import Report, ReportPaths

    assert isinstance(paths, ReportPaths) and isinstance(report, Report)
    console.print(f"questions {report.questions}, responses {report.responses} "
                  f"({report.valid} valid, {report.invalid} invalid), models {len(report.models)}")
    for r in report.models:
        console.print(f"  {r.label}: present {r.counts.present_abstention:.3f}, absent "
                      f"{r.counts.absent_abstention:.3f}, shift {r.counts.shift:+.3f} "
                      f"(p {r.test.p_value:.5f}, Holm {r.holm_p:.4f}); ACC {r.counts.acc:.3f}", highlight=False)
    if report.disagreements:
        with_answer = sum(1 for d in report.disagreements if not d.no_provider_answer)
        console.print(f"[yellow]re-derivation: {len(report.disagreements)} outcome(s) differ from the "
                      f"recorded ones ({with_answer} with a provider answer); see checks.json[/]")
    console.print(f"report written to {paths.out_dir}")


@evaluate_app.command("report")
@handle_errors
def report_command(
    out: OutOption,
    responses: Annotated[Path | None, typer.Option("--responses", help="Published responses.csv/.jsonl.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Our store (SQLAlchemy URL or SQLite path).")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models (repeatable).")] = None,
    resamples: ResamplesOption = 10_000,
    draws: DrawsOption = 20_000,
    seed: SeedOption = 7,
    figure: FigureOption = True,
) -> None:
    """Write TABLES.md, the CSVs, summary.json, checks.json and Figure 1 from responses."""
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.report import StatsSettings, build_report, write_report
    from arcticqa.evaluate.responses import load_published_responses, rederivation_disagreements

    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    settings = StatsSettings(resamples=resamples, draws=draws, seed=seed)
    if responses is not None:
        records, lines = load_published_responses(responses)
        disagreements = rederivation_disagreements(records, lines)
        source = str(responses)
    else:
        from arcticqa.evaluate.records import load_store_responses
        from arcticqa.store.db import make_engine

        assert db is not None
        records, disagreements, source = load_store_responses(make_engine(_db_url(db))), [], _db_url(db)
        if not records:
            raise ConfigError(f"{source}: the store holds no evaluator responses")
    if model:
        records = [r for r in records if r.model in model]
        if not records:
            raise ConfigError(f"no responses of model(s) {', '.join(model)}")
    report = build_report(records, settings=settings, source=source, disagreements=disagreements)
    paths = write_report(report, out, figure=figure)
    _print_report(paths, report)


@evaluate_app.command("score")
@handle_errors
def score_command(
    protocol: Annotated[str, typer.Option("--protocol", help="arcticabstain | abstainqa | know2guess")],
    items: Annotated[Path, typer.Option("--items", help="The release items.jsonl.")],
    responses: Annotated[Path, typer.Option("--responses", help="JSONL of external raw responses.")],
    out: OutOption,
    resamples: ResamplesOption = 10_000,
    draws: DrawsOption = 20_000,
    seed: SeedOption = 7,
    figure: FigureOption = True,
) -> None:
    """Re-score an externally produced run with the same parsers, metrics and report."""
    from arcticqa.evaluate.protocols import get_protocol
    from arcticqa.evaluate.report import StatsSettings, build_report, write_report

    scorer = get_protocol(protocol)
    records = scorer(items, responses)
    report = build_report(records, settings=StatsSettings(resamples=resamples, draws=draws, seed=seed),
                          source=str(responses))
    _print_report(write_report(report, out, figure=figure), report)


@evaluate_app.command("run")
@handle_errors
def run_command(
    config: ConfigOption = None,
    items: Annotated[Path | None, typer.Option("--items", help="items.jsonl (default: [evaluate] items).")] = None,
    trials: Annotated[int | None, typer.Option("--trials", min=1, help="Trials per condition.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Store URL or SQLite path (default: [evaluate] db_url).")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these model labels.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Skip cells already recorded.")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the report here.")] = None,
) -> None:
    """Run the configured models on both conditions of every item (no Prefect; see the flow)."""
    import asyncio
    import os

    from arcticqa.config import DEFAULT_CONFIG_NAME
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.conditions import load_items, load_prompt
    from arcticqa.evaluate.records import load_store_responses
    from arcticqa.evaluate.report import build_report, write_report
    from arcticqa.evaluate.runner import run_evaluation
    from arcticqa.evaluate.settings import load_evaluate_settings
    from arcticqa.store.db import make_engine

    path = config or (Path(os.environ["ARCTICQA_CONFIG"]) if os.environ.get("ARCTICQA_CONFIG")
                      else Path(DEFAULT_CONFIG_NAME))
    settings = load_evaluate_settings(path)
    models = [m for m in settings.models if not model or m.label in model]
    if not models:
        raise ConfigError(f"{path}: no [[evaluate.models]] to run" + (f" among {', '.join(model)}" if model else ""))
    items_path = items or settings.items
    if items_path is None:
        raise ConfigError("give --items or set [evaluate] items")
    for m in models:
        m.api_key()  # fail before any call when a key is missing
    engine = make_engine(_db_url(db) if db else settings.db_url)
    loaded = load_items(items_path)
    prompt = load_prompt(settings.prompt)

    def progress(label: str, done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            console.print(f"  {label}: {done}/{total}", highlight=False)

    result = asyncio.run(run_evaluation(loaded, models, engine, trials=trials or settings.trials, prompt=prompt,
                                        eval_set=settings.eval_set, resume=resume, progress=progress))
    console.print(f"run {result.run_id}: {result.recorded} recorded, {result.skipped} already recorded, "
                  f"{result.planned} planned, {result.elapsed_s:.1f} s")
    for label, counts in result.outcomes.items():
        console.print(f"  {label}: " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)), highlight=False)
    if out is not None:
        records = load_store_responses(engine, models=[m.label for m in models])
        report = build_report(records, source=str(engine.url), models=[m.label for m in models])
        _print_report(write_report(report, out), report)


@evaluate_app.command("policies")
@handle_errors
def policies_command(
    items: Annotated[Path, typer.Option("--items", help="The release items.jsonl.")],
    out: OutOption,
    db: Annotated[str, typer.Option("--db", help="Store URL or SQLite path.")] = "sqlite:///.arcticqa/eval-policies.db",
    trials: Annotated[int, typer.Option("--trials", min=1)] = 3,
) -> None:
    """Evaluate the built-in reference policies (always-abstain, first-option, random, oracle)
    served over a local OpenAI-compatible server, through the real runner."""
    import asyncio

    from arcticqa.evaluate.policies import run_reference_policies

    paths = asyncio.run(run_reference_policies(items, out, db_url=_db_url(db), trials=trials))
    console.print(f"report written to {paths.out_dir}")
