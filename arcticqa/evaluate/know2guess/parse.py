"""Know2Guess parsers (a completion → ANSWER / ABSTAIN / REFUSE, or INVALID / NONE) and grading.

- ``strict`` (official): a provider refusal, or a reply opening like a policy refusal ("I can't
  help with that") is REFUSE — never an abstention. Otherwise the stripped reply must be one
  JSON object with ``decision`` exactly ``ANSWER`` or ``ABSTAIN`` (the control may omit it), a
  non-empty string ``answer`` when answering and a number ``confidence`` in [0, 1] when answering;
  anything else is INVALID. No provider answer is NONE, left out of every metric.
- ``robust`` (sensitivity): code fences and surrounding prose allowed, keys and decisions in
  any case, ``Decision: / Answer: / Confidence:`` lines, percentages, "I don't know"-style
  answers read as ABSTAIN, a one-line plain reply read as an answer.

Grading: exact normalised match (NFKC, lower case, punctuation and the articles a/an/the
removed, whitespace collapsed) against the gold answer and its variants. An answer to an
abstention-expected item is never correct.
"""

from __future__ import annotations

import json
import math
import re
import string
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

from arcticqa.evaluate.know2guess.items import Know2GuessItem

__all__ = ["Decision", "CAUSE_INFRASTRUCTURE", "CAUSE_REFUSAL", "CAUSE_POLICY_TEXT", "CAUSE_FORMAT", "Parsed",
           "normalise_answer", "grade", "parse_confidence", "parse_strict_reply", "parse_robust_reply"]

Decision = Literal["ANSWER", "ABSTAIN", "REFUSE", "INVALID", "NONE"]
CAUSE_INFRASTRUCTURE = "infrastructure_no_provider_answer"
CAUSE_REFUSAL = "provider_safeguard_refusal"
CAUSE_POLICY_TEXT = "model_policy_refusal"
CAUSE_FORMAT = "model_format_violation"

# -- grading ----------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalise_answer(text: str) -> str:
    """NFKC, lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch).startswith("P") or ch in string.punctuation else ch
                   for ch in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def grade(item: Know2GuessItem, answer: str | None) -> bool:
    """Exact normalised match with the gold answer or a variant (never for abstention-expected items)."""
    if answer is None or item.abstention_expected:
        return False
    said = normalise_answer(answer)
    if not said:
        return False
    accepted = {normalise_answer(t) for t in (item.gold_answer or "", *item.acceptable_variants)} - {""}
    return said in accepted


# -- parsing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Parsed:
    decision: Decision
    answer: str | None = None
    confidence: float | None = None
    cause: str | None = None


# Openings of a policy refusal. Checked only when the reply is not a valid structured reply.
_REFUSAL = re.compile(
    r"^\W*(?:i(?:'|’)?m\s+sorry|sorry|unfortunately|as\s+an\s+ai)?[\s,.!:-]*(?:but\s+)?"
    r"i\s+(?:can(?:'|’)?t|cannot|can\s+not|won(?:'|’)?t|will\s+not|am\s+(?:not\s+able|unable)|"
    r"(?:'|’)m\s+(?:not\s+able|unable))\s+(?:help|assist|comply|provide|answer\s+that|do\s+that|fulfil|fulfill|"
    r"support|share|engage)", re.IGNORECASE)


def _is_policy_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text.strip()))


def parse_confidence(value: Any, *, lenient: bool) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif lenient and isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", value)
        if not m:
            return None
        number = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    else:
        return None
    if lenient and 1.0 < number <= 100.0:
        number /= 100.0  # "80" meaning 80 %
    return number if 0.0 <= number <= 1.0 and math.isfinite(number) else None


def parse_strict_reply(text: str | None, *, mode: str = "answer_or_abstain",
                       failure: str | None = None) -> Parsed:
    """The official parser (see the module docstring)."""
    if failure == "refusal":
        return Parsed("REFUSE", cause=CAUSE_REFUSAL)
    if failure is not None or text is None:
        return Parsed("NONE", cause=CAUSE_INFRASTRUCTURE)
    try:
        data = json.loads(text.strip())
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        decision = data.get("decision", "ANSWER" if mode == "answer_only" else None)
        answer = data.get("answer")
        confidence = parse_confidence(data.get("confidence"), lenient=False)
        if decision == "ABSTAIN":
            # Even under the answer-only control an explicit abstention is one.
            return Parsed("ABSTAIN", None, confidence)
        if decision == "ANSWER" and isinstance(answer, str) and answer.strip() and confidence is not None:
            return Parsed("ANSWER", answer.strip(), confidence)
    if _is_policy_refusal(text):
        return Parsed("REFUSE", cause=CAUSE_POLICY_TEXT)
    return Parsed("INVALID", cause=CAUSE_FORMAT)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_LINE = re.compile(r"^[ \t]*[*_`]*[ \t]*(decision|answer|confidence)[ \t]*[*_`]*[ \t]*[:=-][ \t]*[*_`]*[ \t]*"
                   r"(.*?)[ \t]*[*_`]*[ \t]*$", re.IGNORECASE | re.MULTILINE)
_ABSTAIN_WORDS = {"abstain", "abstained", "abstention", "idk", "i dont know", "i do not know", "unknown",
                  "pass", "no answer", "cannot be determined", "cannot answer", "not known", "unanswerable",
                  "i abstain", "none"}
_ANSWER_WORDS = {"answer", "answered", "answering"}


def _robust_decision(value: Any) -> Decision | None:
    if not isinstance(value, str):
        return None
    word = normalise_answer(value.replace("'", "").replace("\u2019", ""))
    if word in _ANSWER_WORDS:
        return "ANSWER"
    if word in _ABSTAIN_WORDS:
        return "ABSTAIN"
    return None


def parse_robust_reply(text: str | None, *, mode: str = "answer_or_abstain",
                       failure: str | None = None) -> Parsed:
    """The normalised parser (sensitivity variant; see the module docstring)."""
    if failure is not None or text is None:
        return parse_strict_reply(text, mode=mode, failure=failure)
    body = text.strip()
    fenced = _FENCE.search(body)
    candidate = fenced.group(1) if fenced else body
    fields: dict[str, Any] = {}
    found = _OBJECT.search(candidate)
    if found:
        try:
            data = json.loads(found.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            fields = {str(k).strip().lower(): v for k, v in data.items()}
    if not fields:
        fields = {m.group(1).lower(): m.group(2).strip().strip('"') for m in _LINE.finditer(body)}
    if fields:
        decision = _robust_decision(fields.get("decision"))
        raw_answer = fields.get("answer")
        answer = str(raw_answer).strip() if isinstance(raw_answer, str | int | float) and not isinstance(
            raw_answer, bool) else None
        confidence = parse_confidence(fields.get("confidence"), lenient=True)
        if answer and _robust_decision(answer) == "ABSTAIN" and decision != "ANSWER":
            decision = "ABSTAIN"
        if decision is None and answer:
            decision = "ANSWER"
        if decision == "ABSTAIN":
            return Parsed("ABSTAIN", None, confidence)
        if decision == "ANSWER" and answer:
            return Parsed("ANSWER", answer, confidence)
    if _is_policy_refusal(body):
        return Parsed("REFUSE", cause=CAUSE_POLICY_TEXT)
    if _robust_decision(body) == "ABSTAIN":
        return Parsed("ABSTAIN")
    lines = [line for line in body.splitlines() if line.strip()]
    if len(lines) == 1 and not fields and len(body) <= 200:
        return Parsed("ANSWER", body.strip().strip('"'), None)
    return Parsed("INVALID", cause=CAUSE_FORMAT)
