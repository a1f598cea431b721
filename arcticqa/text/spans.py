"""Sentence splitting and packing sentences into bounded evidence spans and model chunks.

A span never crosses a paragraph and never cuts a sentence, unless one sentence alone is longer
than the hard cap (then it is cut at whitespace). Sentences are packed up to a target length
(default 600 characters) so that a cited span is a quote, not a page; the hard cap defaults to
1,600. Chunks pack whole spans of one section up to a context budget, overlapping by trailing
spans.
"""

from __future__ import annotations

import re

__all__ = ["sentence_bounds", "pack_spans", "pack_chunks"]

# Abbreviations after which a full stop does not end a sentence (lower-cased, without the dot).
_ABBREVIATIONS = frozenset(
    "e.g i.e et al fig figs eq eqs tab ref refs approx ca cf vs etc resp no nos vol pp sect sec "
    "st mt dr prof mr mrs ms jan feb mar apr jun jul aug sep sept oct nov dec "
    "incl max min avg std ed eds рис табл т.е т.к др см г гг им".split()
)
_BOUNDARY = re.compile(r"[.!?…]+[\"'”»)\]]*\s+(?=[\"'“«(\[]?[A-ZА-ЯЁ0-9])")
_LAST_TOKEN = re.compile(r"(\S+)$")


def sentence_bounds(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` (end exclusive, trailing space excluded)."""
    bounds: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        head = text[start:m.start() + 1]
        token = _LAST_TOKEN.search(head.rstrip(".!?…\"'”»)]"))
        raw = token.group(1).lstrip("([{\"'“‘«") if token else ""  # "(Fig. 3)" ends no sentence
        word = raw.lower()
        if word in _ABBREVIATIONS or (len(raw) == 1 and raw.isupper()):
            continue  # "et al. Smith", "Fig. 2", initials like "J. Smith" (but "3.5 m. The" ends)
        end = m.end()
        stripped_end = end - (len(m.group(0)) - len(m.group(0).rstrip()))
        bounds.append((start, stripped_end))
        start = end
    if start < len(text) and text[start:].strip():
        bounds.append((start, len(text.rstrip())))
    return bounds


def _hard_split(start: int, end: int, text: str, cap: int) -> list[tuple[int, int]]:
    pieces = []
    while end - start > cap:
        cut = text.rfind(" ", start + 1, start + cap)
        if cut <= start:
            cut = start + cap
        pieces.append((start, cut))
        start = cut + 1 if text[cut:cut + 1] == " " else cut
    pieces.append((start, end))
    return pieces


def pack_spans(text: str, *, target: int = 600, cap: int = 1600) -> list[tuple[int, int]]:
    """Group the sentences of one paragraph into spans of about ``target`` chars, at most ``cap``."""
    sentences: list[tuple[int, int]] = []
    for s, e in sentence_bounds(text):
        sentences.extend(_hard_split(s, e, text, cap) if e - s > cap else [(s, e)])
    spans: list[tuple[int, int]] = []
    for s, e in sentences:
        if spans:
            ps, pe = spans[-1]
            if (pe - ps) < target and e - ps <= cap and (e - ps) <= target * 1.5:
                spans[-1] = (ps, e)
                continue
        spans.append((s, e))
    return spans


def pack_chunks(spans: list[tuple[int, int]], *, budget: int = 6000,
                overlap: int = 500) -> list[list[int]]:
    """Indices of spans per chunk: consecutive spans up to ``budget`` chars (measured from the
    first span's start to the last span's end), each chunk after the first starting with the
    trailing spans of the previous one that fit in ``overlap`` chars."""
    chunks: list[list[int]] = []
    current: list[int] = []
    for i, (_s, e) in enumerate(spans):
        if current and e - spans[current[0]][0] > budget:
            chunks.append(current)
            carry: list[int] = []
            for j in reversed(current):
                if spans[current[-1]][1] - spans[j][0] > overlap:
                    break
                carry.insert(0, j)
            # the overlap must leave room for the new span
            while carry and e - spans[carry[0]][0] > budget:
                carry.pop(0)
            current = carry
        current.append(i)
    if current:
        chunks.append(current)
    return chunks
