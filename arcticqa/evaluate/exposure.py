"""Training exposure: every paired ArcticAbstain metric split at each model's knowledge cutoff.

It lives beside :mod:`arcticqa.evaluate.coverage`, not in the ``arcticabstain`` subpackage, so
every protocol keeps the same module names (docs/evaluation.md#protocol-shape); reading item
dates does not depend on the protocol.

An item is *before* a model's cutoff when its paper's publication date is earlier than the
cutoff, *after* otherwise. Each side is reported with exactly the published procedure
(:func:`arcticqa.evaluate.arcticabstain.report.build_report` on that side's responses: the
question bootstrap CIs and the within-side sign-flip test of the condition shift), so a split
number means what the unsplit one means.

The before-after comparison is a permutation test over per-question values: answer-present
accuracy when answering (N1/(N1+N2)) and abstention responsiveness (absent - present abstention
rate). Before and after items are different questions, not pairs, so a sign flip (which swaps
the two members of a pair) has nothing to swap; the exchangeable unit is the question's side
label, and the test permutes those labels. Holm corrects each comparison across models.

Dates are never guessed: an item whose paper has no date is counted as *undated* and left out
of both sides, and the report lists how many.

Know2Guess-style zones (an approximation, docs/evaluation.md#know2guess-style-zones): per model
with a cutoff, each response falls in one zone by its item's side and its condition, and each
zone has one expected action, as Know2Guess's zones do (abstention expected exactly in its zone D):
``seen`` (answer-present, published before the cutoff: answer expected), ``unseen``
(answer-present, on or after it: answer expected), ``boundary`` (answer-absent rewrite of a seen
item: abstention expected) and ``unknown`` (answer-absent rewrite of an unseen item: abstention
expected). Per zone: Know2Guess's reliability, answered accuracy and abstention rate over the
valid responses, with question-bootstrap CIs drawn exactly as the side's published CIs (so the
seen zone's abstention CI is the before side's present-abstention CI), and its refusal and
invalid rates over the responses with a provider answer.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.metrics import METRIC_NAMES
from arcticqa.evaluate.arcticabstain.parse import CAUSE_FORMAT, CAUSE_INFRASTRUCTURE, CAUSE_REFUSAL
from arcticqa.evaluate.arcticabstain.records import ResponseRecord, model_order
from arcticqa.evaluate.arcticabstain.report import ModelResult, StatsSettings, build_report
from arcticqa.evaluate.reportio import csv_text, f6, md_text
from arcticqa.evaluate.stats import bootstrap_multiplicities, holm, percentile_bounds

__all__ = [
    "read_item_dates",
    "papers_of_items",
    "dates_of_items",
    "ItemDates",
    "resolve_item_dates",
    "ZONES",
    "ZoneResult",
    "zone_results",
    "PermutationResult",
    "label_permutation_test",
    "ModelExposure",
    "build_exposure",
    "exposure_texts",
    "exposure_figure",
]


def _parse_date(text: str, *, path: str, line: int | None, field: str) -> date:
    value = text.strip()
    try:
        # A bare year or year-month (Semantic Scholar often has only the year) is its first day:
        # the earliest the paper can have existed, so "before the cutoff" is never overstated.
        if len(value) == 4:
            return date(int(value), 1, 1)
        if len(value) == 7:
            return date(int(value[:4]), int(value[5:7]), 1)
        return date.fromisoformat(value)
    except ValueError:
        raise InputError(f"not a date (YYYY, YYYY-MM or YYYY-MM-DD): {value!r}", path=path, line=line,
                         field=field) from None


def read_item_dates(path: Path | str) -> dict[str, date]:
    """``item_id``/``doi`` -> publication date from a CSV with a ``date`` column and one of those keys.

    DOIs are matched case-insensitively (they are case-insensitive by definition). Empty dates
    are skipped (that item stays undated); a malformed date or a key given twice is an error.
    """
    name = str(path)
    dates: dict[str, date] = {}
    with Path(path).open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        fields = reader.fieldnames or []
        keys = [k for k in ("item_id", "doi") if k in fields]
        if "date" not in fields or not keys:
            raise InputError("needs a 'date' column and an 'item_id' or 'doi' column", path=name, line=1)
        for row in reader:
            line = reader.line_num
            value = (row.get("date") or "").strip()
            if not value:
                continue
            when = _parse_date(value, path=name, line=line, field="date")
            for key in keys:
                raw = (row.get(key) or "").strip()
                if not raw:
                    continue
                identifier = raw.lower() if key == "doi" else raw
                if identifier in dates and dates[identifier] != when:
                    raise InputError(f"{key} {raw!r} has two different dates", path=name, line=line, field=key)
                dates[identifier] = when
    return dates


def papers_of_items(path: Path | str, wanted: Iterable[str]) -> tuple[dict[str, str | None], dict[str, date]]:
    """From an ``items.jsonl``: each wanted item's ``paper.doi`` and its own ``paper.publication_date``."""
    name, keep = str(path), set(wanted)
    if not Path(path).exists():
        raise InputError("file not found", path=name)
    dois: dict[str, str | None] = {}
    dates: dict[str, date] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            item_id, paper = row["item_id"], row.get("paper") or {}
            doi, published = paper.get("doi"), paper.get("publication_date")
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InputError("not an item with item_id (and paper.doi)", path=name, line=number) from None
        if item_id in keep:
            dois[item_id] = doi
            if published:
                dates[item_id] = _parse_date(str(published), path=name, line=number, field="paper.publication_date")
    return dois, dates


