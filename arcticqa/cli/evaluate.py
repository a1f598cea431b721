"""CLI commands: ``arcticqa evaluate run|report|score|policies`` (the abstention evaluator).

``--protocol`` picks ArcticAbstain (the default), Abstain-QA or Know2Guess. ``evaluate run``
calls the async runner directly, without Prefect; the Prefect flow ``evaluate-arcticabstain``
(flows/evaluate_arcticabstain.py) runs the same ArcticAbstain code with one task per model.
Heavy imports live inside the commands so ``arcticqa --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from arcticqa.cli.app import ConfigOption, OverwriteOption, app, console, handle_errors

if TYPE_CHECKING:
    from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["evaluate_app"]

evaluate_app = typer.Typer(help="Evaluate abstention (ArcticAbstain, Abstain-QA, Know2Guess): run models, "
                                "report, re-score.",
                           no_args_is_help=True)
app.add_typer(evaluate_app, name="evaluate")

OutOption = Annotated[Path, typer.Option("--out", help="Report folder (new or empty; --overwrite replaces an "
                                                       "earlier report there, never other files).")]
ResamplesOption = Annotated[int, typer.Option("--resamples", min=1, help="Bootstrap resamples.")]
DrawsOption = Annotated[int, typer.Option("--draws", min=1, help="Sign-flip permutation draws.")]
SeedOption = Annotated[int, typer.Option("--seed", help="Seed of the bootstrap and permutation draws.")]
FigureOption = Annotated[bool, typer.Option("--figure/--no-figure", help="Write the figures (PNG and SVG).")]
ProtocolOption = Annotated[str, typer.Option("--protocol", help="arcticabstain | abstainqa | know2guess")]
ThresholdsOption = Annotated[str, typer.Option(
    "--thresholds", help="Abstain-QA verbal-confidence thresholds t (answer with confidence <= t -> IDK/NOTA).")]
PenaltyOption = Annotated[float, typer.Option(
    "--wrong-penalty", min=0.0, help="Know2Guess cost-sensitive reliability: a wrong answer scores -penalty.")]
BinsOption = Annotated[int, typer.Option("--ece-bins", min=1, help="Know2Guess ECE bins (equal width).")]


def _thresholds(value: str) -> tuple[int, ...]:
    from arcticqa.errors import ConfigError

    try:
        found = tuple(int(p) for p in value.split(",") if p.strip())
    except ValueError:
        raise ConfigError(f"--thresholds: expected integers 0-5 separated by commas, not {value!r}") from None
    if not found or any(not 0 <= t <= 5 for t in found):
        raise ConfigError(f"--thresholds: expected integers 0-5 separated by commas, not {value!r}")
    return found


def _protocol_report(protocol: str, engine: object, *, models: list[str] | None, out: Path, figure: bool,
                     thresholds: tuple[int, ...], wrong_penalty: float, bins: int, source: str) -> None:
    """Build and write an Abstain-QA or Know2Guess report from the store, and print its summary."""
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate import abstainqa, know2guess
    from arcticqa.evaluate.records import load_protocol_details

    details = load_protocol_details(engine, protocol, models=models)  # type: ignore[arg-type]
    if not details:
        raise ConfigError(f"{source}: the store holds no {protocol} responses")
    if protocol == "abstainqa":
        aqa = abstainqa.build_abstainqa_report([abstainqa.AbstainQARecord.from_details(d) for d in details],
                                               source=source, thresholds=thresholds)
        abstainqa.write_abstainqa_report(aqa, out, figure=figure)
        lines = abstainqa.summary_lines(aqa)
    else:
        k2g = know2guess.build_know2guess_report([know2guess.Know2GuessRecord.from_details(d) for d in details],
                                                 source=source, wrong_penalty=wrong_penalty, bins=bins)
        know2guess.write_know2guess_report(k2g, out, figure=figure)
        lines = know2guess.summary_lines(k2g)
    for line in lines:
        console.print(line, highlight=False)
    console.print(f"report written to {out}")


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
        console.print(f"re-derivation: {len(report.disagreements)} outcome(s) differ from the "
                      f"recorded ones ({with_answer} with a provider answer); see checks.json", style="yellow")
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
    protocol: ProtocolOption = "arcticabstain",
    thresholds: ThresholdsOption = "0,1,2,3,4",
    wrong_penalty: PenaltyOption = 1.0,
    ece_bins: BinsOption = 10,
    overwrite: OverwriteOption = False,
) -> None:
    """Write TABLES.md, the CSVs, summary.json, checks.json and the figures from responses.
    Abstain-QA and Know2Guess reports are read from the store (--db); re-score files with `score`."""
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import get_entry
    from arcticqa.evaluate.report import StatsSettings, build_report, write_report
    from arcticqa.evaluate.reportio import check_report_folder
    from arcticqa.evaluate.responses import load_published_responses, rederivation_disagreements

    check_report_folder(out, overwrite=overwrite)

    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    get_entry(protocol)
    if protocol != "arcticabstain":
        if db is None:
            raise ConfigError(f"--protocol {protocol}: give --db; re-score response files with `evaluate score`")
        from arcticqa.store.db import make_engine

        _protocol_report(protocol, make_engine(_db_url(db)), models=model, out=out, figure=figure,
                         thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty, bins=ece_bins,
                         source=_db_url(db))
        return
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
    protocol: ProtocolOption,
    items: Annotated[Path, typer.Option("--items", help="Items: release items.jsonl, Abstain-QA or Know2Guess JSONL.")],
    responses: Annotated[Path, typer.Option("--responses", help="JSONL of external raw responses.")],
    out: OutOption,
    resamples: ResamplesOption = 10_000,
    draws: DrawsOption = 20_000,
    seed: SeedOption = 7,
    figure: FigureOption = True,
    thresholds: ThresholdsOption = "0,1,2,3,4",
    wrong_penalty: PenaltyOption = 1.0,
    ece_bins: BinsOption = 10,
    overwrite: OverwriteOption = False,
) -> None:
    """Re-score an externally produced run with the same parsers, metrics and report."""
    from arcticqa.errors import InputError
    from arcticqa.evaluate.protocols import RescoreOptions, get_entry
    from arcticqa.evaluate.report import StatsSettings, build_report, write_report
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)

    entry = get_entry(protocol)
    if not items.exists():
        raise InputError(f"items file for --protocol {protocol} not found", path=str(items))
    if entry.scorer is None:
        assert entry.rescore is not None
        options = RescoreOptions(figure=figure, thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty,
                                 bins=ece_bins)
        for line in entry.rescore(items, responses, out, options):
            console.print(line, highlight=False)
        console.print(f"report written to {out}")
        return
    records = entry.scorer(items, responses)
    report = build_report(records, settings=StatsSettings(resamples=resamples, draws=draws, seed=seed),
                          source=str(responses))
    _print_report(write_report(report, out, figure=figure), report)


def _print_run(result: object) -> None:
    from arcticqa.evaluate.runner import RunResult

    assert isinstance(result, RunResult)
    console.print(f"run {result.run_id}: {result.recorded} recorded, {result.skipped} already recorded, "
                  f"{result.planned} planned, {result.elapsed_s:.1f} s")
    for label, counts in result.outcomes.items():
        console.print(f"  {label}: " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)), highlight=False)


def _live_protocol(protocol: str, items: Path, variants: list[str], *, verbal_confidence: bool, trials: int,
                   eval_set: str) -> LiveProtocol:
    """The planned calls of an Abstain-QA or Know2Guess run."""
    from arcticqa.evaluate import abstainqa, know2guess

    if protocol == "abstainqa":
        return abstainqa.live_protocol(
            abstainqa.load_abstainqa_items(items, eval_set=eval_set),
            [abstainqa.load_abstainqa_prompt(v) for v in (variants or ["standard"])], trials=trials,
            verbal_confidence=verbal_confidence, eval_set=eval_set)
    return know2guess.live_protocol(
        know2guess.load_know2guess_items(items),
        [know2guess.load_know2guess_prompt(v) for v in (variants or ["answer_or_abstain"])], trials=trials,
        eval_set=eval_set)


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
    protocol: ProtocolOption = "arcticabstain",
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", help="Prompt variant or prompt file (repeatable). Abstain-QA: standard | abstain | "
                          "extreme_abstain (default standard); Know2Guess: answer_or_abstain | answer_only | "
                          "answer_or_abstain_terse (default answer_or_abstain).")] = None,
    verbal_confidence: Annotated[bool, typer.Option(
        "--verbal-confidence", help="Abstain-QA: also ask for a confidence 1-5.")] = False,
    thresholds: ThresholdsOption = "0,1,2,3,4",
    wrong_penalty: PenaltyOption = 1.0,
    ece_bins: BinsOption = 10,
    overwrite: OverwriteOption = False,
) -> None:
    """Run the configured models on every item: ArcticAbstain (both conditions), or --protocol
    abstainqa / know2guess with their prompt variants (no Prefect; see the flow)."""
    import asyncio
    import os

    from arcticqa.config import DEFAULT_CONFIG_NAME
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.conditions import load_items, load_prompt
    from arcticqa.evaluate.protocols import get_entry
    from arcticqa.evaluate.records import load_store_responses
    from arcticqa.evaluate.report import build_report, write_report
    from arcticqa.evaluate.reportio import check_report_folder
    from arcticqa.evaluate.runner import run_evaluation, run_protocol
    from arcticqa.evaluate.settings import load_evaluate_settings
    from arcticqa.store.db import make_engine

    if out is not None:  # before any model is paid for
        check_report_folder(out, overwrite=overwrite)
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

    def progress(label: str, done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            console.print(f"  {label}: {done}/{total}", highlight=False)

    get_entry(protocol)
    if protocol != "arcticabstain":
        live = _live_protocol(protocol, items_path, variant or [], verbal_confidence=verbal_confidence,
                              trials=trials or settings.trials, eval_set=settings.eval_set)
        result = asyncio.run(run_protocol(live, models, engine, resume=resume, progress=progress))
        _print_run(result)
        if out is not None:
            _protocol_report(protocol, engine, models=[m.label for m in models], out=out, figure=True,
                             thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty, bins=ece_bins,
                             source=str(engine.url))
        return
    loaded = load_items(items_path)
    prompt = load_prompt(settings.prompt)
    result = asyncio.run(run_evaluation(loaded, models, engine, trials=trials or settings.trials, prompt=prompt,
                                        eval_set=settings.eval_set, resume=resume, progress=progress))
    _print_run(result)
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
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per condition and policy.")] = 3,
    overwrite: OverwriteOption = False,
) -> None:
    """Evaluate the built-in reference policies (always-abstain, first-option, random, oracle)
    served over a local OpenAI-compatible server, through the real runner."""
    import asyncio

    from arcticqa.evaluate.policies import run_reference_policies
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)
    paths = asyncio.run(run_reference_policies(items, out, db_url=_db_url(db), trials=trials))
    console.print(f"report written to {paths.out_dir}")
