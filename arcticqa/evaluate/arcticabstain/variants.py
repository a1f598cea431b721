"""Prompt robustness of ArcticAbstain: the variants plan, and every metric per variant per model.

ArcticAbstain's own: the protocol object resolves ``--variants`` through :func:`resolve_variants` and
writes this report for ``evaluate report --variants`` and a variants run
(:meth:`arcticqa.evaluate.arcticabstain.ArcticAbstain.report_variants_from_store`).

A plan is a list of variant ids (:mod:`arcticqa.evaluate.arcticabstain.prompt`): the cross product of
``[evaluate.variants]``'s instructions, label sets and abstain positions, or its explicit ``ids``;
the same table may sit in a TOML file of its own (``[variants]``). The reference variant
``published`` is always part of a plan, so every variant is compared with the paper's prompt.

The report (:func:`build_variant_report`) takes each model's responses per variant and gives:

- every ArcticAbstain metric per variant and model, with a 95% percentile bootstrap interval over
  questions (resampled as the paper tables resample them: the questions the model answered validly);
- its spread across variants per model: min, max, range and the sample standard deviation;
- ranking flips: a pair of models whose order on a metric reverses between two variants. A flip is
  called *beyond noise* when, in both variants, the two models' intervals do not overlap; otherwise
  it is *within noise*. Non-overlap of two 95% intervals is a conservative rule (it implies a
  difference at well under 5%), chosen so a flagged flip is never an artefact of resampling noise.
"""

from __future__ import annotations

import json
import math
import statistics
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from arcticqa.config import VariantPlanSettings
from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.arcticabstain.metrics import OutcomeCounts
from arcticqa.evaluate.arcticabstain.prompt import (
    INSTRUCTIONS,
    REFERENCE_VARIANT,
    parse_variant_id,
    variant_id,
)
from arcticqa.evaluate.arcticabstain.records import ResponseRecord, model_order
from arcticqa.evaluate.reportio import csv_text, f6, md_code, md_text, write_report_folder
from arcticqa.evaluate.stats import bootstrap_multiplicities, percentile_bounds

__all__ = ["METRICS", "plan_ids", "read_plan_file", "resolve_variants", "VariantCell",
           "Spread", "RankingFlip", "VariantReport", "build_variant_report", "render_variants_md",
           "write_variant_report", "variant_summary_lines"]

#: (OutcomeCounts attribute, column title) of every metric the report compares across variants
METRICS: tuple[tuple[str, str], ...] = (
    ("acc", "ACC"), ("abstention_rate", "Abst. rate"), ("f1_abs", "F1_abs"), ("r_acc", "R-Acc"),
    ("present_abstention", "Present abst."), ("absent_abstention", "Absent abst."), ("shift", "Shift"))
#: the metrics of the figure
_FIGURE_METRICS = ("acc", "abstention_rate", "f1_abs", "r_acc")


# -- the plan ------------------------------------------------------------------------------------

def plan_ids(plan: VariantPlanSettings) -> list[str]:
    """The variant ids of a plan, the reference first, each once (a ConfigError names a bad one)."""
    ids = plan.ids or [variant_id(instruction, labels, position, plan.seed) for instruction in plan.instructions
                       for labels in plan.labels for position in plan.abstain_positions]
    for text in ids:
        parse_variant_id(text)
    return list(dict.fromkeys([REFERENCE_VARIANT, *ids]))


