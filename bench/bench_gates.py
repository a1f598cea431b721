"""Do the gates keep planted defects out of the release? (Target: none reaches it.)

Builds the sample corpus (``data/sample_corpus``) through the offline roles served over the
OpenAI wire protocol (:class:`arcticqa.standins.passthrough.OfflineOverWire`), once per seed with
the red team (:class:`arcticqa.standins.redteam.RedTeam`) planting one defect per item, exports
each release, and prints per defect class: planted, reached an accepted item, caught by which
rule ids. Then the pass-through run: the same build with no tamper must export the offline
build's ``items.jsonl`` byte for byte (the red-team machinery itself rejects nothing).

    .venv/bin/python -m bench.bench_gates [--seeds 1 2 3 4 5 6 7 8] [--papers N] [--classes NAME ...]
        [--out DIR] [--json]

Exit status 1 if any planted defect reached an accepted item, the pass-through differs, or the
run planted fewer than ``--min-plants`` defects in fewer than ``--min-classes`` classes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcticqa.config import load_settings
from arcticqa.pipeline.build import build
from arcticqa.pipeline.export import export_from_store
from arcticqa.standins.passthrough import OfflineOverWire, models_toml
from arcticqa.standins.redteam import CATALOGUE, Outcome, RedTeam, score
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store import open_store

__all__ = ["SAMPLE_CORPUS", "BUILD", "SeedRun", "corpus_subset", "build_release", "run_seed", "passthrough_same",
           "table", "main"]

SAMPLE_CORPUS = Path(__file__).resolve().parents[1] / "data" / "sample_corpus" / "papers.jsonl"
#: every candidate finding of a paper is tried (more items, so more plants, per build)
BUILD = "findings_per_paper = 5\nitems_per_family = 5\n"
#: quick transport retries: the stand-in answers at once
MODEL = "max_retries = 2\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.05\ntimeout_s = 30\n"


def corpus_subset(folder: Path, papers: int | None) -> Path:
    """The sample corpus, or its first ``papers`` records with their PDFs copied beside them (a
    snapshot's ``localPdf`` must stay inside its own folder)."""
    if papers is None:
        return SAMPLE_CORPUS
    lines = [line for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()][:papers]
    folder.mkdir(parents=True, exist_ok=True)
    for line in lines:
        local = json.loads(line).get("localPdf")
        if local:
            (folder / local).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(SAMPLE_CORPUS.parent / local, folder / local)
    out = folder / "papers.jsonl"
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return out


def build_release(folder: Path, corpus: Path, models: str = "") -> Path:
    """Build ``corpus`` in ``folder`` (offline roles unless ``models`` says otherwise) and export;
    returns the release folder."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{folder / "arcticqa.db"}"\n\n[build]\n'
                      f'data_dir = "{folder / "data"}"\nsource = "snapshot:{corpus}"\n{BUILD}\n{models}',
                      encoding="utf-8")
    settings = load_settings(config)
    build(settings)
    store = open_store(settings)
    try:
        export_from_store(store, settings, folder / "release", release_id="bench-gates", overwrite=True)
    finally:
        store.close()
    return folder / "release"


def _wire_models(base_url: str) -> str:
    toml = models_toml(base_url)
    head, _, roles = toml.partition("\n\n[roles]")
    return f"{head}\n{MODEL}\n[roles]{roles}"


@dataclass
class SeedRun:
    seed: int
    outcomes: list[Outcome]
    items: int
    seconds: float
    log: Path
    requests: int = 0
    errors: list[str] = field(default_factory=list)


def _read_store(folder: Path, release: Path) -> dict[str, Any]:
    settings = load_settings(folder / "arcticqa.toml")
    store = open_store(settings)
    try:
        findings = [(r.paper_id, r.output or {}) for r in store.runs(stage="findings")]
        rejections = [(r.subject, r.rule_id, (r.evidence or {}).get("option")) for r in store.rejections()
                      if r.subject.startswith("fd-")]
        failures = [(r.subject or r.paper_id, f"{r.error_class}: {r.error_message}"[:160])
                    for r in store.runs(status="failed")]
        released = {json.loads(line)["item_id"] for line in (release / "items.jsonl").read_text(
            encoding="utf-8").splitlines() if line.strip()}
        items = [row.payload or {} for row in store.items() if row.item_id in released]
    finally:
        store.close()
    return {"findings_outputs": findings, "rejections": rejections, "failures": failures, "items": items}


def run_seed(seed: int, corpus: Path, folder: Path, classes: Sequence[str] | None = None) -> SeedRun:
    """One red-team build: plant, build, export, score; the plants' log is ``folder/plants.jsonl``."""
    red = RedTeam(seed, classes)
    started = time.perf_counter()
    with FakeOpenAIServer(OfflineOverWire(tamper=red)) as server:
        release = build_release(folder, corpus, _wire_models(server.base_url))
        requests = server.completions
    found = _read_store(folder, release)
    outcomes = score(red.plants, **found)
    log = red.write_log(folder / "plants.jsonl")
    return SeedRun(seed=seed, outcomes=outcomes, items=len(found["items"]), seconds=time.perf_counter() - started,
                   log=log, requests=requests)


def passthrough_same(corpus: Path, folder: Path) -> tuple[bool, int]:
    """(the pass-through build's items.jsonl equals the offline build's byte for byte, items)."""
    offline = build_release(folder / "offline", corpus) / "items.jsonl"
    with FakeOpenAIServer(OfflineOverWire()) as server:
        wire = build_release(folder / "passthrough", corpus, _wire_models(server.base_url)) / "items.jsonl"
    same = offline.read_bytes() == wire.read_bytes()
    return same, sum(1 for line in offline.read_text(encoding="utf-8").splitlines() if line.strip())


def table(runs: Sequence[SeedRun]) -> tuple[str, dict[str, Any]]:
    """The per-class table and its figures."""
    planted: Counter[str] = Counter()
    reached: Counter[str] = Counter()
    missed: Counter[str] = Counter()  # neither reached nor caught by any recorded rule
    caught: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        for o in run.outcomes:
            name = o.plant.defect
            planted[name] += 1
            reached[name] += o.reached
            if not o.reached and not o.caught_by:
                missed[name] += 1
            for rule_id in o.caught_by:
                caught[name][rule_id if not rule_id.startswith("failed:") else "failed"] += 1
    names = [c.name for c in CATALOGUE if planted[c.name]]
    width = max([len(n) for n in names] + [10])
    lines = [f"{'class':<{width}}  planted  reached  uncaught  caught by (rule id: plants)",
             f"{'-' * width}  -------  -------  --------  ---------------------------"]
    for name in names:
        rules = ", ".join(f"{r}: {n}" for r, n in sorted(caught[name].items(), key=lambda x: (-x[1], x[0])))
        lines.append(f"{name:<{width}}  {planted[name]:>7}  {reached[name]:>7}  {missed[name]:>8}  {rules}")
    lines.append(f"{'total':<{width}}  {sum(planted.values()):>7}  {sum(reached.values()):>7}  "
                 f"{sum(missed.values()):>8}  {len(names)} classes, {len(runs)} seeds")
    figures = {"planted": dict(planted), "reached": dict(reached), "uncaught": dict(missed),
               "caught_by": {k: dict(v) for k, v in caught.items()}, "classes": len(names), "seeds": len(runs),
               "plants": sum(planted.values()), "reached_total": sum(reached.values())}
    return "\n".join(lines), figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8])
    parser.add_argument("--papers", type=int, default=None, help="only the first N records of the sample corpus")
    parser.add_argument("--classes", nargs="+", default=None, help="plant only these classes")
    parser.add_argument("--out", type=Path, default=None, help="keep the builds and plant logs here")
    parser.add_argument("--min-plants", type=int, default=200)
    parser.add_argument("--min-classes", type=int, default=8)
    parser.add_argument("--no-passthrough", action="store_true", help="skip the pass-through comparison")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-gates-") as tmp:
        root = args.out or Path(tmp)
        corpus = corpus_subset(root / "corpus", args.papers)
        runs: list[SeedRun] = []
        for seed in args.seeds:
            run = run_seed(seed, corpus, root / f"seed-{seed}", args.classes)
            runs.append(run)
            print(f"seed {seed}: {len(run.outcomes)} plants, {sum(o.reached for o in run.outcomes)} reached, "
                  f"{run.items} accepted items, {run.requests} requests, {run.seconds:.1f} s "
                  f"(log {run.log if args.out else run.log.name})", flush=True)
        text, figures = table(runs)
        print()
        print(text)
        for run in runs:
            for o in run.outcomes:
                if o.reached:
                    print(f"REACHED seed {run.seed} {o.plant.defect} ({o.plant.variant}) in {o.items}: "
                          f"{o.plant.change}")
        same, n_items = (True, 0) if args.no_passthrough else passthrough_same(corpus, root / "passthrough")
        if not args.no_passthrough:
            print(f"\npass-through: items.jsonl {'byte-identical to' if same else 'DIFFERS from'} the offline "
                  f"build's ({n_items} items)")
        figures["passthrough_identical"] = same
        if args.json:
            print(json.dumps(figures, indent=2, sort_keys=True))
    ok = (figures["reached_total"] == 0 and same and figures["plants"] >= args.min_plants
          and figures["classes"] >= args.min_classes)
    if figures["plants"] < args.min_plants or figures["classes"] < args.min_classes:
        print(f"too few plants: {figures['plants']} in {figures['classes']} classes "
              f"(want >= {args.min_plants} in >= {args.min_classes})", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