def dates_of_items(item_dois: Mapping[str, str | None], dates: Mapping[str, date]) -> tuple[dict[str, date], list[str]]:
    """Each item's date (by item id first, then its paper's DOI) and the sorted undated item ids."""
    found: dict[str, date] = {}
    missing: list[str] = []
    for item_id, doi in sorted(item_dois.items()):
        when = dates.get(item_id) or (dates.get(doi.lower()) if doi else None)
        if when is None:
            missing.append(item_id)
        else:
            found[item_id] = when
    return found, missing


@dataclass(frozen=True)
class ItemDates:
    """Each evaluated item's date, the undated items, and where the dates came from."""

    dated: dict[str, date]
    undated: list[str]
    from_csv: int
    from_items: int
    csv_name: str | None = None
    items_name: str | None = None

    def provenance(self) -> str:
        """One line for the report and the figure: a reader must see where the dates came from."""
        parts = []
        if self.csv_name is not None:
            parts.append(f"{self.from_csv} from {self.csv_name} (--item-dates)")
        if self.items_name is not None:
            parts.append(f"{self.from_items} from paper.publication_date in {self.items_name}")
        parts.append(f"{len(self.undated)} undated (in no side)")
        return "Item dates: " + "; ".join(parts) + "."


def resolve_item_dates(item_ids: Iterable[str], *, items: Path | None = None,
                       item_dates: Path | None = None) -> ItemDates:
    """The date of each item: the ``--item-dates`` CSV (by item id, then by the DOI the items file
    gives the item) wins; an item it leaves undated falls back to its own ``paper.publication_date``."""
    item_dois: dict[str, str | None] = dict.fromkeys(item_ids)
    own: dict[str, date] = {}
    if items is not None:
        dois, own = papers_of_items(items, item_dois)
        item_dois |= dois
    dated, undated = dates_of_items(item_dois, read_item_dates(item_dates) if item_dates else {})
    from_csv = len(dated)
    dated |= {i: own[i] for i in undated if i in own}
    return ItemDates(dated=dated, undated=[i for i in undated if i not in own], from_csv=from_csv,
                     from_items=len(dated) - from_csv,
                     csv_name=Path(item_dates).name if item_dates else None,
                     items_name=Path(items).name if items else None)


#: (zone, condition, side of the cutoff) in Know2Guess's order, from answer-expected to
#: abstention-expected; the answer-absent condition is where abstention is expected
ZONES: tuple[tuple[str, str, str], ...] = (
    ("seen", "answer_present", "before"),
    ("unseen", "answer_present", "after"),
    ("boundary", "answer_absent", "before"),
    ("unknown", "answer_absent", "after"),
)

# Outcome columns (N0..N5) per condition: valid, the expected action, answered, answered correctly,
# abstained. An answer in the answer-absent condition is never correct (no gold option is shown).
_COLUMNS: dict[str, dict[str, list[int]]] = {
    "answer_present": {"valid": [1, 2, 3], "expected": [1], "answered": [1, 2], "correct": [1], "abstained": [3]},
    "answer_absent": {"valid": [4, 5], "expected": [5], "answered": [4], "correct": [], "abstained": [5]},
}

Interval = tuple[float, float]


