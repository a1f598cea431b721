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

__all__ = ["render_funnel", "funnel_format", "funnel_svg", "funnel_figure_bytes"]

_MAX_REASONS = 6  # per side box; the rest are summed into one "other rules" line


def _label(name: str) -> str:
    return name.replace("_", " ")


def funnel_figure_bytes(funnel: FunnelCounts, fmt: str) -> bytes:
    """The figure as ``png`` or ``svg`` bytes."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyBboxPatch

    if fmt not in ("png", "svg"):
        raise InputError(f"unsupported figure format {fmt!r}; use .png or .svg")
    steps = funnel.steps
    n = max(len(steps), 1)
    row_h = 1.0
    with matplotlib.rc_context({"svg.hashsalt": "arcticqa-funnel", "svg.fonttype": "path",
                                "font.family": "DejaVu Sans", "font.size": 9}):
        fig = Figure(figsize=(9.0, 0.95 * n + 0.6))
        ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
        ax.set_xlim(0, 10)
        ax.set_ylim(-n * row_h - 0.2, 0.4)
        ax.axis("off")
        for i, step in enumerate(steps):
            y = -i * row_h
            box = FancyBboxPatch((0.3, y - 0.62), 3.6, 0.62, boxstyle="round,pad=0.02",
                                 facecolor="#e8f0fb", edgecolor="#2b5b9c", linewidth=1.0)
            ax.add_patch(box)
            ax.text(2.1, y - 0.31, f"{_label(step.name)}\n{step.count:,} {step.unit}",
                    ha="center", va="center")
            if i + 1 < len(steps):
                ax.annotate("", xy=(2.1, y - row_h), xytext=(2.1, y - 0.64),
                            arrowprops={"arrowstyle": "->", "color": "#2b5b9c"})
            reasons = sorted(step.rejected.items(), key=lambda kv: (-kv[1], kv[0]))
            if not reasons and not step.needs_review:
                continue
            lines = [f"{rid}: {cnt:,}" for rid, cnt in reasons[:_MAX_REASONS]]
            rest = sum(c for _, c in reasons[_MAX_REASONS:])
            if rest:
                lines.append(f"{len(reasons) - _MAX_REASONS} other rules: {rest:,}")
            if step.needs_review:
                lines.append(f"needs review: {step.needs_review:,}")
            total = sum(step.rejected.values())
            header = f"excluded before {_label(step.name)}: {total:,}"
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
