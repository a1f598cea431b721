"""Question gates: answer leak, standalone phrasing, dropped scope and length bounds.

These run on the question writer's validated output before any other model sees it, and again
in ``validate-release --recheck`` on published items (no source text needed).
"""

from __future__ import annotations

import re

from arcticqa.gates.direction import direction_terms
from arcticqa.gates.numbers import Number, parse_numbers, prepare_text, same_value
from arcticqa.gates.text import (
    contains_phrase,
    content_words,
    normalize,
    normalize_loose,
    parenthetical_parts,
    strip_parenthetical,
    words,
)
from arcticqa.rules import Rejection, rule

__all__ = [
    "ANSWER_LEAK",
    "NOT_STANDALONE",
    "SCOPE_DROPPED",
    "LENGTH",
    "answer_leak",
    "not_standalone",
    "scope_dropped",
    "length_bounds",
    "phrase_covered",
    "answer_variants",
]

ANSWER_LEAK = rule("question.answer_leak",
                   "the answer, one of its numbers or a variant appears in the question or context")
NOT_STANDALONE = rule("question.not_standalone",
                      "the question refers to the source document or to an undefined referent")
SCOPE_DROPPED = rule("question.scope_dropped",
                     "a scope value the finding needs is missing from the question and context")
LENGTH = rule("question.length", "the question or its context is outside the length bounds")


def answer_variants(answer: str) -> list[str]:
    """Textual forms of the answer a reader would recognise: whole, without and inside brackets."""
    variants = [answer, strip_parenthetical(answer), *parenthetical_parts(answer)]
    out: list[str] = []
    for v in variants:
        v = v.strip(" .;,")
        # short fragments ("C", "N", "2") match everywhere; numbers are checked separately
        if len(normalize_loose(v)) >= 3 and not re.fullmatch(r"[\d\s.,%‰°+\-~]+", v) and v not in out:
            out.append(v)
    return out


def answer_leak(question: str, context: str, answer: str) -> Rejection | None:
    """``question.answer_leak`` when the answer shows through the question or its context.

    Checked: the answer text and its bracket variants as whole words (a direction answer named
    alongside its antonym, "increase or decrease", is a choice, not a leak), and every number of
    the answer, compared by value after unit conversion ("0.5 m" leaks through "50 cm").
    """
    for where, text in (("question", question), ("question_context", context)):
        if not text:
            continue
        for variant in answer_variants(answer):
            if not contains_phrase(text, variant):
                continue
            terms = direction_terms(variant)
            if terms and len(words(variant)) <= 2:
                opposite = {(t.axis, -t.polarity) for t in terms}
                if any((t.axis, t.polarity) in opposite for t in direction_terms(text)):
                    continue
            return ANSWER_LEAK.reject(f"the answer {variant!r} appears in the {where}",
                                      field=where, variant=variant)
        text_numbers = parse_numbers(text)
        answer_numbers = parse_numbers(answer)
        for number in answer_numbers:
            if len(answer_numbers) > 1 and _is_year(number):
                continue  # "1 September 2020" asked "in 2020": the year frames, the date answers
            for other in text_numbers:
                if same_value(number, other):
                    return ANSWER_LEAK.reject(
                        f"the answer's number {number.value:g} appears in the {where}",
                        field=where, number=number.value, found=prepare_text(text)[other.start:other.end])
    return None


def _is_year(number: Number) -> bool:
    return number.decimals == 0 and number.unit is None and 1600 <= number.value <= 2100


