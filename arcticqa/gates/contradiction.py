"""Deterministic contradiction rules: prove an option false from the cited evidence, no model.

Three rules, each needing the *source-stated* value — found in the finding's cited evidence
spans (the spans that support the gold answer), not anywhere in the paper:

* ``numeric_outside_tolerance``: the evidence states the answer's value (within its precision or
  ``±``), and the option's value lies outside that tolerance after unit conversion;
* ``bound_excludes_answer``: the option is a bound or a range ("less than 5 days", "от 10 до 12
  дней") that the answer's value lies outside of by more than the tolerance, the evidence states
  the answer's value(s), and no other value the evidence states could satisfy it. A bound or
  range that holds for the answer is never proved false by any rule;
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

from arcticqa.gates.bounds import bound_verdict, interval_verdict, point, read_interval, same_quantity
from arcticqa.gates.direction import direction_terms, terms_reverse
from arcticqa.gates.numbers import Number, comparable, parse_numbers, prepare_text, values_agree
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.gates.text import contains_phrase, split_sentences, strip_parenthetical

__all__ = ["Contradiction", "ContradictionRule", "contradiction", "evidence_supports_value",
           "closed_set_sentence", "set_members", "set_counts"]

ContradictionRule = Literal["numeric_outside_tolerance", "bound_excludes_answer", "direction_reversal", "closed_set"]


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


_COUNTED = re.compile(r"\(?\s*[-+]?\d[\d.,]*\s*(?:[^\W\d_]+\s*)?\)?")


def set_counts(text: str) -> dict[str, str] | None:
    """A listed answer as {entity: its count text} ("Diatoms (28 species), Ochrophyta (2 species)"),
    or None when ``text`` is not a list whose every member holds exactly one number."""
    members = set_members(text)
    if len(members) < 2:
        return None
    out: dict[str, str] = {}
    for member in members:
        numbers = parse_numbers(member)
        if len(numbers) != 1:
            return None
        entity = " ".join(_COUNTED.sub(" ", re.sub(r"\((?=[^()]*\d)[^()]*\)", " ", member)).split()).casefold()
        if not entity or entity in out:
            return None
        out[entity] = member
    return out


def _number_pairs(answer: str, option: str) -> list[tuple[Number, Number]] | None:
    """Answer and option numbers paired: by entity for lists of (entity, count), else in order.
    None when they cannot be paired (other counts, or lists naming other entities)."""
    sa, so = set_counts(answer), set_counts(option)
    if sa is not None and so is not None:
        if set(sa) != set(so):
            return None  # other members: a closed-set question, not a numeric one
        return [(parse_numbers(sa[k])[0], parse_numbers(so[k])[0]) for k in sorted(sa)]
    na, no = parse_numbers(answer), parse_numbers(option)
    if not na or len(na) != len(no):
        return None
    return list(zip(na, no, strict=True))


def _differing_pair(answer: str, option: str) -> tuple[Number, Number] | None:
    """The one number where option and answer differ (all others agree), or None."""
    pairs = _number_pairs(answer, option)
    if pairs is None:
        return None
    differing = [(a, o) for a, o in pairs if values_agree(a, o) is not True]
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


def _bound(option: str, evidence_text: str, answer: str) -> Contradiction | None:
    gold, claim = read_interval(answer), read_interval(option)
    if gold is None or claim is None or claim.is_point or gold.words != claim.words:
        return None
    if interval_verdict(gold, claim) is not False:
        return None
    stated = [n for n in (gold.low, gold.high) if n is not None]
    sources: list[Number] = []
    for value in dict.fromkeys(stated):
        source = next((s for s in parse_numbers(evidence_text)
                       if values_agree(value, s) is True and (s.unit is not None or value.unit is None)), None)
        if source is None:
            return None  # the evidence must state the answer's value
        sources.append(source)
    ends = [n for n in (claim.low, claim.high) if n is not None]
    for number in parse_numbers(evidence_text):
        if any(values_agree(number, v) is True for v in stated):
            continue
        if number.unit is None and any(e.unit is not None for e in ends):
            continue  # a bare number (a station id, a year) is no quantity of the option's kind
        if any(comparable(number, e) is not None for e in ends) and interval_verdict(point(number), claim) is not False:
            return None  # another stated value may satisfy the option
    first = sources[0]
    return Contradiction(rule="bound_excludes_answer", evidence=_sentence_at(evidence_text, first.start),
                         detail={"source_value": evidence_text[first.start:first.end], "option": option,
                                 "low": claim.low.value if claim.low else None,
                                 "high": claim.high.value if claim.high else None})


def _direction(option: str, evidence_text: str, answer: str) -> Contradiction | None:
    answer_terms = direction_terms(answer)
    if not answer_terms and parse_numbers(answer):
        # "60%" answering "what percentage increase": the option "a decrease of 60%" carries the
        # answer's number, so the direction it states is what the evidence must settle
        pairs = _number_pairs(answer, option)
        if pairs and all(values_agree(a, o) is True for a, o in pairs):
            answer_terms = direction_terms(evidence_text)
    option_terms = direction_terms(option)
    if terms_reverse(answer_terms, option_terms) is not True:
        return None
    evidence_terms = direction_terms(evidence_text)
    for axis in sorted({t.axis for t in answer_terms} & {t.axis for t in option_terms}):
        want = {t.polarity for t in answer_terms if t.axis == axis}
        got = {t.polarity for t in option_terms if t.axis == axis}
        if len(want) != 1 or len(got) != 1 or want == got:
            continue  # only an axis the option cleanly reverses can prove it false
        stated = {t.polarity for t in evidence_terms if t.axis == axis}
        if stated == want:
            word = next(t.word for t in evidence_terms if t.axis == axis)
            pos = evidence_text.casefold().find(word)
            return Contradiction(rule="direction_reversal",
                                 evidence=_sentence_at(evidence_text, max(pos, 0)),
                                 detail={"axis": axis, "answer_polarity": next(iter(want)),
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
    # an option or answer in words ("thirty-three days") states its number; the evidence is read
    # as written ("one of the lakes" is no quantity)
    option, answer = spelled_as_digits(option), spelled_as_digits(answer)
    evidence_text = prepare_text(evidence_text)  # number offsets index into this form
    if same_quantity(answer, option):
        # a bound or range about the answer's quantity is decided by arithmetic alone: one that
        # holds ("less than 18 days" for 9 days) is never false, and its bound words ("more",
        # "less") are no direction to reverse
        if bound_verdict(answer, option) is True:
            return None
        return _bound(option, evidence_text, answer) or _numeric(option, evidence_text, answer)
    found = _numeric(option, evidence_text, answer) or _direction(option, evidence_text, answer)
    if found is None and answer_type in ("entity", "category", "set", "other"):
        found = _closed_set(option, evidence_text, answer)
    return found
