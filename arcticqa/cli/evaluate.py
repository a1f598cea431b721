"""CLI commands: ``arcticqa evaluate run|report|exposure|score|policies`` (the abstention evaluator).

``--protocol`` picks ArcticAbstain (the default), Abstain-QA, Know2Guess or the open-ended one. ``evaluate run``
calls the async runner directly, without Prefect; the Prefect flow ``evaluate-arcticabstain``
(flows/evaluate_arcticabstain.py) runs the same ArcticAbstain code with one task per model.
Heavy imports live inside the commands so ``arcticqa --help`` stays fast.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from arcticqa.cli.app import ConfigOption, OverwriteOption, app, console, err_console, handle_errors

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.engine import Engine

    from arcticqa.config import EvalModel, ModelConfig, Settings
    from arcticqa.evaluate.arcticabstain.records import ResponseRecord
    from arcticqa.evaluate.protocols import EvalProtocol, ReportOptions, ReportSummary, RunOptions
    from arcticqa.evaluate.runner import RunResult

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
ProtocolOption = Annotated[str, typer.Option("--protocol", help="arcticabstain | abstainqa | know2guess | open")]
ThresholdsOption = Annotated[str, typer.Option(
    "--thresholds", help="Abstain-QA verbal-confidence thresholds t (answer with confidence <= t -> IDK/NOTA).")]
PenaltyOption = Annotated[float, typer.Option(
    "--wrong-penalty", min=0.0, help="Know2Guess cost-sensitive reliability: a wrong answer scores -penalty.")]
BinsOption = Annotated[int, typer.Option("--ece-bins", min=1, help="Know2Guess ECE bins (equal width).")]


def _thresholds(value: str) -> tuple[int, ...]:
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError

    try:
        found = tuple(int(p) for p in value.split(",") if p.strip())
    except ValueError:
        raise ConfigError(f"--thresholds: expected integers 0-5 separated by commas, not {value!r}") from None
    if not found or any(not 0 <= t <= 5 for t in found):
        raise ConfigError(f"--thresholds: expected integers 0-5 separated by commas, not {value!r}")
    return found


def _db_url(value: str) -> str:
    return value if "://" in value else f"sqlite:///{value}"


def _existing_db(value: str) -> str:
    """The URL of a store a command only reads: a SQLite file that is not there is refused (exit 2)
    before anything opens it, so a mistyped path never becomes a new, empty store."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import InputError
    from arcticqa.store.store import sqlite_file

    url = _db_url(value)
    found = sqlite_file(url)
    if found is not None and not found.is_file():
        raise InputError("store not found", path=value)
    return url


