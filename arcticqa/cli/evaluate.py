"""CLI commands: ``arcticqa evaluate run|report|score|protocols|exposure|policies`` (the abstention evaluator).

``--protocol`` picks a protocol from the registry (:mod:`arcticqa.evaluate.protocols`: ArcticAbstain, the
default, Abstain-QA, Know2Guess, the open-ended one); ``run``, ``report`` and ``score`` call its
methods and hold no per-protocol branch or flag: a protocol's own options come as ``-P KEY=VALUE``
and are validated by its options model (``arcticqa evaluate protocols`` lists them). The options the
commands had before are kept as hidden aliases of ``-P``. ``evaluate run`` calls the async runner
directly, without Prefect; the Prefect flow ``evaluate-arcticabstain`` (flows/evaluate_arcticabstain.py)
runs the same ArcticAbstain code with one task per model. Heavy imports live inside the commands so
``arcticqa --help`` stays fast.
"""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from arcticqa.cli.app import (
    ConfigOption,
    OverwriteOption,
    app,
    console,
    err_console,
    handle_errors,
    load_cli_settings,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from sqlalchemy.engine import Engine

    from arcticqa.config import EvalModel, ModelConfig, Settings
    from arcticqa.evaluate.arcticabstain.records import ResponseRecord
    from arcticqa.evaluate.arcticabstain.report import StatsSettings
    from arcticqa.evaluate.protocols import EvalProtocol, ReportOptions, ReportSummary, RunOptions
    from arcticqa.evaluate.runner import RunResult
    from arcticqa.evaluate.shape import ProtocolOptions

__all__ = ["evaluate_app"]

evaluate_app = typer.Typer(help="Evaluate abstention (ArcticAbstain, Abstain-QA, Know2Guess, open-ended): run "
                                "models, report, re-score.",
                           no_args_is_help=True)
app.add_typer(evaluate_app, name="evaluate")

OutOption = Annotated[Path, typer.Option("--out", help="Report folder (new or empty; --overwrite replaces an "
                                                       "earlier report there, never other files).")]
# ArcticAbstain's statistics, for the commands that are its own views (exposure): None is the published
# analysis's (StatsSettings, the defaults of ArcticAbstain's -P options too)
ResamplesOption = Annotated[int | None, typer.Option(
    "--resamples", min=1, help="Bootstrap resamples (default: the published analysis's, 10000).")]
DrawsOption = Annotated[int | None, typer.Option(
    "--draws", min=1, help="Sign-flip permutation draws (default: the published analysis's, 20000).")]
SeedOption = Annotated[int | None, typer.Option(
    "--seed", help="Seed of the bootstrap and permutation draws (default: the published analysis's, 7).")]
FigureOption = Annotated[bool, typer.Option("--figure/--no-figure", help="Write the figures (PNG and SVG).")]
ProtocolOption = Annotated[str, typer.Option(
    "--protocol", help="The evaluation protocol (`arcticqa evaluate protocols` lists them and their options).")]
ProtocolOptionsOption = Annotated[list[str] | None, typer.Option(
    "-P", "--protocol-option", metavar="KEY=VALUE",
    help="An option of the chosen protocol (repeatable), e.g. -P wrong_penalty=2 for know2guess; "
         "`arcticqa evaluate protocols` lists each protocol's, with its default.")]


def _alias(flag: str, key: str) -> Any:
    """A hidden option kept from before ``-P``: the same as ``-P key=VALUE``."""
    return typer.Option(flag, hidden=True, help=f"The older spelling of -P {key}=VALUE.")


# the commands' older per-protocol options, each now a hidden alias of `-P KEY=VALUE`
ResamplesAlias = Annotated[str | None, _alias("--resamples", "resamples")]
DrawsAlias = Annotated[str | None, _alias("--draws", "draws")]
SeedAlias = Annotated[str | None, _alias("--seed", "seed")]
ThresholdsAlias = Annotated[str | None, _alias("--thresholds", "thresholds")]
PenaltyAlias = Annotated[str | None, _alias("--wrong-penalty", "wrong_penalty")]
BinsAlias = Annotated[str | None, _alias("--ece-bins", "ece_bins")]
VerbalConfidenceAlias = Annotated[bool, typer.Option(
    "--verbal-confidence", hidden=True, help="The older spelling of -P verbal_confidence=true.")]
OpenVerifierAlias = Annotated[str | None, _alias("--open-verifier", "verifier")]


def _protocol_options(chosen: EvalProtocol, pairs: list[str] | None, aliases: Mapping[str, tuple[str, str | None]],
                      *, command: str) -> ProtocolOptions:
    """The chosen protocol's options from ``-P KEY=VALUE`` and the hidden aliases (flag -> (key, value)),
    validated by its options model: an unknown key or a bad value is one line naming the protocol,
    the key and its options, exit 2. An alias the protocol does not read is ignored with a warning,
    as it was before it became an alias."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError

    given: dict[str, str] = {}
    for text in pairs or []:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"-P {text!r}: expected KEY=VALUE (an option of --protocol {chosen.name})")
        if key in given:
            raise ConfigError(f"-P {key}: given twice")
        given[key] = value.strip()
    model = chosen.options_model
    for flag, (key, alias_value) in aliases.items():
        if alias_value is None:
            continue
        if key in given:
            raise ConfigError(f"{flag} and -P {key} set the same option: give one")
        if key not in model.model_fields or command not in model.commands_of(key):
            err_console.print(f"warning: {flag} is not an option of --protocol {chosen.name} for evaluate {command}; "
                              "ignored", style="yellow", highlight=False)
            continue
        given[key] = alias_value
    return chosen.parse_options(given, command=command)


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


def _one_source(responses: Path | None, db: str | None, *, other: str = "--responses FILE") -> str | None:
    """The store URL of ``--db`` (refused when its SQLite file is not there), after checking that
    exactly one of ``--db`` and the other source was given."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError

    if (responses is None) == (db is None):
        raise ConfigError(f"give exactly one of {other} or --db URL")
    return _existing_db(db) if db is not None else None


@evaluate_app.command("report")
@handle_errors
def report_command(
    out: OutOption,
    responses: Annotated[Path | None, typer.Option("--responses", help="Published responses.csv/.jsonl.")] = None,
    db: Annotated[str | None, typer.Option("--db", help="Our store (SQLAlchemy URL or SQLite path).")] = None,
    model: Annotated[list[str] | None, typer.Option("--model", help="Only these models (repeatable).")] = None,
    protocol: ProtocolOption = "arcticabstain",
    protocol_option: ProtocolOptionsOption = None,
    figure: FigureOption = True,
    overwrite: OverwriteOption = False,
    variants: Annotated[bool, typer.Option(
        "--variants", help="With --db: the prompt-robustness report (VARIANTS.md) of every recorded prompt variant "
                           "instead of the protocol's tables (ArcticAbstain's).")] = False,
    resamples: ResamplesAlias = None,
    draws: DrawsAlias = None,
    seed: SeedAlias = None,
    thresholds: ThresholdsAlias = None,
    wrong_penalty: PenaltyAlias = None,
    ece_bins: BinsAlias = None,
) -> None:
    """Write TABLES.md, the CSVs, summary.json, checks.json and the figures from responses.
    Abstain-QA and Know2Guess reports are read from the store (--db); re-score files with `score`."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import ReportOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)
    url = _one_source(responses, db)
    chosen = get_protocol(protocol)
    options = ReportOptions(figure=figure, protocol_options=_protocol_options(chosen, protocol_option, {
        "--resamples": ("resamples", resamples), "--draws": ("draws", draws), "--seed": ("seed", seed),
        "--thresholds": ("thresholds", thresholds), "--wrong-penalty": ("wrong_penalty", wrong_penalty),
        "--ece-bins": ("ece_bins", ece_bins)}, command="report"))
    if variants and url is None:
        raise ConfigError("--variants reports the prompt variants recorded in the store: give --db")
    if url is None:
        assert responses is not None
        _print_summary(chosen.report_from_published(responses, out, options, models=model))
        return
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.store.db import make_engine

    engine = make_engine(url)
    if variants:
        _print_summary(chosen.report_variants_from_store(engine, out, options, source=url, models=model))
    else:
        _print_summary(chosen.report_from_store(engine, out, options, source=url, models=model))


@evaluate_app.command("protocols")
@handle_errors
def protocols_command(
    markdown: Annotated[bool, typer.Option(
        "--markdown", help="Print the options as the Markdown table of docs/evaluation.md.")] = False,
) -> None:
    """Every registered protocol: what it measures, what --variants takes, whose inspect_ai logs
    `score --from-inspect-log` reads, and its -P options with their defaults."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.evaluate.protocols import PROTOCOLS, options_table

    if markdown:
        console.print(options_table(), highlight=False, end="", soft_wrap=True)
        return
    for protocol in PROTOCOLS.values():
        console.print(f"{protocol.name}: {protocol.summary}", highlight=False)
        console.print(f"  --variants: {protocol.variants_help}", highlight=False)
        if protocol.inspect_task:
            console.print(f"  --from-inspect-log: logs of {protocol.inspect_task}", highlight=False)
        options = protocol.options_model.documented()
        if not options:
            console.print("  no -P options", highlight=False)
        for option in options:
            console.print(f"  -P {option.key}=<{option.value}> (default {option.default}; evaluate "
                          f"{', '.join(option.commands)}): {option.help}", highlight=False)


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
                        "items.jsonl beside --responses; with --db, [evaluate] items of the config.")] = None,
    cutoff: Annotated[list[str] | None, typer.Option(
        "--cutoff", help="MODEL=YYYY-MM-DD knowledge cutoff (repeatable; overrides [[evaluate.models]]).")] = None,
    config: ConfigOption = None,
    resamples: ResamplesOption = None,
    draws: DrawsOption = None,
    seed: SeedOption = None,
    figure: FigureOption = True,
    overwrite: OverwriteOption = False,
) -> None:
    """ArcticAbstain metrics split at each model's knowledge cutoff (training exposure), with
    Know2Guess-style zones."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError, InputError
    from arcticqa.evaluate import exposure
    from arcticqa.evaluate.arcticabstain.report import StatsSettings
    from arcticqa.evaluate.reportio import check_report_folder, write_report_folder

    check_report_folder(out, overwrite=overwrite)
    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    # the settings every command gets (its -c, the global -c, $ARCTICQA_CONFIG or ./arcticqa.toml)
    settings = load_cli_settings(config)
    cutoffs = {m.label: m.knowledge_cutoff for m in settings.evaluate.models if m.knowledge_cutoff is not None}
    cutoffs |= _cutoffs(cutoff or [])
    records, source = _exposure_records(responses, db)
    items_path = items
    if items_path is None and responses is not None and (responses.parent / "items.jsonl").exists():
        items_path = responses.parent / "items.jsonl"
    if items_path is None and db is not None and settings.config_path is not None:
        # the release the run evaluated: `evaluate run` reads [evaluate] items by default
        items_path = settings.evaluate.resolved(settings.config_path).items
    known = {r.model for r in records}
    unknown = sorted(set(cutoffs) - known)
    if unknown:
        raise InputError(f"cutoff for models not in the responses: {', '.join(unknown)} "
                         f"(models: {', '.join(sorted(known))})", path=source)
    dates = exposure.resolve_item_dates({r.item_id for r in records}, items=items_path, item_dates=item_dates)
    exposures = exposure.build_exposure(records, dates.dated, cutoffs,
                                        settings=_stats(StatsSettings(), resamples=resamples, draws=draws, seed=seed))
    figures = [lambda folder: exposure.exposure_figure(exposures, folder / "exposure.png", folder / "exposure.svg",
                                                       note=dates.provenance())] \
        if figure and any(e.split for e in exposures) else []
    texts = exposure.exposure_texts(exposures, dates)
    write_report_folder(out, texts, figures, overwrite=overwrite)
    console.print(texts["EXPOSURE.md"], highlight=False)
    console.print(f"report written to {out}")


def _stats(published: StatsSettings, **given: int | None) -> StatsSettings:
    """The published statistics with the draws the command was given."""
    from dataclasses import replace

    return replace(published, **{name: value for name, value in given.items() if value is not None})


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


def _items_file(given: Path | None, *, default: Path | None = None, missing: str, whose: str) -> Path:
    """The items file a command reads: ``--items``, else its default; none is ``missing`` and a path
    that is not there is refused naming ``whose`` items they are (both exit 2)."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError, InputError

    path = given or default
    if path is None:
        raise ConfigError(missing)
    if not path.exists():
        raise InputError(f"items file {whose} not found", path=str(path))
    return path


