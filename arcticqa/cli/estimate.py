"""``arcticqa estimate``: what a build will cost and take, before any model call (docs/estimate.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from arcticqa.cli.app import ConfigOption, OverwriteOption, app, console, handle_errors, load_cli_settings

if TYPE_CHECKING:
    from arcticqa.pipeline.estimate import Estimate, Range

__all__ = ["render_estimate", "render_short"]


def _n(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.1f}" if value >= 10 else f"{value:,.2f}"


def _r(r: Range, unit: str = "") -> str:
    if abs(r.high - r.low) < 1e-9:
        return f"{unit}{_n(r.mid)}"
    return f"{unit}{_n(r.mid)} ({unit}{_n(r.low)}–{unit}{_n(r.high)})"


def _t(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _rt(r: Range) -> str:
    return _t(r.mid) if abs(r.high - r.low) < 1e-6 else f"{_t(r.mid)} ({_t(r.low)}–{_t(r.high)})"


def render_estimate(est: Estimate, why: str) -> list[str]:
    """The estimate as lines a person reads: funnel, per role, per model's limits, totals."""
    lines = [f"estimate for {est.papers:,} discovered papers ({why}); ranges are low–high",
             f"  full texts {_r(est.fulltext)}, eligible {_r(est.eligible)}",
             "  role               model          calls                 tokens in                  "
             "tokens out                USD (no batch)        source"]
    for r in est.roles:
        lines.append(f"  {r.role:<18} {r.model:<14} {_r(r.calls):<21} {_r(r.tokens_in):<26} "
                     f"{_r(r.tokens_out):<25} {_r(r.cost_usd, '$'):<21} {r.source}")
    lines.append(f"  total: {_r(est.calls)} calls, {_r(est.tokens_in)} tokens in, {_r(est.tokens_out)} out")
    lines.append(f"  cost: {_r(est.cost_usd, '$')} as configured; {_r(est.cost_batch_usd, '$')} with the Batch API "
                 "(every OpenAI role at its batch_price_factor)")
    for m in est.models:
        parts = [f"calls × latency ÷ {m.concurrency} slots + one paper's chain {_rt(m.by_latency)}"]
        if m.by_tokens is not None:
            parts.insert(0, f"tokens ÷ {m.tpm:,.0f} TPM {_rt(m.by_tokens)}")
        if m.by_requests is not None:
            parts.insert(0, f"requests ÷ {m.rpm:,.0f} RPM {_rt(m.by_requests)}")
        lines.append(f"  model {m.model}: " + "; ".join(parts))
    if est.s2_pages:
        rate = f"{est.s2_rate:g}/s" if est.s2_rate else "no rate"
        lines.append(f"  discovery: {est.s2_pages:,} Semantic Scholar pages at {rate}: {_rt(est.discovery_s)}")
    if est.local_s.mid:
        lines.append(f"  local stages before construct (the store's pace): {_rt(est.local_s)}")
    lines.append(f"  wall time: {_rt(est.wall_s)} (the stages start on each discovery page; bound by {est.binding})")
    lines += [f"  assuming {a}" for a in est.assumptions]
    return lines


def render_short(est: Estimate, why: str) -> str:
    """One line for ``arcticqa build``."""
    return (f"estimate: {est.papers:,} papers ({why}) → {_r(est.calls)} model calls, "
            f"{_r(est.tokens_in + est.tokens_out)} tokens, {_r(est.cost_usd, '$')} "
            f"({_r(est.cost_batch_usd, '$')} with the Batch API), wall {_rt(est.wall_s)} "
            f"(`arcticqa estimate` for the detail)")


@app.command()
@handle_errors
def estimate(config: ConfigOption = None,
             papers: Annotated[int | None, typer.Option("--papers", min=1, help="Discovered papers to estimate for "
                                                        "(default: the store's, a snapshot source's records, "
                                                        "else the reference's 84,829).")] = None,
             as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
             no_store: Annotated[bool, typer.Option("--no-store", help="Ignore the store's history: the "
                                                    "per-role table and the reference's funnel only.")] = False,
             profile_out: Annotated[Path | None, typer.Option(
                 "--profile-out", help="Write the per-role table measured from this config's store to FILE "
                 "(what estimate.profile reads) and exit.")] = None,
             overwrite: OverwriteOption = False) -> None:
    """Predict a build's model calls, tokens, cost (with and without the Batch API) and wall time."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.outputs import write_file
    from arcticqa.pipeline.estimate import estimate_for_settings, measure_profile
    from arcticqa.store.store import open_existing_store

    settings = load_cli_settings(config)
    if profile_out is not None:
        store = open_existing_store(settings)
        try:
            profile = measure_profile(store, settings, command=f"arcticqa estimate -c {settings.config_path} "
                                                               f"--profile-out {profile_out}")
        finally:
            store.close()
        write_file(profile_out, json.dumps(profile.to_json(), indent=2, sort_keys=True) + "\n", overwrite=overwrite)
        console.print(f"wrote {profile_out}", highlight=False)
        return
    est, why = estimate_for_settings(settings, papers=papers, use_store=not no_store)
    if as_json:
        print(json.dumps({**est.to_json(), "papers_from": why}, sort_keys=True))
        return
    for line in render_estimate(est, why):
        console.print(line, highlight=False, soft_wrap=True)
