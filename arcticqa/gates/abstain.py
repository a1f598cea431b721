"""Abstentions and non-answers in free text, English and Russian: "I don't know", "I have no
idea", "not stated in the evidence", "Сложно сказать", "Понятия не имею".

One lexicon serves every reader of free text: the open-ended grader (a reply that abstains) and
the blinded reconstruction's matcher (a reconstruction that gives no answer is a mismatch decided
by rule). Each rule reads the first sentence only, and every real option and response of the
ArcticQA v1 release is a negative (``tests/test_open_protocol.py``): a bare negation ("не
изменился", "not detected") or a finding about missing data ("no data gaps") is not an abstention.
"""

from __future__ import annotations

import re

from arcticqa.gates.text import split_sentences

__all__ = ["ABSTENTION_RULES", "abstention_rule", "first_sentence"]

_APOS = "['\u2019]"
# Cyrillic words: \b works on them (str patterns are Unicode-aware); ё is also written е
_RU_VERB = r"(?:определить|сказать|ответить|установить|оценить|судить)"
_RU_NOT_STATED = r"(?:указан\w*|сказано|говорится|упоминается|упомянут\w*|приводится|приведен\w*|сообщается)"
_EN_SOURCE = r"(?:context|text|passage|evidence|excerpt|spans?|paper|study|article|source|information\s+given)"
_EN_NOT_STATED = r"(?:stated|given|reported|specified|mentioned|provided|indicated|available|included)"
#: rule id -> pattern, checked in this order
ABSTENTION_RULES: dict[str, re.Pattern[str]] = {
    "open.abstain.dont_know": re.compile(
        rf"\bi\s*(?:do\s+not|don{_APOS}?t)\s+know\b|\bi{_APOS}?m\s+not\s+(?:sure|certain)\b|"
        r"\bi\s+am\s+(?:not\s+(?:sure|certain)|unsure|uncertain)\b|"
        r"^\W*(?:i\s+(?:have|had)\s+)?no\s+(?:idea|clue)\b|\bi\s+have\s+no\s+(?:idea|clue)\b|"
        r"\b(?:hard|difficult|tough)\s+to\s+(?:say|tell)\b|\bno\s+way\s+(?:to|of)\s+(?:know|tell)\w*\b|"
        r"\bне\s+знаю\b|\bне\s+уверен[аы]?\b|\bзатрудняюсь\b|"
        r"\b(?:сложно|трудно|тяжело)\s+(?:сказать|ответить|судить)\b|\bпонятия\s+не\s+имею\b|"
        r"\bне\s+имею\s+(?:ни\s+малейшего\s+)?представления\b|^\W*без\s+понятия\b",
        re.IGNORECASE),
    "open.abstain.cannot_determine": re.compile(
        rf"\b(?:cannot|can{_APOS}?t|can\s+not|could\s+not|couldn{_APOS}?t)\s+(?:be\s+)?"
        r"(?:determined?|answer(?:ed)?|tell|say|know|known|infer(?:red)?|establish(?:ed)?)\b|"
        r"\bunable\s+to\s+(?:determine|answer|tell|say|know|infer)\b|"
        r"\bimpossible\s+to\s+(?:say|know|determine|tell|answer)\b|"
        r"\b(?:is|remains)\s+(?:not\s+(?:possible|determinable)\s+to\s+(?:determine|say|tell))\b|"
        rf"\b(?:невозможно|нельзя|не\s+могу|не\s+удается|не\s+удаётся|не\s+представляется\s+возможным)\s+"
        rf"(?:точно\s+|однозначно\s+)?{_RU_VERB}\b|\bне\s+может\s+быть\s+(?:определен\w*|установлен\w*)",
        re.IGNORECASE),
    "open.abstain.no_information": re.compile(
        r"\b(?:not\s+enough|insufficient|no)\s+(?:information|data|details)\s*(?:$|[.,;:!]|\b(?:is|are|to|in|on|about|"
        r"for|given|available|provided)\b)|"
        rf"\b{_EN_SOURCE}\s+(?:does\s+not|doesn{_APOS}?t|do\s+not|don{_APOS}?t)\s+(?:say|state|mention|provide|specify|"
        r"contain|give|include|report|indicate)\b|"
        rf"\bnot\s+{_EN_NOT_STATED}\s+(?:in|by)\s+(?:the\s+)?{_EN_SOURCE}\b|"
        rf"\b(?:(?:the\s+)?(?:answer|value|information)\s+(?:is\s+)?)?not\s+{_EN_NOT_STATED}\W*$|"
        r"\b(?:недостаточно|нет|не\s+хватает)\s+(?:информации|данных|сведений)\b|"
        r"\b(?:информация|данные|сведения)\s+(?:об\s+этом\s+|по\s+этому\s+вопросу\s+)?отсутству\w*|"
        r"^\W*(?:информации|данных|сведений)\s+нет\b|"
        rf"\bв\s+(?:контексте|тексте|отрывке|источнике|статье)\s+(?:это\s+|об\s+этом\s+)?не\s+{_RU_NOT_STATED}|"
        rf"^\W*(?:это\s+|ответ\s+)?не\s+{_RU_NOT_STATED}\W*$",
        re.IGNORECASE),
    "open.abstain.explicit": re.compile(
        r"^\W*(?:(?:i\s+)?(?:abstain|unknown|no\s+answer|n/?a|pass)|(?:it\s+is\s+|it{_APOS}?s\s+)?(?:unclear|uncertain)"
        r"|(?:я\s+)?воздерживаюсь|неизвестно|нет\s+ответа|(?:ответ\s+)?(?:неясно|неясен)|не\s+ясно)\W*$".replace("{_APOS}", _APOS),
        re.IGNORECASE),
}

_CYRILLIC_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[А-ЯЁ])")


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (a Russian one ends before a Cyrillic capital too)."""
    sentences = split_sentences(text.strip()) or [text.strip()]
    return _CYRILLIC_SENTENCE_END.split(sentences[0], maxsplit=1)[0]


def abstention_rule(text: str) -> str | None:
    """The id of the first abstention rule the first sentence of ``text`` matches (None if none)."""
    first = first_sentence(text)
    for rule, pattern in ABSTENTION_RULES.items():
        if pattern.search(first):
            return rule
    return None