@dataclass(frozen=True)
class ZoneResult:
    """One model's metrics in one zone (rates over valid responses; None when undefined)."""

    zone: str
    condition: str
    side: str
    questions: int
    responses: int
    valid: int
    provider_answered: int
    refusals: int
    format_invalid: int
    reliability: float | None
    reliability_ci: Interval
    answered: int
    answered_accuracy: float | None
    answered_accuracy_ci: Interval
    abstention_rate: float | None
    abstention_ci: Interval

    @property
    def abstention_expected(self) -> bool:
        return self.condition == "answer_absent"

    @property
    def refusal_rate(self) -> float | None:
        return self.refusals / self.provider_answered if self.provider_answered else None

    @property
    def invalid_rate(self) -> float | None:
        return self.format_invalid / self.provider_answered if self.provider_answered else None


def _rates(numerator: NDArray[np.float64], denominator: NDArray[np.float64]) -> NDArray[np.float64]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan)


def zone_results(rows: Sequence[ResponseRecord], side: str, settings: StatsSettings) -> list[ZoneResult]:
    """The zones of one side of one model's cutoff (``rows``: that model's responses on the side's items).

    The bootstrap is the side's published one: the questions answered validly at least once, in id
    order, resampled with the published draws; both zones of a side share those resamples, since
    a question's two conditions are one unit.
    """
    ids = sorted({r.item_id for r in rows})
    index = {item_id: i for i, item_id in enumerate(ids)}
    counts = np.zeros((len(ids), 6), dtype=np.float64)
    for record in rows:
        counts[index[record.item_id], int(record.outcome[1])] += 1
    answered_questions = counts[counts[:, 1:].sum(axis=1) > 0]
    summed = bootstrap_multiplicities(answered_questions.shape[0], settings.resamples, settings.seed) @ answered_questions
    totals = counts.sum(axis=0)

    def point(columns: list[int], of: list[int]) -> float | None:
        denominator = float(totals[of].sum())
        return float(totals[columns].sum()) / denominator if denominator else None

    def interval(columns: list[int], of: list[int]) -> Interval:
        return percentile_bounds(_rates(summed[:, columns].sum(axis=1), summed[:, of].sum(axis=1)), settings.level)

    results = []
    for zone, condition, zone_side in ZONES:
        if zone_side != side:
            continue
        c = _COLUMNS[condition]
        in_zone = [r for r in rows if r.condition == condition]
        causes = [r.cause for r in in_zone]
        results.append(ZoneResult(
            zone=zone, condition=condition, side=side,
            questions=int(np.count_nonzero(counts[:, c["valid"]].sum(axis=1))),
            responses=len(in_zone), valid=int(totals[c["valid"]].sum()),
            provider_answered=len(in_zone) - causes.count(CAUSE_INFRASTRUCTURE),
            refusals=causes.count(CAUSE_REFUSAL), format_invalid=causes.count(CAUSE_FORMAT),
            reliability=point(c["expected"], c["valid"]), reliability_ci=interval(c["expected"], c["valid"]),
            answered=int(totals[c["answered"]].sum()),
            answered_accuracy=point(c["correct"], c["answered"]),
            answered_accuracy_ci=interval(c["correct"], c["answered"]),
            abstention_rate=point(c["abstained"], c["valid"]), abstention_ci=interval(c["abstained"], c["valid"])))
    return results


@dataclass(frozen=True)
class PermutationResult:
    """Two-sided test of mean(before) - mean(after) by permuting the questions' side labels."""

    before: int
    after: int
    difference: float
    p_value: float
    draws: int
    seed: int


def label_permutation_test(before: Sequence[float], after: Sequence[float], *, draws: int = 20_000,
                           seed: int = 7) -> PermutationResult:
    """p = (#draws with |difference| >= |observed| - 1e-12, + 1) / (draws + 1), as the sign-flip test."""
    a, b = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        return PermutationResult(a.size, b.size, float("nan"), float("nan"), draws, seed)
    observed = math.fsum(before) / a.size - math.fsum(after) / b.size
    pooled = np.concatenate([a, b])
    rng = np.random.default_rng(seed)
    # Each row is a random relabelling: the first len(before) of a permutation are "before".
    order = rng.permuted(np.tile(np.arange(pooled.size), (draws, 1)), axis=1)
    relabelled = pooled[order]
    differences = relabelled[:, :a.size].mean(axis=1) - relabelled[:, a.size:].mean(axis=1)
    extreme = int(np.count_nonzero(np.abs(differences) >= abs(observed) - 1e-12))
    return PermutationResult(a.size, b.size, observed, (extreme + 1) / (draws + 1), draws, seed)


