"""The item audit on ArcticQA v1: wall time of `arcticqa evaluate items`, and (``--study``) the
planted-mislabel study: swap the key with a shown distractor on k items (seeded, many draws),
re-score the real responses against the swapped keys, and report how well the naive score and the
audit's ``suspect_score`` (the moved-key probability) separate swapped from untouched items (AUROC,
recall at a 10% flag rate), overall and by what the swapped item was before.

    python -m bench.bench_items [--study] [--draws 200] [--k 10]

The answer-absent responses were collected with the original key hidden, so swapped items are
re-scored on the answer-present responses only (see docs/evaluation.md, "Planted mislabels").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

V1 = Path(__file__).resolve().parents[1].parent / "shared" / "arcticqa-v1"


def _auroc(score: np.ndarray, y: np.ndarray) -> float:
    pos, neg = score[y == 1], score[y == 0]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def _recall_at(score: np.ndarray, y: np.ndarray, share: float) -> float:
    top = np.argsort(-score, kind="stable")[: max(1, round(share * len(score)))]
    return float(y[top].sum() / y.sum())


def study(draws: int, k: int, seed: int) -> None:
    from arcticqa.evaluate import itemaudit

    base = itemaudit.load_published_choices(V1 / "responses.csv", V1 / "items.jsonl")
    rng = np.random.default_rng(seed)
    n = len(base.items)
    present0 = base.choices["answer_present"]
    answered0 = ((present0 >= 0) & (present0 != 5)).sum((0, 2))
    # the items fewer than 20% of answered present responses get right: a swap there moves the key
    # between two options the models mostly avoid, which no present-condition signal can see
    hard = (present0 == 0).sum((0, 2)) < 0.2 * answered0
    names = ("naive", "suspect_score")
    overall: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    # every swapped item against the untouched items that are hard and against the others: the hard
    # ones look like moved keys to any score that reads answers, and some may well be
    against: dict[str, dict[bool, list[float]]] = {name: {True: [], False: []} for name in names}
    by_origin: dict[str, dict[bool, list[float]]] = {name: {True: [], False: []} for name in names}
    for _ in range(draws):
        swapped = rng.choice(n, size=k, replace=False)
        choices = {c: a.copy() for c, a in base.choices.items()}
        items = list(base.items)
        for i in swapped:
            role = int(rng.integers(1, 4))  # a distractor shown in both conditions (rank 0-2)
            present = choices["answer_present"][:, i, :]
            key, other = present == 0, present == role
            present[key], present[other] = role, 0
            item = items[i]
            d = list(item.distractors)
            d[role - 1], gold = item.gold_answer, d[role - 1]
            items[i] = replace(item, gold_answer=gold, distractors=(d[0], d[1], d[2], d[3]))
            # the absent responses saw the original key hidden: their choices stay as recorded
        data = replace(base, choices=choices, items=items)
        audit = itemaudit.audit_items(data, resamples=0)
        y = np.zeros(n)
        y[swapped] = 1
        stats = {s.item_id: s for s in audit.stats if s.condition == "answer_present"}
        naive = np.array([1 - stats[it.item_id].key_chosen / max(stats[it.item_id].answered, 1) for it in items])
        score = np.array([audit.scores[it.item_id] for it in items])
        for name, s in zip(names, (naive, score), strict=True):
            overall[name].append((_auroc(s, y), _recall_at(s, y, 0.10)))
            for group in (True, False):
                keep = (y == 1) | (hard == group)
                against[name][group].append(_auroc(s[keep], y[keep]))
            negatives = s[y == 0]
            for i in swapped:  # each swapped item's share of untouched items it outranks
                beaten = float((s[i] > negatives).mean() + 0.5 * (s[i] == negatives).mean())
                by_origin[name][bool(hard[i])].append(beaten)
    print(f"planted-mislabel study: {draws} draws, {k} swapped items of {n}, seed {seed}")
    for name in names:
        arr = np.array(overall[name])
        print(f"  {name:13s} AUROC {arr[:, 0].mean():.3f} (sd {arr[:, 0].std():.3f}), recall at 10% flagged "
              f"{arr[:, 1].mean():.3f}; AUROC of swaps on the {int(hard.sum())} items under 20% correct "
              f"{np.mean(by_origin[name][True]):.3f}, on the others {np.mean(by_origin[name][False]):.3f}; "
              f"AUROC against the untouched hard items {np.mean(against[name][True]):.3f}, against the other "
              f"untouched items {np.mean(against[name][False]):.3f}")
    gain = np.array(overall["suspect_score"])[:, 0] - np.array(overall["naive"])[:, 0]
    print(f"  suspect_score - naive, paired by draw: AUROC {gain.mean():+.3f} (sd {gain.std():.3f}), higher in "
          f"{int((gain > 0).sum())} of {draws} draws, lower in {int((gain < 0).sum())}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--study", action="store_true")
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=38)
    args = parser.parse_args()
    if not (V1 / "responses.csv").exists():
        print(f"ArcticQA v1 not found at {V1}; nothing to measure")
        return
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [str(Path(sys.executable).parent / "arcticqa"), "evaluate", "items", "--responses",
               str(V1 / "responses.csv"), "--out", str(Path(tmp) / "items")]
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        wall = time.perf_counter() - start
    print(done.stdout.strip())
    print(f"evaluate items on v1 (9,312 responses, with the figure, 200 bootstrap refits): {wall:.2f} s wall")
    if args.study:
        study(args.draws, args.k, args.seed)


if __name__ == "__main__":
    main()
