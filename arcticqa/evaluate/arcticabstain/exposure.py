"""Training exposure: every paired metric split at each model's knowledge cutoff.

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
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.records import ResponseRecord, model_order
from arcticqa.evaluate.arcticabstain.report import ModelResult, StatsSettings, build_report
from arcticqa.evaluate.stats import holm

__all__ = [
    "read_item_dates",
    "dates_of_items",
    "PermutationResult",
    "label_permutation_test",
    "ModelExposure",
    "build_exposure",
]


def _parse_date(text: str, *, path: str, line: int, field: str) -> date:
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
    before: ModelResult | None = None
    after: ModelResult | None = None
    before_items: int = 0
    after_items: int = 0
    accuracy_test: PermutationResult | None = None
    responsiveness_test: PermutationResult | None = None
    accuracy_holm_p: float = float("nan")
    responsiveness_holm_p: float = float("nan")

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
    results: list[ModelExposure] = []
    for model in order:
        cutoff = cutoffs.get(model)
        result = ModelExposure(model=model, label=labels.get(model, model), cutoff=cutoff)
        results.append(result)
        if cutoff is None:
            continue
        rows = by_model[model]
        items = sorted({r.item_id for r in rows if r.item_id in item_dates})
        before_ids = [i for i in items if item_dates[i] < cutoff]
        after_ids = [i for i in items if item_dates[i] >= cutoff]
        before_set, after_set = set(before_ids), set(after_ids)
        result.before_items, result.after_items = len(before_ids), len(after_ids)
        result.before = _side([r for r in rows if r.item_id in before_set], model, settings)
        result.after = _side([r for r in rows if r.item_id in after_set], model, settings)
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
