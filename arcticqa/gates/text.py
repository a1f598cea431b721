"""Text normalisation shared by every gate: one canonical form so that gates compare like with like.

Model outputs and PDF text differ in Unicode forms (NFKC), dashes, minus signs, quotes, degree
signs and spacing; the gates compare the canonical form :func:`normalize` produces, and
tokenise it with :func:`words` when whole-word matching is needed.
"""

from __future__ import annotations

import functools
import re
import unicodedata

__all__ = [
    "normalize",
    "normalize_loose",
    "words",
    "content_words",
    "contains_phrase",
    "split_sentences",
    "language_script",
    "strip_parenthetical",
    "parenthetical_parts",
    "STOPWORDS",
]

# Degree signs come in several look-alikes in PDFs (masculine ordinal, ring above, combining
# ring); "3.7 ̊C" in the published release is one of them.
_DEGREE_LOOKALIKES = str.maketrans({"\u00ba": "°", "\u02da": "°", "\u030a": "°", "\u2218": "°"})
# Every dash-like character becomes "-", except the minus sign, which becomes "-" too: callers
# that care about signs (numbers.py) look at the raw text before this step.
_DASHES = re.compile(r"[\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe63\uff0d]")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00b4": "'"})
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+(?:['-][^\W_]+)*", re.UNICODE)

#: function words ignored when comparing phrases by their content
STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or as is are was were be been being that this "
    "these those its it their there than then which who whom whose what when where during over "
    "under per into onto about across between among within".split()
)


@functools.lru_cache(maxsize=4096)
def normalize(text: str) -> str:
    """NFKC, case-folded, unified dashes/quotes/degree signs, single spaces, stripped."""
    text = unicodedata.normalize("NFKC", text).translate(_DEGREE_LOOKALIKES)
    text = text.replace("\u00ad", "")  # soft hyphen
    text = _DASHES.sub("-", text).translate(_QUOTES)
    text = re.sub(r"°\s+", "°", text)  # "3.7 ° C" -> "3.7 °C"
    text = re.sub(r"\s+°", " °", text)
    return _SPACE.sub(" ", text.casefold()).strip()


def normalize_loose(text: str) -> str:
    """:func:`normalize` plus punctuation dropped and hyphens read as spaces ("sea-ice" = "sea ice")."""
    return " ".join(words(text))


def words(text: str) -> list[str]:
    """Word tokens of the normalised text; hyphenated compounds are split ("sea-ice" -> sea, ice)."""
    return [w for tok in _WORD.findall(normalize(text)) for w in re.split(r"[-']", tok) if w]


def _singular(word: str) -> str:
    # crude plural folding: enough to match "glaciers"/"glacier", "species" stays "species"
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is", "ies")):
        return word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """Words minus stopwords, singularised: the unit of fuzzy phrase coverage."""
    return [_singular(w) for w in words(text) if w not in STOPWORDS]


def contains_phrase(haystack: str, phrase: str) -> bool:
    """Whole-word, case- and punctuation-insensitive containment of ``phrase`` in ``haystack``."""
    needle = _phrase_words(phrase)
    if not needle:
        return False
    hay = _phrase_words(haystack)
    n = len(needle)
    return any(hay[i:i + n] == needle for i in range(len(hay) - n + 1))


@functools.lru_cache(maxsize=1024)
def _phrase_words(text: str) -> tuple[str, ...]:
    # the gates ask about many phrases in the same evidence text: it is tokenised once
    return tuple(_singular(w) for w in words(text))


_ABBREVIATIONS = ("et al.", "e.g.", "i.e.", "fig.", "figs.", "ca.", "c.", "approx.", "eq.", "no.",
                  "vs.", "sp.", "spp.", "cf.", "resp.", "tab.", "ref.", "refs.")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (a heuristic split that does not break after "et al." or "Fig.")."""
    pieces = re.split(r"(?<=[.!?])\s+(?=[A-Z(\[\"'0-9])", " ".join(text.split()))
    out: list[str] = []
    for piece in pieces:
        if out and out[-1].casefold().endswith(_ABBREVIATIONS):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [p for p in out if p]


def strip_parenthetical(text: str) -> str:
    """``text`` without its parenthesised parts: "Polar cod (Boreogadus saida)" -> "Polar cod"."""
    return " ".join(re.sub(r"\([^()]*\)", " ", text).split())


def parenthetical_parts(text: str) -> list[str]:
    """The parenthesised parts of ``text``: "Polar cod (Boreogadus saida)" -> ["Boreogadus saida"]."""
    return [p.strip() for p in re.findall(r"\(([^()]*)\)", text) if p.strip()]


def language_script(*texts: str) -> str:
    """``latin``, ``cyrillic`` or ``mixed``: which alphabets the letters of ``texts`` use."""
    latin = cyrillic = 0
    for text in texts:
        for ch in text:
            if not ch.isalpha():
                continue
            name = unicodedata.name(ch, "")
            if name.startswith("CYRILLIC"):
                cyrillic += 1
            elif name.startswith("LATIN"):
                latin += 1
    if cyrillic and latin:
        return "mixed"
    return "cyrillic" if cyrillic else "latin"
