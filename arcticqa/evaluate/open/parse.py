"""Grading of an open reply: abstention rules first, then the deterministic answer matcher.

Outcomes: ``correct``, ``wrong``, ``abstained``, ``unparseable``, and ``undecided`` for a reply the
matcher cannot decide; ``no_answer`` when the provider returned nothing (left out of every rate).

An undecided reply may be sent to the verifier role (``open_verifier``, prompt
``prompts/open/verifier-v1.md``, when ``[evaluate] open_verifier`` names a model): its
:class:`VerifierVerdict` (``correct``, ``wrong``, ``abstained`` or ``unclear``, and a short reason)
grades the reply with confidence ``low`` and cause ``open.verifier``; ``unclear`` leaves it
undecided. Nothing the rules or the matcher decided is ever sent to it.

Abstention rules: the lexicon of :mod:`arcticqa.gates.abstain` (rule ids ``open.abstain.dont_know``,
``open.abstain.cannot_determine``, ``open.abstain.no_information``, ``open.abstain.explicit``;
English and Russian), checked on the reply's first sentence.

Matcher (decides ``correct`` only on positive evidence and ``wrong`` only on a contradiction it can
prove, so an equivalent rewrite of the gold answer is never graded wrong):

1. ``exact``: the normalised reply (NFKC, lower case, punctuation, articles and a leading "the answer
   is" removed) equals the normalised gold answer → correct;
2. ``direction``: the reply states the opposite direction on an axis the gold answer uses
   (:mod:`arcticqa.gates.direction`) → wrong;
3. ``numbers``: both sides carry the same count of numbers (unit-aware grammar,
   :mod:`arcticqa.gates.numbers`, number words read as digits by :mod:`arcticqa.gates.numwords`;
   a unit the grammar does not know makes a pair not comparable, so undecided): a comparable pair
   that disagrees beyond tolerance → wrong; every pair the same value (and ``±``) after unit
   conversion and every non-numeric content word of the gold answer present → correct (a rounding
   of the gold value stays undecided);
4. ``set``: the gold answer is a list ("a, b and c"); the reply names the same set, any order;
5. ``contains``: a gold answer without numbers occurs as a phrase in the reply → correct.

A reply with a negation, or with a direction word where the gold answer has none, is never graded
correct by steps 3–5 (it makes a different claim); it stays undecided.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from arcticqa.gates.abstain import ABSTENTION_RULES, abstention_rule
from arcticqa.gates.direction import direction_terms, is_direction_reversal
from arcticqa.gates.numbers import parse_numbers, prepare_text, same_uncertainty, same_value, values_agree
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.gates.text import contains_phrase, content_words

__all__ = ["Outcome", "OUTCOMES", "ABSTENTION_RULES", "Grade", "normalise", "abstention_rule", "match_answer",
           "grade_reply", "VERIFIER_ROLE", "VERIFIER_PROMPT", "VERIFIER_CAUSE", "VerifierVerdict", "grade_from_verdict"]

Outcome = Literal["correct", "wrong", "abstained", "unparseable", "undecided", "no_answer"]
OUTCOMES: tuple[str, ...] = ("correct", "wrong", "abstained", "unparseable", "undecided", "no_answer")

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_LEAD = re.compile(r"^\s*(?:(?:the\s+)?(?:short\s+|final\s+)?answer\s*(?:is|:)|it\s+(?:is|was))\s*", re.IGNORECASE)
_LIST_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&)\s*")
_APOS = "['\u2019]"
_NEGATION = re.compile(rf"\b(?:not|no|never|neither|nor|none|without|isn{_APOS}?t|wasn{_APOS}?t|aren{_APOS}?t)\b",
                       re.IGNORECASE)


@dataclass(frozen=True)
class Grade:
    outcome: Outcome
    #: the abstention rule id or matcher step that decided (None when nothing did)
    rule: str | None = None
    #: ``high`` for the deterministic matcher and rules; ``low`` is reserved for the verifier
    confidence: str | None = None


def normalise(text: str) -> str:
    """NFKC, lower case, a leading "the answer is" removed, punctuation (but not the decimal point or
    minus of a number) removed, articles removed, whitespace collapsed."""
    text = _LEAD.sub("", unicodedata.normalize("NFKC", text).strip())
    text = re.sub(r"(?<!\d)[.\-](?!\d)", " ", text.lower())
    text = "".join(" " if unicodedata.category(ch).startswith("P") and ch not in ".-" else ch for ch in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _as_set(text: str) -> frozenset[str] | None:
    parts = [normalise(p) for p in _LIST_SPLIT.split(text)]
    parts = [p for p in parts if p]
    return frozenset(parts) if len(parts) > 1 else None


def _numbers_verdict(gold: str, reply: str) -> Outcome | None:
    """``correct`` when every number is the same value (after unit conversion), ``wrong`` when some
    comparable pair disagrees beyond tolerance, None otherwise (no numbers, different counts, units
    that do not convert, or a rounding of the gold value)."""
    want, said = parse_numbers(gold), parse_numbers(reply)
    if not want or len(want) != len(said):
        return None
    verdicts = [values_agree(a, b) for a, b in zip(want, said, strict=True)]
    if any(v is False for v in verdicts):
        return "wrong"
    if all(v is not None for v in verdicts) and all(
            same_value(a, b) and same_uncertainty(a, b) and a.bound == b.bound for a, b in zip(want, said, strict=True)):
        return "correct"
    return None


def _without_numbers(text: str) -> str:
    """The text with its numbers and their units cut out (a unit may be rewritten: 0.5 m = 50 cm)."""
    prepared = prepare_text(text)
    kept, at = [], 0
    for n in parse_numbers(text):
        kept.append(prepared[at:n.start])
        at = n.end
    return " ".join([*kept, prepared[at:]])


def _words_covered(gold: str, reply: str) -> bool:
    """Every content word of the gold answer outside its numbers occurs in the reply."""
    have = set(content_words(_without_numbers(reply)))
    return all(w in have for w in content_words(_without_numbers(gold)))


def match_answer(gold: str, reply: str) -> Grade:
    """The deterministic matcher (see the module docstring); ``undecided`` when no step decides."""
    said, want = normalise(reply), normalise(gold)
    if not said:
        return Grade("unparseable", "empty")
    if said == want:
        return Grade("correct", "exact", "high")
    body = _LEAD.sub("", reply)
    # numbers written in words ("twenty-seven percent") are read as digits
    gold, body = spelled_as_digits(gold), spelled_as_digits(body)
    reversed_ = is_direction_reversal(gold, body)
    if reversed_:
        return Grade("wrong", "direction", "high")
    # a direction the gold answer does not state, or a negation, changes the claim: not "correct"
    adds_claim = bool(_NEGATION.search(body)) or (bool(direction_terms(body)) and not direction_terms(gold))
    numbers = _numbers_verdict(gold, body)
    if numbers == "wrong":
        return Grade("wrong", "numbers", "high")
    if adds_claim:
        return Grade("undecided")
    if numbers == "correct" and _words_covered(gold, body):
        return Grade("correct", "numbers", "high")
    gold_set = _as_set(gold)
    if gold_set is not None and _as_set(body) == gold_set:
        return Grade("correct", "set", "high")
    if numbers is None and not parse_numbers(gold) and want and contains_phrase(said, want):
        return Grade("correct", "contains", "high")
    return Grade("undecided")


def grade_reply(gold: str, reply: str | None, *, failure: str | None = None) -> Grade:
    """One reply's outcome: no provider answer, abstention rules, then the matcher."""
    if failure == "refusal":  # a provider safeguard refusal is never an abstention
        return Grade("unparseable", "refusal")
    if failure is not None or reply is None:
        return Grade("no_answer", failure or "no_text")
    if not reply.strip():
        return Grade("unparseable", "empty")
    rule = abstention_rule(reply)
    if rule is not None:
        return Grade("abstained", rule, "high")
    return match_answer(gold, reply)


#: the model role that judges what the matcher leaves undecided, and its versioned prompt file
VERIFIER_ROLE = "open_verifier"
VERIFIER_PROMPT = "open/verifier-v1"
#: the ``cause`` of a row the verifier graded
VERIFIER_CAUSE = "open.verifier"


class VerifierVerdict(BaseModel):
    """The verifier role's structured answer about one undecided reply."""

    verdict: Literal["correct", "wrong", "abstained", "unclear"]
    reason: str = Field("", max_length=500)


def grade_from_verdict(verdict: VerifierVerdict) -> Grade:
    """A verifier's verdict as a grade: lower confidence than a rule or the matcher; ``unclear``
    leaves the reply undecided."""
    if verdict.verdict == "unclear":
        return Grade("undecided")
    return Grade(verdict.verdict, VERIFIER_CAUSE, "low")
