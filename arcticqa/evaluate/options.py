"""Answer options across protocols: matching option texts, and reading a reply that names one label.

Every protocol that shows options (ArcticAbstain, Abstain-QA) compares option texts by one
normalisation (:func:`normalise_option_text`) and reads a reply with the same two parsers:

- ``strict`` (:func:`parse_strict`, the published rule): after stripping whitespace the reply is
  exactly one label of the option set (letters, or the numbers 1-5 a prompt variant may ask for);
- ``lenient`` (:func:`parse_lenient`, a sensitivity reading only): also common wrappings
  (``Answer: B``, ``(B)``, ``B.``, ``**B**``, ``Option B``) and a final line holding only the label.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

__all__ = ["normalise_option_text", "parse_strict", "parse_lenient"]

# One published gold answer holds a zero-width space, so option texts are matched without them.
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


def normalise_option_text(text: str) -> str:
    """An option text as compared against an item's answers: Unicode NFC, whitespace collapsed,
    zero-width characters removed (shared by every protocol that matches option texts)."""
    return " ".join(_ZERO_WIDTH.sub("", unicodedata.normalize("NFC", text)).split())


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