def _per_question(rows: Sequence[ResponseRecord], item_ids: Sequence[str]) -> tuple[list[float], list[float]]:
    """Per question (in id order): present accuracy when answering, and absent - present abstention.

    A question is left out of a value whose denominator it never reaches (e.g. always abstained
    when the answer was present), exactly as the published per-question shift does.
    """
    counts: dict[str, NDArray[np.int64]] = {i: np.zeros(6, dtype=np.int64) for i in item_ids}
    for record in rows:
        if record.item_id in counts:
            counts[record.item_id][int(record.outcome[1])] += 1
    accuracy: list[float] = []
    responsiveness: list[float] = []
    for item_id in sorted(counts):
        c = counts[item_id]
        if c[1] + c[2]:
            accuracy.append(float(c[1]) / float(c[1] + c[2]))
        present, absent = c[1] + c[2] + c[3], c[4] + c[5]
        if present and absent:
            responsiveness.append(float(c[5]) / float(absent) - float(c[3]) / float(present))
    return accuracy, responsiveness


@dataclass
class ModelExposure:
    """One model's split; ``before``/``after`` are None when it declares no cutoff."""

    model: str
    label: str
    cutoff: date | None
    whole: ModelResult
    whole_items: int
    before: ModelResult | None = None
    after: ModelResult | None = None
    before_items: int = 0
    after_items: int = 0
    accuracy_test: PermutationResult | None = None
    responsiveness_test: PermutationResult | None = None
    accuracy_holm_p: float = float("nan")
    responsiveness_holm_p: float = float("nan")
    zones: list[ZoneResult] = field(default_factory=list)

    @property
    def split(self) -> bool:
        return self.cutoff is not None


def _side(rows: Sequence[ResponseRecord], model: str, settings: StatsSettings) -> ModelResult | None:
    if not rows:
        return None
    return build_report(rows, settings=settings, models=[model]).models[0]


def build_exposure(records: Sequence[ResponseRecord], item_dates: Mapping[str, date],
                   cutoffs: Mapping[str, date | None], *,
                   settings: StatsSettings | None = None) -> list[ModelExposure]:
    """Split each model's responses at its cutoff; undated items are in neither side."""
    settings = settings or StatsSettings()
    order, labels = model_order(records)
    by_model: dict[str, list[ResponseRecord]] = {m: [] for m in order}
    for record in records:
        by_model[record.model].append(record)
    # The unsplit view is the published report itself, so its numbers are the published ones.
    whole = {m.model: m for m in build_report(records, settings=settings, models=order).models}
    results: list[ModelExposure] = []
    for model in order:
        cutoff = cutoffs.get(model)
        result = ModelExposure(model=model, label=labels.get(model, model), cutoff=cutoff, whole=whole[model],
                               whole_items=len({r.item_id for r in by_model[model]}))
        results.append(result)
        if cutoff is None:
            continue
        rows = by_model[model]
        items = sorted({r.item_id for r in rows if r.item_id in item_dates})
        before_ids = [i for i in items if item_dates[i] < cutoff]
        after_ids = [i for i in items if item_dates[i] >= cutoff]
        before_set, after_set = set(before_ids), set(after_ids)
        result.before_items, result.after_items = len(before_ids), len(after_ids)
        before_rows = [r for r in rows if r.item_id in before_set]
        after_rows = [r for r in rows if r.item_id in after_set]
        result.before = _side(before_rows, model, settings)
        result.after = _side(after_rows, model, settings)
        by_zone = {z.zone: z for z in zone_results(before_rows, "before", settings)
                   + zone_results(after_rows, "after", settings)}
        result.zones = [by_zone[name] for name, _, _ in ZONES]
        before_acc, before_resp = _per_question(rows, before_ids)
        after_acc, after_resp = _per_question(rows, after_ids)
        result.accuracy_test = label_permutation_test(before_acc, after_acc, draws=settings.draws,
                                                      seed=settings.seed)
        result.responsiveness_test = label_permutation_test(before_resp, after_resp, draws=settings.draws,
                                                            seed=settings.seed)
    tested = [r for r in results if r.accuracy_test is not None and r.responsiveness_test is not None]
    for attribute, target in (("accuracy_test", "accuracy_holm_p"), ("responsiveness_test", "responsiveness_holm_p")):
        valid = [r for r in tested if not math.isnan(getattr(r, attribute).p_value)]
        for r, adjusted in zip(valid, holm([getattr(r, attribute).p_value for r in valid]), strict=True):
            setattr(r, target, adjusted)
    return results


