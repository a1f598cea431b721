"""CLI command ``arcticqa evaluate items``: the item audit from evaluation responses.

Registered on the ``evaluate`` sub-app from its own module (``cli/evaluate.py`` holds the
protocols' commands). The work is in :mod:`arcticqa.evaluate.itemaudit`; heavy imports stay inside
the command so ``arcticqa --help`` stays fast.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from arcticqa.cli.app import OverwriteOption, console, handle_errors
from arcticqa.cli.evaluate import FigureOption, OutOption, evaluate_app

__all__ = ["items_command"]


@evaluate_app.command("items")
@handle_errors
def items_command(
    out: OutOption,
    responses: Annotated[Path | None, typer.Option(
        "--responses", help="Published ArcticAbstain responses.csv/.jsonl.")] = None,
    db: Annotated[str | None, typer.Option(
        "--db", help="Our store (SQLAlchemy URL or SQLite path): its ArcticAbstain or Abstain-QA responses.")] = None,
    protocol: Annotated[str | None, typer.Option(
        "--protocol", help="With --db: whose responses (arcticabstain | abstainqa). Default: the one of them the "
                           "store holds; a store holding both needs it.")] = None,
    variant: Annotated[str | None, typer.Option(
        "--variant", help="With --db: the prompt variant audited (default: arcticabstain published, abstainqa "
                          "standard, or the only one held).")] = None,
    eval_set: Annotated[str | None, typer.Option(
        "--eval-set", help="With --db: the stored eval set (e.g. abstainqa:arcticqa) when the store holds "
                           "several.")] = None,
    items: Annotated[Path | None, typer.Option(
        "--items", help="The release's items.jsonl (its key and distractors name the options). Default: "
                        "items.jsonl beside --responses.")] = None,
    resamples: Annotated[int, typer.Option(
        "--resamples", min=0, help="Bootstrap refits of the IRT model for the 95% intervals (0: none).")] = 200,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap draws.")] = 7,
    figure: FigureOption = True,
    overwrite: OverwriteOption = False,
) -> None:
    """Item statistics, an IRT fit and suspect flags (ITEMS.md, item-stats.csv, suspects.csv, item-map.png)."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.cli.evaluate import _db_url, _existing_db
    from arcticqa.errors import ConfigError
    from arcticqa.evaluate import itemaudit
    from arcticqa.evaluate.arcticabstain.items import load_items
    from arcticqa.evaluate.reportio import check_report_folder, write_report_folder

    check_report_folder(out, overwrite=overwrite)
    if (responses is None) == (db is None):
        raise ConfigError("give exactly one of --responses FILE or --db URL")
    if items is None and responses is not None and (responses.parent / "items.jsonl").exists():
        items = responses.parent / "items.jsonl"
    if items is None:
        raise ConfigError("give --items (the release's items.jsonl)")
    release = load_items(items)
    selection = None
    if responses is not None:
        if protocol not in (None, "arcticabstain") or variant is not None or eval_set is not None:
            raise ConfigError("--responses reads published ArcticAbstain responses: --protocol, --variant and "
                              "--eval-set go with --db")
        data = itemaudit.load_published_choices(responses, release)
    else:
        assert db is not None
        url = _existing_db(db)
        # imported in the command, not at the top: `arcticqa --help` stays fast
        from arcticqa.evaluate import itemsources
        from arcticqa.evaluate.protocols import PROTOCOLS
        from arcticqa.store.db import make_engine

        engine = make_engine(url)
        held = itemsources.held_protocols(engine, list(PROTOCOLS))
        chosen = itemsources.choose_protocol(held, protocol, source=_db_url(db))
        data, selection = itemsources.store_choices(engine, chosen, release, source=_db_url(db), variant=variant,
                                                    eval_set=eval_set)
        for name, n in held.items():
            if name != chosen and protocol is None:
                why = itemsources.UNMAPPABLE.get(name, "")
                console.print(f"not audited: {n} {name} responses" + (f" ({why})" if why else ""),
                              style="yellow", highlight=False, soft_wrap=True)
    audit = itemaudit.audit_items(data, resamples=resamples, seed=seed)
    texts = itemaudit.item_texts(audit)
    write_report_folder(out, texts, itemaudit.write_figures(audit) if figure else [], overwrite=overwrite)
    flagged = {s.item_id for s in audit.suspects}
    by_rule = Counter(s.rule_id for s in audit.suspects)
    if selection is not None:
        console.print(f"{selection.describe()}:", highlight=False)
    console.print(f"{audit.responses} responses of {len(audit.models)} models on {len(audit.items)} items: "
                  f"{len(flagged)} suspect item(s)", highlight=False)
    for r in itemaudit.SUSPECT_RULES:
        console.print(f"  {r.id}: {by_rule.get(r.id, 0)}", highlight=False)
    for line in audit.warnings:
        console.print(line, style="yellow", highlight=False, soft_wrap=True)
    console.print(f"report written to {out}", highlight=False)
