"""Character-level cleaning of extracted text: Unicode normalisation and line-wrap hyphens.

NFKC folds ligatures (``ﬁ`` → ``fi``) and compatibility forms; note that it also folds
superscripts (``km²`` → ``km2``), which is accepted for matching-friendly evidence text.
Line-wrap hyphens are rejoined using the document's own vocabulary (see
:func:`join_wrapped`), so a compound that the paper spells with a hyphen elsewhere keeps it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = ["normalise_line", "Vocabulary", "join_wrapped", "collapse_spaces"]

# zero-width characters and the BOM carry no text; soft hyphens are line-break hints only
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"), None)
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
_TAIL_FRAGMENT = re.compile(r"([^\W\d_]+)[-\u2010]$", re.UNICODE)
_HEAD_FRAGMENT = re.compile(r"^([^\W\d_]+)", re.UNICODE)


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def normalise_line(text: str) -> str:
    """NFKC, invisible characters removed, runs of spaces collapsed.

    A soft hyphen at the very end of a line is turned into a plain hyphen first, so that the
    wrap is still visible to :func:`join_wrapped`.
    """
    if text.endswith("\u00ad"):
        text = text[:-1] + "-"
    return collapse_spaces(unicodedata.normalize("NFKC", text).translate(_INVISIBLE))


class Vocabulary:
    """Lower-cased word counts of a document, hyphenated compounds counted as whole words."""

    def __init__(self, lines: Iterable[str] = ()) -> None:
        self.counts: Counter[str] = Counter()
        for line in lines:
            self.add(line)

    def add(self, line: str) -> None:
        words = _WORD.findall(line.lower())
        if line.rstrip().endswith(("-", "\u2010")) and words:
            words = words[:-1]  # a line-final fragment is not a word of the paper
        self.counts.update(words)


def join_wrapped(previous: str, following: str, vocabulary: Vocabulary | None = None) -> str:
    """Join two consecutive lines of a paragraph, undoing line-wrap hyphenation.

    ``tempera-`` + ``ture`` gives ``temperature``; ``sea-`` + ``ice`` keeps the hyphen when the
    paper writes ``sea-ice`` elsewhere and never ``seaice``. A hyphen followed by a capital or
    a digit (``CO2-`` / ``Rich``, ``1990-`` / ``2000``) is kept as a real hyphen.
    """
    if not previous:
        return following
    if not following:
        return previous
    if not previous.endswith(("-", "\u2010")) or not following[0].islower():
        return f"{previous} {following}"
    # only the end of the growing paragraph matters; searching all of it would be quadratic
    tail = _TAIL_FRAGMENT.search(previous[-80:])
    head = _HEAD_FRAGMENT.match(following)
    if tail and head:
        left, right = tail.group(1).lower(), head.group(1).lower()
        keep_hyphen = False
        if vocabulary is not None:
            joined = vocabulary.counts.get(left + right, 0)
            hyphenated = vocabulary.counts.get(f"{left}-{right}", 0)
            keep_hyphen = hyphenated > joined
        if keep_hyphen:
            return previous[:-1] + "-" + following
        return previous[:-1] + following
    return f"{previous} {following}"