def read_plan_file(path: Path) -> VariantPlanSettings:
    """The ``[variants]`` table of a TOML plan file (keys as in ``[evaluate.variants]``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("variants plan file not found", path=str(path)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not a TOML file: {exc}", path=str(path)) from None
    table = data.get("variants")
    if not isinstance(table, dict):
        raise InputError("expected a [variants] table", path=str(path), field="variants")
    try:
        plan = VariantPlanSettings.model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in ("variants", *first["loc"]))
        raise InputError(first["msg"], path=str(path), field=where) from None
    for i, instruction in enumerate(plan.instructions):
        if instruction not in INSTRUCTIONS:
            raise InputError(f"unknown instruction {instruction!r}; known: {', '.join(INSTRUCTIONS)}",
                             path=str(path), field=f"variants.instructions[{i}]")
    for i, text in enumerate(plan.ids):
        try:
            parse_variant_id(text)
        except ConfigError as exc:
            raise InputError(str(exc), path=str(path), field=f"variants.ids[{i}]") from None
    return plan


def resolve_variants(value: str, plan: VariantPlanSettings) -> list[str]:
    """``--variants``: ``plan`` (the configured plan), a ``.toml`` plan file, or ids separated by commas."""
    if value == "plan":
        return plan_ids(plan)
    if value.endswith(".toml"):
        return plan_ids(read_plan_file(Path(value)))
    ids = [part.strip() for part in value.split(",") if part.strip()]
    if not ids:
        raise ConfigError("--variants: give plan, a plan file (.toml) or variant ids separated by commas")
    for text in ids:
        parse_variant_id(text)
    return list(dict.fromkeys(ids))


# -- the report ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class VariantCell:
    """One model's responses to one variant: outcome counts and each metric's bootstrap interval."""

    model: str
    variant: str
    counts: OutcomeCounts
    questions: int
    ci: dict[str, tuple[float, float]]

    def value(self, metric: str) -> float:
        return float(getattr(self.counts, metric))

    def exact(self, metric: str) -> Fraction:
        return self.counts.exact(metric)


@dataclass(frozen=True)
class Spread:
    """A metric's spread across the variants one model answered."""

    model: str
    metric: str
    variants: int
    minimum: float
    maximum: float
    sd: float | None  # sample SD; None with a single variant
    min_variant: str
    max_variant: str

    @property
    def range(self) -> float:
        return self.maximum - self.minimum


@dataclass(frozen=True)
class RankingFlip:
    """``higher`` beats ``lower`` on ``metric`` under ``first`` and loses to it under ``second``."""

    metric: str
    higher: str
    lower: str
    first: str
    second: str
    higher_first: float
    lower_first: float
    higher_second: float
    lower_second: float
    beyond_noise: bool


@dataclass
class VariantReport:
    source: str
    variants: list[str]
    models: list[str]
    labels: dict[str, str]
    cells: dict[tuple[str, str], VariantCell]
    spreads: list[Spread]
    flips: list[RankingFlip]
    #: (metric, model, model, variant) of every pair with exactly equal values under a variant
    ties: list[tuple[str, str, str, str]]
    resamples: int
    seed: int
    level: float
    responses: int
    missing: list[tuple[str, str]] = field(default_factory=list)

    def cell(self, model: str, variant: str) -> VariantCell | None:
        return self.cells.get((model, variant))


