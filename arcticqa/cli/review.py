"""CLI commands ``review sample|serve|report``: expert review of a sample of the store's items.

The domain work is in :mod:`arcticqa.review` (plan, statistics, report) and the web app in
:mod:`arcticqa.workbench`; this module parses options and prints. Heavy imports stay inside the
commands so ``arcticqa --help`` is fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from arcticqa.cli.app import ConfigOption, OverwriteOption, app, console, handle_errors, load_cli_settings

__all__ = ["review_app"]

review_app = typer.Typer(help="Expert review: sample items, review them in a local browser workbench, report "
                              "the measured error rate (docs/review.md).", no_args_is_help=True)
app.add_typer(review_app, name="review")

PlanOption = Annotated[str, typer.Option("--plan", help="Review plan id.")]


@review_app.command("sample")
@handle_errors
def sample_cmd(
    reviewer: Annotated[list[str] | None, typer.Option("--reviewer", help="A reviewer (repeat for several).")] = None,
    credit: Annotated[list[str] | None, typer.Option(
        "--credit", help="A reviewer who agrees to be named in release cards (added as a reviewer).")] = None,
    plan: PlanOption = "main",
    n: Annotated[int | None, typer.Option("--n", help="Accepted items to sample (default: from --half-width).")] = None,
    half_width: Annotated[float | None, typer.Option(
        "--half-width", help="Target half-width of the 95% interval of the error rate (default 0.05).")] = None,
    expected_rate: Annotated[float | None, typer.Option(
        "--expected-rate", help="Error rate assumed for the sample size (default 0.5, the largest).")] = None,
    rejected_n: Annotated[int | None, typer.Option(
        "--rejected-n", help="Rejected candidates to sample (default: from --half-width).")] = None,
    double_share: Annotated[float | None, typer.Option(
        "--double-share", help="Share of sampled items given to a second reviewer (default 0.2).")] = None,
    model_weight: Annotated[float | None, typer.Option(
        "--model-weight", help="Oversample model-decided items: their strata get this many times their "
                               "proportional share (default 3; 1 samples in proportion).")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of a new plan (default 20; a plan keeps its seed).")
                    ] = None,
    from_suspects: Annotated[Path | None, typer.Option(
        "--from-suspects", help="suspects.csv of `arcticqa evaluate items`: add the flagged items to the plan as "
                                "their own population (reasons shown after the verdict; the random sample's "
                                "estimate never includes them).")] = None,
    config: ConfigOption = None,
) -> None:
    """Draw a review plan from the store, or extend it (never reshuffling earlier assignments)."""
    from collections import Counter

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.review.items import load_review_items
    from arcticqa.review.plan import SamplingRequest, extend_plan, plan_dimensions
    from arcticqa.review.suspects import SUSPECT_POPULATION, read_suspects
    from arcticqa.store import open_existing_store
    from arcticqa.store.reviews import get_plan, plan_assignments, save_plan

    suspects = read_suspects(from_suspects) if from_suspects is not None else {}
    store = open_existing_store(load_cli_settings(config))
    try:
        old = get_plan(store.engine, plan)
        existing = plan_assignments(store.engine, plan)
        req = SamplingRequest(plan_id=plan, seed=seed, half_width=half_width, n=n, rejected_n=rejected_n,
                              expected_rate=expected_rate, double_share=double_share, model_weight=model_weight,
                              reviewers=reviewer or [], credited=credit or [], suspects=suspects)
        items = load_review_items(store.engine)
        new_plan, added = extend_plan(old, existing, items, req)
        save_plan(store.engine, new_plan, added)
        rows = [*existing, *added]
    finally:
        store.close()
    per = Counter((a.reviewer, a.slot) for a in rows)
    console.print(f"review plan {plan} ({'extended' if old else 'new'}, seed {new_plan.seed}): {len(added)} "
                  f"assignment(s) added, {len(rows)} in all", highlight=False)
    for population, sizes in (new_plan.strata or {}).items():
        sampled = sum(1 for a in rows if a.population == population and a.slot == 1)
        console.print(f"  {population}: {sampled} of {sum(sizes.values())} item(s) sampled over "
                      f"{len(sizes)} strat{'um' if len(sizes) == 1 else 'a'}", highlight=False)
    if "decided_by" in plan_dimensions(new_plan.params)["accepted"]:
        model = {i.key for i in items if i.population == "accepted" and i.strata.get("decided_by") == "model"}
        accepted = sum(1 for i in items if i.population == "accepted")
        taken = sum(1 for a in rows if a.population == "accepted" and a.slot == 1 and a.item_key in model)
        weight = (new_plan.params or {}).get("model_weight", 1)
        console.print(f"  model-decided: {taken} of {len(model)} sampled ({len(model)} of {accepted} accepted item(s); "
                      f"weight {weight})", highlight=False, soft_wrap=True)
    flagged = (new_plan.params or {}).get("suspects") or {}
    if flagged:
        added_suspects = sum(1 for a in rows if a.population == SUSPECT_POPULATION and a.slot == 1)
        unmatched = (new_plan.params or {}).get("suspects_unmatched") or []
        console.print(f"  suspects: {len(flagged)} flagged item(s), {added_suspects} added for review, "
                      f"{len(flagged) - added_suspects} already in the random sample"
                      + (f"; {len(unmatched)} flagged id(s) not accepted items of this store" if unmatched else ""),
                      highlight=False, soft_wrap=True)
    for name in new_plan.reviewers or []:
        console.print(f"  {name}: {per[(name, 1)]} primary, {per[(name, 2)]} second review(s)", highlight=False)


@review_app.command("serve")
@handle_errors
def serve_cmd(
    plan: PlanOption = "main",
    reviewer: Annotated[str | None, typer.Option("--reviewer", help="Review as NAME (else the first page asks).")
                        ] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on (non-loopback needs --token).")
                    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8765,
    token: Annotated[str | None, typer.Option("--token", help="Access token every request must carry.")] = None,
    blind: Annotated[bool, typer.Option("--blind/--no-blind", help="Hide the machine's verdicts and rule labels "
                                        "until the reviewer has answered (default: blind).")] = True,
    config: ConfigOption = None,
) -> None:
    """Serve the review workbench on this machine (127.0.0.1:8765) until Ctrl-C."""
    from urllib.parse import quote

    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.store import open_existing_store
    from arcticqa.workbench import check_bind, create_app, serve

    check_bind(host, token)
    store = open_existing_store(load_cli_settings(config))
    try:
        create_app(store.engine, plan_id=plan, reviewer=reviewer, token=token, blind=blind)  # refuses a bad plan now
        shown = f"[{host}]" if ":" in host else host
        console.print(f"review workbench: http://{shown}:{port}/" + (f"?token={quote(token)}" if token else "")
                      + "  (Ctrl-C to stop)", highlight=False, soft_wrap=True)
        serve(store.engine, host=host, port=port, plan_id=plan, reviewer=reviewer, token=token, blind=blind)
    finally:
        store.close()


@review_app.command("report")
@handle_errors
def report_cmd(
    plan: Annotated[str | None, typer.Option("--plan", help="Review plan id (default: the newest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="The report as one JSON object.")] = False,
    html: Annotated[Path | None, typer.Option("--html", help="Also write the report as an HTML page here.")] = None,
    overwrite: OverwriteOption = False,
    config: ConfigOption = None,
) -> None:
    """Residual error rate, false rejections, agreement and what the gates missed."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import InputError
    from arcticqa.outputs import check_file_target, write_file
    from arcticqa.review.report import render_html, render_text, report_for_store
    from arcticqa.store import open_existing_store

    if html is not None:
        check_file_target(html, overwrite=overwrite)
    store = open_existing_store(load_cli_settings(config))
    try:
        report = report_for_store(store.engine, plan)
    finally:
        store.close()
    if report is None:
        raise InputError("the store has no review plan (run `arcticqa review sample --reviewer NAME` first)")
    if html is not None:
        write_file(html, render_html(report), overwrite=overwrite)
    if as_json:
        typer.echo(json.dumps(report.model_dump(mode="json"), ensure_ascii=False, sort_keys=True))
    else:
        console.print(render_text(report), highlight=False, soft_wrap=True)
    if html is not None and not as_json:
        console.print(f"wrote {html}", highlight=False)
