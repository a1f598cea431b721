"""Character-level cleaning of extracted text: Unicode normalisation and line-wrap hyphens.

NFKC folds ligatures (``ﬁ`` → ``fi``) and compatibility forms, but Unicode superscript and
subscript digits and signs are kept (``km²``, ``yr⁻¹``, ``CO₂``, ``δ¹⁸O``): that is the one normal
form for exponents and indices (raised or lowered runs of a PDF line are turned into it by
:func:`script_text`), and NFKC would make ``10⁻³`` read as ``10-3``. Degree look-alikes after a
digit (``◦`` from LaTeX's ``$^\\circ$``, ``∘``, ``˚``, ``º``, ``ᵒ``, ``⁰`` before a minute or a
hemisphere) become ``°``. Line-wrap hyphens are rejoined using the document's own vocabulary
(see :func:`join_wrapped`), so a compound that the paper spells with a hyphen elsewhere keeps it.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

__all__ = ["normalise_line", "Vocabulary", "join_wrapped", "collapse_spaces", "script_text", "SCRIPT_CHARS"]

# zero-width characters and the BOM carry no text; soft hyphens are line-break hints only
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"), None)
# control characters are glyphs without a Unicode mapping (rules and dots of LaTeX pictures)
_INVISIBLE.update(dict.fromkeys([*range(0x00, 0x09), *range(0x0b, 0x20), 0x7f], None))
_SPACES = re.compile(r"[ \t\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*", re.UNICODE)
_TAIL_FRAGMENT = re.compile(r"([^\W\d_]+)[-\u2010]$", re.UNICODE)
_HEAD_FRAGMENT = re.compile(r"^([^\W\d_]+)", re.UNICODE)

#: the characters of the exponent/index normal form, which NFKC must not fold
SCRIPT_CHARS = "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎"
_SCRIPT_RUN = re.compile(f"([{SCRIPT_CHARS}]+)")
_TO_SUPER = str.maketrans("0123456789+-−–=()", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻⁻⁼⁽⁾")
_TO_SUB = str.maketrans("0123456789+-−–=()", "₀₁₂₃₄₅₆₇₈₉₊₋₋₋₌₍₎")
_SCRIPTABLE = re.compile(r"^[0-9+\-−–=()]+$")
_DEGREE_MARKS = "◦∘˚ºᵒ"
# a degree look-alike after a number; "⁰" only where a minute, a hemisphere or a scale follows
_DEGREE_LIKE = re.compile(rf"(?<=\d)(\s?)(?:[{_DEGREE_MARKS}]|⁰(?=\s?[NSEWCFK\d′'’]))")
# LaTeX accents on letters the font has no glyph for come out as a spacing accent before the
# letter ("Utqia˙gvik" for "Utqiaġvik"), which NFKC would turn into a space and a loose mark
_SPACING_ACCENTS = {"˙": "\u0307", "˘": "\u0306", "ˇ": "\u030c", "˝": "\u030b", "¨": "\u0308",
                    "˚": "\u030a", "¸": "\u0327", "˛": "\u0328", "¯": "\u0304", "˜": "\u0303", "ˆ": "\u0302"}
_LOOSE_ACCENT = re.compile(f"([{''.join(_SPACING_ACCENTS)}])([^\\W\\d_])")
# other fonts draw the accent after its letter, over it ("Radic´" for "Radić"): an accent that
# ends a word goes back on the letter before it. The acute only then: before a letter it is as
# often an apostrophe ("don´t")
_AFTER_ACCENTS = {**_SPACING_ACCENTS, "´": "\u0301"}
_TRAILING_ACCENT = re.compile(f"(?<=[^\\W\\d_])([{''.join(_AFTER_ACCENTS)}])(?![^\\W\\d_])")
# one test for everything the slow path handles: most lines have none of it
_NEEDS_CARE = re.compile(f"[{_DEGREE_MARKS}⁰{SCRIPT_CHARS}{''.join(_AFTER_ACCENTS)}]")


def script_text(text: str, raised: bool, previous: str = "") -> str | None:
    """The normal form of a raised (superscript) or lowered (subscript) run, or ``None`` to keep it.

    Only runs made entirely of digits, signs and brackets are converted, so a footnote mark
    ``a`` or ``∗`` stays as written; a raised degree look-alike after a digit becomes ``°``.
    """
    run = text.strip()
    if raised and run in ("◦", "∘", "o", "˚") and previous[-1:].isdigit():
        return "°"
    if not run or not _SCRIPTABLE.match(run):
        return None
    return run.translate(_TO_SUPER if raised else _TO_SUB)


def _nfkc(text: str) -> str:
    parts = _SCRIPT_RUN.split(text)  # odd indexes are the protected runs
    return "".join(p if i % 2 else unicodedata.normalize("NFKC", p) for i, p in enumerate(parts))


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def normalise_line(text: str) -> str:
    """NFKC, invisible characters removed, runs of spaces collapsed.

    A soft hyphen at the very end of a line is turned into a plain hyphen first, so that the
    wrap is still visible to :func:`join_wrapped`.
    """
    if text.endswith("\u00ad"):
        text = text[:-1] + "-"
    if not _NEEDS_CARE.search(text):
        return collapse_spaces(unicodedata.normalize("NFKC", text).translate(_INVISIBLE))
    text = _DEGREE_LIKE.sub(r"\1°", text)
    text = _TRAILING_ACCENT.sub(lambda m: _AFTER_ACCENTS[m.group(1)], text)
    text = _LOOSE_ACCENT.sub(lambda m: m.group(2) + _SPACING_ACCENTS[m.group(1)], text)
    return collapse_spaces(_nfkc(text).translate(_INVISIBLE))


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
    if not previous.endswith(("-", "\u2010")):
        return f"{previous} {following}"
    if not following[0].islower():
        if previous[-2:-1].isalnum() and following[0].isalnum():
            # a compound broken at its own hyphen: "Ny-" + "Ålesund", "CO2-" + "Rich", "1990-" + "2000"
            return previous + following
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