def _divide(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    # a zero denominator gives 0.0, as metrics.ratio does
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _resampled_metrics(summed: NDArray[np.float64]) -> dict[str, NDArray[np.float64]]:
    """Every metric of :data:`METRICS` for each resample (rows of N0..N5 counts)."""
    n1, n2, n3, n4, n5 = (summed[:, i] for i in range(1, 6))
    valid = n1 + n2 + n3 + n4 + n5
    precision, recall = _divide(n5, n3 + n5), _divide(n5, n2 + n4 + n5)
    present, absent = _divide(n3, n1 + n2 + n3), _divide(n5, n4 + n5)
    return {"acc": _divide(n1 + n5, valid), "abstention_rate": _divide(n3 + n5, valid),
            "f1_abs": _divide(2 * precision * recall, precision + recall), "r_acc": _divide(n1, n1 + n2 + n4),
            "present_abstention": present, "absent_abstention": absent, "shift": absent - present}


def _cell(model: str, variant: str, records: Sequence[ResponseRecord], *, resamples: int, seed: int,
          level: float) -> VariantCell:
    question_ids = sorted({r.item_id for r in records})
    index = {q: i for i, q in enumerate(question_ids)}
    per_question = np.zeros((len(question_ids), 6))
    for record in records:
        per_question[index[record.item_id], int(record.outcome[1])] += 1
    # as the paper tables: resample the questions this model answered validly at least once
    answered = per_question[per_question[:, 1:].sum(axis=1) > 0]
    ci: dict[str, tuple[float, float]] = {}
    if answered.shape[0]:
        summed = bootstrap_multiplicities(answered.shape[0], resamples, seed) @ answered
        ci = {name: percentile_bounds(values, level) for name, values in _resampled_metrics(summed).items()}
    return VariantCell(model=model, variant=variant, counts=OutcomeCounts.of(r.outcome for r in records),
                       questions=len(question_ids), ci=ci)


def _disjoint(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    return a is not None and b is not None and (a[1] < b[0] or b[1] < a[0])


def _ties(cells: dict[tuple[str, str], VariantCell], models: Sequence[str],
          variants: Sequence[str]) -> list[tuple[str, str, str, str]]:
    return [(metric, a, b, u) for metric, _ in METRICS for a, b in combinations(models, 2) for u in variants
            if (au := cells.get((a, u))) and (bu := cells.get((b, u))) and au.exact(metric) == bu.exact(metric)]


def _flips(cells: dict[tuple[str, str], VariantCell], models: Sequence[str],
           variants: Sequence[str]) -> list[RankingFlip]:
    found = []
    for metric, _ in METRICS:
        for a, b in combinations(models, 2):
            for u, v in combinations(variants, 2):
                au, bu, av, bv = (cells.get(key) for key in ((a, u), (b, u), (a, v), (b, v)))
                if au is None or bu is None or av is None or bv is None:
                    continue
                # exact fractions of counts: 1/6 reached two ways is a tie, not a float-noise order
                before, after = au.exact(metric) - bu.exact(metric), av.exact(metric) - bv.exact(metric)
                if before * after >= 0:  # same order, or a tie on either side: nothing reversed
                    continue
                higher, lower = (au, bu) if before > 0 else (bu, au)
                higher_v, lower_v = (av, bv) if before > 0 else (bv, av)
                beyond = (_disjoint(higher.ci.get(metric), lower.ci.get(metric))
                          and _disjoint(higher_v.ci.get(metric), lower_v.ci.get(metric)))
                found.append(RankingFlip(metric=metric, higher=higher.model, lower=lower.model, first=u, second=v,
                                         higher_first=higher.value(metric), lower_first=lower.value(metric),
                                         higher_second=higher_v.value(metric), lower_second=lower_v.value(metric),
                                         beyond_noise=beyond))
    return found


def _spreads(cells: dict[tuple[str, str], VariantCell], models: Sequence[str],
             variants: Sequence[str]) -> list[Spread]:
    found = []
    for model in models:
        answered = [cells[(model, v)] for v in variants if (model, v) in cells]
        for metric, _ in METRICS:
            values = [c.value(metric) for c in answered]
            low = min(range(len(values)), key=values.__getitem__)
            high = max(range(len(values)), key=values.__getitem__)
            found.append(Spread(model=model, metric=metric, variants=len(values), minimum=values[low],
                                maximum=values[high], sd=statistics.stdev(values) if len(values) > 1 else None,
                                min_variant=answered[low].variant, max_variant=answered[high].variant))
    return found


def build_variant_report(records: Sequence[ResponseRecord], *, source: str, resamples: int = 10_000, seed: int = 7,
                         level: float = 0.95, models: Sequence[str] | None = None) -> VariantReport:
    """The robustness report of ``records`` (of every variant): cells, spreads and ranking flips."""
    if not records:
        raise ConfigError(f"{source}: no ArcticAbstain responses to compare across variants")
    order, labels = model_order(records)
    if models:
        order = [m for m in models if m in labels]
    variants = list(dict.fromkeys(r.variant for r in records))
    if REFERENCE_VARIANT in variants:  # the reference leads every table
        variants.remove(REFERENCE_VARIANT)
        variants.insert(0, REFERENCE_VARIANT)
    grouped: dict[tuple[str, str], list[ResponseRecord]] = {}
    for record in records:
        if record.model in order:
            grouped.setdefault((record.model, record.variant), []).append(record)
    cells = {key: _cell(*key, rows, resamples=resamples, seed=seed, level=level) for key, rows in grouped.items()}
    missing = [(m, v) for m in order for v in variants if (m, v) not in cells]
    return VariantReport(source=source, variants=variants, models=order, labels=labels, cells=cells,
                         spreads=_spreads(cells, order, variants), flips=_flips(cells, order, variants),
                         ties=_ties(cells, order, variants),
                         resamples=resamples, seed=seed, level=level,
                         responses=sum(len(rows) for rows in grouped.values()), missing=missing)


def _described(variant: str) -> tuple[str, str, str]:
    try:
        instruction, labels, position, seed = parse_variant_id(variant)
    except ConfigError:  # recorded by another version: shown, not interpreted
        return ("?", "?", "?")
    return (instruction, labels, f"seeded (seed {seed})" if position == "seeded" else position)


def _fmt(value: float, metric: str) -> str:
    return f"{value:+.3f}" if metric == "shift" else f"{value:.3f}"


def render_variants_md(report: VariantReport) -> str:
    """VARIANTS.md: the variants, one table per metric (with its spread), and the ranking flips."""
    titles = dict(METRICS)
    names = [md_text(report.labels.get(m, m)) for m in report.models]
    lines = [
        "# Prompt robustness (variants)", "",
        f"Generated by `arcticqa evaluate report --variants` from {md_code(report.source)}. Do not edit by hand.",
        "",
        f"Models: {len(report.models)}. Variants: {len(report.variants)} (reference: `{REFERENCE_VARIANT}`, the "
        f"published prompt, labels and option order). Responses: {report.responses}.",
        "",
        "## Variants", "",
        "| Variant | Instruction | Labels | Abstain option |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {md_code(v)} | " + " | ".join(_described(v)) + " |" for v in report.variants]
    if report.missing:
        lines += ["", "Not recorded: " + "; ".join(f"{md_text(m)} × {md_code(v)}" for m, v in report.missing) + "."]
    spreads = {(s.model, s.metric): s for s in report.spreads}
    for metric, title in METRICS:
        lines += ["", f"## {title}", "",
                  "| Model | " + " | ".join(md_code(v) for v in report.variants) + " | Min | Max | Range | SD |",
                  "| --- | " + " | ".join("---:" for _ in report.variants) + " | ---: | ---: | ---: | ---: |"]
        for model, name in zip(report.models, names, strict=True):
            values = [c.value(metric) if (c := report.cell(model, v)) else None for v in report.variants]
            s = spreads[(model, metric)]
            sd = "" if s.sd is None else f"{s.sd:.3f}"
            lines.append(f"| {name} | " + " | ".join("" if x is None else _fmt(x, metric) for x in values)
                         + f" | {_fmt(s.minimum, metric)} | {_fmt(s.maximum, metric)} | {s.range:.3f} | {sd} |")
    lines += ["", "## Ranking flips", "",
              "A pair of models whose order on a metric is strictly reversed between two variants: A above B "
              "under one, B above A under the other, the values compared as exact fractions of outcome counts. "
              f"A tie under either variant is not a flip ({len(report.ties)} model pairs tie on a metric under a "
              "variant; `variants.json` lists them). *Beyond noise*: in both "
              f"variants the two models' {100 * report.level:.0f}% bootstrap intervals (questions resampled, "
              f"{report.resamples} resamples, seed {report.seed}) do not overlap; otherwise *within noise*.", ""]
    if not report.flips:
        lines.append("None.")
    else:
        lines += ["| Metric | Model ahead in first | Model behind in first | First variant | Second variant | "
                  "First (ahead / behind) | Second (ahead / behind) | Verdict |",
                  "| --- | --- | --- | --- | --- | ---: | ---: | --- |"]
        for f in report.flips:
            lines.append(
                f"| {titles[f.metric]} | {md_text(report.labels.get(f.higher, f.higher))} | "
                f"{md_text(report.labels.get(f.lower, f.lower))} | {md_code(f.first)} | {md_code(f.second)} | "
                f"{_fmt(f.higher_first, f.metric)} / {_fmt(f.lower_first, f.metric)} | "
                f"{_fmt(f.higher_second, f.metric)} / {_fmt(f.lower_second, f.metric)} | "
                f"{'beyond noise' if f.beyond_noise else 'within noise'} |")
    return "\n".join(lines) + "\n"


def _metrics_csv(report: VariantReport) -> str:
    header = ["model_id", "model", "variant", "questions", "responses", "N0", "N1", "N2", "N3", "N4", "N5"]
    header += [f"{m}{suffix}" for m, _ in METRICS for suffix in ("", "_ci_low", "_ci_high")]
    rows = []
    for model in report.models:
        for variant in report.variants:
            cell = report.cell(model, variant)
            if cell is None:
                continue
            values: list[str] = []
            for metric, _ in METRICS:
                low, high = cell.ci.get(metric, (math.nan, math.nan))
                values += [f6(cell.value(metric)), f6(low), f6(high)]
            rows.append([model, report.labels.get(model, model), variant, cell.questions, cell.counts.responses,
                         *cell.counts.counts, *values])
    return csv_text(header, rows)


def _spread_csv(report: VariantReport) -> str:
    header = ["model_id", "model", "metric", "variants", "min", "max", "range", "sd", "min_variant", "max_variant"]
    return csv_text(header, [[s.model, report.labels.get(s.model, s.model), s.metric, s.variants, f6(s.minimum),
                              f6(s.maximum), f6(s.range), f6(s.sd), s.min_variant, s.max_variant]
                             for s in report.spreads])


def _flips_csv(report: VariantReport) -> str:
    header = ["metric", "model_ahead_first", "model_behind_first", "first_variant", "second_variant",
              "ahead_first", "behind_first", "ahead_second", "behind_second", "beyond_noise"]
    return csv_text(header, [[f.metric, f.higher, f.lower, f.first, f.second, f6(f.higher_first),
                              f6(f.lower_first), f6(f.higher_second), f6(f.lower_second),
                              "true" if f.beyond_noise else "false"] for f in report.flips])


def _summary_json(report: VariantReport) -> str:
    data: dict[str, Any] = {
        "source": report.source, "reference_variant": REFERENCE_VARIANT, "variants": report.variants,
        "models": report.models, "responses": report.responses,
        "bootstrap": {"resamples": report.resamples, "seed": report.seed, "level": report.level, "unit": "question"},
        "flip_rule": "order strictly reversed between two variants, values compared as exact fractions of "
                     "outcome counts (a tie under either variant is no flip); beyond noise when the two models' "
                     "intervals are disjoint in both variants",
        "ranking_flips": len(report.flips), "ranking_flips_beyond_noise": sum(f.beyond_noise for f in report.flips),
        "ties": [{"metric": m, "models": [a, b], "variant": v} for m, a, b, v in report.ties],
        "missing": [list(pair) for pair in report.missing],
    }
    return json.dumps(data, indent=2) + "\n"


def _figure(report: VariantReport, png: Path, svg: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    titles = dict(METRICS)
    fig, axes = plt.subplots(1, len(_FIGURE_METRICS), figsize=(3.0 * len(_FIGURE_METRICS),
                                                               2.4 + 0.12 * len(report.variants)), sharey=True)
    xs = np.arange(len(report.variants))
    width = 0.6 / max(1, len(report.models))
    for ax, metric in zip(axes, _FIGURE_METRICS, strict=True):
        for i, model in enumerate(report.models):
            points = [(x, c) for x, v in zip(xs, report.variants, strict=True) if (c := report.cell(model, v))]
            if not points:
                continue
            x = np.array([p[0] for p in points]) + (i - (len(report.models) - 1) / 2) * width
            y = np.array([p[1].value(metric) for p in points])
            bounds = [p[1].ci.get(metric, (p[1].value(metric),) * 2) for p in points]
            err = np.array([[v - b[0] for v, b in zip(y, bounds, strict=True)],
                            [b[1] - v for v, b in zip(y, bounds, strict=True)]]).clip(min=0)
            ax.errorbar(x, y, yerr=err, fmt="o-", markersize=4, linewidth=1, capsize=2,
                        label=report.labels.get(model, model))
        ax.set_title(titles[metric], fontsize=10)
        ax.set_xticks(xs, report.variants, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(axis="y", color="0.9")
    axes[0].set_ylabel("value (95% CI)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(4, max(1, len(names))), fontsize=8, frameon=False)
    rows = -(-len(names) // 4)
    fig.tight_layout(rect=(0, 0.05 * rows + 0.02, 1, 1))
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def write_variant_report(report: VariantReport, out_dir: Path | str, *, figure: bool = True,
                         overwrite: bool = True) -> Path:
    """Write VARIANTS.md, the CSVs, variants.json and the figure into ``out_dir`` (atomically)."""
    texts = {"VARIANTS.md": render_variants_md(report), "variant-metrics.csv": _metrics_csv(report),
             "variant-spread.csv": _spread_csv(report), "ranking-flips.csv": _flips_csv(report),
             "variants.json": _summary_json(report)}
    figures: list[Callable[[Path], None]] = []
    if figure and report.cells:
        figures.append(lambda d: _figure(report, d / "variants.png", d / "variants.svg"))
    return write_report_folder(out_dir, texts, figures, overwrite=overwrite)


def variant_summary_lines(report: VariantReport) -> list[str]:
    """The console lines of a variants report: each model's abstention-rate spread, and the flips."""
    lines = [f"variants {len(report.variants)}, models {len(report.models)}, responses {report.responses}"]
    for s in report.spreads:
        if s.metric in ("acc", "abstention_rate"):
            lines.append(f"  {report.labels.get(s.model, s.model)} {s.metric}: {s.minimum:.3f}-{s.maximum:.3f} "
                         f"(range {s.range:.3f}) across {s.variants} variant(s)")
    beyond = sum(f.beyond_noise for f in report.flips)
    lines.append(f"ranking flips: {len(report.flips)} ({beyond} beyond noise)")
    return lines