# Document-relative wording that no context can repair: the reader has no document.
_ALWAYS = [
    (r"\b(?:this|the present|the current|our) (?:study|paper|article|work|manuscript|analysis|research|survey|investigation|review)\b",
     "refers to the source document"),
    (r"\bthe authors?\b", "refers to the authors"),
    (r"\b(?:we|our|us)\b", "speaks as the authors"),
    (r"\b(?:fig(?:ure)?s?\.?|tables?|eqs?\.?|equations?|appendix|supplementa(?:l|ry)(?: material| information)?)\s*(?:s?\d+|[ivx]+\b|[a-z]\d)",
     "points at a figure, table, equation or appendix"),
    (r"\b(?:in|see|of) sections? \d+(?:\.\d+)*\b", "points at a section of the document"),
    (r"\b(?:as )?(?:shown|described|reported|mentioned|discussed) (?:above|below|earlier|previously)\b",
     "points elsewhere in the document"),
]
# Referents that need a defining context ("the site" is fine once the context names it).
_NEEDS_CONTEXT = [
    (r"\b(?:this|these|that|those|the) (?:(?:study|sampling|research|field|monitoring) )?(?:site|sites|station|stations|location|locations|plot|plots|transect|transects)\b|\bthe study (?:area|region)\b",
     "names a place only as 'the site'"),
    (r"\b(?:this|these|those) (?:samples?|specimens?|cores?|individuals|populations?|otus?|species|isolates?|strains?|experiments?|models?|simulations?)\b",
     "names a sample only as 'these samples'"),
    (r"\bthe (?:identified|sampled|studied|investigated|examined|surveyed|observed) \w+",
     "names a referent only by the study's action"),
]
_PERIOD = re.compile(r"\b(?:during|over|in|throughout|for) (?:the|this) (?:study|sampling|observation|survey|measurement|monitoring|experimental|field) (?:period|season|year|years|campaign)\b")
_YEAR = re.compile(r"\b(?:1[6-9]\d\d|20\d\d)\b")


def not_standalone(question: str, context: str) -> Rejection | None:
    """``question.not_standalone`` for document-relative or undefined references.

    Figure/table pointers, "this study", "the authors" and first-person wording fail anywhere;
    "the site", "these samples" fail when there is no context to define them; "during the study
    period" fails unless a year is given in the question or context.
    """
    for where, text in (("question", question), ("question_context", context)):
        norm = normalize(text)
        for pattern, why in _ALWAYS:
            m = re.search(pattern, norm)
            if m:
                return NOT_STANDALONE.reject(f"the {where} {why}: {m.group(0)!r}", field=where,
                                             phrase=m.group(0))
    qnorm = normalize(question)
    if not context.strip():
        for pattern, why in _NEEDS_CONTEXT:
            m = re.search(pattern, qnorm)
            if m:
                return NOT_STANDALONE.reject(f"the question {why} ({m.group(0)!r}) and has no context",
                                             field="question", phrase=m.group(0))
    for where, text in (("question", question), ("question_context", context)):
        m = _PERIOD.search(normalize(text))
        if m and not _YEAR.search(question) and not _YEAR.search(context):
            return NOT_STANDALONE.reject(f"the {where} uses a document-relative period {m.group(0)!r} "
                                         "without stating the years", field=where, phrase=m.group(0))
    return None


def phrase_covered(text: str, value: str, *, min_share: float = 0.6) -> bool:
    """Whether a scope value is stated in ``text``: verbatim, or by its key words.

    Key words are the value's numbers (by value) and capitalised names, which must all appear;
    at least ``min_share`` of its remaining content words must appear too. This accepts the
    rewording a question needs ("in the eastern East Siberian Sea" for "eastern part of the East
    Siberian Sea") and rejects losing the place, the years or the sample.
    """
    if not value.strip():
        return True
    if contains_phrase(text, value):
        return True
    text_numbers = parse_numbers(text)
    for number in parse_numbers(value):
        if not any(same_value(number, other) for other in text_numbers):
            return False
    text_words = set(content_words(text))
    names = {w for w in content_words(" ".join(re.findall(r"\b[A-Z][\w-]*", value)))}
    names -= {"the", "in", "of"}
    if not names <= text_words:
        return False
    value_words = [w for w in content_words(value) if not w.isdigit()]
    if not value_words:
        return True
    share = sum(w in text_words for w in value_words) / len(value_words)
    return share >= min_share


def scope_dropped(question: str, context: str, scope: dict[str, str | None]) -> Rejection | None:
    """``question.scope_dropped`` when a non-empty scope value is not stated in question or context."""
    both = f"{question}\n{context}"
    for dimension, value in scope.items():
        if value and not phrase_covered(both, value):
            return SCOPE_DROPPED.reject(f"the scope {dimension} {value!r} is not stated in the question "
                                        "or its context", dimension=dimension, value=value)
    return None


def length_bounds(question: str, context: str, *, question_min: int = 20, question_max: int = 400,
                  context_max: int = 700) -> Rejection | None:
    """``question.length``: a question of 20–400 characters with a context of at most 700."""
    q = len(question.strip())
    if q < question_min or q > question_max:
        return LENGTH.reject(f"the question has {q} characters (bounds {question_min}–{question_max})",
                             field="question", length=q)
    c = len(context.strip())
    if c > context_max:
        return LENGTH.reject(f"the context has {c} characters (at most {context_max})",
                             field="question_context", length=c)
    return None