def _print_summary(summary: ReportSummary) -> None:
    for line in summary.lines:
        console.print(line, highlight=False)
    for line in summary.warnings:
        console.print(line, style="yellow")
    console.print(f"report written to {summary.out_dir}")


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
    variants: Annotated[bool, typer.Option(
        "--variants", help="ArcticAbstain with --db: the prompt-robustness report (VARIANTS.md) of every "
                           "recorded prompt variant instead of the paper tables.")] = False,
) -> None:
    """Write TABLES.md, the CSVs, summary.json, checks.json and the figures from responses.
    Abstain-QA and Know2Guess reports are read from the store (--db); re-score files with `score`."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import ReportOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)

    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    if db is not None:
        db = _existing_db(db)
    chosen = get_protocol(protocol)
    if variants:
        if chosen.name != "arcticabstain" or db is None:
            raise ConfigError("--variants reports ArcticAbstain prompt variants from the store: give --db "
                              "(and --protocol arcticabstain)")
        _variants_report(_db_url(db), out, models=model, resamples=resamples, seed=seed, figure=figure)
        return
    options = ReportOptions(figure=figure, resamples=resamples, draws=draws, seed=seed,
                            thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty, bins=ece_bins)
    if responses is not None:
        summary = chosen.report_from_published(responses, out, options, models=model)
    else:
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.store.db import make_engine

        assert db is not None
        summary = chosen.report_from_store(make_engine(_db_url(db)), out, options, source=_db_url(db), models=model)
    _print_summary(summary)


def _variants_report(db_url: str, out: Path, *, models: list[str] | None, resamples: int, seed: int,
                     figure: bool) -> None:
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.evaluate.protocols import ARCTICABSTAIN
    from arcticqa.evaluate.variants import build_variant_report, variant_summary_lines, write_variant_report
    from arcticqa.store.db import make_engine

    records = ARCTICABSTAIN.records_from_store(make_engine(db_url), models=models, variant=None)
    report = build_variant_report(records, source=db_url, resamples=resamples, seed=seed, models=models)
    written = write_variant_report(report, out, figure=figure)
    for line in variant_summary_lines(report):
        console.print(line, highlight=False)
    console.print(f"report written to {written}")


def _cutoffs(values: list[str]) -> dict[str, date]:
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError

    found: dict[str, date] = {}
    for value in values:
        label, _, when = value.partition("=")
        try:
            found[label.strip()] = date.fromisoformat(when.strip())
        except ValueError:
            raise ConfigError(f"--cutoff: expected MODEL=YYYY-MM-DD, not {value!r}") from None
        if not label.strip():
            raise ConfigError(f"--cutoff: expected MODEL=YYYY-MM-DD, not {value!r}")
    return found


@evaluate_app.command("exposure")
@handle_errors
def exposure_command(
    out: OutOption,
    responses: Annotated[Path | None, typer.Option("--responses", help="Published responses.csv/.jsonl.")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="Our store (SQLAlchemy URL or SQLite path): its ArcticAbstain responses, as `evaluate "
                     "report --db` reads them.")] = None,
    item_dates: Annotated[Path | None, typer.Option(
        "--item-dates", help="CSV with a date column and item_id and/or doi (publication date of each item's "
                             "paper); overrides paper.publication_date in the items file.")] = None,
    items: Annotated[Path | None, typer.Option(
        "--items", help="items.jsonl of the evaluated release (paper.publication_date, paper.doi). Default: "
                        "items.jsonl beside --responses; with --db, [evaluate] items of --config.")] = None,
    cutoff: Annotated[list[str] | None, typer.Option(
        "--cutoff", help="MODEL=YYYY-MM-DD knowledge cutoff (repeatable; overrides [[evaluate.models]]).")] = None,
    config: ConfigOption = None,
    resamples: ResamplesOption = 10_000,
    draws: DrawsOption = 20_000,
    seed: SeedOption = 7,
    figure: FigureOption = True,
    overwrite: OverwriteOption = False,
) -> None:
    """ArcticAbstain metrics split at each model's knowledge cutoff (training exposure), with
    Know2Guess-style zones."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import load_settings
    from arcticqa.errors import ConfigError, InputError
    from arcticqa.evaluate import exposure
    from arcticqa.evaluate.arcticabstain.report import StatsSettings
    from arcticqa.evaluate.reportio import check_report_folder, write_report_folder

    check_report_folder(out, overwrite=overwrite)
    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    settings = load_settings(config) if config is not None else None
    cutoffs: dict[str, date] = {}
    if settings is not None:
        cutoffs = {m.label: m.knowledge_cutoff for m in settings.evaluate.models if m.knowledge_cutoff is not None}
    cutoffs |= _cutoffs(cutoff or [])
    records, source = _exposure_records(responses, db)
    items_path = items
    if items_path is None and responses is not None and (responses.parent / "items.jsonl").exists():
        items_path = responses.parent / "items.jsonl"
    if items_path is None and db is not None and config is not None and settings is not None:
        # the release the run evaluated: `evaluate run` reads [evaluate] items by default
        items_path = settings.evaluate.resolved(config).items
    known = {r.model for r in records}
    unknown = sorted(set(cutoffs) - known)
    if unknown:
        raise InputError(f"cutoff for models not in the responses: {', '.join(unknown)} "
                         f"(models: {', '.join(sorted(known))})", path=source)
    dates = exposure.resolve_item_dates({r.item_id for r in records}, items=items_path, item_dates=item_dates)
    exposures = exposure.build_exposure(records, dates.dated, cutoffs,
                                        settings=StatsSettings(resamples=resamples, draws=draws, seed=seed))
    figures = [lambda folder: exposure.exposure_figure(exposures, folder / "exposure.png", folder / "exposure.svg",
                                                       note=dates.provenance())] \
        if figure and any(e.split for e in exposures) else []
    texts = exposure.exposure_texts(exposures, dates)
    write_report_folder(out, texts, figures, overwrite=overwrite)
    console.print(texts["EXPOSURE.md"], highlight=False)
    console.print(f"report written to {out}")