_SIDE_HEADER = ["model", "model_label", "knowledge_cutoff", "side", "questions", "responses", "valid",
                "present_abstention", "present_ci_low", "present_ci_high", "absent_abstention", "absent_ci_low",
                "absent_ci_high", "shift", "shift_ci_low", "shift_ci_high", "present_accuracy_when_answering",
                "accuracy_ci_low", "accuracy_ci_high", "shift_test_p", *METRIC_NAMES]
_TEST_HEADER = ["model", "model_label", "knowledge_cutoff", "comparison", "before_questions", "after_questions",
                "difference_before_minus_after", "p_value", "holm_p", "draws", "seed"]


def _side_row(e: ModelExposure, side: str, result: ModelResult | None, questions: int) -> list[str | int]:
    head: list[str | int] = [e.model, e.label, e.cutoff.isoformat() if e.cutoff else "", side, questions]
    if result is None:
        return head + [""] * (len(_SIDE_HEADER) - len(head))
    c = result.counts
    return head + [c.responses, c.valid, f6(c.present_abstention), f6(result.present_ci[0]),
                   f6(result.present_ci[1]), f6(c.absent_abstention), f6(result.absent_ci[0]),
                   f6(result.absent_ci[1]), f6(c.shift), f6(result.shift_ci[0]), f6(result.shift_ci[1]),
                   f6(c.present_accuracy_when_answering), f6(result.accuracy_ci[0]), f6(result.accuracy_ci[1]),
                   f6(result.test.p_value), *(f6(v) for v in c.metrics().values())]


_ZONE_HEADER = ["model", "model_label", "knowledge_cutoff", "zone", "side", "condition", "abstention_expected",
                "questions", "responses", "valid", "reliability", "reliability_ci_low", "reliability_ci_high",
                "answered", "answered_accuracy", "answered_accuracy_ci_low", "answered_accuracy_ci_high",
                "abstention_rate", "abstention_ci_low", "abstention_ci_high", "provider_answered", "refusal_rate",
                "invalid_rate"]


def _zone_row(e: ModelExposure, z: ZoneResult) -> list[str | int]:
    assert e.cutoff is not None
    return [e.model, e.label, e.cutoff.isoformat(), z.zone, z.side, z.condition, str(z.abstention_expected).lower(),
            z.questions, z.responses, z.valid, f6(z.reliability), f6(z.reliability_ci[0]), f6(z.reliability_ci[1]),
            z.answered, f6(z.answered_accuracy), f6(z.answered_accuracy_ci[0]), f6(z.answered_accuracy_ci[1]),
            f6(z.abstention_rate), f6(z.abstention_ci[0]), f6(z.abstention_ci[1]), z.provider_answered,
            f6(z.refusal_rate), f6(z.invalid_rate)]


def _with_ci(value: float | None, ci: Interval) -> str:
    if value is None:
        return "–"
    if math.isnan(ci[0]):
        return f"{value:.3f}"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _zone_lines(exposures: Sequence[ModelExposure]) -> list[str]:
    lines = ["", "## ZONES", "",
             "Know2Guess-style zones, an approximation (docs/evaluation.md#know2guess-style-zones): seen = "
             "answer-present items published before the cutoff, unseen = on or after it (answer expected); "
             "boundary = the answer-absent rewrite of a seen item, unknown = of an unseen item (abstention "
             "expected). Rates over valid responses with 95% question-bootstrap CIs; refusal and invalid "
             "rates over responses with a provider answer; – = no response to rate.", "",
             "| Model | Cutoff | Zone | Expected | Questions | Valid | Reliability | Answered acc. | Abstention "
             "| Refusal | Invalid |",
             "| --- | --- | --- | --- | ---: | ---: | --- | --- | --- | ---: | ---: |"]
    for e in exposures:
        for z in e.zones:
            assert e.cutoff is not None
            lines.append(
                f"| {md_text(e.label)} | {e.cutoff.isoformat()} | {z.zone} | "
                f"{'abstain' if z.abstention_expected else 'answer'} | {z.questions} | {z.valid} | "
                f"{_with_ci(z.reliability, z.reliability_ci)} | "
                f"{_with_ci(z.answered_accuracy, z.answered_accuracy_ci)} | "
                f"{_with_ci(z.abstention_rate, z.abstention_ci)} | "
                f"{'–' if z.refusal_rate is None else f'{z.refusal_rate:.3f}'} | "
                f"{'–' if z.invalid_rate is None else f'{z.invalid_rate:.3f}'} |")
    return lines


