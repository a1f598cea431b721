"""Deterministic contradiction rules: prove an option false from the cited evidence, no model.

Three rules, each needing the *source-stated* value — found in the finding's cited evidence
spans (the spans that support the gold answer), not anywhere in the paper:

* ``numeric_outside_tolerance``: the evidence states the answer's value (within its precision or
  ``±``), and the option's value lies outside that tolerance after unit conversion;
* ``direction_reversal``: the option reverses the answer's direction on the same axis (antonym
  table in :mod:`arcticqa.gates.direction`), the evidence states the answer's direction and
  never the option's;
* ``closed_set``: the evidence declares the answer's set closed ("only", "exclusively", "all …
  were") in one sentence, and the option names a member outside it.

An option that matches *another* value the evidence states (:func:`evidence_supports_value`) is
never contradicted: a reasonable reading may support it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from arcticqa.gates.direction import direction_terms, is_direction_reversal
from arcticqa.gates.numbers import Number, comparable, parse_numbers, prepare_text, values_agree
from arcticqa.gates.text import contains_phrase, split_sentences, strip_parenthetical

__all__ = ["Contradiction", "ContradictionRule", "contradiction", "evidence_supports_value",
           "closed_set_sentence", "set_members"]

ContradictionRule = Literal["numeric_outside_tolerance", "direction_reversal", "closed_set"]


class Contradiction(BaseModel):
    """Proof that an option is false: which rule, the evidence sentence, and the compared values."""

    rule: ContradictionRule
    evidence: str
    detail: dict[str, Any] = Field(default_factory=dict)


def _sentence_at(text: str, pos: int) -> str:
    offset = 0
    for sentence in split_sentences(text):
        idx = text.find(sentence[:20], offset) if sentence else -1
        if idx == -1:
            continue
        if idx <= pos < idx + len(sentence) + 1:
            return sentence
        offset = idx
    return " ".join(text.split())[:400]


def _differing_pair(answer: str, option: str) -> tuple[Number, Number] | None:
    """The one number where option and answer differ (all others agree), or None."""
    na, no = parse_numbers(answer), parse_numbers(option)
    if not na or len(na) != len(no):
        return None
    differing = [(a, o) for a, o in zip(na, no, strict=True) if values_agree(a, o) is not True]
    if len(differing) != 1:
        return None
    return differing[0]


def evidence_supports_value(option: str, evidence_text: str, answer: str) -> str | None:
    """The evidence sentence stating a value the option matches (other than via the answer).

    When the option's value equals some number the evidence states for a comparable unit, the
    option may be true of the question's quantity (another site, year or subgroup): it must not be
    admitted. Returns that sentence, or None.
    """
    pair = _differing_pair(answer, option)
    if pair is None:
        return None
    _, value = pair
    evidence_text = prepare_text(evidence_text)
    for number in parse_numbers(evidence_text):
        if value.unit is not None and number.unit is None:
            continue  # a bare number in the evidence (a station id "ARK-XXV/2", a "24′") is no quantity
        if values_agree(value, number) is True:
            return _sentence_at(evidence_text, number.start)
    return None


def _numeric(option: str, evidence_text: str, answer: str) -> Contradiction | None:
    pair = _differing_pair(answer, option)
    if pair is None:
        return None
    gold, value = pair
    if gold.bound or value.bound:
        return None  # "> 50%" is not contradicted by "60%"
    if evidence_supports_value(option, evidence_text, answer):
        return None
    for source in parse_numbers(evidence_text):
        if source.bound or values_agree(gold, source) is not True:
            continue
        cmp = comparable(source, value)
        if cmp is None:
            continue
        source_value, option_value, tolerance = cmp
        if abs(source_value - option_value) > tolerance + 1e-9 * max(1.0, abs(source_value)):
            return Contradiction(
                rule="numeric_outside_tolerance",
                evidence=_sentence_at(evidence_text, source.start),
                detail={"source_value": evidence_text[source.start:source.end],
                        "option_value": option_value, "source_number": source_value,
                        "unit": source.unit, "tolerance": tolerance},
            )
    return None


def _direction(option: str, evidence_text: str, answer: str) -> Contradiction | None:
    if is_direction_reversal(answer, option) is not True:
        return None
    answer_terms = direction_terms(answer)
    option_terms = direction_terms(option)
    axes = {t.axis for t in answer_terms} & {t.axis for t in option_terms}
    evidence_terms = direction_terms(evidence_text)
    for axis in sorted(axes):
        want = next(t.polarity for t in answer_terms if t.axis == axis)
        stated = {t.polarity for t in evidence_terms if t.axis == axis}
        if stated == {want}:
            word = next(t.word for t in evidence_terms if t.axis == axis)
            pos = evidence_text.casefold().find(word)
            return Contradiction(rule="direction_reversal",
                                 evidence=_sentence_at(evidence_text, max(pos, 0)),
                                 detail={"axis": axis, "answer_polarity": want,
                                         "evidence_word": word,
                                         "option_words": [t.word for t in option_terms if t.axis == axis]})
    return None


_CLOSURE = re.compile(r"\b(?:only|solely|exclusively|sole|entirely|all (?:of )?(?:the )?\w+ (?:were|was|belonged|belong)"
                      r"|none other than|restricted to|limited to)\b", re.I)


def set_members(text: str) -> list[str]:
    """Items of a listed answer: "A, B and C" -> [A, B, C]; counts in brackets are kept."""
    parts = re.split(r"\s*(?:;|,(?![^()]*\))|\band\b(?![^()]*\)))\s*", text)
    return [p.strip(" .") for p in parts if p and p.strip(" .")]


def closed_set_sentence(evidence_text: str, answer: str) -> str | None:
    """The evidence sentence that declares a closed set containing every member of ``answer``."""
    members = set_members(answer)
    for sentence in split_sentences(evidence_text):
        if not _CLOSURE.search(sentence):
            continue
        if all(contains_phrase(sentence, m) or contains_phrase(sentence, strip_parenthetical(m))
               for m in members):
            return sentence
    return None


def _closed_set(option: str, evidence_text: str, answer: str) -> Contradiction | None:
    sentence = closed_set_sentence(evidence_text, answer)
    if sentence is None or contains_phrase(sentence, option):
        return None
    outside = [m for m in set_members(option)
               if not contains_phrase(sentence, m) and not contains_phrase(sentence, strip_parenthetical(m))]
    if not outside:
        return None
    return Contradiction(rule="closed_set", evidence=sentence,
                         detail={"outside_members": outside, "set": set_members(answer)})


def contradiction(option: str, evidence_text: str, answer: str, answer_type: str) -> Contradiction | None:
    """Prove ``option`` false from ``evidence_text`` (the finding's cited spans) without a model.

    ``answer_type`` is the finding's (numeric, entity, category, direction, set, other): numbers
    are tried for every type that has them, closed sets only for non-numeric answers. Returns
    None when no rule proves it — which is *not* evidence that the option is true.
    """
    if not option.strip() or not evidence_text.strip():
        return None
    evidence_text = prepare_text(evidence_text)  # number offsets index into this form
    found = _numeric(option, evidence_text, answer) or _direction(option, evidence_text, answer)
    if found is None and answer_type in ("entity", "category", "set", "other"):
        found = _closed_set(option, evidence_text, answer)
    return found