def _exposure_records(responses: Path | None, db: str | None) -> tuple[list[ResponseRecord], str]:
    """The ArcticAbstain records of a published file or of the store, and the source's name."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
    from arcticqa.evaluate.arcticabstain.records import load_published_responses

    if responses is not None:
        return load_published_responses(responses)[0], str(responses)
    assert db is not None
    db = _existing_db(db)  # a mistyped path must not become a new, empty store
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.store.db import make_engine

    records = ARCTICABSTAIN.records_from_store(make_engine(db))
    if not records:
        raise ConfigError(f"{_db_url(db)}: the store holds no arcticabstain responses")
    return records, _db_url(db)


@evaluate_app.command("score")
@handle_errors
def score_command(
    out: OutOption,
    protocol: ProtocolOption = "arcticabstain",
    items: Annotated[Path | None, typer.Option(
        "--items", help="Items: release items.jsonl, Abstain-QA or Know2Guess JSONL (with --from-inspect-log: "
                        "default, the release the logged task ran on).")] = None,
    responses: Annotated[Path | None, typer.Option("--responses", help="JSONL of external raw responses.")] = None,
    from_inspect_log: Annotated[list[Path] | None, typer.Option(
        "--from-inspect-log", help="inspect_ai logs (files or folders; repeatable) of the ArcticAbstain task "
                                   "arcticqa/integrations/inspect_task.py, instead of --responses.")] = None,
    resamples: ResamplesOption = 10_000,
    draws: DrawsOption = 20_000,
    seed: SeedOption = 7,
    figure: FigureOption = True,
    thresholds: ThresholdsOption = "0,1,2,3,4",
    wrong_penalty: PenaltyOption = 1.0,
    ece_bins: BinsOption = 10,
    overwrite: OverwriteOption = False,
) -> None:
    """Re-score an externally produced run (a responses JSONL, or inspect_ai logs) with the same
    parsers, metrics and report."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError, InputError
    from arcticqa.evaluate.protocols import ReportOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)

    chosen = get_protocol(protocol)
    options = ReportOptions(figure=figure, resamples=resamples, draws=draws, seed=seed,
                            thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty, bins=ece_bins)
    if (responses is None) == (not from_inspect_log):
        raise ConfigError("give exactly one of --responses FILE or --from-inspect-log LOG")
    if from_inspect_log:
        _print_summary(_score_inspect_logs(chosen, from_inspect_log, items, out, options))
        return
    assert responses is not None
    if items is None:
        raise ConfigError("give --items (the items the responses answer)")
    if not items.exists():
        raise InputError(f"items file for --protocol {protocol} not found", path=str(items))
    _print_summary(chosen.score_external(items, responses, out, options))


def _score_inspect_logs(chosen: EvalProtocol, logs: list[Path], items: Path | None, out: Path,
                        options: ReportOptions) -> ReportSummary:
    """Turn inspect logs into external response lines and score them like a --responses file."""
    import tempfile

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError, InputError

    if chosen.name != "arcticabstain":  # the only protocol shipped as an inspect task
        raise ConfigError(f"--from-inspect-log reads logs of the ArcticAbstain inspect task, not --protocol {chosen.name}")
    try:  # inspect_ai is an optional extra, so its bridge is imported only when asked for
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.integrations.inspect_log import read_inspect_logs
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--from-inspect-log needs inspect_ai ({exc.name} is not installed): "
                          'pip install -e ".[inspect]"') from None
    converted = read_inspect_logs(logs)
    items = items or converted.items
    if items is None:
        raise ConfigError("the logs ran on different releases (or name none): give --items")
    if not items.exists():
        raise InputError("items file of the logged release not found (give --items)", path=str(items))
    with tempfile.TemporaryDirectory(prefix="arcticqa-inspect-") as tmp:
        lines = Path(tmp) / "inspect-responses.jsonl"
        lines.write_text(converted.jsonl(), encoding="utf-8")
        summary = chosen.score_external(items, lines, out, options)
    summary.warnings[:0] = converted.warnings
    return summary


def _print_run(result: RunResult) -> None:
    console.print(f"run {result.run_id}: {result.recorded} recorded, {result.skipped} already recorded, "
                  f"{result.planned} planned, {result.elapsed_s:.1f} s")
    for label, counts in result.outcomes.items():
        failed = f" ({result.failed[label]} of {sum(counts.values())} calls got no answer)" \
            if result.failed.get(label) else ""
        console.print(f"  {label}: " + ", ".join(f"{k} {counts[k]}" for k in sorted(counts)) + failed,
                      highlight=False)


