"""``evaluate items``: what the models' answers say about the *items* (an item audit).

Reads multiple-choice responses with an abstain option (a published ArcticAbstain
``responses.csv``/``.jsonl``, or our store's ArcticAbstain or Abstain-QA responses mapped by
:mod:`arcticqa.evaluate.itemsources`) and the release's ``items.jsonl``, and gives per item and
condition:

- classical statistics: difficulty (answer present: share of answered responses choosing the
  key; answer absent: share abstaining, the correct action), abstention share, the corrected
  item-total (point-biserial) discrimination over the responses and the share of every option;
- an IRT view (:mod:`arcticqa.evaluate.irt`): model abilities from a Rasch fit, then each item's
  2PL slope ``a`` and difficulty ``b`` given them, with 95% bootstrap intervals (models and, within
  a model, trials drawn with replacement);
- suspect flags, each a stable rule id (``items.*``, below) with a reason naming the models,
  option and counts, and a ranking by the moved-key probability (:mod:`arcticqa.evaluate.keycheck`).

Every option is identified by its text against the items file (``key``, ``distractor k`` for rank
k - 1, ``abstain``), so re-scoring the same responses against another key file is a matter of
passing that file. A response whose answer-absent options include the listed key cannot come from
this items file's conditions; such responses are counted and reported (``key_shown_absent``),
never used as a suspect signal.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.items import EvalItem, load_items
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, parse_strict
from arcticqa.evaluate.arcticabstain.records import (
    check_unique_cells,
    iter_published_rows,
    record_from_published,
)
from arcticqa.evaluate.irt import TwoPL, bootstrap_2pl, fit_items_on_rasch
from arcticqa.evaluate.keycheck import MIN_ITEMS, moved_key_scores
from arcticqa.evaluate.options import normalise_option_text
from arcticqa.evaluate.reportio import csv_text, f6, md_code, md_text
from arcticqa.release.cues import STRATEGIES
from arcticqa.rules import Rule, rule

__all__ = ["ROLES", "SUSPECT_RULES", "ChoiceData", "ItemStats", "Suspect", "ItemAudit", "load_published_choices",
           "choices_from_rows", "audit_items", "item_texts", "item_figure", "ITEM_FILES"]

#: an option's role in an item: the listed key, distractor k (rank k - 1), the abstain option
ROLES: tuple[str, ...] = ("key", "distractor 1", "distractor 2", "distractor 3", "distractor 4", "abstain")
_KEY, _ABSTAIN = 0, 5
ABSTAIN_TEXT = "I abstain from answering"

R_LOW_DISCRIMINATION = rule(
    "items.low_discrimination",
    "answer present: models that answer the other items better choose the key less often here "
    "(corrected item-total discrimination <= -0.3 and 2PL slope <= 0.25)")
R_STRONG_CONVERGE = rule(
    "items.strong_models_converge",
    "answer present: the strongest models (top half by Rasch ability) converge on one distractor, "
    "at least twice as often as on the key")
R_ABSENT_CONVERGE = rule(
    "items.absent_converge",
    "answer absent: models that abstain well on the other items converge on one option here "
    "(that distractor may be true)")
R_SHARED_CUE = rule(
    "items.shared_cue",
    "answer present: every model chose the key every time, and a cue-only strategy (no question "
    "read) singles the key out: the item may measure the cue")
R_KEY_LOOKS_MOVED = rule(
    "items.key_looks_moved",
    "answer present: the models' answers look like another item's whose key was exchanged with a "
    "distractor (a fit on this audit's own items, cross-fitted)")
SUSPECT_RULES: tuple[Rule, ...] = (R_LOW_DISCRIMINATION, R_STRONG_CONVERGE, R_ABSENT_CONVERGE, R_SHARED_CUE,
                                   R_KEY_LOOKS_MOVED)

#: a converging option (condition -> thresholds): at least this share of the group's valid
#: responses, and the majority choice of at least this many of the group's models
CONVERGE: dict[str, tuple[float, int]] = {"answer_present": (0.6, 3), "answer_absent": (0.75, 3)}
#: the discrimination rule: item-total r and 2PL slope at or below these …
LOW_R = -0.3
LOW_A = 0.25
#: … given at least this many scored responses
MIN_SCORED = 6
#: the moved-key rule: probability (classes weighted equally) at or above this
MOVED_P = 0.8

ITEM_FILES = ("ITEMS.md", "item-stats.csv", "suspects.csv", "item-models.csv", "item-map.png", "item-map.svg")

Int8 = NDArray[np.int8]
Float = NDArray[np.float64]


@dataclass
class ChoiceData:
    """The responses as option roles: ``choices[condition]`` is models x items x trials of a role
    index into :data:`ROLES`, -1 where there is no valid response."""

    source: str
    models: list[str]
    labels: dict[str, str]
    items: list[EvalItem]
    trials: list[int]
    choices: dict[str, Int8]
    #: condition -> items x roles: the role was shown at least once
    shown: dict[str, NDArray[np.bool_]]
    responses: int = 0
    invalid: int = 0
    #: per item: answer-absent responses that showed the listed key
    key_shown_absent: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


class _Builder:
    def __init__(self, items: Sequence[EvalItem], source: str) -> None:
        self.items = list(items)
        self.source = source
        self.index = {it.item_id: i for i, it in enumerate(self.items)}
        self.roles: list[dict[str, int]] = []
        for it in self.items:
            roles = {normalise_option_text(t): 1 + rank for rank, t in enumerate(it.distractors)}
            roles[normalise_option_text(it.gold_answer)] = _KEY
            roles[normalise_option_text(ABSTAIN_TEXT)] = _ABSTAIN
            self.roles.append(roles)
        self.cells: list[tuple[str, int, str, int, int]] = []  # model, item, condition, trial, role
        self.models: dict[str, str] = {}
        self.shown: dict[str, NDArray[np.bool_]] = {c: np.zeros((len(self.items), len(ROLES)), dtype=bool)
                                                    for c in CONDITIONS}
        self.key_absent = np.zeros(len(self.items), dtype=np.int64)
        self.invalid = 0

    def role(self, item: int, text: str, *, line: int) -> int:
        found = self.roles[item].get(normalise_option_text(text))
        if found is None:
            raise InputError(f"option {text[:60]!r} is neither the key, a distractor nor the abstain option of item "
                             f"{self.items[item].item_id} in the items file (responses of another release?)",
                             path=self.source, line=line, field="options")
        return found

    def add(self, *, model: str, label: str, item_id: str, condition: str, trial: int,
            options: Sequence[tuple[str, str]], chosen: str | None, line: int) -> None:
        item = self.index.get(item_id)
        if item is None:
            raise InputError(f"item {item_id} is not in the items file", path=self.source, line=line,
                             field="item_id")
        roles = {letter: self.role(item, text, line=line) for letter, text in options}
        for r in roles.values():
            self.shown[condition][item, r] = True
        if condition == "answer_absent" and _KEY in roles.values():
            self.key_absent[item] += 1
        self.models.setdefault(model, label)
        if chosen is None:
            self.invalid += 1
            role = -1
        else:
            role = roles[chosen]
        self.cells.append((model, item, condition, trial, role))

    def build(self) -> ChoiceData:
        if not self.cells:
            raise InputError("no ArcticAbstain responses", path=self.source)
        models = list(self.models)
        trials = sorted({c[3] for c in self.cells})
        m_index = {m: i for i, m in enumerate(models)}
        t_index = {t: i for i, t in enumerate(trials)}
        choices: dict[str, Int8] = {c: np.full((len(models), len(self.items), len(trials)), -1, dtype=np.int8)
                                    for c in CONDITIONS}
        for model, item, condition, trial, role in self.cells:
            choices[condition][m_index[model], item, t_index[trial]] = role
        return ChoiceData(source=self.source, models=models, labels=dict(self.models), items=self.items,
                          trials=trials, choices=choices, shown=self.shown, responses=len(self.cells),
                          invalid=self.invalid, key_shown_absent=self.key_absent)


def load_published_choices(responses: Path | str, items: Sequence[EvalItem] | Path | str) -> ChoiceData:
    """A published ``responses.csv``/``.jsonl`` (validated and re-scored as ``evaluate report`` does:
    the strict parser on ``raw_response_text``) as option roles of ``items``."""
    path = Path(responses)
    if not path.exists():
        raise InputError("file not found", path=str(path))
    if path.suffix not in (".csv", ".jsonl"):
        raise InputError("expected a .csv or .jsonl responses file", path=str(path))
    item_list = load_items(items) if isinstance(items, Path | str) else list(items)
    builder = _Builder(item_list, str(path))
    records, lines = [], []
    for line, row, options in iter_published_rows(path):
        record = record_from_published(row, options, path=str(path), line=line)
        records.append(record)
        lines.append(line)
        chosen = None
        if record.outcome != "N0":
            chosen = parse_strict(record.raw_response_text, [o.letter for o in options])
        builder.add(model=record.model, label=record.model_label, item_id=record.item_id,
                    condition=record.condition, trial=record.trial,
                    options=[(o.letter, o.text) for o in options], chosen=chosen, line=line)
    check_unique_cells(records, lines, path=str(path))
    return builder.build()


def choices_from_rows(rows: Iterable[Mapping[str, Any]], items: Sequence[EvalItem], *, source: str) -> ChoiceData:
    """Store rows (``eval_response``: model, model_label, item_id, condition, trial, options,
    chosen_letter, outcome, details) of the published prompt as option roles of ``items``; rows
    of other prompt variants are left out (their wording differs)."""
    builder = _Builder(items, source)
    for n, row in enumerate(rows, start=1):
        details = row.get("details") or {}
        if str(details.get("variant") or "published") != "published":
            continue
        options = [(str(o["letter"]), str(o["text"])) for o in (row.get("options") or [])]
        chosen = row.get("chosen_letter") if row.get("outcome") != "N0" else None
        builder.add(model=str(row["model"]), label=str(row.get("model_label") or row["model"]),
                    item_id=str(row["item_id"]), condition=str(row["condition"]), trial=int(row["trial"]),
                    options=options, chosen=str(chosen) if chosen else None, line=n)
    return builder.build()


@dataclass
class ItemStats:
    """One item in one condition."""

    item_id: str
    condition: str
    valid: int
    answered: int
    abstained: int
    key_chosen: int
    #: share correct: the key among answered responses (present), abstaining among valid (absent)
    difficulty: float | None
    abstention_share: float | None
    #: corrected item-total point-biserial over the scored responses
    discrimination: float | None
    irt_a: float
    irt_a_ci: tuple[float, float]
    irt_b: float | None
    irt_b_ci: tuple[float, float] | None
    #: role -> responses choosing it
    chosen: dict[str, int]
    shown: list[str]
    key_shown_absent: int = 0


@dataclass(frozen=True)
class Suspect:
    item_id: str
    rule_id: str
    condition: str
    reason: str
    option: str = ""
    option_text: str = ""


@dataclass
class ItemAudit:
    source: str
    models: list[str]
    labels: dict[str, str]
    responses: int
    invalid: int
    resamples: int
    seed: int
    #: condition -> the fit (abilities per model, items' a and c)
    fits: dict[str, TwoPL]
    #: condition -> per model: share correct over its scored responses
    model_scores: dict[str, list[float | None]]
    stats: list[ItemStats]
    suspects: list[Suspect]
    #: item id -> the ranking score: the moved-key probability (:mod:`arcticqa.evaluate.keycheck`),
    #: or, below its minimum of items, the share of answered present responses not choosing the key
    scores: dict[str, float]
    items: dict[str, EvalItem]
    warnings: list[str] = field(default_factory=list)


def _scored(choices: Int8, condition: str) -> Float:
    """1 correct, 0 wrong, NaN not scored: present scores answered responses (key vs a distractor),
    absent scores every valid response (abstain vs an option)."""
    y = np.full(choices.shape, np.nan)
    if condition == "answer_present":
        y[(choices >= 1) & (choices <= 4)] = 0.0
        y[choices == _KEY] = 1.0
    else:
        y[(choices >= 0) & (choices <= 4)] = 0.0
        y[choices == _ABSTAIN] = 1.0
    return y


def _item_total(y: Float) -> Float:
    """Per item: the Pearson correlation, over scored responses, between the response (0/1) and
    its model's share correct on the *other* items (NaN where either does not vary)."""
    ok = ~np.isnan(y)
    ones = np.where(ok, y, 0.0)
    k_mi, n_mi = ones.sum(2), ok.sum(2).astype(np.float64)  # models x items
    k_m, n_m = k_mi.sum(1, keepdims=True), n_mi.sum(1, keepdims=True)
    rest_n = n_m - n_mi
    rest = np.divide(k_m - k_mi, rest_n, out=np.full_like(k_mi, np.nan), where=rest_n > 0)
    rest = np.where(n_mi > 0, rest, 0.0)
    n = n_mi.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx = (n_mi * rest).sum(0) / n
        my = k_mi.sum(0) / n
        cov = (k_mi * rest).sum(0) / n - mx * my
        vx = (n_mi * rest * rest).sum(0) / n - mx * mx
        vy = my * (1.0 - my)
        r = cov / np.sqrt(vx * vy)
    return np.asarray(np.where((vx > 1e-12) & (vy > 1e-12) & (n > 1), r, np.nan), dtype=np.float64)


