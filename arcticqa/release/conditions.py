"""The two benchmark conditions of each item, exactly as ArcticQA v1 lists them.

Answer present: gold, distractors of rank 0–2, abstain. Answer absent: distractors of rank 0–3,
abstain. Option ids reproduce the published ones: ``gold``, ``abstain`` and
``distractor-`` + the first 20 hex digits of SHA-256 over the JSON array ``[text]``
(``json.dumps([text], ensure_ascii=False)``), checked against every option of the published
``conditions.jsonl``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from arcticqa.release.models import ABSTAIN_TEXT, ConditionOption, ConditionRecord, ReleaseItem

__all__ = ["OPTION_ORDER_NOTE", "distractor_option_id", "build_conditions", "conditions_for"]

#: the v1 ``option_order`` note: the listing order is fixed, each call shuffles again
OPTION_ORDER_NOTE = "shuffled per call; responses.jsonl holds the letters each call showed"


def distractor_option_id(text: str) -> str:
    digest = hashlib.sha256(json.dumps([text], ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"distractor-{digest[:20]}"


def conditions_for(item: ReleaseItem, *, abstain_text: str = ABSTAIN_TEXT) -> list[ConditionRecord]:
    """Both conditions of one item, answer present first."""
    ranked = sorted(item.distractors, key=lambda d: d.rank)
    abstain = ConditionOption(option_id="abstain", kind="abstain", text=abstain_text)

    def _opts(texts: list[str]) -> list[ConditionOption]:
        return [ConditionOption(option_id=distractor_option_id(t), kind="distractor", text=t)
                for t in texts]

    dropped = item.distractor(3)
    present = ConditionRecord(
        item_id=item.item_id, condition="answer_present", question=item.question,
        question_context=item.question_context,
        options=[ConditionOption(option_id="gold", kind="gold", text=item.gold_answer),
                 *_opts([d.text for d in ranked if d.rank < 3]), abstain],
        correct_action="choose_gold_answer", correct_option_text=item.gold_answer,
        dropped_distractor=dropped.text if dropped else None, option_order=OPTION_ORDER_NOTE,
    )
    absent = ConditionRecord(
        item_id=item.item_id, condition="answer_absent", question=item.question,
        question_context=item.question_context,
        options=[*_opts([d.text for d in ranked]), abstain],
        correct_action="abstain", correct_option_text=abstain_text, dropped_distractor=None,
        option_order=OPTION_ORDER_NOTE,
    )
    return [present, absent]


def build_conditions(items: Iterable[ReleaseItem], *,
                     abstain_text: str = ABSTAIN_TEXT) -> list[ConditionRecord]:
    """Both conditions of every item, items in id order (the order ``conditions.jsonl`` uses)."""
    out: list[ConditionRecord] = []
    for item in sorted(items, key=lambda i: i.item_id):
        out.extend(conditions_for(item, abstain_text=abstain_text))
    return out
