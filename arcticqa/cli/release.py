"""CLI commands: validate-release, export, audit, funnel.

``validate-release`` needs only a folder. ``export``, ``audit`` and ``funnel`` read the store
through the pipeline's adapters (``arcticqa.pipeline.export``, ``.audit``, ``.funnel``). Heavy
imports stay inside the commands so ``arcticqa --help`` is fast.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from arcticqa.cli.app import (
    ConfigOption,
    OverwriteOption,
    Text,
    app,
    config_flag,
    console,
    err_console,
    handle_errors,
    load_cli_settings,
)
from arcticqa.errors import ConfigError, StageError

if TYPE_CHECKING:
    from arcticqa.release.audit import AuditData
    from arcticqa.store import Store

__all__ = ["validate_release_cmd", "export_cmd", "audit_cmd", "funnel_cmd", "release_summary"]

_MAX_PRINTED = 50
_View = TypeVar("_View")


def _read_store(config: Path | None, view: Callable[[Store], _View]) -> _View:
    """Open the existing store, build one view of it (audit, funnel), close it."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.store import open_existing_store

    store = open_existing_store(load_cli_settings(config))
    try:
        return view(store)
    finally:
        store.close()


@app.command("validate-release")
@handle_errors
def validate_release_cmd(
    release_dir: Annotated[Path, typer.Argument(help="Release folder (or a bare items.jsonl).")],
    recheck: Annotated[bool, typer.Option("--recheck", help="Re-run the deterministic gates on the published text.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON record per issue / flagged item or option.")] = False,
) -> None:
    """Check a release folder against the schemas, the manifest hashes and cross-file invariants."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.release.validate import validate_release

    report = validate_release(release_dir, recheck=recheck)
    if as_json:
        for issue in [*report.errors, *report.warnings]:
            console.print_json(json.dumps(issue.model_dump()), indent=None)
        for flag in report.recheck or []:
            console.print_json(json.dumps(flag.model_dump()), indent=None)
        for cue in report.cues or []:
            console.print_json(json.dumps({"cue_audit": cue}), indent=None)
        if report.coverage is not None:
            console.print_json(json.dumps({"deterministic_coverage": report.coverage}), indent=None)
    else:
        counts = ", ".join(f"{v} {k}" for k, v in report.counts.items())
        console.print(f"{release_dir}: {counts or 'nothing read'}", highlight=False, soft_wrap=True)
        for w in report.warnings[:_MAX_PRINTED]:
            console.print(Text.assemble(("warning:", "yellow"), f" {w}"), highlight=False, soft_wrap=True)
        if report.recheck is not None:
            rc = report.recheck_counts()
            n_errors = len(report.recheck_errors)
            console.print(f"recheck: {len(report.recheck)} flag(s): {n_errors} error(s), "
                          f"{len(report.recheck) - n_errors} warning(s)", highlight=False)
            for rule_id, n in rc.items():
                console.print(f"  {rule_id}: {n}", highlight=False)
            if report.coverage and report.coverage["distractors"]:
                cov = report.coverage
                console.print(f"deterministic coverage: {cov['proved']} of {cov['distractors']} distractors "
                              f"({cov['proved'] / cov['distractors']:.1%}) proved false from question, "
                              "context and answer alone", highlight=False, soft_wrap=True)
            if report.cues:
                # imported in the command, not at the top: `arcticqa --help` stays fast
                from arcticqa.release.cues import CueResult, cue_table

                console.print("option-set cue audit (answer-present condition):", highlight=False)
                console.print(cue_table([CueResult(**{k: v for k, v in c.items() if k != "severity"})
                                         for c in report.cues]), highlight=False, markup=False, soft_wrap=True)
    for e in report.errors[:_MAX_PRINTED]:
        err_console.print(str(e), highlight=False, markup=False, soft_wrap=True)
    if report.ok and not as_json:
        console.print("valid", style="green")
    report.raise_for_errors()


@app.command("export")
@handle_errors
def export_cmd(
    out: Annotated[Path, typer.Option("--out", help="Release folder to create.")],
    release_id: Annotated[str, typer.Option("--release-id", help="Release id.")] = "arcticqa-release",
    prompt: Annotated[Path | None, typer.Option("--prompt", help="Evaluation prompt JSON (default: the store's).")] = None,
    include_evidence: Annotated[bool, typer.Option("--include-evidence", help="Include evidence text (check source licences).")] = False,
    require_redistributable: Annotated[bool, typer.Option("--require-redistributable", help="Leave out items whose source licence forbids sharing evidence.")] = False,
    fmt: Annotated[str, typer.Option("--format", help="jsonl, or hf: the same release plus Parquet per config (items, answer_present, answer_absent) and a Hugging Face card header (needs pyarrow: the hf extra).")] = "jsonl",
    overwrite: OverwriteOption = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Write a release even when no item was accepted.")] = False,
    config: ConfigOption = None,
) -> None:
    """Export the accepted items as a release folder (written atomically, byte-deterministic).
    Refuses (exit 2) a release without items unless --allow-empty."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.pipeline.export import export_from_store
    from arcticqa.release.jsonio import load_json
    from arcticqa.store import open_existing_store

    prompt_data = load_json(prompt) if prompt is not None else None
    if prompt_data is not None and not isinstance(prompt_data, dict):
        raise StageError("the evaluation prompt must be a JSON object")
    settings = load_cli_settings(config)
    store = open_existing_store(settings)
    try:
        path = export_from_store(store, settings, out, release_id=release_id, prompt=prompt_data,
                                 include_evidence=include_evidence,
                                 require_redistributable=require_redistributable, fmt=fmt, overwrite=overwrite,
                                 allow_empty=allow_empty)
    finally:
        store.close()
    for line in release_summary(path, flag=config_flag(settings)):
        console.print(line, highlight=False, soft_wrap=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def release_summary(release: Path, *, flag: str = "", listed: int = 10) -> list[str]:
    """What ``export`` wrote, read back from the release: what it holds (items, conditions,
    distractors, how answers and options were checked, evidence text or not) and which accepted
    items it left out, grouped by reason, with their ids."""
    manifest = json.loads((release / "MANIFEST.json").read_text(encoding="utf-8"))
    excluded = json.loads((release / "excluded-items.json").read_text(encoding="utf-8"))
    counts = manifest.get("counts") or {}
    items, conditions = int(counts.get("items", 0)), int(counts.get("conditions", 0))
    lines = [f"wrote {release} (release {manifest.get('release_id')}): "
             f"{_plural(items, 'item')}, {_plural(conditions, 'condition')} (each item answer-present and "
             f"answer-absent), {_plural(int(counts.get('distractors', 0)), 'distractor')}"]
    checked = [f"{what}: " + ", ".join(f"{n} {kind}" for kind, n in by.items())
               for what, by in (("answers", counts.get("items_by_answer_match") or {}),
                                ("distractors", counts.get("distractors_by_verification") or {})) if by]
    if checked:
        lines.append("  " + "; ".join(checked))
    lines.append("  evidence text: " + ("included" if manifest.get("include_evidence")
                                        else "left out (span ids, offsets and hashes only; --include-evidence adds it)"))
    by_reason: dict[str, list[str]] = {}
    for entry in excluded:
        by_reason.setdefault(str(entry.get("reason", "no reason recorded")), []).append(str(entry.get("item_id")))
    if not by_reason:
        lines.append("  left out: no accepted item")
    else:
        lines.append(f"  left out: {_plural(len(excluded), 'accepted item')} (excluded-items.json)")
        for reason, ids in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            shown = ", ".join(ids[:listed]) + (f", … ({len(ids) - listed} more)" if len(ids) > listed else "")
            lines.append(f"    {len(ids)} × {reason}: {shown}")
    left: dict[str, int] = {}
    for step in (manifest.get("funnel") or {}).get("steps", []):
        left[step.get("unit", "papers")] = left.get(step.get("unit", "papers"), 0) + sum(
            (step.get("rejected") or {}).values()) + int(step.get("needs_review") or 0)
    built = " and ".join(_plural(n, unit.removesuffix("s")) for unit, n in left.items() if n)
    lines.append(f"  before that, the build left out {built or 'nothing'} (`arcticqa audit{flag}` lists them with "
                 "the rule; the card's funnel counts them)")
    return lines


@app.command("audit")
@handle_errors
def audit_cmd(
    stage: Annotated[str | None, typer.Option("--stage", help="Only this stage.")] = None,
    rule: Annotated[str | None, typer.Option("--rule", help="Only this rule id (or prefix ending in '.').")] = None,
    paper: Annotated[str | None, typer.Option("--paper", help="Only this paper id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="JSON lines instead of a table.")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report here.")] = None,
    overwrite: OverwriteOption = False,
    config: ConfigOption = None,
) -> None:
    """Rejected and needs-review papers/items with stage, rule, message and evidence."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.outputs import check_file_target, write_file
    from arcticqa.pipeline.audit import audit_data

    if html is not None:
        check_file_target(html, overwrite=overwrite)
    data = _read_store(config, lambda store: audit_data(store, stage=stage, rule=rule, paper=paper))
    _check_audit_filters(data, stage=stage, rule=rule)
    if html is not None:
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.release.audit import render_audit_html

        write_file(html, render_audit_html(data), overwrite=overwrite)
        console.print(f"wrote {html}", highlight=False)
        return
    rows = data.filtered(stage=stage, rule=rule, paper=paper)
    if as_json:
        for r in rows:
            typer.echo(json.dumps(r.model_dump(mode="json"), ensure_ascii=False, sort_keys=True))
        return
    # one block per row instead of a table: rule and paper ids are copied into --rule/--paper, so
    # they must never be cut, and a 7-column table cuts them even at 140 columns
    for r in rows:
        console.print(Text.assemble((r.rule_id, "bold"), f"  {r.status}  stage {r.stage}",
                                    f"  paper {r.paper_id}" if r.paper_id else "",
                                    f"  item {r.item_id}" if r.item_id else ""), highlight=False, soft_wrap=True)
        console.print(f"    {r.message}", highlight=False)
        if r.evidence:
            console.print("    evidence: " + json.dumps(r.evidence, ensure_ascii=False, sort_keys=True),
                          highlight=False, soft_wrap=True)
    console.print(f"{len(rows)} row(s)", highlight=False)


def _check_audit_filters(data: AuditData, *, stage: str | None, rule: str | None) -> None:
    """A --stage or --rule that names nothing the build knows is a typo, not "0 rows": refuse it
    (exit 2) with the closest known id."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    import arcticqa.pipeline.stages  # noqa: F401  (imports every stage, which declares its rules)
    from arcticqa.config import did_you_mean
    from arcticqa.pipeline.stages import BUILD_STAGES
    from arcticqa.rules import all_rules
    from arcticqa.stages.construct import STAGES as CONSTRUCT_STEPS

    if stage is not None:
        stages = {"discover", "review", *(s.name for s in BUILD_STAGES), *CONSTRUCT_STEPS,
                  *(r.stage for r in data.rejections)}
        if stage not in stages:
            raise ConfigError(f"--stage {stage}: no such stage{did_you_mean(stage, stages)} "
                              f"(stages: {', '.join(sorted(stages))})")
    if rule is not None:
        rules = {r.id for r in all_rules()} | {r.rule_id for r in data.rejections}
        known = rule in rules or (rule.endswith(".") and any(r.startswith(rule) for r in rules))
        if not known:
            prefixes = {r.split(".", 1)[0] + "." for r in rules}
            raise ConfigError(f"--rule {rule}: no such rule id{did_you_mean(rule, rules | prefixes)} "
                              "(`arcticqa rules` lists them; a prefix ends in '.')")


@app.command("funnel")
@handle_errors
def funnel_cmd(
    out: Annotated[Path, typer.Option("--out", help="funnel.png or funnel.svg")],
    overwrite: OverwriteOption = False,
    config: ConfigOption = None,
) -> None:
    """Draw the PRISMA-style flow figure of the build."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.outputs import check_file_target
    from arcticqa.pipeline.funnel import funnel_counts
    from arcticqa.release.funnel import funnel_format, render_funnel

    funnel_format(out)
    check_file_target(out, overwrite=overwrite)
    funnel = _read_store(config, funnel_counts)
    render_funnel(funnel, out, overwrite=overwrite)
    console.print(f"wrote {out}", highlight=False)