def _top_half(theta: Float) -> list[int]:
    """The models of the top half by ability (at least two; ties at the cut are all in)."""
    order = np.argsort(-theta, kind="stable")
    want = max(2, math.ceil(len(theta) / 2))
    if len(theta) <= want:
        return list(order)
    cut = theta[order[want - 1]]
    return [int(m) for m in order if theta[m] >= cut - 1e-12]


def _option_text(item: EvalItem, role: int) -> str:
    if role == _KEY:
        return item.gold_answer
    if role == _ABSTAIN:
        return ABSTAIN_TEXT
    return item.distractors[role - 1]


def _converge(choices: Int8, group: Sequence[int], roles: Iterable[int], condition: str
              ) -> tuple[int, int, int, list[int]] | None:
    """The role most chosen by ``group`` among ``roles`` if it takes at least the condition's share
    (:data:`CONVERGE`) of the group's valid responses and is the majority choice of at least its
    number of the group's models: (role, its count, the group's valid responses, the models)."""
    share, least = CONVERGE[condition]
    sub = choices[list(group)]  # group x trials
    valid = int((sub >= 0).sum())
    if valid == 0:
        return None
    counts = {r: int((sub == r).sum()) for r in roles}
    role = max(counts, key=lambda r: (counts[r], -r))
    if counts[role] < share * valid:
        return None
    majority = [g for g in group if (choices[g] == role).sum() * 2 > (choices[g] >= 0).sum() > 0]
    if len(majority) < min(least, len(group)):
        return None
    return role, counts[role], valid, majority