@evaluate_app.command("score")
@handle_errors
def score_command(
    out: OutOption,
    protocol: ProtocolOption = "arcticabstain",
    protocol_option: ProtocolOptionsOption = None,
    items: Annotated[Path | None, typer.Option(
        "--items", help="Items: release items.jsonl, Abstain-QA or Know2Guess JSONL (with --from-inspect-log: "
                        "default, the release the logged task ran on).")] = None,
    responses: Annotated[Path | None, typer.Option("--responses", help="JSONL of external raw responses.")] = None,
    from_inspect_log: Annotated[list[Path] | None, typer.Option(
        "--from-inspect-log", help="inspect_ai logs (files or folders; repeatable) of the protocol's inspect task "
                                   "(ArcticAbstain's: arcticqa/integrations/inspect_task.py), instead of "
                                   "--responses.")] = None,
    figure: FigureOption = True,
    overwrite: OverwriteOption = False,
    resamples: ResamplesAlias = None,
    draws: DrawsAlias = None,
    seed: SeedAlias = None,
    thresholds: ThresholdsAlias = None,
    wrong_penalty: PenaltyAlias = None,
    ece_bins: BinsAlias = None,
) -> None:
    """Re-score an externally produced run (a responses JSONL, or inspect_ai logs) with the same
    parsers, metrics and report."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import ReportOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)

    chosen = get_protocol(protocol)
    options = ReportOptions(figure=figure, protocol_options=_protocol_options(chosen, protocol_option, {
        "--resamples": ("resamples", resamples), "--draws": ("draws", draws), "--seed": ("seed", seed),
        "--thresholds": ("thresholds", thresholds), "--wrong-penalty": ("wrong_penalty", wrong_penalty),
        "--ece-bins": ("ece_bins", ece_bins)}, command="score"))
    if (responses is None) == (not from_inspect_log):
        raise ConfigError("give exactly one of --responses FILE or --from-inspect-log LOG")
    if from_inspect_log:
        _print_summary(_score_inspect_logs(chosen, from_inspect_log, items, out, options))
        return
    assert responses is not None
    items = _items_file(items, missing="give --items (the items the responses answer)",
                        whose=f"for --protocol {protocol}")
    _print_summary(chosen.score_external(items, responses, out, options))


def _score_inspect_logs(chosen: EvalProtocol, logs: list[Path], items: Path | None, out: Path,
                        options: ReportOptions) -> ReportSummary:
    """Turn inspect logs into external response lines and score them like a --responses file."""
    import tempfile

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate.protocols import PROTOCOLS

    if chosen.inspect_task is None:
        tasks = ", ".join(f"{p.name} ({p.inspect_task})" for p in PROTOCOLS.values() if p.inspect_task) or "none"
        raise ConfigError(f"--from-inspect-log reads the logs of a protocol's inspect_ai task; --protocol "
                          f"{chosen.name} has none (protocols with one: {tasks})")
    try:  # inspect_ai is an optional extra, so its bridge is imported only when asked for
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.integrations.inspect_log import read_inspect_logs
    except ModuleNotFoundError as exc:
        raise ConfigError(f"--from-inspect-log needs inspect_ai ({exc.name} is not installed): "
                          'pip install -e ".[inspect]"') from None
    converted = read_inspect_logs(logs)
    items = _items_file(items, default=converted.items,
                        missing="the logs ran on different releases (or name none): give --items",
                        whose="of the logged release (give --items)")
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


async def _run_with_roles(settings: Settings, roles: dict[str, str], chosen: EvalProtocol, options: RunOptions,
                          models: list[EvalModel], engine: Engine, *, resume: bool,
                          progress: Callable[[str, int, int, int], None]) -> RunResult:
    """The run with the protocol's judge roles (role -> ``[models]`` name, :meth:`EvalProtocol.judge_roles`)
    answered through the gateway, whose model calls are recorded in the evaluator's store under the
    run's id."""
    import uuid
    from dataclasses import replace

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.evaluate.runner import run_protocol
    from arcticqa.llm.gateway import Gateway
    from arcticqa.pipeline.ledger import StoreLedger
    from arcticqa.store.store import Store

    run_id = uuid.uuid4().hex[:12]
    store = Store(engine.url.render_as_string(hide_password=False))
    try:
        ledger = StoreLedger(store, run_id)
        role_settings = settings.model_copy(update={"roles": {**settings.roles, **roles}})
        async with Gateway(role_settings, ledger, ledger=ledger, run_id=run_id) as gateway:
            return await run_protocol(chosen.live(replace(options, roles=gateway)), models, engine,
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
    protocol_option: ProtocolOptionsOption = None,
    variants: Annotated[str | None, typer.Option(
        "--variants", help="The protocol's prompt variants (names, ids or prompt files, separated by commas); "
                           "`arcticqa evaluate protocols` lists what each protocol takes.")] = None,
    overwrite: OverwriteOption = False,
    variant: Annotated[list[str] | None, typer.Option(
        "--variant", hidden=True, help="Deprecated: one prompt variant (repeatable); use --variants A,B.")] = None,
    verbal_confidence: VerbalConfidenceAlias = False,
    open_verifier: OpenVerifierAlias = None,
    thresholds: ThresholdsAlias = None,
    wrong_penalty: PenaltyAlias = None,
    ece_bins: BinsAlias = None,
) -> None:
    """Run the configured models on every item of the protocol (ArcticAbstain: both conditions; the
    others: their prompt variants), without Prefect (see the flow); a protocol that asks a judge
    model (the open protocol's verifier) asks it through the gateway. Every model's endpoint is
    checked first; progress shows calls done, failed and the rate; a run in which no call got an
    answer exits 1."""
    import asyncio

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import DEFAULT_CONFIG_NAME
    from arcticqa.errors import ConfigError, LLMTransportError
    from arcticqa.evaluate.protocols import ReportOptions, RunOptions, get_protocol
    from arcticqa.evaluate.reportio import check_report_folder
    from arcticqa.evaluate.runner import run_protocol
    from arcticqa.store.db import make_engine

    if out is not None:  # before any model is paid for
        check_report_folder(out, overwrite=overwrite)
    full = load_cli_settings(config)
    path = full.config_path
    if path is None:
        raise ConfigError(f"{DEFAULT_CONFIG_NAME}: config file not found")
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
    protocol_options = _protocol_options(chosen, protocol_option, {
        "--verbal-confidence": ("verbal_confidence", "true" if verbal_confidence else None),
        "--open-verifier": ("verifier", open_verifier), "--thresholds": ("thresholds", thresholds),
        "--wrong-penalty": ("wrong_penalty", wrong_penalty), "--ece-bins": ("ece_bins", ece_bins)}, command="run")
    chosen_variants: tuple[str, ...] = ()
    if variant:
        err_console.print(f"warning: --variant is deprecated; use --variants {','.join(variant)}", style="yellow",
                          highlight=False)
        chosen_variants += chosen.resolve_variants(",".join(variant), settings)
    if variants is not None:
        chosen_variants += chosen.resolve_variants(variants, settings)
    options = RunOptions(items=items_path, trials=trials or settings.trials, eval_set=settings.eval_set,
                         variants=tuple(dict.fromkeys(chosen_variants)), prompt=settings.prompt,
                         protocol_options=protocol_options)
    chosen.live(options)  # reads the items and every prompt: a mistake is exit 2 before a call or a store
    roles = chosen.judge_roles(protocol_options, full)
    _check_model_endpoints(models, [(f"the {role} role", full.models[name]) for role, name in roles.items()])
    db_url = _db_url(db) if db else settings.db_url
    engine = make_engine(db_url)

    with RunProgress(console) as progress:
        if not roles:
            result = asyncio.run(run_protocol(chosen.live(options), models, engine, resume=resume, progress=progress))
        else:
            result = asyncio.run(_run_with_roles(full, roles, chosen, options, models, engine, resume=resume,
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
    if out is not None:
        _print_summary(chosen.report_run(engine, out, ReportOptions(protocol_options=protocol_options), options,
                                         source=str(engine.url), models=[m.label for m in models]))


def _check_model_endpoints(models: list[EvalModel], judges: list[tuple[str, ModelConfig]]) -> None:
    """Every model's endpoint (and each judge role's: ``(what, config)``) answers, before any store is
    opened or any call is made: an unreachable base_url is one line and exit 1, not minutes of retries."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.pipeline.preflight import OPENAI_URL, Endpoint, check_endpoints

    found: dict[str, Endpoint] = {}
    named: list[tuple[str, ModelConfig]] = [(f"model {m.label}", m) for m in models]
    named += [(what, cfg) for what, cfg in judges if cfg.provider == "openai"]
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
    from arcticqa.errors import InputError
    from arcticqa.evaluate.policies import check_policy_run, run_policies
    from arcticqa.evaluate.reportio import check_report_folder

    check_report_folder(out, overwrite=overwrite)
    check_policy_run(protocol, variants=variants)
    if not items.is_file():
        raise InputError("items file not found", path=str(items))
    with tempfile.TemporaryDirectory(prefix="arcticqa-policies-") as scratch:
        db_url = _db_url(db) if db is not None else f"sqlite:///{Path(scratch) / 'responses.db'}"
        kept = f"responses kept in {db}" if db is not None else "responses not kept (--db STORE keeps them)"
        console.print(f"reference policies on {items}: --protocol {protocol}, eval set {eval_set}, {trials} "
                      f"trial{'s' if trials != 1 else ''}; {kept}", highlight=False, soft_wrap=True)
        _print_summary(asyncio.run(run_policies(protocol, items, out, db_url=db_url, trials=trials,
                                                eval_set=eval_set, variants=variants)))
