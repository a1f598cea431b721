"""The item audit's stored inputs: which protocols' responses it reads, and how each maps onto its
option roles (:class:`~arcticqa.evaluate.itemaudit.ChoiceData`).

The audit names every shown option by its text against a release ``items.jsonl`` (``key``,
``distractor k``, ``abstain``) in two conditions (``answer_present``, ``answer_absent``). A
protocol maps onto that when its responses chose one of a release item's options:

- ``arcticabstain``: as recorded; the reference prompt (``published``) only, since the other
  prompt variants word the options differently.
- ``abstainqa`` (questions made from a release ``items.jsonl``): ``<item_id>#present``
  (answerable: the key and distractors 1-3) is ``answer_present`` of ``<item_id>``,
  ``<item_id>#absent`` (unanswerable: distractors 1-4) is ``answer_absent``, the IDK/NOTA option
  is ``abstain``. One prompt variant per audit (the variant is the stored condition), default
  ``standard``. Questions of an Abstain-QA import file belong to no release item and are refused.

Not mappable, refused with the reason (:data:`UNMAPPABLE`): ``know2guess`` and ``open``.

A store may hold one protocol's responses under several eval sets (each its own option order, the
same cells); one audit reads one eval set, so several need ``--eval-set``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.abstainqa.items import IDK_TEXT
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.itemaudit import ABSTAIN_TEXT, ChoiceData, choices_from_rows
from arcticqa.evaluate.recorded import load_protocol_rows

__all__ = ["MAPPED", "UNMAPPABLE", "StoreSelection", "held_protocols", "choose_protocol", "store_choices"]

#: the protocols the audit reads -> the prompt variant it reads unless told another
MAPPED: dict[str, str] = {"arcticabstain": "published", "abstainqa": "standard"}

#: the protocols it cannot read -> why
UNMAPPABLE: dict[str, str] = {
    "know2guess": "its questions have no answer options (an open-ended answer or ABSTAIN, graded against the "
                  "gold text) and are not a release's items, so no response chose a key, distractor or abstain "
                  "option",
    "open": "its answers are in words without options, graded against the key only: a wrong answer names no "
            "distractor, and it has no answer-absent condition",
}

_COLUMNS = ("eval_set", "model", "model_label", "item_id", "condition", "trial", "options", "chosen_letter",
            "outcome", "details")
_ABSTAINQA_CONDITIONS = {"present": "answer_present", "absent": "answer_absent"}


@dataclass(frozen=True)
class StoreSelection:
    """What one audit read from the store."""

    protocol: str
    variant: str
    eval_set: str
    responses: int

    def describe(self) -> str:
        return f"{self.protocol} responses, prompt variant {self.variant}, eval set {self.eval_set}"


def held_protocols(engine: Engine, names: Sequence[str]) -> dict[str, int]:
    """How many responses the store holds of each of ``names`` (those it holds any of)."""
    counts = {name: len(load_protocol_rows(engine, name, ("trial",))) for name in names}
    return {name: n for name, n in counts.items() if n}


def _held_text(held: Mapping[str, int]) -> str:
    return ", ".join(f"{name} ({n})" for name, n in held.items()) or "none"


def choose_protocol(held: Mapping[str, int], protocol: str | None, *, source: str) -> str:
    """The protocol to audit: ``protocol`` when it can be mapped and the store holds it; else the one
    mappable protocol the store holds. Several need ``--protocol``: each is its own audit (its own
    items' abilities and flags), and the report folder should not depend on what the store holds."""
    if protocol is not None:
        if protocol in UNMAPPABLE:
            raise ConfigError(f"--protocol {protocol}: the item audit cannot read {protocol} responses: "
                              f"{UNMAPPABLE[protocol]} (it reads {', '.join(MAPPED)})")
        if protocol not in MAPPED:
            raise ConfigError(f"--protocol {protocol}: the item audit reads {', '.join(MAPPED)} responses")
        if not held.get(protocol):
            raise ConfigError(f"{source}: the store holds no {protocol} responses (it holds: {_held_text(held)})")
        return protocol
    mappable = [name for name in MAPPED if held.get(name)]
    if not mappable:
        why = "".join(f"; {name}: {UNMAPPABLE[name]}" for name in held if name in UNMAPPABLE)
        raise ConfigError(f"{source}: the store holds no responses the item audit can read ({', '.join(MAPPED)}); "
                          f"it holds: {_held_text(held)}{why}")
    if len(mappable) > 1:
        raise ConfigError(f"{source}: the store holds responses of {_held_text({m: held[m] for m in mappable})}: "
                          f"give --protocol {' or --protocol '.join(mappable)} (each is its own audit and report "
                          "folder)")
    return mappable[0]


def _variant(protocol: str, row: Mapping[str, Any]) -> str:
    if protocol == "arcticabstain":
        return str((row.get("details") or {}).get("variant") or "published")
    return str(row["condition"])


def _pick(kind: str, flag: str, held: Counter[str], wanted: str | None, default: str | None, *, protocol: str,
          source: str) -> str:
    listed = ", ".join(f"{name} ({n})" for name, n in sorted(held.items()))
    if wanted is not None:
        if wanted not in held:
            raise ConfigError(f"{flag} {wanted}: the store holds no {protocol} responses of that {kind} "
                              f"(it holds: {listed})")
        return wanted
    if default is not None and default in held:
        return default
    if len(held) == 1:
        return next(iter(held))
    raise ConfigError(f"{source}: the store holds {protocol} responses of several {kind}s ({listed}): give {flag}")


def _abstainqa_row(row: Mapping[str, Any], n: int, *, source: str) -> dict[str, Any]:
    """An Abstain-QA row in ArcticAbstain's shape: the release item, the condition its question
    stands for, the IDK/NOTA option as the abstain option."""
    question = str(row["item_id"])
    item_id, _, suffix = question.rpartition("#")
    condition = _ABSTAINQA_CONDITIONS.get(suffix)
    if not item_id or condition is None:
        raise InputError(f"Abstain-QA question {question!r} is not one of a release item's questions "
                         "(<item_id>#present or <item_id>#absent): questions of an import file have no release "
                         "item to audit", path=source, line=n, field="item_id")
    answerable = (row.get("details") or {}).get("answerable")
    if answerable is not None and bool(answerable) != (condition == "answer_present"):
        raise InputError(f"question {question!r} is recorded as {'' if answerable else 'un'}answerable",
                         path=source, line=n, field="details.answerable")
    options = []
    for option in row.get("options") or []:
        abstain = option.get("kind") == "abstain" or option.get("text") == IDK_TEXT
        options.append({"letter": option["letter"], "text": ABSTAIN_TEXT if abstain else option["text"]})
    return {"model": row["model"], "model_label": row.get("model_label"), "item_id": item_id,
            "condition": condition, "trial": row["trial"], "options": options,
            "chosen_letter": row.get("chosen_letter"), "outcome": row.get("outcome"), "details": None}


def store_choices(engine: Engine, protocol: str, items: Sequence[EvalItem], *, source: str,
                  variant: str | None = None, eval_set: str | None = None) -> tuple[ChoiceData, StoreSelection]:
    """One protocol's stored responses (one prompt variant, one eval set) as option roles of
    ``items``, and what was read."""
    if protocol not in MAPPED:
        raise ConfigError(f"the item audit reads {', '.join(MAPPED)} responses, not {protocol}")
    rows = load_protocol_rows(engine, protocol, _COLUMNS)
    chosen_set = _pick("eval set", "--eval-set", Counter(str(r["eval_set"]) for r in rows), eval_set, None,
                       protocol=protocol, source=source)
    rows = [r for r in rows if r["eval_set"] == chosen_set]
    chosen_variant = _pick("prompt variant", "--variant", Counter(_variant(protocol, r) for r in rows), variant,
                           MAPPED[protocol], protocol=protocol, source=source)
    if protocol == "arcticabstain" and chosen_variant != "published":
        raise ConfigError(f"--variant {chosen_variant}: the item audit reads ArcticAbstain's published prompt only "
                          "(its other variants word the options differently)")
    rows = [r for r in rows if _variant(protocol, r) == chosen_variant]
    if protocol == "abstainqa":
        rows = [_abstainqa_row(r, n, source=source) for n, r in enumerate(rows, start=1)]
    label = f"{source} ({protocol}, {chosen_variant}, {chosen_set})"
    data = choices_from_rows(rows, items, source=label)
    return data, StoreSelection(protocol, chosen_variant, chosen_set, len(rows))
