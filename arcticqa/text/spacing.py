"""Word spaces from glyph gaps, where a PDF draws the gap but carries no space glyph.

Some typesetters position every word with a kerning offset instead of a space character. When
the offset is smaller than MuPDF's space threshold (tight justified lines, italic citations) the
words come out glued: ``TointerprettheAEE/IIEEratio``, ``Tietscheetal.``. The glyph positions
still show where the words end, so the spaces are put back from them.

Reading every glyph's box (PyMuPDF's ``"rawdict"``) costs as much again as reading the page, so
it is done only on pages with a *suspect* span: one without whitespace whose letters, unknown
to the paper as a word of their own, split wholly into words the paper uses elsewhere, two of
them function words (``tietscheetal`` → ``tietsche`` ``et`` ``al``), or a run of letters longer
than any word, or words joined by a comma with no space after it. The vocabulary only picks the pages; the spaces
come from the geometry alone, so a real long word (``understanding``) is never split.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["PaperWords", "long_runs", "suspect_pages", "respace_page"]

_LETTERS = re.compile(r"[^\W\d_]+", re.UNICODE)
#: addresses, identifiers and file names run without spaces by nature
_NOT_PROSE = re.compile(r"@|://|www\.|\bdoi\b|10\.\d{4}|\w\.\w+/|[#_?=]", re.IGNORECASE)
_JOINERS = re.compile(r"[-/‐–]")
_PUNCTUATION_GLUE = re.compile(r"[^\W\d_]{2}[,;][^\W\d_]{2}")
_FUNCTION_WORDS = frozenset("an and as at by et al for from in is it of on or that the to we with".split())
# a word holding fewer than two of them cannot split into two: checked before any counting
_FUNCTION_PIECE = re.compile("|".join(sorted(_FUNCTION_WORDS, key=len, reverse=True)))
#: a gap of at least this share of the font size between two glyphs is a word space
_GAP_EM = 0.1
#: ... and it must stand this far above the span's usual gap between letters
_ABOVE_USUAL_EM = 0.08
_MIN_SUSPECT = 7  # letters: shorter glued runs are too rare to be worth a page's glyph read
_LONG_RUN = 25
_MAX_SUSPECT = 200


def _spans(page_dict: dict[str, Any]) -> Iterator[tuple[tuple[int, int, int], dict[str, Any]]]:
    for b, block in enumerate(page_dict.get("blocks", ())):
        for li, line in enumerate(block.get("lines", ())):
            for s, span in enumerate(line.get("spans", ())):
                yield (b, li, s), span


def long_runs(page_dict: dict[str, Any]) -> list[tuple[tuple[int, int, int], str]]:
    """The (block, line, span) keys and text of a page's spans that are one run of seven
    characters or more, and of the runs inside longer spans where a comma joins two words:
    the only ones that can be glued words."""
    runs: list[tuple[tuple[int, int, int], str]] = []
    for b, block in enumerate(page_dict.get("blocks", ())):  # every span of the paper: kept lean
        for li, line in enumerate(block.get("lines", ())):
            for s, span in enumerate(line.get("spans", ())):
                text = span["text"]
                if len(text) >= _MIN_SUSPECT:
                    pieces = text.split()
                    if len(pieces) == 1 and len(pieces[0]) >= _MIN_SUSPECT:
                        runs.append(((b, li, s), pieces[0]))
                    elif _PUNCTUATION_GLUE.search(text):  # words glued inside a spaced span
                        runs.extend(((b, li, s), piece) for piece in pieces if _PUNCTUATION_GLUE.search(piece))
    return runs


class PaperWords:
    """Each page's long runs (:func:`long_runs`) and, counted when first asked for, how often
    each lower-cased word stands in the paper's text as a run of letters."""

    def __init__(self, runs: list[list[tuple[tuple[int, int, int], str]]], texts: Callable[[], Iterable[str]]) -> None:
        self.long_runs = runs
        self._texts = texts
        self._counts: Counter[str] | None = None
        self._glued: dict[str, bool] = {}
        # a run that recurs is a word of the paper: known without counting every word
        self._recurring = Counter(w.lower() for page in runs for _key, run in page for w in _LETTERS.findall(run))

    @property
    def counts(self) -> Counter[str]:
        if self._counts is None:
            self._counts = Counter()
            for text in self._texts():
                self._counts.update(_LETTERS.findall(text.lower()))
        return self._counts

    def known(self, word: str) -> bool:
        return self.counts.get(word, 0) >= 2

    def glued(self, word: str) -> bool:
        """Whether ``word`` (not itself a word of the paper) splits wholly into words of the paper,
        two of them short function words (``tietscheetal``, ``tointerpretthe``): a compound
        (``throughout``, ``thereby``) splits too, but into content words."""
        if (not _MIN_SUSPECT <= len(word) <= _MAX_SUSPECT or self._recurring[word] >= 2
                or len(_FUNCTION_PIECE.findall(word)) < 2 or self.counts.get(word, 0) >= 2):
            return False
        if word not in self._glued:
            self._glued[word] = self._splits_with_function_words(word)
        return self._glued[word]

    def _splits_with_function_words(self, word: str) -> bool:
        n = len(word)
        # most[i]: the most function words in a split of word[:i] into known words, or None
        most: list[int | None] = [0] + [None] * n
        for end in range(1, n + 1):
            for start in range(max(0, end - 25), end):
                before = most[start]
                piece = word[start:end]
                if before is None or not (piece in _FUNCTION_WORDS or len(piece) >= 3 and self.known(piece)):
                    continue
                count = before + (piece in _FUNCTION_WORDS)
                if most[end] is None or count > most[end]:  # type: ignore[operator]
                    most[end] = count
        best = most[n]
        return best is not None and best >= 2


