"""ArcticAbstain items (a release ``items.jsonl``), the two conditions and the per-call option order.

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
from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.parse import Condition, ShownOption
from arcticqa.release.conditions import distractor_option_id
from arcticqa.release.jsonio import iter_jsonl, shown

__all__ = ["EvalItem", "load_items", "option_id_for", "order_seed", "condition_options", "shown_options",
           "abstain_slot"]


@dataclass(frozen=True)
class EvalItem:
    item_id: str
    question: str
    question_context: str
    gold_answer: str
    #: distractor texts by rank 0..3
    distractors: tuple[str, str, str, str]
    eval_set_id: str | None = None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def option_id_for(text: str) -> str:
    return distractor_option_id(text)


def load_items(path: Path | str) -> list[EvalItem]:
    """Items of a release ``items.jsonl`` (ArcticQA v1 or ours), in id order."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    items: dict[str, EvalItem] = {}
    # the hardened reader: size cap, strict UTF-8 and JSON, depth limit, truncated last line
    for line_no, row in iter_jsonl(path, skip_blank=True):
        for field in ("item_id", "question", "gold_answer"):
            if not isinstance(row.get(field), str) or not row[field]:
                raise InputError("missing or empty", path=name, line=line_no, field=field)
        distractors = row.get("distractors")
        by_rank: dict[int, str] = {}
        if isinstance(distractors, list):
            for d in distractors:
                if isinstance(d, dict) and isinstance(d.get("rank"), int) and isinstance(d.get("text"), str):
                    by_rank[d["rank"]] = d["text"]
        if sorted(by_rank) != [0, 1, 2, 3]:
            raise InputError("need four distractors with rank 0-3 and text", path=name, line=line_no,
                             field="distractors")
        if row["item_id"] in items:
            raise InputError(f"duplicate item_id {shown(row['item_id'])}", path=name, line=line_no,
                             field="item_id")
        context = row.get("question_context") or ""
        if not isinstance(context, str):
            raise InputError("must be a string", path=name, line=line_no, field="question_context")
        items[row["item_id"]] = EvalItem(
            item_id=row["item_id"], question=row["question"], question_context=context,
            gold_answer=row["gold_answer"],
            distractors=(by_rank[0], by_rank[1], by_rank[2], by_rank[3]),
            eval_set_id=row.get("eval_set_id") or None,
        )
    if not items:
        raise InputError("no items in file", path=name)
    return [items[k] for k in sorted(items)]


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
