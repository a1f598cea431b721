"""The PRISMA-style flow figure of a build: one box per funnel step, rejections beside it.

Drawn with matplotlib's object API (no pyplot state, Agg canvas), so it works headless and in
threads. SVG output is byte-stable (fixed hash salt, no date) because the dataset card and the
HTML report embed it and exports must be deterministic.
"""

from __future__ import annotations

import io
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.outputs import write_file
from arcticqa.release.models import FunnelCounts

__all__ = ["render_funnel", "funnel_format", "funnel_svg", "funnel_figure_bytes", "STEP_LABELS"]

_MAX_REASONS = 6  # per side box; the rest are summed into one "other rules" line


#: plain words for the boxes (a step this code does not know shows its name)
STEP_LABELS: dict[str, str] = {
    "discovered": "discovered",
    "prefiltered": "passed the metadata prefilter",
    "full_text": "full text extracted",
    "eligible": "eligible (study site in the Arctic)",
    "with_items": "gave at least one accepted item",
    "candidates": "candidate items (one per finding or revision)",
    "questions": "question written",
    "reconstructed": "reconstructed blind",
    "verified": "verified against the evidence",
    "distractors": "distractors written",
    "options_checked": "options checked",
    "accepted": "accepted",
}
_UNIT_HEADINGS = {"papers": "Papers", "candidates": "Candidate items of the papers that reached construction"}


def _label(name: str) -> str:
    return STEP_LABELS.get(name, name.replace("_", " "))


def funnel_figure_bytes(funnel: FunnelCounts, fmt: str) -> bytes:
    """The figure as ``png`` or ``svg`` bytes."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    if fmt not in ("png", "svg"):
        raise InputError(f"unsupported figure format {fmt!r}; use .png or .svg")
    steps = funnel.steps
    # a heading row above each run of boxes with the same unit; arrows join boxes of one unit only
    starts = {i for i, st in enumerate(steps) if i == 0 or steps[i - 1].unit != st.unit}
    n = max(len(steps) + len(starts), 1)
    row_h = 1.0
    with matplotlib.rc_context({"svg.hashsalt": "arcticqa-funnel", "svg.fonttype": "path",
                                "font.family": "DejaVu Sans", "font.size": 9}):
        fig = Figure(figsize=(9.0, 0.95 * n + 0.6))
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        ax.set_xlim(0, 10)
        ax.set_ylim(-n * row_h - 0.2, 0.4)
        ax.axis("off")
        row = 0
        for i, step in enumerate(steps):
            if i in starts:
                ax.text(0.3, -row * row_h - 0.35, _UNIT_HEADINGS.get(step.unit, step.unit), ha="left",
                        va="center", fontsize=10, fontweight="bold")
                row += 1
            y = -row * row_h
            row += 1
            box = FancyBboxPatch((0.3, y - 0.62), 3.6, 0.62, boxstyle="round,pad=0.02",
                                 facecolor="#e8f0fb", edgecolor="#2b5b9c", linewidth=1.0)
            ax.add_patch(box)
            ax.text(2.1, y - 0.31, f"{_label(step.name)}\n{step.count:,} {step.unit}",
                    ha="center", va="center")
            if i + 1 < len(steps) and i + 1 not in starts:
                ax.annotate("", xy=(2.1, y - row_h), xytext=(2.1, y - 0.64),
                            arrowprops={"arrowstyle": "->", "color": "#2b5b9c"})
            reasons = sorted(step.rejected.items(), key=lambda kv: (-kv[1], kv[0]))
            if not reasons and not step.needs_review:
                continue
            lines = [f"{rid.replace('_', ' ') if '.' not in rid else rid}: {cnt:,}"
                     for rid, cnt in reasons[:_MAX_REASONS]]
            rest = sum(c for _, c in reasons[_MAX_REASONS:])
            if rest:
                lines.append(f"{len(reasons) - _MAX_REASONS} other rules: {rest:,}")
            if step.needs_review:
                lines.append(f"held for review: {step.needs_review:,}")
            total = sum(step.rejected.values()) + step.needs_review
            before = f" of {steps[i - 1].count:,}" if i not in starts else ""
            header = f"left out here: {total:,}{before} {step.unit}"
            ax.text(4.6, y - 0.31 + 0.5 * row_h, "\n".join([header, *lines]), ha="left",
                    va="center", fontsize=7.5,
                    bbox={"boxstyle": "round,pad=0.3", "facecolor": "#fdf0ee",
                          "edgecolor": "#a33b2b", "linewidth": 0.8})
            ax.annotate("", xy=(4.55, y - 0.31 + 0.5 * row_h), xytext=(2.1, y - 0.31 + 0.5 * row_h),
                        arrowprops={"arrowstyle": "->", "color": "#a33b2b", "linewidth": 0.8})
        buf = io.BytesIO()
        metadata: dict[str, str | None] = {"Date": None} if fmt == "svg" else {"Software": None}
        fig.savefig(buf, format=fmt, metadata=metadata, dpi=150)
    return buf.getvalue()


def funnel_svg(funnel: FunnelCounts) -> str:
    """The SVG element alone (no XML prolog or doctype), for inlining into HTML."""
    svg = funnel_figure_bytes(funnel, "svg").decode("utf-8")
    return svg[svg.index("<svg"):]


def funnel_format(out: Path) -> str:
    """``png`` or ``svg`` from the output's suffix; anything else is an :class:`InputError`."""
    fmt = Path(out).suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise InputError("output must end in .png or .svg", path=str(out))
    return fmt


def render_funnel(funnel: FunnelCounts, out: Path, *, overwrite: bool = True) -> Path:
    """Write the figure to ``out`` (PNG or SVG by suffix) through :func:`arcticqa.outputs.write_file`."""
    return write_file(out, funnel_figure_bytes(funnel, funnel_format(out)), overwrite=overwrite)