class RunProgress:
    """``evaluate run``'s progress, per model: calls done of those to make, how many got no answer,
    and the rate. On a terminal a live bar; in a pipe or a log, a line when a model starts, every
    ``every_s`` seconds after, and when it is done."""

    def __init__(self, out: Console, *, every_s: float = 10.0) -> None:
        import time

        self.out, self.every_s, self.clock = out, every_s, time.monotonic
        self.started = self.clock()
        self.last: dict[str, float] = {}
        self.tasks: dict[str, Any] = {}
        self.bar: Any = None
        if out.is_terminal:
            # imported here: only a terminal needs it
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[failed]} failed"), TextColumn("{task.fields[rate]}"),
                                TimeElapsedColumn(), console=out)

    def __enter__(self) -> RunProgress:
        self.started = self.clock()
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def _rate(self, done: int) -> str:
        elapsed = self.clock() - self.started
        return f"{done / elapsed:.1f} calls/s" if elapsed > 0 and done else "- calls/s"

    def __call__(self, label: str, done: int, total: int, failed: int) -> None:
        if self.bar is not None:
            if label not in self.tasks:
                self.tasks[label] = self.bar.add_task(label, total=total, failed=0, rate="")
            self.bar.update(self.tasks[label], completed=done, total=total, failed=failed, rate=self._rate(done))
            return
        now = self.clock()
        if done and done < total and now - self.last.get(label, now) < self.every_s:
            return
        self.last[label] = now
        self.out.print(f"  {label}: {done}/{total} calls, {failed} failed, {self._rate(done)}", highlight=False)


