"""The ArcticAbstain report: the paper's two tables, their CSV inputs, summary.json and Figure 1.

:func:`build_report` turns scored responses into numbers (the published procedure, see
:mod:`arcticqa.evaluate.stats`); :func:`write_report` writes them in the exact formats of the
published ``results/`` folder so the two can be diffed, plus ``checks.json`` (strict vs lenient
parser sensitivity and, for published files, re-derivation disagreements) and the figure.
Files are written to a temporary folder beside ``out_dir`` and renamed into place, so a failed
run never leaves a half-written report.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from arcticqa.evaluate.arcticabstain.metrics import METRIC_NAMES, OutcomeCounts, median_of
from arcticqa.evaluate.arcticabstain.records import Disagreement, ResponseRecord, model_order
from arcticqa.evaluate.coverage import (
    COVERAGE_FILES,
    CoverageAnalysis,
    analyse_coverage,
    coverage_figure,
    coverage_files,
    from_outcome_counts,
)
from arcticqa.evaluate.reportio import csv_text, md_code, md_text, write_report_folder
from arcticqa.evaluate.stats import (
    SignFlipResult,
    bootstrap_multiplicities,
    holm,
    percentile_bounds,
    sign_flip_test,
)

__all__ = [
    "StatsSettings",
    "ModelResult",
    "Report",
    "ReportPaths",
    "build_report",
    "render_tables",
    "write_report",
    "coverage_of",
    "figure_1",
    "REPORT_FILES",
]

REPORT_FILES = ("TABLES.md", "condition-shifts.csv", "metrics.csv", "trial-metrics.csv",
                "outcome-counts.csv", "summary.json", "checks.json", "figure-1.png", "figure-1.svg",
                *COVERAGE_FILES)

_NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven",
                 8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}


def _words(n: int) -> str:
    return _NUMBER_WORDS.get(n, str(n))


@dataclass(frozen=True)
class StatsSettings:
    """The published analysis: 10,000 bootstrap resamples, 20,000 sign-flip draws, seed 7."""

    resamples: int = 10_000
    draws: int = 20_000
    seed: int = 7
    level: float = 0.95


@dataclass
class ModelResult:
    model: str
    label: str
    counts: OutcomeCounts
    lenient_counts: OutcomeCounts
    trial_counts: dict[int, OutcomeCounts]
    present_ci: tuple[float, float]
    absent_ci: tuple[float, float]
    shift_ci: tuple[float, float]
    accuracy_ci: tuple[float, float]
    test: SignFlipResult
    holm_p: float = float("nan")


@dataclass
class Report:
    source: str
    questions: int
    responses: int
    valid: int
    settings: StatsSettings
    models: list[ModelResult]
    pooled: SignFlipResult
    trials: int
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def invalid(self) -> int:
        return self.responses - self.valid

    @property
    def mean_of_model_shifts(self) -> float:
        # The published value is the mean of the six-decimal shifts printed in the CSV.
        shifts = [round(m.counts.shift, 6) for m in self.models]
        return math.fsum(shifts) / len(shifts) if shifts else 0.0


@dataclass(frozen=True)
class ReportPaths:
    """Where :func:`write_report` put each file."""

    out_dir: Path
    tables: Path
    condition_shifts: Path
    metrics: Path
    trial_metrics: Path
    outcome_counts: Path
    summary: Path
    checks: Path
    figure_png: Path | None
    figure_svg: Path | None


def _question_counts(records: Sequence[ResponseRecord], index: dict[str, int]) -> NDArray[np.float64]:
    counts = np.zeros((len(index), 6), dtype=np.float64)
    for record in records:
        counts[index[record.item_id], int(record.outcome[1])] += 1
    return counts


def _rate(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def _per_question_shifts(counts: NDArray[np.float64]) -> dict[int, float]:
    """Share of N5 among valid absent - share of N3 among valid present, per question having both."""
    shifts: dict[int, float] = {}
    for q in range(counts.shape[0]):
        present = counts[q, 1] + counts[q, 2] + counts[q, 3]
        absent = counts[q, 4] + counts[q, 5]
        if present and absent:
            shifts[q] = float(counts[q, 5]) / float(absent) - float(counts[q, 3]) / float(present)
    return shifts


def build_report(records: Sequence[ResponseRecord], *, settings: StatsSettings | None = None,
                 source: str = "", models: Sequence[str] | None = None,
                 labels: dict[str, str] | None = None,
                 disagreements: Sequence[Disagreement] = ()) -> Report:
    """Compute every number of the report from scored responses (strict outcomes)."""
    settings = settings or StatsSettings()
    found_models, found_labels = model_order(records)
    order = list(models) if models is not None else found_models
    names = found_labels | (labels or {})
    question_ids = sorted({r.item_id for r in records})
    index = {item_id: i for i, item_id in enumerate(question_ids)}
    n = len(question_ids)
    by_model: dict[str, list[ResponseRecord]] = {m: [] for m in order}
    for record in records:
        if record.model in by_model:
            by_model[record.model].append(record)

    results: list[ModelResult] = []
    question_shifts: list[dict[int, float]] = []
    for model in order:
        rows = by_model[model]
        per_question = _question_counts(rows, index)
        # The published bootstrap resamples only the questions this model answered validly at
        # least once (in id order), so a model with a wholly-invalid question draws from n - 1.
        answered = per_question[per_question[:, 1:].sum(axis=1) > 0]
        multiplicities = bootstrap_multiplicities(answered.shape[0], settings.resamples, settings.seed)
        summed = multiplicities @ answered
        present = _rate(summed[:, 3], summed[:, 1] + summed[:, 2] + summed[:, 3])
        absent = _rate(summed[:, 5], summed[:, 4] + summed[:, 5])
        accuracy = _rate(summed[:, 1], summed[:, 1] + summed[:, 2])
        shifts = _per_question_shifts(per_question)
        question_shifts.append(shifts)
        trial_counts: dict[int, OutcomeCounts] = {}
        for record in rows:
            trial_counts.setdefault(record.trial, OutcomeCounts()).add(record.outcome)
        results.append(ModelResult(
            model=model, label=names.get(model, model),
            counts=OutcomeCounts.of(r.outcome for r in rows),
            lenient_counts=OutcomeCounts.of(r.lenient_outcome for r in rows),
            trial_counts=dict(sorted(trial_counts.items())),
            present_ci=percentile_bounds(present, settings.level),
            absent_ci=percentile_bounds(absent, settings.level),
            shift_ci=percentile_bounds(absent - present, settings.level),
            accuracy_ci=percentile_bounds(accuracy, settings.level),
            test=sign_flip_test([shifts[q] for q in sorted(shifts)], draws=settings.draws, seed=settings.seed),
        ))
    for result, adjusted in zip(results, holm([r.test.p_value for r in results]), strict=True):
        result.holm_p = adjusted

    pooled_differences = []
    for q in range(n):
        values = [s[q] for s in question_shifts if q in s]
        if values:
            pooled_differences.append(math.fsum(values) / len(values))
    pooled = sign_flip_test(pooled_differences, draws=settings.draws, seed=settings.seed)
    kept = [r for r in records if r.model in by_model]
    trials = len({r.trial for r in kept})
    return Report(source=source, questions=n, responses=len(kept),
                  valid=sum(1 for r in kept if r.outcome != "N0"), settings=settings, models=results,
                  pooled=pooled, trials=trials, disagreements=list(disagreements))


def render_tables(report: Report, *, generator: str = "`arcticqa evaluate report`",
                  source_name: str = "the responses") -> str:
    """TABLES.md in the published columns, order and number formats."""
    m, t = len(report.models), _words(report.trials)
    lines = [
        "# Paper tables, reproduced",
        "",
        f"Generated by {generator} from {source_name}. Do not edit by hand.",
        "",
        f"Questions: {report.questions}. Responses: {report.responses} ({report.valid} valid, "
        f"{report.invalid} invalid).",
        "",
        "## Condition-specific abstention and the paired shift",
        "",
        f"Rates pool the {t} trials. Shift = answer-absent minus answer-present, in percentage points.",
        "",
        "| Model | Present abst. | Absent abst. | Shift [95% CI] (pp) | Permutation p | Holm p |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report.models:
        c = r.counts
        lines.append(
            f"| {md_text(r.label)} | {100 * c.present_abstention:.1f}% | {100 * c.absent_abstention:.1f}% | "
            f"{100 * c.shift:+.2f} [{100 * r.shift_ci[0]:.1f}, {100 * r.shift_ci[1]:.1f}] | "
            f"{r.test.p_value:.5f} | {r.holm_p:.4f} |")
    p = report.pooled
    model_word = "model" if m == 1 else "models"
    lines += [
        "",
        f"Mean per-question shift over the {_words(m)} {model_word}: {100 * p.mean:+.2f} pp (one sign-flip "
        f"test with the question as the unit, p = {p.p_value:.1e}; {p.positive} questions up, "
        f"{p.negative} down, {p.zero} unchanged).",
        f"Mean of the {_words(m)} pooled model shifts: {100 * report.mean_of_model_shifts:+.2f} pp.",
        "",
        "## Metrics",
        "",
        f"Pooled over the {t} trials, and the median of the {t} per-trial values.",
        "",
        "| Model | ACC | Abst. rate | F1_abs | R-Acc | ACC (median) | Abst. rate (median) | "
        "F1_abs (median) | R-Acc (median) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in report.models:
        pooled_values = [r.counts.acc, r.counts.abstention_rate, r.counts.f1_abs, r.counts.r_acc]
        medians = [_trial_median(r, name) for name in ("acc", "abstention_rate", "f1_abs", "r_acc")]
        lines.append(f"| {md_text(r.label)} | " + " | ".join(f"{v:.3f}" for v in pooled_values + medians) + " |")
    return "\n".join(lines) + "\n"


def _trial_median(result: ModelResult, name: str) -> float:
    return median_of(getattr(c, name) for c in result.trial_counts.values())


def _f6(value: float) -> str:
    return f"{value:.6f}"


def _condition_shifts_csv(report: Report) -> str:
    header = ["model_id", "model", "questions", "present_valid_responses", "absent_valid_responses",
              "present_abstention", "present_abstention_ci_low", "present_abstention_ci_high",
              "absent_abstention", "absent_abstention_ci_low", "absent_abstention_ci_high",
              "shift", "shift_ci_low", "shift_ci_high", "present_accuracy_when_answering",
              "present_accuracy_ci_low", "present_accuracy_ci_high", "permutation_p", "holm_p"]
    rows = []
    for r in report.models:
        c = r.counts
        rows.append([r.model, r.label, report.questions, c.present_valid, c.absent_valid,
                     *map(_f6, (c.present_abstention, *r.present_ci, c.absent_abstention, *r.absent_ci,
                                c.shift, *r.shift_ci, c.present_accuracy_when_answering, *r.accuracy_ci,
                                r.test.p_value, r.holm_p))])
    return csv_text(header, rows)


def _metrics_csv(report: Report) -> str:
    names = ("acc", "abstention_rate", "f1_abs", "r_acc")
    header = ["model_id", "model", *(f"{n}_pooled" for n in names), *(f"{n}_trial_median" for n in names)]
    rows = [[r.model, r.label, *(_f6(getattr(r.counts, n)) for n in names),
             *(_f6(_trial_median(r, n)) for n in names)] for r in report.models]
    return csv_text(header, rows)


def _trial_metrics_csv(report: Report) -> str:
    header = ["model_id", "model", "trial", "N0", "N1", "N2", "N3", "N4", "N5", *METRIC_NAMES]
    rows = []
    for r in report.models:
        for trial, c in r.trial_counts.items():
            rows.append([r.model, r.label, trial, *c.counts, *(_f6(v) for v in c.metrics().values())])
    return csv_text(header, rows)


def _outcome_counts_csv(report: Report) -> str:
    header = ["model_id", "model", "responses", "N0", "N1", "N2", "N3", "N4", "N5"]
    return csv_text(header, [[r.model, r.label, r.counts.responses, *r.counts.counts] for r in report.models])


def _summary(report: Report) -> dict[str, Any]:
    s = report.settings
    per_model = {}
    for r in report.models:
        t = r.test
        per_model[r.model] = {
            "questions": t.questions, "mean_per_question_shift": t.mean,
            "questions_shift_positive": t.positive, "questions_shift_negative": t.negative,
            "questions_shift_zero": t.zero, "p_value": t.p_value, "holm_p": r.holm_p,
        }
    p = report.pooled
    presents = [round(r.counts.present_abstention, 6) for r in report.models]
    return {
        "source": report.source,
        "questions": report.questions,
        "responses": report.responses,
        "valid_responses": report.valid,
        "invalid_responses": report.invalid,
        "bootstrap": {"resamples": s.resamples, "seed": s.seed, "level": s.level, "unit": "question"},
        "permutation": {"draws": s.draws, "seed": s.seed, "sides": 2, "correction": "Holm"},
        "per_model_shift_test": per_model,
        "pooled_shift_test": {
            "questions": p.questions, "mean_shift_over_models": p.mean,
            "questions_shift_positive": p.positive, "questions_shift_negative": p.negative,
            "questions_shift_zero": p.zero, "p_value": p.p_value, "permutations": p.draws, "seed": p.seed,
        },
        "mean_of_model_shifts": report.mean_of_model_shifts,
        "present_abstention_range": [min(presents), max(presents)] if presents else [],
    }


def _checks(report: Report) -> dict[str, Any]:
    sensitivity = []
    for r in report.models:
        for parser, c in (("strict", r.counts), ("lenient", r.lenient_counts)):
            sensitivity.append({
                "model_id": r.model, "parser": parser, **{f"N{i}": v for i, v in enumerate(c.counts)},
                "acc": c.acc, "present_abstention": c.present_abstention,
                "absent_abstention": c.absent_abstention, "shift": c.shift,
            })
    disagreements = [asdict(d) for d in report.disagreements]
    return {
        "default_parser": "strict",
        "parser_sensitivity": sensitivity,
        "rederivation": {
            "disagreements": len(disagreements),
            "disagreements_with_provider_answer": sum(1 for d in report.disagreements if not d.no_provider_answer),
            "rows": disagreements,
        },
    }


def _figure(report: Report, png: Path, svg: Path) -> None:
    import matplotlib.pyplot as plt

    fig = figure_1(report)
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def figure_1(report: Report) -> Any:
    """The paper's Figure 1 (abstention with the answer present vs absent), as a matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = report.models
    fig, ax = plt.subplots(figsize=(7.0, 0.5 * len(models) + 1.4))
    ys = np.arange(len(models))[::-1]
    for y, r in zip(ys, models, strict=True):
        present, absent = 100 * r.counts.present_abstention, 100 * r.counts.absent_abstention
        ax.plot([present, absent], [y, y], color="0.6", linewidth=2, zorder=1)
        ax.scatter([present], [y], color="#4477aa", s=40, zorder=2, label="answer present" if y == ys[0] else None)
        ax.scatter([absent], [y], color="#cc6677", s=40, zorder=2, label="answer absent" if y == ys[0] else None)
        ax.annotate(f"{100 * r.counts.shift:+.1f} pp", (max(present, absent), y), xytext=(6, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(ys, [r.label for r in models])
    ax.set_xlabel("Abstention rate (%)")
    # room right of 100% for a "+100.0 pp" label, and the legend above the axes, where no point
    # or label can be (inside, it covered the oracle's label)
    ax.set_xlim(-2, 118)
    ax.set_title("Abstention with the answer present vs absent", fontsize=10, pad=22)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8, frameon=False,
              borderaxespad=0.2)
    ax.grid(axis="x", color="0.9")
    fig.tight_layout()
    return fig


def coverage_of(report: Report) -> CoverageAnalysis:
    """The coverage–risk view of an ArcticAbstain report (from each model's N1..N5)."""
    records = [rec for r in report.models for rec in from_outcome_counts(r.model, r.label, r.counts.counts)]
    return analyse_coverage(records, protocol="arcticabstain")


def write_report(report: Report, out_dir: Path | str, *, figure: bool = True,
                 generator: str = "`arcticqa evaluate report`", source_name: str | None = None) -> ReportPaths:
    """Write every report file into ``out_dir`` (replaced as a whole, atomically per folder)."""
    name = source_name or (md_code(Path(report.source).name) if report.source else "the responses")
    texts = {
        "TABLES.md": render_tables(report, generator=generator, source_name=name),
        "condition-shifts.csv": _condition_shifts_csv(report),
        "metrics.csv": _metrics_csv(report),
        "trial-metrics.csv": _trial_metrics_csv(report),
        "outcome-counts.csv": _outcome_counts_csv(report),
        "summary.json": json.dumps(_summary(report), indent=2) + "\n",
        "checks.json": json.dumps(_checks(report), indent=2) + "\n",
    }
    # The coverage view goes into files of its own so the published files stay byte-identical.
    coverage = coverage_of(report)
    texts.update(coverage_files(coverage))
    figures: list[Callable[[Path], None]] = []
    if figure and report.models:
        figures = [lambda d: _figure(report, d / "figure-1.png", d / "figure-1.svg"),
                   lambda d: coverage_figure(coverage, d / "coverage-risk.png", d / "coverage-risk.svg")]
    out_dir = write_report_folder(out_dir, texts, figures)
    has_figure = figure and bool(report.models)
    return ReportPaths(
        out_dir=out_dir, tables=out_dir / "TABLES.md", condition_shifts=out_dir / "condition-shifts.csv",
        metrics=out_dir / "metrics.csv", trial_metrics=out_dir / "trial-metrics.csv",
        outcome_counts=out_dir / "outcome-counts.csv", summary=out_dir / "summary.json",
        checks=out_dir / "checks.json",
        figure_png=out_dir / "figure-1.png" if has_figure else None,
        figure_svg=out_dir / "figure-1.svg" if has_figure else None,
    )
