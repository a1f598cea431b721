"""Matching option texts across sources: the one normalisation every protocol compares them by."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["normalise_option_text"]

# One published gold answer holds a zero-width space, so option texts are matched without them.
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


def normalise_option_text(text: str) -> str:
    """An option text as compared against an item's answers: Unicode NFC, whitespace collapsed,
    zero-width characters removed (shared by every protocol that matches option texts)."""
    return " ".join(_ZERO_WIDTH.sub("", unicodedata.normalize("NFC", text)).split())
