"""CLI commands: ``arcticqa eligibility explain`` — why a text or paper is (not) Arctic.

Shows every site found (source, span, coordinates, land/sea, region), the rule applied to each
and the decision, so a policy change can be tried on one text before a build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from arcticqa.cli.app import ConfigOption, Text, app, console, handle_errors, load_cli_settings
from arcticqa.errors import InputError

if TYPE_CHECKING:
    from arcticqa.evidence import Document
    from arcticqa.papers import PaperRecord
    from arcticqa.stages.eligibility import EligibilityDecision

__all__ = ["eligibility_app", "explain"]

eligibility_app = typer.Typer(help="Geographic eligibility: is a study set in the Arctic?", no_args_is_help=True)
app.add_typer(eligibility_app, name="eligibility")


def _read_file(path: Path) -> tuple[PaperRecord, Document | None]:
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.papers import PaperRecord

    if not path.is_file():
        raise InputError("file not found", path=str(path))
    if path.suffix.lower() == ".pdf":
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.text.extract import extract_pdf_bytes

        document = extract_pdf_bytes(path.read_bytes())
        if document.status != "ok":
            raise InputError(f"cannot extract text ({document.status}): {document.message or ''}".strip(),
                             path=str(path))
        return PaperRecord(paperId=path.stem), document
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=str(path)) from exc
    return PaperRecord(paperId=path.stem, abstract=text), None


def _from_store(paper_id: str, config: Path | None) -> tuple[PaperRecord, Document | None]:
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.store import open_existing_store

    settings = load_cli_settings(config)
    store = open_existing_store(settings)
    try:
        paper = store.get_paper(paper_id)
        if paper is None:
            raise InputError(f"paper {paper_id!r} is not in the store ({settings.store.url})", field="--paper")
        return paper, store.get_document(paper_id)
    finally:
        store.close()


def _print(decision: EligibilityDecision) -> None:
    colour = {"eligible": "green", "ineligible": "red", "needs_review": "yellow"}[decision.decision]
    if not decision.sites:
        console.print("No site found.")
    for i, v in enumerate(decision.sites, start=1):
        m = v.mention
        if m.lat_min is not None and m.lat_max is not None:
            where = f"lat {m.lat_min:.2f}..{m.lat_max:.2f}"
        elif m.lat is None:
            where = "no coordinates"
        else:
            where = f"lat {m.lat:.3f}" + ("" if m.lon is None else f", lon {m.lon:.3f}")
        verdict_colour = {"eligible": "green", "ineligible": "red", "uncertain": "yellow"}.get(v.verdict, "dim")
        console.print(Text.assemble(f"{i:>2}. ", (m.text, "bold"), f" ({m.source}"
                                    + (f", place {m.place}" if m.place and m.place != m.text else "") + ")"),
                      highlight=False)
        console.print(f"    span {m.span_id} [{m.section}] {m.start}:{m.end}; {where}; {m.kind}"
                      + (f"; region {v.region}" if v.region else ""), highlight=False)
        console.print(Text.assemble("    ", (v.verdict, verdict_colour), f" {v.rule_id}: {v.reason}"),
                      highlight=False)
    for w in decision.warnings:
        console.print(Text.assemble(("warning", "yellow"), f" {w.rule_id}: {w.message}"), highlight=False)
    console.print(Text.assemble("Decision: ", (decision.decision, f"bold {colour}"),
                                f"  rules: {', '.join(decision.rule_ids)}"), highlight=False)
    for r in decision.rejections:
        console.print(f"  {r.rule_id}: {r.message}", highlight=False)
    console.print(f"policy {decision.policy_version} (site rule '{decision.site_rule}') "
                  f"sha256 {decision.policy_sha256[:12]}; regions {decision.regions_sha256[:12]}; "
                  f"gazetteer {decision.gazetteer_sha256[:12]}", style="dim", highlight=False)


@eligibility_app.command("explain")
@handle_errors
def explain(
    text: Annotated[str | None, typer.Option("--text", help="Judge this text (treated as an abstract).")] = None,
    file: Annotated[Path | None, typer.Option("--file", help="Judge a .txt file (or a .pdf, extracted).")] = None,
    paper: Annotated[str | None, typer.Option("--paper", help="Judge a paper from the store by its id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    policy: Annotated[Path | None, typer.Option(
        "--policy", help="Eligibility policy TOML (default: [policies] eligibility of the settings, "
                     "else data/policies/eligibility.toml).")] = None,
    site_rule: Annotated[str | None, typer.Option(
        "--site-rule", help="Override the policy's site rule: all, any or majority.")] = None,
    config: ConfigOption = None,
) -> None:
    """Show every site found in a text or paper, the rule applied to each, and the decision."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.papers import PaperRecord
    from arcticqa.stages.eligibility import assess, load_eligibility_policy

    chosen = [name for name, value in (("--text", text), ("--file", file), ("--paper", paper)) if value is not None]
    if len(chosen) != 1:
        raise InputError("give exactly one of --text, --file or --paper"
                         + (f" (got {', '.join(chosen)})" if chosen else ""))
    if policy is None:
        policy = load_cli_settings(config).policies.eligibility  # None: the repository's default policy
    pol = load_eligibility_policy(policy)
    if site_rule is not None:
        if site_rule not in ("all", "any", "majority"):
            raise InputError(f"--site-rule must be all, any or majority, not {site_rule!r}", field="--site-rule")
        pol = pol.model_copy(update={"site_rule": site_rule})
    document = None
    if text is not None:
        record = PaperRecord(paperId="text", abstract=text)
    elif file is not None:
        record, document = _read_file(file)
    else:
        assert paper is not None
        record, document = _from_store(paper, config)
    decision = assess(record, document, policy=pol)
    if as_json:
        typer.echo(json.dumps(decision.explain_json(), ensure_ascii=False, indent=2))
    else:
        _print(decision)