def _verifier_config(settings: Settings, verifier: str) -> ModelConfig:
    """The ``[models]`` entry of the open verifier, checked (defined, served over HTTP, key set)."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import did_you_mean
    from arcticqa.errors import ConfigError

    cfg = settings.models.get(verifier)
    if cfg is None:
        raise ConfigError(f"open verifier {verifier!r} is not under [models]{did_you_mean(verifier, settings.models)}")
    if cfg.provider == "offline":  # the rule-based roles judge build outputs, not free-text replies
        raise ConfigError(f"open verifier {verifier!r}: the offline provider has no open verifier; "
                          "name a model served over an OpenAI-compatible API")
    cfg.api_key()  # fail before any call when its key is missing
    return cfg


async def _run_with_verifier(settings: Settings, verifier: str, chosen: EvalProtocol, options: RunOptions,
                             models: list[EvalModel], engine: Engine, *, resume: bool,
                             progress: Callable[[str, int, int, int], None]) -> RunResult:
    """The run with the verifier role answered by the ``[models]`` entry ``verifier``, through the
    gateway, whose model calls are recorded in the evaluator's store under the run's id."""
    import uuid
    from dataclasses import replace

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.evaluate.open.parse import VERIFIER_ROLE
    from arcticqa.evaluate.runner import run_protocol
    from arcticqa.llm.gateway import Gateway
    from arcticqa.pipeline.ledger import StoreLedger
    from arcticqa.store.store import Store

    _verifier_config(settings, verifier)
    run_id = uuid.uuid4().hex[:12]
    store = Store(engine.url.render_as_string(hide_password=False))
    try:
        ledger = StoreLedger(store, run_id)
        role_settings = settings.model_copy(update={"roles": {**settings.roles, VERIFIER_ROLE: verifier}})
        async with Gateway(role_settings, ledger, ledger=ledger, run_id=run_id) as gateway:
            return await run_protocol(chosen.live(replace(options, verifier=gateway)), models, engine,
                                      resume=resume, run_id=run_id, progress=progress)
    finally:
        store.close()


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
    variants: Annotated[str | None, typer.Option(
        "--variants", help="Prompt variants, separated by commas. ArcticAbstain: plan ([evaluate.variants]), a "
                           "plan FILE.toml, or variant ids (e.g. published,reworded.numbers.last); Abstain-QA: "
                           "standard | abstain | extreme_abstain (default standard); Know2Guess and open: "
                           "answer_or_abstain | answer_only | answer_or_abstain_terse (default answer_or_abstain); "
                           "or prompt files.")] = None,
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", hidden=True, help="Deprecated: one prompt variant (repeatable); use --variants A,B.")] = None,
    verbal_confidence: Annotated[bool, typer.Option(
        "--verbal-confidence", help="Abstain-QA: also ask for a confidence 1-5.")] = False,
    open_verifier: Annotated[str | None, typer.Option(
        "--open-verifier", help="Open protocol: the [models] name whose model judges the replies the matcher "
                                "leaves undecided (overrides [evaluate] open_verifier).")] = None,
    thresholds: ThresholdsOption = "0,1,2,3,4",
    wrong_penalty: PenaltyOption = 1.0,
    ece_bins: BinsOption = 10,
    overwrite: OverwriteOption = False,
) -> None:
    """Run the configured models on every item: ArcticAbstain (both conditions), or --protocol
    abstainqa / know2guess / open with their prompt variants (no Prefect; see the flow); with an
    open verifier, the open protocol's undecided replies are judged by it (lower confidence).
    Every model's endpoint is checked first; progress shows calls done, failed and the rate; a run
    in which no call got an answer exits 1."""
    import asyncio
    import os

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import DEFAULT_CONFIG_NAME, load_settings
    from arcticqa.errors import ConfigError, LLMTransportError
    from arcticqa.evaluate.protocols import ReportOptions, RunOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder
    from arcticqa.evaluate.runner import run_protocol
    from arcticqa.store.db import make_engine

    if out is not None:  # before any model is paid for
        check_report_folder(out, overwrite=overwrite)
    path = config or (Path(os.environ["ARCTICQA_CONFIG"]) if os.environ.get("ARCTICQA_CONFIG")
                      else Path(DEFAULT_CONFIG_NAME))
    full = load_settings(path)
    settings = full.evaluate.resolved(path)
    models = [m for m in settings.models if not model or m.label in model]
    if not models:
        raise ConfigError(f"{path}: no [[evaluate.models]] to run" + (f" among {', '.join(model)}" if model else ""))
    items_path = items or settings.items
    if items_path is None:
        raise ConfigError("give --items or set [evaluate] items")
    for m in models:
        m.api_key()  # fail before any call when a key is missing

    chosen = get_protocol(protocol)
    if variant:
        err_console.print(f"warning: --variant is deprecated; use --variants {','.join(variant)}", style="yellow",
                          highlight=False)
    chosen_variants = tuple(variant or ())
    if variants is not None:
        if chosen.name == "arcticabstain":
            # imported in the command, not at the top: `arcticqa --help` stays fast
            from arcticqa.evaluate.variants import resolve_variants

            chosen_variants += tuple(resolve_variants(variants, settings.variants))
        else:
            named = tuple(part.strip() for part in variants.split(",") if part.strip())
            if not named:
                raise ConfigError(f"--variants: give prompt variants of --protocol {chosen.name} separated by commas")
            chosen_variants += named
    options = RunOptions(items=items_path, trials=trials or settings.trials, eval_set=settings.eval_set,
                         variants=tuple(dict.fromkeys(chosen_variants)), prompt=settings.prompt,
                         verbal_confidence=verbal_confidence)
    chosen.live(options)  # reads the items and every prompt: a mistake is exit 2 before a call or a store
    verifier = open_verifier or settings.open_verifier
    _check_model_endpoints(models, _verifier_config(full, verifier) if verifier else None)
    db_url = _db_url(db) if db else settings.db_url
    engine = make_engine(db_url)

    with RunProgress(console) as progress:
        if verifier is None:
            result = asyncio.run(run_protocol(chosen.live(options), models, engine, resume=resume, progress=progress))
        else:
            result = asyncio.run(_run_with_verifier(full, verifier, chosen, options, models, engine, resume=resume,
                                                    progress=progress))
    _print_run(result)
    if result.all_failed:
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.evaluate.recorded import forget_run

        # nothing to keep: N0 cells would make a rerun (or --resume) skip them as done
        forget_run(engine, result.run_id)
        label, error = next(iter(result.first_error.items()))
        raise LLMTransportError(f"none of the {result.called} calls of this run got an answer (model {label}: "
                                f"{error}); nothing was recorded: fix the endpoint (`arcticqa doctor`) and run "
                                "again")
    if out is not None and variants is not None and chosen.name == "arcticabstain":
        # a variants run: the robustness report of its models
        _variants_report(db_url, out, models=[m.label for m in models], resamples=10_000, seed=7, figure=True)
    elif out is not None:
        labels = [m.label for m in models]
        _print_summary(chosen.report_from_store(
            engine, out, ReportOptions(thresholds=_thresholds(thresholds), wrong_penalty=wrong_penalty,
                                       bins=ece_bins),
            source=str(engine.url), models=labels, in_given_order=True))


def _check_model_endpoints(models: list[EvalModel], verifier: ModelConfig | None) -> None:
    """Every model's endpoint (and the open verifier's) answers, before any store is opened or any
    call is made: an unreachable base_url is one line and exit 1, not minutes of retries."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.pipeline.preflight import OPENAI_URL, Endpoint, check_endpoints

    found: dict[str, Endpoint] = {}
    named: list[tuple[str, ModelConfig]] = [(f"model {m.label}", m) for m in models]
    if verifier is not None and verifier.provider == "openai":
        named.append(("the open verifier", verifier))
    for what, cfg in named:
        base = (cfg.base_url or OPENAI_URL).rstrip("/")
        found.setdefault(base, Endpoint(f"the endpoint {base} of {what}", f"{base}/models", cfg.api_key_env or None))
    check_endpoints(list(found.values()), timeout_s=10.0)


