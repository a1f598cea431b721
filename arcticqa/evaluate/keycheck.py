"""Does an item's answer pattern look like another item's with its key moved to a distractor?

A key that is wrong is, to the models, an ordinary item whose *label* sits on the wrong option:
the models answer the true option as they would on any item, and the listed key gets the share a
distractor gets. The audit's own items therefore show what both look like. Every item is taken as
it is listed (class 0) and once per shown distractor with the key and that distractor exchanged
(class 1); a logistic regression over per-model features learns to tell them apart, and each
item is scored by a fit that never saw it (cross-fitting over folds of items), so an item cannot
vouch for itself.

Per model the features are the shares of its valid responses on the key, on the distractor the
models choose most, and on the abstain option. The abstain share is what a raw count lacks: on an
item that is merely hard the models that know when they do not know abstain while the others
converge on a distractor; on a moved key they answer, and answer the same option, as they do on
the easy items they know. Nothing here is specific to a model: the weights are fitted on each
audit's own responses.

The score is a probability with the two classes weighted equally (the relabelled copies outnumber
the items about three to one; that ratio is taken out of the logit).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["MIN_ITEMS", "moved_key_scores"]

#: fewer items than this (or a single model) give no fit: the audit falls back to the raw share
MIN_ITEMS = 20

_KEY, _ABSTAIN = 0, 5
_FOLDS = 5
#: ridge penalty on the standardised weights: with 3 features a model and a few hundred items the
#: fit would otherwise chase single models' trial noise
_L2 = 10.0


def _features(present: NDArray[np.int8], distractors: list[int]) -> NDArray[np.float64]:
    """items x (3 x models): per model the shares of its valid responses on the key, on the
    distractor all models chose most, and on abstain. Distractors tied for most chosen count as
    their mean, so a distractor's rank never matters."""
    valid = np.maximum((present >= 0).sum(2), 1).astype(np.float64)  # models x items
    key = (present == _KEY).sum(2) / valid
    per_role = np.stack([(present == r).sum(2) for r in distractors], 2)  # models x items x roles
    pooled = per_role.sum(0)  # items x roles
    top = pooled == pooled.max(1, keepdims=True)
    chosen = (per_role * top[None]).sum(2) / top.sum(1)[None] / valid
    abstain = (present == _ABSTAIN).sum(2) / valid
    return np.asarray(np.concatenate([key, chosen, abstain], 0).T, dtype=np.float64)


def _exchange(present: NDArray[np.int8], item: int, role: int) -> None:
    cell = present[:, item, :]
    key, other = cell == _KEY, cell == role
    cell[key], cell[other] = role, _KEY


def _fit(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """L2-penalised logistic regression by Newton's method (the intercept unpenalised)."""
    x1 = np.c_[np.ones(len(x)), x]
    penalty = _L2 * np.eye(x1.shape[1])
    penalty[0, 0] = 0.0
    w = np.zeros(x1.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x1 @ w)))
        grad = x1.T @ (p - y) + penalty @ w
        hess = x1.T @ (x1 * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-9:
            break
    return w


def moved_key_scores(present: NDArray[np.int8], shown: NDArray[np.bool_], *, seed: int = 7
                     ) -> NDArray[np.float64] | None:
    """Per item, the cross-fitted probability that its answer-present responses look like an
    item's whose key was exchanged with a distractor; ``None`` below :data:`MIN_ITEMS` items or
    with a single model.

    ``present`` is models x items x trials of role indices (0 key, 1–4 distractors, 5 abstain, -1
    no valid response); ``shown`` is items x roles, whether the role was ever shown.
    """
    models, n, _ = present.shape
    if n < MIN_ITEMS or models < 2:
        return None
    distractors = [r for r in range(1, _ABSTAIN) if shown[:, r].any()]
    listed = _features(present, distractors)
    copies, owner = [], []
    for role in distractors:
        items = np.flatnonzero(shown[:, role])
        moved = present.copy()
        for i in items:
            _exchange(moved, int(i), role)
        copies.append(_features(moved, distractors)[items])
        owner.append(items)
    moved_x, moved_owner = np.concatenate(copies), np.concatenate(owner)
    fold = np.random.default_rng(seed).permutation(n) % _FOLDS
    logit = np.zeros(n)
    for f in range(_FOLDS):
        train = fold != f
        train_moved = train[moved_owner]
        x = np.r_[listed[train], moved_x[train_moved]]
        y = np.r_[np.zeros(int(train.sum())), np.ones(int(train_moved.sum()))]
        mean, sd = x.mean(0), x.std(0) + 1e-9
        w = _fit((x - mean) / sd, y)
        test = ~train
        logit[test] = np.c_[np.ones(int(test.sum())), (listed[test] - mean) / sd] @ w
        logit[test] -= np.log(train_moved.sum() / train.sum())
    return np.asarray(1.0 / (1.0 + np.exp(-logit)), dtype=np.float64)