def exposure_texts(exposures: Sequence[ModelExposure], dates: ItemDates) -> dict[str, str]:
    """The report's text files: per-side metrics, the before-after tests, the zones, the undated items."""
    sides: list[list[str | int]] = []
    tests: list[list[str | int]] = []
    lines = ["# Training exposure: metrics before vs after each model's knowledge cutoff", "",
             f"{dates.provenance()} Undated items are listed in undated-items.csv.", ""]
    for e in exposures:
        sides.append(_side_row(e, "all", e.whole, e.whole_items))
        if not e.split:
            lines.append(f"- {e.label}: no knowledge_cutoff declared; reported unsplit.")
            continue
        sides.append(_side_row(e, "before", e.before, e.before_items))
        sides.append(_side_row(e, "after", e.after, e.after_items))
        assert e.cutoff is not None
        for name, test, adjusted in (("present_accuracy", e.accuracy_test, e.accuracy_holm_p),
                                     ("abstention_responsiveness", e.responsiveness_test, e.responsiveness_holm_p)):
            assert test is not None
            tests.append([e.model, e.label, e.cutoff.isoformat(), name, test.before, test.after,
                          f6(test.difference), f6(test.p_value), f6(adjusted), test.draws, test.seed])
            lines.append(f"- {e.label} (cutoff {e.cutoff.isoformat()}): {name.replace('_', ' ')} before - after "
                         f"= {test.difference:+.3f} ({test.before} vs {test.after} questions), "
                         f"permutation p = {test.p_value:.4f}, Holm p = {adjusted:.4f}.")
    if any(e.zones for e in exposures):
        lines += _zone_lines(exposures)
    return {"EXPOSURE.md": "\n".join(lines) + "\n",
            "exposure.csv": csv_text(_SIDE_HEADER, sides),
            "exposure-tests.csv": csv_text(_TEST_HEADER, tests),
            "exposure-zones.csv": csv_text(_ZONE_HEADER, [_zone_row(e, z) for e in exposures for z in e.zones]),
            "undated-items.csv": csv_text(["item_id"], [[i] for i in dates.undated])}


def exposure_figure(exposures: Sequence[ModelExposure], png: Path, svg: Path, *, note: str = "") -> None:
    """Per model: abstention responsiveness and answer-present accuracy, before vs after, with CIs.

    ``note`` is printed under the plot: the report passes where the item dates came from, so a
    figure copied without its caption still says whether its dates are real.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    split = [e for e in exposures if e.before is not None and e.after is not None]
    fig, axes = plt.subplots(1, 2, figsize=(10.0, 1.3 + 0.5 * max(len(split), 1)), sharey=True)
    for ax, (title, value, ci) in zip(axes, (
            ("Abstention responsiveness: absent - present abstention rate", "shift", "shift_ci"),
            ("Answer-present accuracy when answering", "present_accuracy_when_answering", "accuracy_ci")),
            strict=True):
        for row, e in enumerate(split):
            for side, offset, colour, legend in (("before", -0.12, "tab:blue", "published before cutoff"),
                                                 ("after", 0.12, "tab:orange", "on or after cutoff")):
                result = getattr(e, side)
                x = getattr(result.counts, value)
                low, high = getattr(result, ci)
                ax.errorbar([x], [row + offset], xerr=[[x - low], [high - x]], fmt="o", color=colour,
                            markersize=4, capsize=2, label=legend if row == 0 else None)
        ax.set_title(title, fontsize=9)
        ax.grid(color="0.92")
        # responsiveness is a difference of rates (can be negative); accuracy is a rate
        if value == "shift":
            ax.axvline(0.0, color="0.6", linewidth=0.8, zorder=0)
        else:
            ax.set_xlim(-0.02, 1.02)
    axes[0].set_yticks(range(len(split)), [f"{e.label} (cutoff {e.cutoff})\n{e.before_items} before / "
                                           f"{e.after_items} after questions" for e in split], fontsize=8)
    # first model on top, half a row of room around each so the before/after points stay inside
    axes[0].set_ylim(len(split) - 0.5, -0.5)
    # outside the axes: a legend inside would hide the points it explains
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower right", ncol=2, fontsize=7, frameon=False)
    fig.suptitle("ArcticAbstain before vs after each model's knowledge cutoff (95% question-bootstrap CIs)",
                 fontsize=10)
    if note:
        fig.text(0.01, 0.01, note, fontsize=7, ha="left", va="bottom", color="0.25")
    fig.tight_layout(rect=(0.0, 0.06, 1.0, 1.0))
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)