@evaluate_app.command("policies")
@handle_errors
def policies_command(
    items: Annotated[Path, typer.Option("--items", help="The release items.jsonl.")],
    out: OutOption,
    db: Annotated[str | None, typer.Option(
        "--db", help="Keep the responses in this store (SQLAlchemy URL or SQLite path; cells already there are "
                     "not asked again). Default: a temporary store, deleted afterwards. The report covers this "
                     "run's cells only (its eval set, trials, items), whatever else the store holds.")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1, help="Trials per condition and policy.")] = 3,
    protocol: Annotated[str, typer.Option(
        "--protocol", help="arcticabstain (the options shown) | open (no options shown; the report pairs each "
                           "policy with its arcticabstain answers, asked too).")] = "arcticabstain",
    eval_set: Annotated[str, typer.Option(
        "--eval-set", help="Eval set id. It seeds the option order, so first-option and random depend on it: "
                           "`arcticqa demo` uses arcticqa-demo.")] = "arcticqa",
    overwrite: OverwriteOption = False,
    variants: Annotated[str | None, typer.Option(
        "--variants", help="Ask these ArcticAbstain prompt variants (a plan FILE.toml or ids separated by "
                           "commas) and write the variants report instead of the paper tables.")] = None,
) -> None:
    """Evaluate the built-in reference policies (always-abstain, first-option, random, oracle)
    served over a local OpenAI-compatible server, through the real runner."""
    import asyncio
    import tempfile

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import did_you_mean
    from arcticqa.errors import ConfigError, InputError
    from arcticqa.evaluate.policies import run_open_reference_policies, run_reference_policies
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)
    served = ("arcticabstain", "open")  # the protocols the reference policies answer
    if protocol not in served:
        raise ConfigError(f"--protocol {protocol}: the reference policies answer {' and '.join(served)}"
                          f"{did_you_mean(protocol, served)}")
    if variants is not None and protocol != "arcticabstain":
        raise ConfigError("--variants asks ArcticAbstain prompt variants: leave out --protocol open")
    if not items.is_file():
        raise InputError("items file not found", path=str(items))
    with tempfile.TemporaryDirectory(prefix="arcticqa-policies-") as scratch:
        db_url = _db_url(db) if db is not None else f"sqlite:///{Path(scratch) / 'responses.db'}"
        kept = f"responses kept in {db}" if db is not None else "responses not kept (--db STORE keeps them)"
        console.print(f"reference policies on {items}: --protocol {protocol}, eval set {eval_set}, {trials} "
                      f"trial{'s' if trials != 1 else ''}; {kept}", highlight=False, soft_wrap=True)
        if variants is not None:
            # imported in the command, not at the top: `arcticqa --help` stays fast
            from arcticqa.config import VariantPlanSettings
            from arcticqa.evaluate import variants as plans

            ids = plans.resolve_variants(variants, VariantPlanSettings())
            report = asyncio.run(plans.run_policy_variants(items, out, db_url=db_url, variants=ids, trials=trials,
                                                           eval_set=eval_set))
            for line in plans.variant_summary_lines(report):
                console.print(line, highlight=False)
            console.print(f"report written to {out}")
            return
        if protocol == "open":
            summary = asyncio.run(run_open_reference_policies(items, out, db_url=db_url, trials=trials,
                                                              eval_set=eval_set, ask_mc=True))
            _print_summary(summary)
            return
        paths = asyncio.run(run_reference_policies(items, out, db_url=db_url, trials=trials, eval_set=eval_set))
        console.print(f"report written to {paths.out_dir}")
