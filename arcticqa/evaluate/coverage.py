"""The coverage–risk view shared by every protocol: selective accuracy vs coverage, AURC, λ sweep.

Every scored response becomes a :class:`SelectiveRecord`: did the model give an answer
(``answered``), was that answer correct, did it abstain, and how confident was it. Refusals,
unparseable replies and wrong answers are neither correct nor abstentions. Responses without
a provider answer (infrastructure failures) are left out by the protocols before this point.

Per group (model × prompt variant):

- Coverage = answered / responses. Answered responses are ranked by confidence, highest
  first (no confidence ranks below any confidence; equal confidences are one tie group).
  The curve has one point per tie group: coverage k/N and selective accuracy (correct among
  the k highest-ranked answers); risk = 1 − selective accuracy. Without confidences the
  curve is the single point of the model's own coverage.
- AURC = (1/N) Σ_{k=1..K} risk(k): the area under the risk–coverage curve from 0 to the
  model's coverage K/N, where risk(k) inside a tie group is its expectation under random
  tie-breaking (so the value never depends on input order). ``aurc_per_coverage`` = AURC ÷
  coverage, the mean risk over the curve, comparable between models with different coverage.
- λ sweep: score(λ) = (correct + λ·abstained) / N for λ in [0, 1] (correct = 1, abstain = λ,
  wrong, refusal or invalid = 0). Ranks are per λ within a protocol and prompt variant;
  every exact λ at which two models' scores cross (a ranking flip) is listed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcticqa.evaluate.reportio import csv_text, f6

__all__ = ["SelectiveRecord", "CurvePoint", "GroupCoverage", "Crossing", "CoverageAnalysis",
           "DEFAULT_LAMBDAS", "analyse_coverage", "coverage_files", "coverage_summary", "coverage_figure",
           "COVERAGE_FILES", "from_outcome_counts"]

DEFAULT_LAMBDAS: tuple[float, ...] = tuple(round(i / 20, 2) for i in range(21))
COVERAGE_FILES = ("coverage-summary.csv", "coverage-risk.csv", "lambda-sweep.csv", "coverage.json",
                  "coverage-risk.png", "coverage-risk.svg")


@dataclass(frozen=True)
class SelectiveRecord:
    """One scored response, reduced to what selective prediction needs."""

    model: str
    model_label: str
    variant: str
    answered: bool
    correct: bool
    abstained: bool
    confidence: float | None = None


@dataclass(frozen=True)
class CurvePoint:
    answered: int
    coverage: float
    selective_accuracy: float
    risk: float
    threshold: float | None  # the lowest confidence included (None: answers without confidence)


@dataclass
class GroupCoverage:
    model: str
    model_label: str
    variant: str
    responses: int
    answered: int
    correct: int
    abstained: int
    points: list[CurvePoint] = field(default_factory=list)
    aurc: float = 0.0

    @property
    def coverage(self) -> float:
        return self.answered / self.responses if self.responses else 0.0

    @property
    def selective_accuracy(self) -> float:
        return self.correct / self.answered if self.answered else 0.0

    @property
    def aurc_per_coverage(self) -> float:
        return self.aurc / self.coverage if self.coverage else 0.0

    def score(self, lam: float) -> float:
        return (self.correct + lam * self.abstained) / self.responses if self.responses else 0.0


@dataclass(frozen=True)
class Crossing:
    """Two models of one variant score the same at ``lam``; below it ``above`` ranks higher."""

    variant: str
    lam: float
    above: str
    below: str


@dataclass
class CoverageAnalysis:
    protocol: str
    groups: list[GroupCoverage]
    lambdas: tuple[float, ...]
    crossings: list[Crossing]

    def ranks(self, lam: float) -> dict[tuple[str, str], int]:
        """(variant, model) -> competition rank (1 = best) of score(λ) within the variant."""
        result: dict[tuple[str, str], int] = {}
        for variant in dict.fromkeys(g.variant for g in self.groups):
            scores = [(round(g.score(lam), 12), g.model) for g in self.groups if g.variant == variant]
            for value, model in scores:
                result[(variant, model)] = 1 + sum(1 for other, _ in scores if other > value)
        return result


def _curve(rows: Sequence[SelectiveRecord], total: int) -> tuple[list[CurvePoint], float]:
    answered = [r for r in rows if r.answered]
    if not answered:
        return [], 0.0
    # Group by confidence, highest first; answers without a confidence form the last group.
    levels: dict[float | None, list[bool]] = {}
    for r in answered:
        levels.setdefault(r.confidence, []).append(r.correct)
    order = sorted((c for c in levels if c is not None), reverse=True)
    ordered: list[float | None] = [*order, *([None] if None in levels else [])]
    points: list[CurvePoint] = []
    area = 0.0
    k_before, c_before = 0, 0.0
    for level in ordered:
        group = levels[level]
        m, c_group = len(group), float(sum(group))
        for j in range(1, m + 1):
            # Expected correct among the first k under random order inside the tie group.
            expected = c_before + j * c_group / m
            area += 1.0 - expected / (k_before + j)
        k_before += m
        c_before += c_group
        accuracy = c_before / k_before
        points.append(CurvePoint(k_before, k_before / total, accuracy, 1.0 - accuracy, level))
    return points, area / total


def _crossings(groups: Sequence[GroupCoverage]) -> list[Crossing]:
    found = []
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            if a.variant != b.variant or not a.responses or not b.responses:
                continue
            ca, cb = a.correct / a.responses, b.correct / b.responses
            aa, ab = a.abstained / a.responses, b.abstained / b.responses
            if math.isclose(aa, ab, abs_tol=1e-12):
                continue
            lam = (cb - ca) / (aa - ab)
            if 0.0 < lam < 1.0:
                # At λ below the crossing the model with more correct answers leads.
                above, below = (a, b) if ca > cb else (b, a)
                found.append(Crossing(a.variant, lam, above.model, below.model))
    return sorted(found, key=lambda c: (c.variant, c.lam, c.above, c.below))


def analyse_coverage(records: Iterable[SelectiveRecord], *, protocol: str,
                     lambdas: Sequence[float] = DEFAULT_LAMBDAS) -> CoverageAnalysis:
    """Curves, AURC and the λ sweep of every (model, variant), in order of first appearance."""
    grouped: dict[tuple[str, str], list[SelectiveRecord]] = {}
    for r in records:
        grouped.setdefault((r.model, r.variant), []).append(r)
    groups = []
    for (model, variant), rows in grouped.items():
        g = GroupCoverage(model=model, model_label=rows[0].model_label, variant=variant, responses=len(rows),
                          answered=sum(r.answered for r in rows), correct=sum(r.correct for r in rows),
                          abstained=sum(r.abstained for r in rows))
        g.points, g.aurc = _curve(rows, len(rows))
        groups.append(g)
    return CoverageAnalysis(protocol=protocol, groups=groups, lambdas=tuple(lambdas), crossings=_crossings(groups))


def coverage_files(analysis: CoverageAnalysis) -> dict[str, str]:
    """``coverage-summary.csv``, ``coverage-risk.csv``, ``lambda-sweep.csv`` and ``coverage.json``."""
    summary = csv_text(
        ["protocol", "variant", "model_id", "model", "responses", "answered", "correct", "abstained", "coverage",
         "selective_accuracy", "aurc", "aurc_per_coverage"],
        [[analysis.protocol, g.variant, g.model, g.model_label, g.responses, g.answered, g.correct, g.abstained,
          f6(g.coverage), f6(g.selective_accuracy), f6(g.aurc), f6(g.aurc_per_coverage)] for g in analysis.groups])
    curve = csv_text(
        ["protocol", "variant", "model_id", "model", "answered", "coverage", "selective_accuracy", "risk",
         "confidence_threshold"],
        [[analysis.protocol, g.variant, g.model, g.model_label, p.answered, f6(p.coverage), f6(p.selective_accuracy),
          f6(p.risk), "" if p.threshold is None else f"{p.threshold:g}"]
         for g in analysis.groups for p in g.points])
    sweep_rows = []
    for lam in analysis.lambdas:
        ranks = analysis.ranks(lam)
        sweep_rows += [[analysis.protocol, g.variant, f"{lam:g}", g.model, g.model_label, f6(g.score(lam)),
                        ranks[(g.variant, g.model)]] for g in analysis.groups]
    sweep = csv_text(["protocol", "variant", "lambda", "model_id", "model", "score", "rank"], sweep_rows)
    return {"coverage-summary.csv": summary, "coverage-risk.csv": curve, "lambda-sweep.csv": sweep,
            "coverage.json": json.dumps(coverage_summary(analysis), indent=2) + "\n"}


def coverage_summary(analysis: CoverageAnalysis) -> dict[str, Any]:
    return {
        "protocol": analysis.protocol,
        "groups": [{"model_id": g.model, "variant": g.variant, "responses": g.responses, "coverage": g.coverage,
                    "selective_accuracy": g.selective_accuracy, "aurc": g.aurc,
                    "aurc_per_coverage": g.aurc_per_coverage} for g in analysis.groups],
        "lambda_grid": list(analysis.lambdas),
        "ranking_flips": [{"variant": c.variant, "lambda": c.lam, "leads_below": c.above, "leads_above": c.below}
                          for c in analysis.crossings],
    }


def coverage_figure(analysis: CoverageAnalysis, png: Path, svg: Path) -> None:
    """Left: risk–coverage curves; right: score vs abstention credit λ."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.2))
    many_variants = len({g.variant for g in analysis.groups}) > 1
    for g in analysis.groups:
        name = f"{g.model_label} ({g.variant})" if many_variants else g.model_label
        if not g.points:  # answers nothing: no risk to draw
            (line,) = left.plot([], [], marker="o", markerfacecolor="none", linestyle="none",
                                label=f"{name}: answers nothing")
        elif len(g.points) == 1:
            # no confidence to order answers by: the model is one operating point, not a curve (a
            # line back to coverage 0 drew a flat risk no ranking of its answers supports)
            (line,) = left.plot([g.points[0].coverage], [g.points[0].risk], marker="o", markersize=6,
                                linestyle="none", label=f"{name}, AURC {g.aurc:.3f}")
        else:
            xs = [0.0, *(p.coverage for p in g.points)]
            ys = [g.points[0].risk, *(p.risk for p in g.points)]
            (line,) = left.plot(xs, ys, drawstyle="steps-post", marker="o", markersize=3,
                                label=f"{name}, AURC {g.aurc:.3f}")
        right.plot(analysis.lambdas, [g.score(lam) for lam in analysis.lambdas], color=line.get_color(), label=name)
    if all(len(g.points) <= 1 for g in analysis.groups):
        left.text(0.02, 0.5, "No confidences in these responses:\neach model is one operating point\n"
                  "(its coverage and its risk), not a curve.", transform=left.transAxes, fontsize=7,
                  color="0.35", va="center")
    left.set_xlabel("Coverage (share answered)")
    left.set_ylabel("Risk (1 − selective accuracy)")
    left.set_xlim(0, 1.02)
    left.set_ylim(-0.02, 1.02)
    left.set_title("Risk–coverage", fontsize=10)
    right.set_xlabel("Abstention credit λ")
    right.set_ylabel("Score (correct = 1, abstain = λ)")
    right.set_title("Where rankings flip", fontsize=10)
    for c in analysis.crossings:
        right.axvline(c.lam, color="0.85", linewidth=0.8, zorder=0)
    for ax in (left, right):
        ax.grid(color="0.92")
        ax.legend(fontsize=7, frameon=False)
    fig.suptitle(f"{analysis.protocol}: coverage and abstention credit", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def from_outcome_counts(model: str, model_label: str, counts: Sequence[int],
                        variant: str = "default") -> list[SelectiveRecord]:
    """ArcticAbstain N0..N5 counts of one model: N1 correct answers; N2, N4 wrong answers; N3, N5
    abstentions; N0 (invalid, outside every denominator) left out. No confidences: one point."""
    def make(n: int, answered: bool, correct: bool) -> list[SelectiveRecord]:
        return [SelectiveRecord(model, model_label, variant, answered, correct, not answered)] * n

    return [*make(counts[1], True, True), *make(counts[2] + counts[4], True, False),
            *make(counts[3] + counts[5], False, False)]
