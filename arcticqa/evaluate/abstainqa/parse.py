"""Abstain-QA parsers and the confusion cell of one reply.

``strict`` (default): the stripped reply is exactly one option letter, or, with verbal
confidence, exactly ``Answer: <letter>`` and ``Confidence: <1-5>`` on two lines. ``lenient``
(sensitivity only): the shared lenient letter rules (:mod:`arcticqa.evaluate.options`), "The
answer is B", a reply equal to an option's text, and a ``confidence`` of 1–5 anywhere.

Answerable: correct option → TP, IDK/NOTA → FN, other option → FP. Unanswerable: IDK/NOTA → TN,
any option → FP (never FN). A reply that names no option is ``INVALID`` (a refusal is never IDK).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from arcticqa.evaluate.abstainqa.items import IDK_FORMS
from arcticqa.evaluate.options import normalise_option_text, parse_lenient, parse_strict

__all__ = ["Outcome", "CAUSE_INFRASTRUCTURE", "CAUSE_REFUSAL", "CAUSE_FORMAT", "parse_reply", "score_abstainqa"]

Outcome = Literal["TP", "FN", "FP", "TN", "INVALID"]
CAUSE_INFRASTRUCTURE = "infrastructure_no_provider_answer"
CAUSE_REFUSAL = "provider_safeguard_refusal"
CAUSE_FORMAT = "model_format_violation"

_STRICT_CONFIDENCE = re.compile(r"Answer:[ \t]*([A-Z])[ \t]*\r?\nConfidence:[ \t]*([1-5])")
_ANY_CONFIDENCE = re.compile(r"confidence\W{0,3}([1-5])(?:\s*/\s*5)?\b", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"answer(?:\s+is)?\W{0,3}\(?([A-Z])\b\)?", re.IGNORECASE)


def parse_reply(text: str | None, letters: str, *, verbal_confidence: bool,
                option_texts: Sequence[str] = ()) -> tuple[str | None, int | None, str | None, int | None]:
    """(strict letter, strict confidence, lenient letter, lenient confidence)."""
    if text is None:
        return None, None, None, None
    strict_letter: str | None
    strict_conf: int | None = None
    if verbal_confidence:
        m = _STRICT_CONFIDENCE.fullmatch(text.strip())
        strict_letter = m.group(1) if m and m.group(1) in letters else None
        strict_conf = int(m.group(2)) if strict_letter and m else None
    else:
        strict_letter = parse_strict(text, letters)
    lenient = parse_lenient(text, letters)
    if lenient is None:
        found = _ANSWER_LINE.search(text)
        if found and found.group(1).upper() == found.group(1) and found.group(1) in letters:
            lenient = found.group(1)
    if lenient is None and option_texts:
        # A reply that is an option's text, e.g. "I don't know / none of the above".
        said = normalise_option_text(text.strip().strip(".")).lower()
        for letter, option in zip(letters, option_texts, strict=False):
            if said == normalise_option_text(option).lower():
                lenient = letter
        if said in IDK_FORMS or said in {"i don't know", "i do not know", "none of the above"}:
            lenient = letters[-1]
    conf_match = _ANY_CONFIDENCE.search(text)
    lenient_conf = int(conf_match.group(1)) if conf_match else None
    return strict_letter, strict_conf, lenient, lenient_conf


def score_abstainqa(answerable: bool, chosen: str | None, correct_letter: str, idk_letter: str) -> Outcome:
    """The protocol's confusion cell of one reply (INVALID when no option was chosen)."""
    if chosen is None:
        return "INVALID"
    if chosen == idk_letter:
        return "FN" if answerable else "TN"
    if answerable and chosen == correct_letter:
        return "TP"
    return "FP"  # a wrong option on an answerable item, or any option on an unanswerable one
