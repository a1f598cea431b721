"""CLI command ``demo``: build, export, audit and evaluate the bundled sample corpus offline."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from arcticqa.cli.app import OverwriteOption, Text, app, console, handle_errors, load_cli_settings
from arcticqa.cli.build import Orchestrator

__all__ = ["follow_on_commands"]


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (what a user would type)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def follow_on_commands(config: Path) -> list[str]:
    """The commands that look at what the demo built, exactly as a user would type them."""
    cfg = shlex.quote(_shown(config))
    folder = shlex.quote(_shown(config.parent))
    return [f"arcticqa status -c {cfg}",
            f"arcticqa audit -c {cfg}",
            f"arcticqa funnel -c {cfg} --out funnel.svg",
            f"arcticqa validate-release {folder}/release",
            f"open {folder}/audit.html in a browser (rejections with their evidence, and the funnel)",
            f"arcticqa review sample -c {cfg} --reviewer NAME && arcticqa review serve -c {cfg}   "
            "(review items in the browser workbench at http://127.0.0.1:8765/; docs/review.md)"]


@app.command()
@handle_errors
def demo(
    out: Annotated[Path, typer.Option("--out", help="Where the demo writes its store and artifacts.")] = Path(
        "out/demo"),
    orchestrator: Annotated[Orchestrator, typer.Option(
        "--orchestrator", help="prefect: the build-arcticqa flow; local: the same stages without Prefect.")
    ] = Orchestrator.prefect,
    trials: Annotated[int, typer.Option("--trials", help="Evaluation trials per condition.")] = 3,
    overwrite: OverwriteOption = False,
) -> None:
    """Run the whole product offline on the bundled sample corpus (no API key needed)."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.demo.run import run_demo

    result = run_demo(out, orchestrator=orchestrator.value, trials=trials, console=console, overwrite=overwrite,
                      load=load_cli_settings)
    stages = result.build.get("stages", {})
    table = Table(title="build (this run)")
    cols = ("succeeded", "rejected", "failed", "skipped", "blocked")
    table.add_column("stage")
    for c in cols:
        table.add_column(c, justify="right")
    for stage, counts in stages.items():
        table.add_row(stage, *(str(counts.get(c, 0)) for c in cols))
    console.print(table)
    console.print(Text.assemble("accepted items in the release: ", (str(result.items), "bold")))
    for name, path in result.artifacts.items():
        console.print(f"  {name:11} {path}", highlight=False)
    console.print("next (the demo's store is not ./arcticqa.db, so pass its config):")
    for line in follow_on_commands(result.artifacts["config"]):
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    if result.items == 0:
        raise typer.Exit(1)
