"""Grading of an open reply: abstention rules first, then the deterministic answer matcher.

Outcomes: ``correct``, ``wrong``, ``abstained``, ``unparseable``, and ``undecided`` for a reply the
matcher cannot decide; ``no_answer`` when the provider returned nothing (left out of every rate).

An undecided reply may be sent to the verifier role (``open_verifier``, prompt
``prompts/open/verifier-v1.md``, when ``[evaluate] open_verifier`` names a model): its
:class:`VerifierVerdict` (``correct``, ``wrong``, ``abstained`` or ``unclear``, and a short reason)
grades the reply with confidence ``low`` and cause ``open.verifier``; ``unclear`` leaves it
undecided. Nothing the rules or the matcher decided is ever sent to it.

Abstention rules (rule id: what it recognises), checked on the reply's first sentence:

- ``open.abstain.dont_know``: "I don't know", "I do not know", "I'm not sure", "I am unsure";
- ``open.abstain.cannot_determine``: "cannot be determined", "can't determine", "unable to
  determine/answer", "cannot answer", "impossible to say/know";
- ``open.abstain.no_information``: "not enough / insufficient information (or data)", "the context
  does not (say/state/mention/provide/specify)", "no information";
- ``open.abstain.explicit``: the reply is just "abstain", "I abstain", "unknown", "no answer", "N/A".

The same four rules hold the common Russian forms (the v1 release has Russian items, and a model
asked in Russian answers in Russian): "не знаю", "не уверен(а)", "затрудняюсь ответить";
"невозможно / нельзя / не могу / не удаётся определить (сказать, ответить, установить)", "не может
быть определено"; "недостаточно / нет информации (данных, сведений)", "в контексте / в тексте не
указано (сказано, говорится, упоминается, приводится)", "информация отсутствует"; and the reply
"воздерживаюсь", "неизвестно" or "нет ответа". A bare negation ("не изменился") is not one of them.

Matcher (decides ``correct`` only on positive evidence and ``wrong`` only on a contradiction it can
prove, so an equivalent rewrite of the gold answer is never graded wrong):

1. ``exact``: the normalised reply (NFKC, lower case, punctuation, articles and a leading "the answer
   is" removed) equals the normalised gold answer → correct;
2. ``direction``: the reply states the opposite direction on an axis the gold answer uses
   (:mod:`arcticqa.gates.direction`) → wrong;
3. ``numbers``: both sides carry the same count of numbers (unit-aware grammar,
   :mod:`arcticqa.gates.numbers`): a comparable pair that disagrees beyond tolerance → wrong; every
   pair the same value after unit conversion and every non-numeric content word of the gold answer
   present → correct (a rounding of the gold value stays undecided);
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

from arcticqa.gates.direction import direction_terms, is_direction_reversal
from arcticqa.gates.numbers import parse_numbers, prepare_text, same_value, values_agree
from arcticqa.gates.text import contains_phrase, content_words, split_sentences

__all__ = ["Outcome", "OUTCOMES", "ABSTENTION_RULES", "Grade", "normalise", "abstention_rule", "match_answer",
           "grade_reply", "VERIFIER_ROLE", "VERIFIER_PROMPT", "VERIFIER_CAUSE", "VerifierVerdict", "grade_from_verdict"]

Outcome = Literal["correct", "wrong", "abstained", "unparseable", "undecided", "no_answer"]
OUTCOMES: tuple[str, ...] = ("correct", "wrong", "abstained", "unparseable", "undecided", "no_answer")

_APOS = "['\u2019]"
# Cyrillic words: \b works on them (str patterns are Unicode-aware); ё is also written е
_RU_VERB = r"(?:определить|сказать|ответить|установить|оценить|судить)"
_RU_NOT_STATED = r"(?:указан\w*|сказано|говорится|упоминается|упомянут\w*|приводится|приведен\w*|сообщается)"
ABSTENTION_RULES: dict[str, re.Pattern[str]] = {
    "open.abstain.dont_know": re.compile(
        rf"\bi\s*(?:do\s+not|don{_APOS}?t)\s+know\b|\bi{_APOS}?m\s+not\s+sure\b|\bi\s+am\s+(?:not\s+sure|unsure)\b|"
        r"\bне\s+знаю\b|\bне\s+уверен[аы]?\b|\bзатрудняюсь\s+(?:ответить|с\s+ответом)\b",
        re.IGNORECASE),
    "open.abstain.cannot_determine": re.compile(
        rf"\b(?:cannot|can{_APOS}?t|can\s+not)\s+(?:be\s+)?(?:determined?|answer(?:ed)?|tell|say)\b|"
        r"\bunable\s+to\s+(?:determine|answer|tell|say)\b|\bimpossible\s+to\s+(?:say|know|determine|tell)\b|"
        rf"\b(?:невозможно|нельзя|не\s+могу|не\s+удается|не\s+удаётся|не\s+представляется\s+возможным)\s+"
        rf"(?:точно\s+|однозначно\s+)?{_RU_VERB}\b|\bне\s+может\s+быть\s+(?:определен\w*|установлен\w*)",
        re.IGNORECASE),
    "open.abstain.no_information": re.compile(
        r"\b(?:not\s+enough|insufficient|no)\s+(?:information|data|details)\b|"
        rf"\b(?:context|text|passage)\s+(?:does\s+not|doesn{_APOS}?t)\s+(?:say|state|mention|provide|specify|"
        r"contain|give|include)\b|"
        r"\b(?:недостаточно|нет|не\s+хватает)\s+(?:информации|данных|сведений)\b|"
        r"\b(?:информация|данные|сведения)\s+(?:об\s+этом\s+|по\s+этому\s+вопросу\s+)?отсутству\w*|"
        rf"\bв\s+(?:контексте|тексте|отрывке)\s+(?:это\s+|об\s+этом\s+)?не\s+{_RU_NOT_STATED}",
        re.IGNORECASE),
    "open.abstain.explicit": re.compile(
        r"^\W*(?:(?:i\s+)?(?:abstain|unknown|no\s+answer|n/?a)|(?:я\s+)?воздерживаюсь|неизвестно|нет\s+ответа)\W*$",
        re.IGNORECASE),
}

_CYRILLIC_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[А-ЯЁ])")
_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
_LEAD = re.compile(r"^\s*(?:(?:the\s+)?(?:short\s+|final\s+)?answer\s*(?:is|:)|it\s+(?:is|was))\s*", re.IGNORECASE)
_LIST_SPLIT = re.compile(r"\s*(?:,|;|\band\b|&)\s*")
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


def abstention_rule(reply: str) -> str | None:
    """The id of the first abstention rule the reply's first sentence matches (None if none)."""
    sentences = split_sentences(reply.strip()) or [reply.strip()]
    # the shared splitter ends a sentence only before a Latin capital; a Russian reply's next
    # sentence starts with a Cyrillic one
    first = _CYRILLIC_SENTENCE_END.split(sentences[0], maxsplit=1)[0]
    for rule, pattern in ABSTENTION_RULES.items():
        if pattern.search(first):
            return rule
    return None


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
            same_value(a, b) and (a.plusminus or 0.0) == (b.plusminus or 0.0) and a.bound == b.bound for a, b in zip(want, said, strict=True)):
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
