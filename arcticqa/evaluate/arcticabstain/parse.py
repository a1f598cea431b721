"""Reading a model's reply as an option letter, and the N0-N5 outcome classes of ArcticAbstain.

Two parsers exist, shared with every protocol that shows options (:mod:`arcticqa.evaluate.options`,
re-exported here). ``strict`` is the published rule and the default: after stripping
whitespace the reply must be exactly one label of the option set (the letters A-E as published;
a prompt variant may ask with the numbers 1-5). ``lenient`` also accepts
common wrappings (``Answer: B``, ``(B)``, ``B.``, ``**B**``, a final line holding only the
letter); it is reported as a separate sensitivity row and never replaces the strict outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from arcticqa.evaluate.options import parse_lenient, parse_strict

__all__ = [
    "Condition",
    "OptionKind",
    "Parser",
    "CONDITIONS",
    "OUTCOMES",
    "CAUSE_INFRASTRUCTURE",
    "CAUSE_REFUSAL",
    "CAUSE_FORMAT",
    "ShownOption",
    "Scored",
    "parse_strict",
    "parse_lenient",
    "outcome_of",
    "score_reply",
]

Condition = Literal["answer_present", "answer_absent"]
OptionKind = Literal["gold", "distractor", "abstain"]
Parser = Literal["strict", "lenient"]

CONDITIONS: tuple[Condition, ...] = ("answer_present", "answer_absent")
OUTCOMES: tuple[str, ...] = ("N0", "N1", "N2", "N3", "N4", "N5")

CAUSE_INFRASTRUCTURE = "infrastructure_no_provider_answer"
CAUSE_REFUSAL = "provider_safeguard_refusal"
CAUSE_FORMAT = "model_format_violation"


@dataclass(frozen=True)
class ShownOption:
    """One option as a call showed it."""

    letter: str
    kind: OptionKind
    text: str
    option_id: str = ""


@dataclass(frozen=True)
class Scored:
    """How one reply scores. ``parser`` names the parser that found the letter (None: neither)."""

    outcome: str
    chosen_letter: str | None
    chosen_kind: OptionKind | None
    cause: str | None
    parser: Parser | None
    lenient_outcome: str
    lenient_letter: str | None


def outcome_of(condition: str, kind: OptionKind | None) -> str:
    """N1 gold; N2 present+distractor; N3 present+abstain; N4 absent+distractor; N5 absent+abstain."""
    if kind is None:
        return "N0"
    if condition == "answer_present":
        return {"gold": "N1", "distractor": "N2", "abstain": "N3"}[kind]
    if condition == "answer_absent":
        if kind == "gold":
            raise ValueError("the answer-absent condition shows no gold option")
        return {"distractor": "N4", "abstain": "N5"}[kind]
    raise ValueError(f"unknown condition {condition!r}")


def score_reply(condition: str, options: Sequence[ShownOption], text: str | None, *,
                failure: Literal["infrastructure", "refusal"] | None = None) -> Scored:
    """Score one reply. ``failure`` is what the transport knew (no answer / provider refusal)."""
    letters = [o.letter for o in options]
    kinds = {o.letter: o.kind for o in options}
    if failure is not None or text is None:
        cause = CAUSE_REFUSAL if failure == "refusal" else CAUSE_INFRASTRUCTURE
        return Scored("N0", None, None, cause, None, "N0", None)
    strict = parse_strict(text, letters)
    lenient = parse_lenient(text, letters)
    lenient_outcome = outcome_of(condition, kinds[lenient]) if lenient else "N0"
    if strict is not None:
        return Scored(outcome_of(condition, kinds[strict]), strict, kinds[strict], None, "strict",
                      lenient_outcome, lenient)
    return Scored("N0", None, None, CAUSE_FORMAT, "lenient" if lenient else None, lenient_outcome, lenient)