def audit_items(data: ChoiceData, *, resamples: int = 200, seed: int = 7) -> ItemAudit:
    """Statistics, the IRT fit with bootstrap intervals, and the suspect flags."""
    fits: dict[str, TwoPL] = {}
    boots: dict[str, tuple[Float, Float]] = {}
    totals: dict[str, Float] = {}
    model_scores: dict[str, list[float | None]] = {}
    for condition in CONDITIONS:
        y = _scored(data.choices[condition], condition)
        ok = ~np.isnan(y)
        k, n = np.where(ok, y, 0.0).sum(2), ok.sum(2).astype(np.float64)
        fits[condition] = fit_items_on_rasch(k, n)
        boots[condition] = bootstrap_2pl(y, fits[condition], resamples=resamples, seed=seed) if resamples else (
            np.full((1, len(data.items)), np.nan), np.full((1, len(data.items)), np.nan))
        totals[condition] = _item_total(y)
        model_scores[condition] = [float(k[m].sum() / n[m].sum()) if n[m].sum() else None
                                   for m in range(len(data.models))]
    stats: list[ItemStats] = []
    for condition in CONDITIONS:
        ch = data.choices[condition]
        fit = fits[condition]
        boot_a, boot_b = boots[condition]
        with np.errstate(invalid="ignore"):
            a_ci = np.nanpercentile(boot_a, [2.5, 97.5], axis=0) if resamples else np.full((2, len(data.items)), np.nan)
        for i, item in enumerate(data.items):
            col = ch[:, i, :]
            counts = {ROLES[r]: int((col == r).sum()) for r in range(len(ROLES))}
            valid = int((col >= 0).sum())
            abstained = counts["abstain"]
            answered = valid - abstained
            key = counts["key"]
            if condition == "answer_present":
                difficulty = key / answered if answered else None
            else:
                difficulty = abstained / valid if valid else None
            a = float(fit.a[i])
            b: float | None = float(fit.b[i]) if abs(a) >= 0.25 else None
            b_ci = None
            if b is not None and resamples:
                bb = boot_b[:, i][np.isfinite(boot_b[:, i]) & (np.abs(boot_a[:, i]) >= 0.25)]
                if len(bb) >= max(10, resamples // 2):
                    b_ci = (float(np.percentile(bb, 2.5)), float(np.percentile(bb, 97.5)))
            r_it = totals[condition][i]
            stats.append(ItemStats(
                item_id=item.item_id, condition=condition, valid=valid, answered=answered, abstained=abstained,
                key_chosen=key, difficulty=difficulty, abstention_share=abstained / valid if valid else None,
                discrimination=None if np.isnan(r_it) else float(r_it), irt_a=a,
                irt_a_ci=(float(a_ci[0, i]), float(a_ci[1, i])), irt_b=b, irt_b_ci=b_ci, chosen=counts,
                shown=[ROLES[r] for r in range(len(ROLES)) if data.shown[condition][i, r]],
                key_shown_absent=int(data.key_shown_absent[i]) if condition == "answer_absent" else 0))
    moved = moved_key_scores(data.choices["answer_present"], data.shown["answer_present"], seed=seed)
    suspects = _flags(data, fits, stats, moved)
    by_item = {(s.item_id, s.condition): s for s in stats}
    scores = {}
    for i, item in enumerate(data.items):
        st = by_item[(item.item_id, "answer_present")]
        scores[item.item_id] = (float(moved[i]) if moved is not None
                                else 1 - st.key_chosen / st.answered if st.answered else 0.0)
    warnings = []
    if moved is None:
        warnings.append(f"the moved-key score needs at least {MIN_ITEMS} items and two models; items are ranked by "
                        "the share of answered answer-present responses not choosing the key, and "
                        f"{R_KEY_LOOKS_MOVED.id} is not checked")
    shown_key = int(data.key_shown_absent.sum())
    if shown_key:
        warnings.append(f"{shown_key} answer-absent response(s) on {int((data.key_shown_absent > 0).sum())} item(s) "
                        "showed the items file's key: those responses were collected under another key (for "
                        "instance a key changed after the run). They are scored against this file and counted "
                        "in key_shown_absent; no flag uses that fact.")
    for condition in CONDITIONS:
        if not fits[condition].converged:
            warnings.append(f"the {condition} IRT fit did not converge; its item parameters are approximate")
    return ItemAudit(source=data.source, models=data.models, labels=data.labels, responses=data.responses,
                     invalid=data.invalid, resamples=resamples, seed=seed, fits=fits, model_scores=model_scores,
                     stats=stats, suspects=suspects, scores=scores, items={it.item_id: it for it in data.items},
                     warnings=warnings)


def _names(data: ChoiceData, models: Sequence[int]) -> str:
    return ", ".join(data.models[m] for m in models)


def _interval(ci: tuple[float, float]) -> str:
    """`` (95% lo to hi)``, or nothing when there were no bootstrap refits."""
    return "" if any(math.isnan(v) for v in ci) else f" (95% {ci[0]:+z.2f} to {ci[1]:+z.2f})"


def _flags(data: ChoiceData, fits: Mapping[str, TwoPL], stats: Sequence[ItemStats], moved: Float | None
           ) -> list[Suspect]:
    by_item = {(s.item_id, s.condition): s for s in stats}
    out: list[Suspect] = []
    strong = _top_half(fits["answer_present"].theta)
    abstainers = _top_half(fits["answer_absent"].theta)
    for i, item in enumerate(data.items):
        present = by_item[(item.item_id, "answer_present")]
        scored = present.answered
        if (scored >= MIN_SCORED and present.discrimination is not None and present.discrimination <= LOW_R
                and present.irt_a <= LOW_A):
            out.append(Suspect(item.item_id, R_LOW_DISCRIMINATION.id, "answer_present",
                               f"corrected item-total r = {present.discrimination:+z.2f}, 2PL a = {present.irt_a:+z.2f}"
                               f"{_interval(present.irt_a_ci)}; key chosen in {present.key_chosen} of {scored} "
                               "answered responses"))
        ch = data.choices["answer_present"][:, i, :]
        found = _converge(np.where(ch == _ABSTAIN, -1, ch).astype(np.int8), strong, (1, 2, 3, 4), "answer_present")
        if found is not None:
            role, count, valid, models = found
            key = int((ch[strong] == _KEY).sum())
            if count >= 2 * key:
                out.append(Suspect(item.item_id, R_STRONG_CONVERGE.id, "answer_present",
                                   f"the strongest models ({_names(data, strong)}) chose {ROLES[role]} in {count} of "
                                   f"their {valid} answered responses and the key in {key}; {ROLES[role]} is the "
                                   f"majority answer of {_names(data, models)}",
                                   ROLES[role], _option_text(item, role)))
        if moved is not None and moved[i] >= MOVED_P:
            role = max((r for r in range(1, _ABSTAIN) if data.shown["answer_present"][i, r]),
                       key=lambda r: (int((ch == r).sum()), -r))
            out.append(Suspect(item.item_id, R_KEY_LOOKS_MOVED.id, "answer_present",
                               f"moved-key probability {moved[i]:.2f}: {ROLES[role]} chosen in {int((ch == role).sum())} "
                               f"and the key in {present.key_chosen} of {scored} answered responses; "
                               f"{int((ch == _ABSTAIN).sum())} abstained",
                               ROLES[role], _option_text(item, role)))
        ch = data.choices["answer_absent"][:, i, :]
        found = _converge(ch, abstainers, (1, 2, 3, 4), "answer_absent")
        if found is not None:
            role, count, valid, models = found
            out.append(Suspect(item.item_id, R_ABSENT_CONVERGE.id, "answer_absent",
                               f"the models that abstain best on the other items ({_names(data, abstainers)}) chose "
                               f"{ROLES[role]} in {count} of their {valid} answer-absent responses; it is the "
                               f"majority answer of {_names(data, models)}",
                               ROLES[role], _option_text(item, role)))
        every = [m for m in range(len(data.models)) if (data.choices["answer_present"][m, i] >= 0).any()]
        if (present.answered and present.key_chosen == present.answered
                and len(every) == len(data.models) and len(every) >= 2):
            options = [item.gold_answer, *item.distractors[:3]]
            cues = [name for name, strategy in STRATEGIES.items() if strategy(item.question, options) == {0}]
            if cues:
                out.append(Suspect(item.item_id, R_SHARED_CUE.id, "answer_present",
                                   f"all {len(every)} models chose the key in every answered response "
                                   f"({present.key_chosen}), and the cue-only "
                                   f"strateg{'y' if len(cues) == 1 else 'ies'} {', '.join(repr(c) for c in cues)} "
                                   "single(s) it out without reading the question", "key", item.gold_answer))
    return out


# -- outputs ------------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _num(value: float | None) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:z.6f}"


def item_texts(audit: ItemAudit) -> dict[str, str]:
    """ITEMS.md, item-stats.csv, suspects.csv and item-models.csv."""
    stats_rows = []
    for s in audit.stats:
        stats_rows.append([
            s.item_id, s.condition, s.valid, s.answered, s.abstained, s.key_chosen, _num(s.difficulty),
            _num(s.abstention_share), _num(s.discrimination), f6(s.irt_a), _num(s.irt_a_ci[0]), _num(s.irt_a_ci[1]),
            _num(s.irt_b), _num(s.irt_b_ci[0]) if s.irt_b_ci else "", _num(s.irt_b_ci[1]) if s.irt_b_ci else "",
            *(s.chosen[r] for r in ROLES), " ".join(r.replace(" ", "") for r in s.shown), s.key_shown_absent,
            f6(audit.scores[s.item_id]),
            " ".join(sorted({x.rule_id for x in audit.suspects if x.item_id == s.item_id and x.condition == s.condition})),
        ])
    stats_csv = csv_text(
        ["item_id", "condition", "valid", "answered", "abstained", "key_chosen", "difficulty", "abstention_share",
         "discrimination_item_total", "irt_a", "irt_a_low", "irt_a_high", "irt_b", "irt_b_low", "irt_b_high",
         "chose_key", "chose_distractor_1", "chose_distractor_2", "chose_distractor_3", "chose_distractor_4",
         "chose_abstain", "options_shown", "key_shown_absent", "suspect_score", "rules"], stats_rows)
    ordered = sorted(audit.suspects, key=lambda s: (-audit.scores[s.item_id], s.item_id, s.rule_id))
    suspects_csv = csv_text(["item_id", "rule_id", "condition", "option", "option_text", "reason", "suspect_score"],
                            [[s.item_id, s.rule_id, s.condition, s.option, s.option_text, s.reason,
                              f6(audit.scores[s.item_id])] for s in ordered])
    model_rows = [[m, audit.labels.get(m, m), f6(audit.fits[c].theta[j]), _num(audit.model_scores[c][j])]
                  for c in CONDITIONS for j, m in enumerate(audit.models)]
    models_csv = csv_text(["model", "model_label", "condition", "rasch_ability", "share_correct"],
                          [[r[0], r[1], c, r[2], r[3]] for r, c in
                           zip(model_rows, [c for c in CONDITIONS for _ in audit.models], strict=True)])
    return {"ITEMS.md": _markdown(audit, ordered), "item-stats.csv": stats_csv, "suspects.csv": suspects_csv,
            "item-models.csv": models_csv}


def _markdown(audit: ItemAudit, ordered: Sequence[Suspect]) -> str:
    n_items = len(audit.items)
    by_rule = Counter(s.rule_id for s in audit.suspects)
    lines = [
        "# Item audit from model responses",
        "",
        f"Source: {md_code(audit.source)}: {audit.responses} responses ({audit.invalid} invalid) of "
        f"{len(audit.models)} models on {n_items} items. IRT intervals: {audit.resamples} bootstrap refits "
        f"(seed {audit.seed}), models and trials drawn with replacement.",
        "",
        f"**{len({s.item_id for s in audit.suspects})} suspect item(s)**, {len(audit.suspects)} flag(s):",
        "",
        "| rule | flags | what it means |",
        "|---|---:|---|",
    ]
    lines += [f"| `{r.id}` | {by_rule.get(r.id, 0)} | {md_text(r.summary)} |" for r in SUSPECT_RULES]
    lines += ["", "## Models", "", "| model | Rasch ability (present) | share correct (present, answered) | "
              "Rasch ability (absent) | share abstaining (absent) |", "|---|---:|---:|---:|---:|"]
    for j, m in enumerate(audit.models):
        lines.append(f"| {md_text(audit.labels.get(m, m))} | {audit.fits['answer_present'].theta[j]:+z.2f} | "
                     f"{_pct(audit.model_scores['answer_present'][j])} | {audit.fits['answer_absent'].theta[j]:+z.2f} | "
                     f"{_pct(audit.model_scores['answer_absent'][j])} |")
    lines += ["", "## Suspects", ""]
    if not ordered:
        lines.append("No item is flagged.")
    else:
        lines += ["Ordered by `suspect_score` (the moved-key probability; docs/evaluation.md, \"Item audit\").", "",
                  "| item | rule | option | reason |", "|---|---|---|---|"]
        for s in ordered:
            option = f"{s.option}: {s.option_text}" if s.option else ""
            lines.append(f"| `{s.item_id}` | `{s.rule_id}` | {md_text(option)} | {md_text(s.reason)} |")
    if audit.warnings:
        lines += ["", "## Warnings", "", *(f"- {md_text(w)}" for w in audit.warnings)]
    lines += ["", "Statistics and rules: docs/evaluation.md, \"Item audit\". `item-stats.csv` holds every item "
              "and condition; `suspects.csv` one row per flag; `item-models.csv` the models' abilities.", ""]
    return "\n".join(lines)


def _label_groups(points: Sequence[tuple[float, float, str]], dx: float = 0.05, dy: float = 0.15
                  ) -> list[tuple[float, float, str]]:
    """One label per cluster of suspects: items that share a spot on the map (every model right, none
    abstaining, ...) would print their ids on top of each other, so a cluster of three or more is
    labelled with its count; the ids are in ``suspects.csv``."""
    groups: list[list[tuple[float, float, str]]] = []
    for point in sorted(points):
        # single linkage: a point near any member joins, and the groups it bridges become one
        near = [g for g in groups if any(abs(q[0] - point[0]) <= dx and abs(q[1] - point[1]) <= dy for q in g)]
        merged = [point] + [q for g in near for q in g]
        groups = [g for g in groups if g not in near] + [merged]
    return [(max(p[0] for p in g), max(p[1] for p in g),
             ", ".join(p[2] for p in sorted(g)) if len(g) < 3 else f"{len(g)} suspects") for g in groups]


def item_figure(audit: ItemAudit, png: Path, svg: Path) -> None:
    """Difficulty (share correct) against the 2PL slope per condition, suspects marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    flagged: dict[str, set[str]] = {}
    for s in audit.suspects:
        flagged.setdefault(s.condition, set()).add(s.item_id)
    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.6), sharey=True)
    for ax, condition, title in zip(axes, CONDITIONS, ("answer present: share of answered choosing the key",
                                                       "answer absent: share abstaining"), strict=True):
        rows = [s for s in audit.stats if s.condition == condition and s.difficulty is not None]
        marks = flagged.get(condition, set())
        for group, colour, size, label in ((False, "0.55", 12, "item"), (True, "tab:red", 30, "suspect")):
            pick = [st for st in rows if (st.item_id in marks) == group]
            if not pick:
                continue
            x = [st.difficulty for st in pick]
            y = [st.irt_a for st in pick]
            low = [st.irt_a - st.irt_a_ci[0] if not math.isnan(st.irt_a_ci[0]) else 0.0 for st in pick]
            high = [st.irt_a_ci[1] - st.irt_a if not math.isnan(st.irt_a_ci[1]) else 0.0 for st in pick]
            if group:
                ax.errorbar(x, y, yerr=[low, high], fmt="none", ecolor=colour, alpha=0.5, linewidth=0.8)
            ax.scatter(x, y, s=size, color=colour, label=f"{label} ({len(pick)})", zorder=3,
                       marker="D" if group else "o")
            if group:
                for gx, gy, text in _label_groups([(st.difficulty or 0.0, st.irt_a, st.item_id[-6:]) for st in pick]):
                    ax.annotate(text, (gx, gy), fontsize=6, xytext=(3, 3), textcoords="offset points", color=colour)
        ax.axhline(0.0, color="0.6", linewidth=0.8, zorder=0)
        ax.set_xlim(-0.03, 1.03)
        ax.set_xlabel(title, fontsize=8)
        ax.set_title(condition.replace("_", " "), fontsize=9)
        ax.grid(color="0.93")
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    axes[0].set_ylabel("2PL discrimination a (on Rasch abilities; 95% bootstrap interval for suspects)", fontsize=8)
    fig.suptitle(f"Item map: {len(audit.items)} items, {len(audit.models)} models", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def write_figures(audit: ItemAudit) -> list[Callable[[Path], None]]:
    return [lambda folder: item_figure(audit, folder / "item-map.png", folder / "item-map.svg")]

