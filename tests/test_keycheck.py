"""The moved-key score (arcticqa.evaluate.keycheck) on responses generated from a known truth.

The generator follows what the v1 responses show: models that know when they do not know abstain
on items too hard for them and answer the rest well; the others never abstain and fall for the most
attractive distractor. A moved key is one item's responses with its key and a distractor
exchanged; a hard item is one few models know, which the careful models abstain on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from arcticqa.evaluate.keycheck import MIN_ITEMS, moved_key_scores

_MODELS = 8
#: per model: how hard an item it still knows, and whether it abstains when it does not know
_REACH = np.linspace(0.3, 0.9, _MODELS)
_CAREFUL = np.array([True, False] * (_MODELS // 2))


def _responses(n: int, *, seed: int, moved: tuple[int, ...] = (), hard: tuple[int, ...] = ()) -> np.ndarray:
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.0, 0.7, n)
    difficulty[list(hard)] = 0.97
    out = np.empty((_MODELS, n, 3), dtype=np.int8)
    for i in range(n):
        lure = int(rng.integers(1, 4))  # the item's most attractive distractor
        for m in range(_MODELS):
            for t in range(3):
                if rng.random() < _REACH[m] - difficulty[i] + 0.1 * rng.standard_normal():
                    out[m, i, t] = 0
                elif _CAREFUL[m]:
                    out[m, i, t] = 5
                else:
                    out[m, i, t] = lure if rng.random() < 0.7 else int(rng.integers(1, 4))
    for i in moved:
        cell = out[:, i, :]
        key, other = cell == 0, cell == 1
        cell[key], cell[other] = 1, 0
    return out


def _shown(n: int) -> np.ndarray:
    shown = np.zeros((n, 6), dtype=bool)
    shown[:, [0, 1, 2, 3, 5]] = True
    return shown


def test_a_moved_key_outranks_hard_items_the_raw_share_cannot_tell_apart() -> None:
    n = 120
    moved, hard = (3, 40, 77), (10, 11, 50, 51, 90, 91)
    present = _responses(n, seed=4, moved=moved, hard=hard)
    scores = moved_key_scores(present, _shown(n))
    assert scores is not None and scores.shape == (n,)
    answered = ((present >= 0) & (present != 5)).sum((0, 2))
    raw = 1 - (present == 0).sum((0, 2)) / answered
    # the raw share puts a hard item at or above some moved key; the moved-key score puts every
    # moved key above every hard item, and above even odds
    assert raw[list(hard)].max() >= raw[list(moved)].min()
    assert scores[list(moved)].min() > scores[list(hard)].max()
    assert scores[list(moved)].min() > 0.5
    untouched = np.setdiff1d(np.arange(n), moved)
    assert np.median(scores[untouched]) < 0.5


def test_same_seed_same_scores_and_too_few_items_give_none() -> None:
    present = _responses(40, seed=9, moved=(5,))
    first = moved_key_scores(present, _shown(40), seed=3)
    assert first is not None
    again = moved_key_scores(present.copy(), _shown(40), seed=3)
    assert again is not None and np.array_equal(first, again)
    assert moved_key_scores(present[:, : MIN_ITEMS - 1], _shown(MIN_ITEMS - 1)) is None
    assert moved_key_scores(present[:1], _shown(40)) is None


def test_scores_do_not_depend_on_model_order_or_distractor_ranks() -> None:
    """Which model comes first and which rank a distractor has are bookkeeping, not evidence:
    25 seeded rewrites (models permuted, distractor ranks permuted) give the same scores."""
    rng = np.random.default_rng(0)
    for seed in range(5):
        present = _responses(60, seed=seed, moved=(7, 30))
        base = moved_key_scores(present, _shown(60))
        assert base is not None
        for _ in range(5):
            mapping = np.arange(6)
            mapping[[1, 2, 3]] = rng.permutation([1, 2, 3])
            order = rng.permutation(_MODELS)
            rewritten = np.where(present >= 0, mapping[np.clip(present, 0, 5)], present).astype(np.int8)[order]
            scores = moved_key_scores(rewritten, _shown(60))
            assert scores is not None
            np.testing.assert_allclose(scores, base, atol=1e-6)


def test_v1_moved_key_flags_name_the_option_the_models_chose(arcticqa_v1: Path) -> None:
    from arcticqa.evaluate.itemaudit import audit_items, load_published_choices

    root = arcticqa_v1
    audit = audit_items(load_published_choices(root / "responses.csv", root / "items.jsonl"), resamples=0)
    moved = [s for s in audit.suspects if s.rule_id == "items.key_looks_moved"]
    assert moved, "v1 has items whose answers look like a moved key"
    for s in moved:
        assert audit.scores[s.item_id] >= 0.8
        assert s.option.startswith("distractor") and s.option_text
    assert all(0.0 <= v <= 1.0 for v in audit.scores.values())
