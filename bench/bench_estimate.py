"""``arcticqa estimate`` against the rehearsal: predicted vs measured calls, tokens and wall time.

Runs :mod:`bench.bench_scale` (its ``main``, with the arguments given here, ``--quick`` by default)
into a kept folder, then estimates the same build from its config alone: the per-role table
measured on the sample corpus and the reference's funnel (``--no-store``: the rehearsal's own
``llm_call`` rows are what is being predicted), at the rehearsal's paper count and limits, told
the stand-in's latency (mean and p99), its share of unanswered calls and the rehearsal papers'
mean length (as a user would state theirs). Prints both side by side with the ratio, and per
role; the target is within 15%.

It then estimates it again from a pilot: the same rehearsal at ``--pilot-scale`` (0.01 by
default), run first into a store of its own, whose ``llm_call`` history and funnel the estimate
reads, as a user's pilot build on a sample of their papers.

    .venv/bin/python -m bench.bench_estimate [--pilot-scale 0.01] [bench_scale options, e.g. --quick | --scale 0.1]
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
    """The mean extracted text of the rehearsal's eligible papers (those ``finding_extractor``
    reads), in tokens (characters / 4): what a user states of their own papers after extracting a
    few (``arcticqa extract-text``), and what the table's ``document_tokens`` is of the sample
    corpus's. (The rehearsal's ineligible papers are shorter: their introduction is one sentence.)"""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return float(con.execute(
            "SELECT avg(length(text)) / 4.0 FROM document WHERE paper_id IN (SELECT paper_id FROM stage_run "
            "WHERE stage = 'eligibility' AND subject = '' AND status = 'succeeded')").fetchone()[0] or 0.0)
    finally:
        con.close()


def compare(figures: dict[str, Any], config: Path, *, latency_s: float | None = None,
            latency_p99_s: float | None = None, timeout_share: float | None = None,
            document: float | None = None, pilot: Path | None = None) -> tuple[list[tuple[str, float, float]], Estimate]:
    """(what, predicted, measured) for calls, tokens in, tokens out and wall time, and the estimate.

    Without ``pilot``: the table and the reference's funnel, told ``latency_s``, ``latency_p99_s``,
    ``timeout_share`` and ``document``. With ``pilot`` (a store): that store's history, as after a
    pilot build on a sample of the papers.
    """
    # imported here: the bench's --help stays fast
    from arcticqa.config import load_settings
    from arcticqa.pipeline.estimate import estimate_for_settings

    told: dict[str, float] = {}
    if latency_s:
        told["latency_s"] = latency_s
    if latency_p99_s:
        told["latency_p99_s"] = latency_p99_s
    if timeout_share:
        told["timeout_share"] = timeout_share
    if document:
        told["document_tokens"] = document
    overrides: dict[str, Any] = {"estimate": told}
    if pilot is not None:
        overrides["store"] = {"url": f"sqlite:///{pilot}"}
    settings = load_settings(config, **overrides)
    papers = int(figures["corpus"]["records"])
    est, _ = estimate_for_settings(settings, papers=papers, use_store=pilot is not None)
    store = figures["store"]
    return [("model calls (first attempts)", est.calls.mid, store["calls"]),
            ("tokens in", est.tokens_in.mid, store["tokens_in"]),
            ("tokens out", est.tokens_out.mid, store["tokens_out"]),
            ("wall time, s", est.wall_s.mid, figures["wall_s"])], est


def _print_roles(est: Estimate, by_role: dict[str, dict[str, Any]]) -> None:
    """Per role: calls and tokens a call, predicted beside measured (where a total's gap comes from)."""
    print(f"{'by role':<20}{'calls':>16}{'tokens in / call':>22}{'tokens out / call':>22}   (predicted / measured)")
    for r in est.roles:
        calls = r.calls.mid
        seen = by_role.get(r.role) or {}
        n = int(seen.get("calls") or 0)
        if not calls and not n:
            continue
        per = (r.tokens_in.mid / calls if calls else 0.0, r.tokens_out.mid / calls if calls else 0.0)
        got = ((seen.get("tokens_in") or 0) / n if n else 0.0, (seen.get("tokens_out") or 0) / n if n else 0.0)
        print(f"{r.role:<20}{f'{calls:,.0f} / {n:,}':>16}{f'{per[0]:,.0f} / {got[0]:,.0f}':>22}"
              f"{f'{per[1]:,.0f} / {got[1]:,.0f}':>22}")


def _print(title: str, rows: list[tuple[str, float, float]], est: Estimate, eligible: int) -> None:
    print(f"\n== {title} ==")
    print(f"{'':<30}{'predicted':>14}{'measured':>14}{'ratio':>8}   range predicted")
    ranges = {"model calls (first attempts)": est.calls, "tokens in": est.tokens_in, "tokens out": est.tokens_out,
              "wall time, s": est.wall_s}
    for what, predicted, measured in rows:
        r = ranges[what]
        ratio = predicted / measured if measured else float("nan")
        print(f"{what:<30}{predicted:>14,.0f}{measured:>14,.0f}{ratio:>8.2f}   {r.low:,.0f}–{r.high:,.0f}"
              f"{'' if abs(ratio - 1) <= 0.15 else '   (off by more than 15%)'}")
    print(f"predicted eligible papers {est.eligible.mid:,.1f} (measured {eligible}); wall bound by {est.binding}; "
          + "; ".join(est.assumptions))


def _option(args: list[str], name: str, default: float) -> float:
    for i, a in enumerate(args[:-1]):
        if a == name:
            return float(args[i + 1])
    return default


def main(argv: list[str] | None = None) -> None:
    from bench import bench_scale

    args = list(sys.argv[1:] if argv is None else argv)
    pilot_scale = _option(args, "--pilot-scale", 0.01)
    args = [a for i, a in enumerate(args) if a != "--pilot-scale" and (i == 0 or args[i - 1] != "--pilot-scale")]
    if not any(a in ("--quick", "--scale") or a.startswith("--scale=") for a in args):
        args.append("--quick")
    base = [a for i, a in enumerate(args) if a not in ("--quick", "--scale") and (i == 0 or args[i - 1] != "--scale")]
    with tempfile.TemporaryDirectory(prefix="arcticqa-estimate-") as tmp:
        pilot = Path(tmp) / "pilot"
        print(f"-- the pilot: the same rehearsal at --scale {pilot_scale:g} --", flush=True)
        bench_scale.main([*base, "--scale", str(pilot_scale), "--keep", str(pilot), "--json", str(Path(tmp) / "p.json")])
        keep = Path(tmp) / "rehearsal"
        out = Path(tmp) / "figures.json"
        print("-- the rehearsal the estimates predict --", flush=True)
        bench_scale.main([*args, "--keep", str(keep), "--json", str(out)])
        figures = json.loads(out.read_text(encoding="utf-8"))
        p99 = _option(args, "--latency-p99", 8.0)
        latency = _stand_in_mean_latency(_option(args, "--latency-median", 1.5), p99)
        timeouts = _option(args, "--timeout-rate", 0.01)
        document = document_tokens(keep / "build" / "arcticqa.db")
        config = keep / "build" / "arcticqa.toml"
        rows, est = compare(figures, config, latency_s=latency, latency_p99_s=p99, timeout_share=timeouts,
                            document=document)
        pilot_rows, pilot_est = compare(figures, config, pilot=pilot / "build" / "arcticqa.db")
    records, eligible = figures["corpus"]["records"], figures["corpus"]["eligible"]
    by_role = figures["store"].get("by_role") or {}
    _print(f"estimate before any build vs rehearsal ({records:,} papers; the config, the sample-corpus table and "
           f"the reference's funnel, told the stand-in's latency (mean {latency:.2f} s, p99 {p99:g} s), its "
           f"timeouts ({timeouts:.0%} of calls) and papers of {document:,.0f} tokens)", rows, est, eligible)
    _print_roles(est, by_role)
    _print(f"estimate from the pilot's store vs rehearsal ({records:,} papers; the pilot at --scale {pilot_scale:g}: "
           "its llm_call history and funnel)", pilot_rows, pilot_est, eligible)
    _print_roles(pilot_est, by_role)


if __name__ == "__main__":
    main()
