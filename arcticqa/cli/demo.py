"""CLI command ``demo``: build, export, audit and evaluate the bundled sample corpus offline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from arcticqa.cli.app import OverwriteOption, app, console, handle_errors

__all__: list[str] = []


@app.command()
@handle_errors
def demo(
    out: Annotated[Path, typer.Option("--out", help="Where the demo writes its store and artifacts.")] = Path(
        "out/demo"),
    orchestrator: Annotated[str, typer.Option("--orchestrator", help="prefect (default) or local.")] = "prefect",
    trials: Annotated[int, typer.Option("--trials", help="Evaluation trials per condition.")] = 3,
    overwrite: OverwriteOption = False,
) -> None:
    """Run the whole product offline on the bundled sample corpus (no API key needed)."""
    from arcticqa.demo.run import run_demo

    result = run_demo(out, orchestrator=orchestrator, trials=trials, console=console, overwrite=overwrite)
    stages = result.build.get("stages", {})
    table = Table(title="build (this run)")
    cols = ("succeeded", "rejected", "failed", "skipped", "blocked")
    table.add_column("stage")
    for c in cols:
        table.add_column(c, justify="right")
    for stage, counts in stages.items():
        table.add_row(stage, *(str(counts.get(c, 0)) for c in cols))
    console.print(table)
    console.print(f"accepted items in the release: [bold]{result.items}[/]")
    for name, path in result.artifacts.items():
        console.print(f"  {name:11} {path}", highlight=False)
    if result.items == 0:
        raise typer.Exit(1)
