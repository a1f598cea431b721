"""ArcticAbstain items (a release ``items.jsonl``), the two conditions and the per-call option order.

The items are read by the evaluator's one release-items reader (:mod:`arcticqa.evaluate.releaseitems`,
re-exported here); this module adds what ArcticAbstain shows of them.

Answer present shows the gold answer, distractors of rank 0-2 and the abstain option; answer
absent shows distractors of rank 0-3 and the abstain option. Option ids follow the release
(``gold``, ``abstain``, ``distractor-`` + 20 hex of sha256 of ``json.dumps([text], ensure_ascii=False)``).

Option order is reshuffled for every call. The scheme (stored with every response):

- ``order_seed = sha256("arcticqa-order|<eval_set>|<item_id>|<condition>|<trial>|<model>")`` (hex);
- options are sorted by ``sha256("arcticqa-position|<order_seed>|<option_id>")`` and given the
  letters A-E in that order.

``eval_set`` is the item's own ``eval_set_id`` when it has one (ArcticQA v1 items do), else the
run's configured eval set name.

A prompt variant may move the abstain option (the others keep the order above): ``first``,
``last``, or ``seeded``: position ``int(sha256("arcticqa-abstain-slot|<seed>|<item_id>"), 16) % 5``,
the same for every condition, trial and model of the item.
"""

from __future__ import annotations

import hashlib

from arcticqa.evaluate.arcticabstain.parse import Condition, ShownOption
from arcticqa.evaluate.releaseitems import EvalItem, load_items
from arcticqa.release.conditions import distractor_option_id

__all__ = ["EvalItem", "load_items", "option_id_for", "order_seed", "condition_options", "shown_options",
           "abstain_slot"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def option_id_for(text: str) -> str:
    return distractor_option_id(text)


def condition_options(item: EvalItem, condition: Condition,
                      abstain_text: str = "I abstain from answering") -> list[tuple[str, str, str]]:
    """(option_id, kind, text) of a condition, in listing order."""
    abstain = ("abstain", "abstain", abstain_text)
    if condition == "answer_present":
        return [("gold", "gold", item.gold_answer),
                *((option_id_for(t), "distractor", t) for t in item.distractors[:3]), abstain]
    return [*((option_id_for(t), "distractor", t) for t in item.distractors), abstain]


def order_seed(eval_set: str, item_id: str, condition: str, trial: int, model: str) -> str:
    return _sha(f"arcticqa-order|{eval_set}|{item_id}|{condition}|{trial}|{model}")


def abstain_slot(item_id: str, seed: int) -> int:
    """The abstain option's 0-based place under the ``seeded`` position (one per item and seed)."""
    return int(_sha(f"arcticqa-abstain-slot|{seed}|{item_id}"), 16) % 5


def shown_options(item: EvalItem, condition: Condition, seed: str, *, letters: str = "ABCDE",
                  abstain_text: str = "I abstain from answering", abstain_position: str = "shuffled",
                  position_seed: int = 0) -> tuple[ShownOption, ...]:
    listed = condition_options(item, condition, abstain_text)
    ordered = sorted(listed, key=lambda o: _sha(f"arcticqa-position|{seed}|{o[0]}"))
    if abstain_position != "shuffled":
        abstain = next(o for o in ordered if o[1] == "abstain")
        others = [o for o in ordered if o is not abstain]
        slot = {"first": 0, "last": len(others)}.get(abstain_position)
        if slot is None:
            if abstain_position != "seeded":
                raise ValueError(f"unknown abstain position {abstain_position!r}")
            slot = abstain_slot(item.item_id, position_seed)
        ordered = [*others[:slot], abstain, *others[slot:]]
    return tuple(ShownOption(letter, kind, text, option_id)  # type: ignore[arg-type]
                 for letter, (option_id, kind, text) in zip(letters, ordered, strict=True))