def _suspect(run: str, vocabulary: PaperWords) -> bool:
    if _NOT_PROSE.search(run):
        return False
    letters = _LETTERS.findall(run)
    # a line's worth of letters with no space: no word of prose is that long; measured between
    # hyphens and slashes, which join words on purpose (Attribution-NonCommercial-NoDerivs, paths)
    if any(len(piece) >= _LONG_RUN and sum(map(len, _LETTERS.findall(piece))) >= 0.7 * len(piece)
           for piece in _JOINERS.split(run)):
        return True
    if _PUNCTUATION_GLUE.search(run):
        return True  # "theIce,Cloud,and": prose puts a space after a comma between words
    return any(vocabulary.glued(word.lower()) for word in letters)


def suspect_pages(vocabulary: PaperWords) -> dict[int, set[tuple[int, int, int]]]:
    """Page index → the (block, line, span) keys of its suspect spans, for pages that have any."""
    found: dict[int, set[tuple[int, int, int]]] = {}
    for index, runs in enumerate(vocabulary.long_runs):
        keys = {key for key, run in runs if _suspect(run, vocabulary)}
        if keys:
            found[index] = keys
    return found


def _spaced(chars: list[dict[str, Any]], size: float) -> str:
    if len(chars) < 2:
        return "".join(c["c"] for c in chars)
    gaps = [b["bbox"][0] - a["bbox"][2] for a, b in zip(chars, chars[1:], strict=False)]
    usual = statistics.median(gaps)
    threshold = max(_GAP_EM * size, usual + _ABOVE_USUAL_EM * size)
    out = [chars[0]["c"]]
    for gap, a, b in zip(gaps, chars, chars[1:], strict=False):
        if gap >= threshold and not a["c"].isspace() and not b["c"].isspace():
            out.append(" ")
        out.append(b["c"])
    return "".join(out)


def respace_page(page_dict: dict[str, Any], raw_dict: dict[str, Any], keys: set[tuple[int, int, int]]) -> int:
    """Put word spaces from glyph gaps into the suspect spans of ``page_dict`` (in place), reading
    the glyph boxes from ``raw_dict`` (the same page's ``"rawdict"``, same flags). Returns how many
    spaces were added. A span whose glyphs do not spell its text is left alone."""
    raw = dict(_spans(raw_dict))
    added = 0
    for key, span in _spans(page_dict):
        if key not in keys or key not in raw:
            continue
        line_dir = page_dict["blocks"][key[0]]["lines"][key[1]].get("dir", (1.0, 0.0))
        chars = raw[key].get("chars", [])
        if abs(line_dir[1]) > 0.05 or "".join(c["c"] for c in chars) != span["text"]:
            continue
        spaced = _spaced(chars, float(span["size"]) or 1.0)
        added += len(spaced) - len(span["text"])
        span["text"] = spaced
    return added
