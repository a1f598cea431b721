"""``arcticqa demo``: the whole product offline, on the bundled sample corpus.

Runs the ``build-arcticqa`` Prefect flow (ephemeral API, no server to start) with the offline
provider for every role, exports and validates the release, writes the audit page and the
funnel figure, evaluates the release with the reference policies served over the same HTTP path
as real models (the multiple-choice ArcticAbstain protocol into ``evaluation/``, then the open-ended
protocol into ``evaluation-open/``, whose table it prints), and prints where everything is.
Re-running resumes: finished work is skipped.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from arcticqa.config import Settings, load_settings
from arcticqa.evaluate.policies import run_open_reference_policies, run_reference_policies
from arcticqa.evaluate.reportio import check_report_folder
from arcticqa.outputs import check_folder_target, os_errors, write_file
from arcticqa.pipeline.audit import audit_data
from arcticqa.pipeline.build import Orchestrator
from arcticqa.pipeline.build import build as pipeline_build
from arcticqa.pipeline.export import export_from_store
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.audit import render_audit_html
from arcticqa.release.funnel import render_funnel
from arcticqa.release.validate import validate_release
from arcticqa.release.writer import RELEASE_FILES
from arcticqa.store.store import open_store

__all__ = ["DemoResult", "run_demo", "check_demo_folder", "open_table", "SAMPLE_CORPUS"]

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "data" / "sample_corpus" / "papers.jsonl"
T = TypeVar("T")


@dataclass
class DemoResult:
    out_dir: Path
    build: dict[str, Any]
    items: int
    artifacts: dict[str, Path] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _config_text(out_dir: Path) -> str:
    # Paths are absolute so the config works from any directory; the default roles are offline.
    return (f'{_MARKER}; every role uses the offline provider (the default)\n'
            f'[store]\nurl = "sqlite:///{out_dir / "arcticqa.db"}"\n\n'
            f'[build]\ndata_dir = "{out_dir / "data"}"\nsource = "snapshot:{SAMPLE_CORPUS}"\n')


_MARKER = "# written by `arcticqa demo`"
#: what the demo writes into its folder (the store's SQLite side files included)
_DEMO_FILES = frozenset({"demo.toml", "arcticqa.db", "arcticqa.db-wal", "arcticqa.db-shm", "arcticqa.db-journal",
                         "data", "release", "evaluation", "evaluation-open", "audit.html", "funnel.png", "funnel.svg", "summary.json"})


def check_demo_folder(out_dir: Path, *, overwrite: bool) -> None:
    """Refuse, before any work, a target the demo would lose someone's files in.

    An earlier demo folder (its demo.toml carries the demo's marker) is the demo's own: running
    again resumes in it, replacing only the demo's outputs. Any other non-empty folder needs
    ``--overwrite``; a folder holding anything the demo does not write (at the top, or in its
    release/ and evaluation/ folders) is refused even then.
    """

    with os_errors(out_dir):
        config = out_dir / "demo.toml"
        earlier = config.is_file() and config.read_text(encoding="utf-8", errors="replace").startswith(_MARKER)
    check_folder_target(out_dir, overwrite=overwrite or earlier, own=_DEMO_FILES)
    check_folder_target(out_dir / "release", overwrite=True, own={*RELEASE_FILES, "MANIFEST.json"})
    check_report_folder(out_dir / "evaluation", overwrite=True)
    check_report_folder(out_dir / "evaluation-open", overwrite=True)


def _write_atomic(path: Path, text: str) -> None:
    write_file(path, text, overwrite=True)


def _step(console: Console, result: DemoResult, name: str, label: str, fn: Callable[[], T]) -> T:
    started = time.perf_counter()
    with console.status(Text.assemble((label, "bold"), " …")):
        value = fn()
    result.seconds[name] = round(time.perf_counter() - started, 2)
    console.print(Text.assemble(("✓", "green"), f" {label} ({result.seconds[name]:.1f} s)"))
    return value


def open_table(summary_json: Path) -> Table:
    """The open-protocol report's metrics (and its pairing with the multiple-choice run) as a table."""
    summary = json.loads(summary_json.read_text(encoding="utf-8"))
    pairing = {p["model"]: p for p in summary.get("pairing") or []}
    table = Table(title="open-ended protocol (no options shown)")
    for name in ("policy", "n", "accuracy", "abstention", "R-Acc", "undecided", "MC wrong → open abstained"):
        table.add_column(name, justify="left" if name == "policy" else "right")
    for g in summary["groups"]:
        paired = pairing.get(g["model_id"])
        crossed = f"{paired['mc_wrong_open_abstained']}/{paired['mc_wrong']}" if paired else "-"
        table.add_row(g["model"], str(g["responses"]), f"{g['accuracy']:.3f}", f"{g['abstention_rate']:.3f}",
                      f"{g['r_acc']:.3f}", f"{g['undecided_rate']:.3f}", crossed)
    return table


def run_demo(out_dir: Path = Path("out/demo"), *, orchestrator: str = "prefect", trials: int = 3,
             console: Console | None = None, overwrite: bool = False,
             load: Callable[[Path], Settings] = load_settings) -> DemoResult:
    """Build, export, audit and evaluate the sample corpus in ``out_dir``. ``load`` reads the
    ``demo.toml`` it writes there: the file alone by default, the CLI's loader (the environment's
    ``ARCTICQA_*`` too) for ``arcticqa demo``."""
    console = console or Console()
    out_dir = out_dir.absolute()
    check_demo_folder(out_dir, overwrite=overwrite)
    with os_errors(out_dir):
        out_dir.mkdir(parents=True, exist_ok=True)
    config = out_dir / "demo.toml"
    _write_atomic(config, _config_text(out_dir))
    settings = load(config)
    result = DemoResult(out_dir=out_dir, build={}, items=0, artifacts={"config": config})

    def build() -> dict[str, Any]:
        route: Orchestrator | None = None  # local: the stages in this process
        if orchestrator == "prefect":
            # imported only on this route: importing Prefect costs seconds the local route never pays
            from flows.build_arcticqa import run_flow

            route = run_flow
        return pipeline_build(settings, orchestrator=route).model_dump(mode="json")

    result.build = _step(console, result, "build", "build-arcticqa flow on the sample corpus", build)
    store = open_store(settings)
    try:
        release = out_dir / "release"
        _step(console, result, "export", "export the release", lambda: export_from_store(
            store, settings, release, release_id="arcticqa-demo", overwrite=True))
        report = _step(console, result, "validate", "validate the release",
                       lambda: validate_release(release))
        report.raise_for_errors()
        result.items = sum(1 for line in (release / "items.jsonl").read_text(encoding="utf-8").splitlines()
                           if line.strip())
        result.artifacts["release"] = release

        def audit() -> None:
            _write_atomic(out_dir / "audit.html", render_audit_html(audit_data(store)))
            for suffix in ("png", "svg"):
                render_funnel(funnel_counts(store), out_dir / f"funnel.{suffix}")

        _step(console, result, "audit", "write the audit page and the funnel figure", audit)
        result.artifacts.update({"audit": out_dir / "audit.html", "funnel": out_dir / "funnel.png"})
    finally:
        store.close()
    if result.items:
        paths = _step(console, result, "evaluate", "evaluate the release with the reference policies",
                      lambda: asyncio.run(run_reference_policies(
                          release / "items.jsonl", out_dir / "evaluation", db_url=settings.store.url,
                          trials=trials, eval_set="arcticqa-demo")))
        result.artifacts.update({"evaluation": paths.out_dir, "tables": paths.tables})
        opened = _step(console, result, "evaluate_open", "evaluate the release open-ended (no options shown)",
                       lambda: asyncio.run(run_open_reference_policies(
                           release / "items.jsonl", out_dir / "evaluation-open", db_url=settings.store.url,
                           trials=trials, eval_set="arcticqa-demo")))
        result.artifacts.update({"evaluation_open": opened.out_dir, "open_tables": opened.out_dir / "TABLES.md"})
        console.print(open_table(opened.out_dir / "summary.json"))
    else:
        console.print("no accepted items, so nothing to evaluate", style="yellow")
    _write_atomic(out_dir / "summary.json", json.dumps({
        "build": result.build, "items": result.items, "seconds": result.seconds,
        "artifacts": {k: str(v) for k, v in result.artifacts.items()}}, indent=2, sort_keys=True))
    result.artifacts["summary"] = out_dir / "summary.json"
    return result
