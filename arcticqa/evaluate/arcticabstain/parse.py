"""Reading a model's reply as an option letter, and the N0-N5 outcome classes of ArcticAbstain.

Two parsers exist. ``strict`` is the published rule and the default: after stripping
whitespace the reply must be exactly one label of the option set (the letters A-E as published;
a prompt variant may ask with the numbers 1-5). ``lenient`` also accepts
common wrappings (``Answer: B``, ``(B)``, ``B.``, ``**B**``, a final line holding only the
letter); it is reported as a separate sensitivity row and never replaces the strict outcome.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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


def parse_strict(text: str | None, letters: Sequence[str]) -> str | None:
    """The published rule: the stripped reply is exactly one letter of ``letters``."""
    if text is None:
        return None
    stripped = text.strip()
    return stripped if len(stripped) == 1 and stripped in letters else None


# Markdown emphasis, brackets, quotes and trailing punctuation around a lone capital letter
# (or digit: a prompt variant may label its options 1-5).
_WRAPPED = re.compile(r"""^[\s*_`"'(\[{]*(?:option\s+)?([A-Z0-9])[\s*_`"')\]}.:;,!]*$""", re.IGNORECASE)
_PREFIXED = re.compile(
    r"""^[\s*_`"']*(?:the\s+)?(?:final\s+|correct\s+|best\s+)?(?:answer|choice|option|letter)"""
    r"""(?:\s+is)?[\s*_`"']*[:\-=]?\s*(.+)$""",
    re.IGNORECASE,
)


def _lenient_line(line: str, letters: Sequence[str]) -> str | None:
    candidate = line.strip()
    prefixed = _PREFIXED.match(candidate)
    if prefixed:
        candidate = prefixed.group(1)
    wrapped = _WRAPPED.match(candidate)
    if wrapped is None:
        return None
    letter = wrapped.group(1)
    # Only capitals count: a lone lower-case "a" is as likely an article as an answer.
    return letter if letter in letters else None


def parse_lenient(text: str | None, letters: Sequence[str]) -> str | None:
    """Strict first; then a wrapped letter on the whole reply; then on its last non-empty line."""
    strict = parse_strict(text, letters)
    if strict is not None or text is None:
        return strict
    found = _lenient_line(text, letters)
    if found is not None:
        return found
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if len(lines) > 1:
        return _lenient_line(lines[-1], letters)
    return None


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
