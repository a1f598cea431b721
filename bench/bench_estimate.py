"""``arcticqa estimate`` against the rehearsal: predicted vs measured calls, tokens and wall time.

Runs :mod:`bench.bench_scale` (its ``main``, with the arguments given here, ``--quick`` by default)
into a kept folder, then estimates the same build from its config alone: the per-role table
measured on the sample corpus and the reference's funnel (``--no-store``: the rehearsal's own
``llm_call`` rows are what is being predicted), at the rehearsal's paper count, limits and the
stand-in's mean latency and the rehearsal papers' mean length (as a user would state theirs). Prints both side by side with the ratio; the target is within 15%.

    .venv/bin/python -m bench.bench_estimate [bench_scale options, e.g. --quick | --scale 0.1]
"""

from __future__ import annotations

import json
import math
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arcticqa.pipeline.estimate import Estimate

__all__ = ["main", "compare"]


def _stand_in_mean_latency(median: float, p99: float) -> float:
    """The mean of the stand-in's lognormal latency (median, 99th percentile)."""
    sigma = math.log(p99 / median) / 2.3263478740408408 if p99 > median > 0 else 0.0
    return median * math.exp(sigma * sigma / 2)


def document_tokens(db: Path) -> float:
    """The mean extracted text of the rehearsal's papers, in tokens (characters / 4): what a user
    states of their own papers after extracting a few (``arcticqa extract-text``)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return float(con.execute("SELECT avg(length(text)) / 4.0 FROM document").fetchone()[0] or 0.0)
    finally:
        con.close()


def compare(figures: dict[str, Any], config: Path, *, latency_s: float,
            document: float | None) -> tuple[list[tuple[str, float, float]], Estimate]:
    """(what, predicted, measured) for calls, tokens in, tokens out and wall time, and the estimate."""
    # imported here: the bench's --help stays fast
    from arcticqa.config import load_settings
    from arcticqa.pipeline.estimate import estimate_for_settings

    told: dict[str, float] = {"latency_s": latency_s}
    if document:
        told["document_tokens"] = document
    settings = load_settings(config, estimate=told)
    papers = int(figures["corpus"]["records"])
    est, _ = estimate_for_settings(settings, papers=papers, use_store=False)
    store = figures["store"]
    return [("model calls (first attempts)", est.calls.mid, store["calls"]),
            ("tokens in", est.tokens_in.mid, store["tokens_in"]),
            ("tokens out", est.tokens_out.mid, store["tokens_out"]),
            ("wall time, s", est.wall_s.mid, figures["wall_s"])], est


def main(argv: list[str] | None = None) -> None:
    from bench import bench_scale

    args = list(sys.argv[1:] if argv is None else argv)
    if not any(a in ("--quick", "--scale") or a.startswith("--scale=") for a in args):
        args.append("--quick")
    with tempfile.TemporaryDirectory(prefix="arcticqa-estimate-") as tmp:
        keep = Path(tmp) / "rehearsal"
        out = Path(tmp) / "figures.json"
        bench_scale.main([*args, "--keep", str(keep), "--json", str(out)])
        figures = json.loads(out.read_text(encoding="utf-8"))
        parser_defaults = {"--latency-median": 1.5, "--latency-p99": 8.0}
        for i, a in enumerate(args[:-1]):
            if a in parser_defaults:
                parser_defaults[a] = float(args[i + 1])
        latency = _stand_in_mean_latency(parser_defaults["--latency-median"], parser_defaults["--latency-p99"])
        document = document_tokens(keep / "build" / "arcticqa.db")
        rows, est = compare(figures, keep / "build" / "arcticqa.toml", latency_s=latency, document=document)
    print(f"\n== estimate vs rehearsal ({figures['corpus']['records']:,} papers; the estimate from the config, the "
          f"sample-corpus table and the reference's funnel; mean latency {latency:.2f} s) ==")
    print(f"{'':<30}{'predicted':>14}{'measured':>14}{'ratio':>8}   range predicted")
    ranges = {"model calls (first attempts)": est.calls, "tokens in": est.tokens_in, "tokens out": est.tokens_out,
              "wall time, s": est.wall_s}
    for what, predicted, measured in rows:
        r = ranges[what]
        ratio = predicted / measured if measured else float("nan")
        print(f"{what:<30}{predicted:>14,.0f}{measured:>14,.0f}{ratio:>8.2f}   {r.low:,.0f}–{r.high:,.0f}"
              f"{'' if abs(ratio - 1) <= 0.15 else '   (off by more than 15%)'}")
    print(f"predicted eligible papers {est.eligible.mid:,.1f} (measured {figures['corpus']['eligible']}); "
          f"wall bound by {est.binding}; " + "; ".join(est.assumptions))


if __name__ == "__main__":
    main()
