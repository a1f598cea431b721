"""Page geometry → lines in reading order → paragraph blocks.

Works on PyMuPDF's ``"dict"`` output (blocks → lines → spans with bbox, size and flags):

* **Running headers and footers**: a line in the top or bottom 8% of the page whose text, with
  digits masked, repeats on at least 40% of the pages (and at least 2), or a bare page number
  there, is dropped.
* **Reading order** (a guarded XY cut): a page is cut into horizontal bands at vertical gaps;
  consecutive bands are merged again while their union still has the same column gutter, so
  a two-column region whose columns happen to share a paragraph gap is not read band by band.
  Each merged band is then split at its gutters and read column by column, top to bottom.
* **Paragraph blocks**: within a column a new block starts at a larger than usual line pitch,
  a change of font size/weight, a first-line indent, or after a short line ending a sentence.
  A block that ends a column without closing punctuation continues in the next column or page.
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from arcticqa.text.clean import SCRIPT_CHARS, normalise_line, script_text
from arcticqa.text.sections import (
    cannot_be_heading,
    classify_heading,
    figures_in,
    heading_words,
    numbering_of,
)

__all__ = ["Line", "Block", "page_lines", "remove_running_lines", "reading_order", "build_blocks",
           "join_drop_caps"]

_BOLD_FLAG, _ITALIC_FLAG, _SUPERSCRIPT_FLAG = 16, 2, 1
_MARGIN_SHARE = 0.08
_NEAR_MARGIN_SHARE = 0.15
_MAX_DEPTH = 2  # columns inside columns, at most this deep
# "12", "iv", "Page 3 of 10", AGU's "–2–"
_PAGE_NUMBER = re.compile(r"^[–—-]?\s*(?:page\s*)?[\divxlc]{1,5}(?:\s*(?:of|/)\s*\d{1,5})?\s*[–—-]?$",
                          re.IGNORECASE)
_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
# a date alone in the margin ("December 3, 2026", "3 March 2025", "2025-03-03")
_MARGIN_DATE = re.compile(rf"^(?:{_MONTHS}\s+\d{{1,2}},?\s+\d{{4}}|\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}"
                          r"|\d{4}-\d{2}-\d{2})$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
#: a bold face by its name where the font's flags do not say so: "…Bold", "…Black", "…Semibold",
#: Springer's "AdvPTimesB", TeX's "CMBX10"
_BOLD_FONT = re.compile(r"(?i:bold|black|heavy|demi)|(?<=[a-z])(?:B|BI|Bd|BdIt)$|-B$|^(?:[A-Z]{6}\+)?CMBX")
_MARKED_NOTE = re.compile(r"^[∗*†‡§¶⁰¹²³⁴⁵⁶⁷⁸⁹\d]")
_NUMBER_ONLY = re.compile(r"^(?:\d{1,2}(?:\.\d{1,2}){0,3}\.?|[IVX]{1,5}\.)$")
_MARKS = SCRIPT_CHARS + "∗*†‡§¶"  # footnote marks after a sentence's full stop
_CLOSING = tuple(".!?:;\"'”»)]")
#: a gap between two glyphs at least this share of the font size is a word space (a justified
#: line's tightest spaces are about 0.15 em; kerning inside a word stays below 0.05 em)
_WORD_GAP = 0.15


@dataclass(slots=True)
class Line:
    """One horizontal text line of a page (text already NFKC-normalised)."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float
    size: float
    bold: bool
    italic: bool
    page: int  # 1-based
    #: characters at the start set in bold or italics when the rest is not (a run-in heading)
    styled_lead: int = 0
    #: a table cell: shares its row with other short lines close beside it
    cell: bool = False
    font: str = ""  # of the line's main span: a face can set text apart where the flags do not


@dataclass
class Block:
    """A paragraph-like run of lines in reading order (heading, body or caption candidate)."""

    lines: list[Line] = field(default_factory=list)
    column_start: bool = False  # first block of a column (may continue the previous block)
    indent: float = 0.0  # of the first line, from the column's left edge
    centred: bool = False  # the first line stands as far from the column's right edge

    @property
    def first(self) -> Line:
        return self.lines[0]

    @property
    def last(self) -> Line:
        return self.lines[-1]


def page_lines(page_dict: dict[str, Any], page_number: int) -> tuple[list[Line], int]:
    """Horizontal text lines of one page, and how many rotated lines were skipped."""
    lines: list[Line] = []
    rotated = 0
    for block in page_dict.get("blocks", ()):
        if block.get("type", 0) != 0:
            continue
        for ln in block.get("lines", ()):
            direction = ln.get("dir", (1.0, 0.0))
            if abs(direction[1]) > 0.05 or direction[0] < 0:
                rotated += 1  # margin stamps ("Downloaded from …") and rotated table headers
                continue
            spans = [s for s in ln.get("spans", ()) if s.get("text")]
            if not spans:
                continue
            main = max(spans, key=lambda s: len(s["text"].strip()))
            raw = spans[0]["text"] if len(spans) == 1 else _join_spans(spans, main)
            text = normalise_line(raw)
            if not text or len(text) >= 6 and text.count(text[0]) == len(text):
                continue  # nothing, or a rule or curve drawn with one repeated glyph
            visible = [s for s in spans if s["text"].strip()]
            styles = [_is_bold(s) for s in visible]
            slants = [_is_italic(s) for s in visible]
            lead = 0
            if len(visible) > 1 and not all(styles) and not all(slants):
                flags = styles if styles[0] else slants
                styled = "".join(s["text"] for s, f in zip(visible, _leading(flags), strict=False) if f)
                lead = len(normalise_line(styled)) if styled.strip() else 0
            x0, y0, x1, y1 = ln["bbox"]
            lines.append(Line(text, x0, y0, x1, y1, round(float(main["size"]), 1), all(styles),
                              all(slants), page_number, lead, font=str(main.get("font", ""))))
    return _read_rows(lines, float(page_dict.get("width") or 595.0)), rotated


def _rows(lines: list[Line]) -> list[list[Line]]:
    """Lines grouped by baseline (within 0.3 of their size), each row from left to right."""
    rows: list[list[Line]] = []
    reach = -1.0  # the lowest baseline the current row still takes
    for line in sorted(lines, key=lambda ln: ln.y1):
        if line.y1 <= reach:
            rows[-1].append(line)
        else:
            rows.append([line])
            reach = line.y1 + 0.3 * line.size
    for row in rows:
        row.sort(key=lambda ln: ln.x0)
    return rows


def _read_rows(lines: list[Line], page_width: float) -> list[Line]:
    """Two things only a line's neighbour on its row tells, done in one pass over the rows:

    * a heading's number set apart from its title (Copernicus' ``2.2.2`` ... ``Sea ice drift``)
      is joined to it, so the number is not a heading of its own and the title not unnumbered;
    * a table cell is short and has another short line of its size close beside it (a heading
      stands alone on its row; a column's neighbour is a full-width line or far across the
      gutter; a sidebar's is set smaller).
    """
    dropped: set[int] = set()
    for row in _rows(lines):
        for a, b in zip(row, row[1:], strict=False):
            gap = b.x0 - a.x1
            if (_NUMBER_ONLY.match(a.text) and 0 <= gap <= 4 * a.size and abs(a.size - b.size) < 0.5
                    and a.bold == b.bold and b.text[:1].isupper()):
                b.text = f"{a.text} {b.text}"
                b.styled_lead = len(a.text) + 1 + b.styled_lead if b.styled_lead else 0
                b.x0, b.y0 = a.x0, min(a.y0, b.y0)
                dropped.add(id(a))
        kept = [ln for ln in row if id(ln) not in dropped]
        for a, b in zip(kept, kept[1:], strict=False):
            if (-1 <= b.x0 - a.x1 <= 3 * max(a.size, b.size) and abs(a.size - b.size) < 0.5
                    and max(a.x1 - a.x0, b.x1 - b.x0) < 0.3 * page_width):
                a.cell = b.cell = True
    return [ln for ln in lines if id(ln) not in dropped] if dropped else lines


def _is_bold(span: dict[str, Any]) -> bool:
    return bool(span["flags"] & _BOLD_FLAG) or _bold_face(span["font"])


def _is_italic(span: dict[str, Any]) -> bool:
    return bool(span["flags"] & _ITALIC_FLAG) or _italic_face(span["font"])


@functools.lru_cache(maxsize=512)  # a paper has a few dozen fonts and ten thousands of spans
def _bold_face(font: str) -> bool:
    return bool(_BOLD_FONT.search(font))


@functools.lru_cache(maxsize=512)
def _italic_face(font: str) -> bool:
    lowered = font.lower()
    return "italic" in lowered or "oblique" in lowered


def _leading(flags: list[bool]) -> list[bool]:
    """Only the first run of True counts: ``[T, T, F, T]`` → ``[T, T, F, F]``."""
    out, inside = [], True
    for f in flags:
        inside = inside and f
        out.append(inside)
    return out


def _join_spans(spans: list[dict[str, Any]], main: dict[str, Any]) -> str:
    """One line's text with raised and lowered runs in the exponent/index normal form.

    A run set smaller than the line's main text and moved off its baseline is a superscript
    (``m`` + ``−2`` → ``m⁻²``) or a subscript (``CO`` + ``2`` → ``CO₂``), joined to the token
    before it, never left as a detached ``−1``.
    """
    size = float(main["size"]) or 1.0
    base = float(main.get("origin", (0.0, 0.0))[1])
    pieces: list[str] = []
    reach: float | None = None  # right edge of the previous span
    for sp in spans:
        text = sp["text"]
        left, right = float(sp["bbox"][0]), float(sp["bbox"][2])
        gap = left - reach if reach is not None else 0.0
        reach = right
        if float(sp["size"]) < 0.9 * size and text.strip():
            shift = float(sp.get("origin", (0.0, base))[1]) - base
            raised = shift < -0.12 * size or bool(sp["flags"] & _SUPERSCRIPT_FLAG)
            if raised or shift > 0.08 * size:
                before = "".join(pieces)
                script = script_text(text, raised, before.rstrip())
                if script is not None:
                    if before.endswith(" ") and before.strip() and not before.rstrip()[-1:].isdigit():
                        pieces = [before.rstrip()]  # "yr −1" in the PDF is "yr⁻¹"
                    pieces.append(script + (" " if text.endswith(" ") else ""))
                    continue
        if gap >= _WORD_GAP * size and pieces and not pieces[-1][-1:].isspace() and not text[:1].isspace():
            pieces.append(" ")  # a word space drawn as a gap, with no space glyph ("44°" + "to")
        pieces.append(text)
    return "".join(pieces)


def join_drop_caps(lines: list[Line]) -> list[Line]:
    """Put a drop cap (a single large capital beside the first lines of a paragraph, IEEE's
    ``T`` + ``HE …``) back in front of the line it starts, so it is neither a heading nor a
    section of its own."""
    if not lines:
        return lines
    sizes = sorted(ln.size for ln in lines)
    typical = sizes[len(sizes) // 2]
    caps = [ln for ln in lines if len(ln.text) == 1 and ln.text.isupper() and ln.size >= 1.8 * typical]
    if not caps:
        return lines
    drop: set[int] = set()
    for cap in caps:
        beside = [ln for ln in lines if ln is not cap and cap.x1 - 1 <= ln.x0 <= cap.x1 + 2 * typical
                  and cap.y0 - 1 <= (ln.y0 + ln.y1) / 2 <= cap.y1 + 1]
        if not beside:
            continue
        first = min(beside, key=lambda ln: ln.y0)
        first.text = cap.text + first.text  # x0 stays: the lines beside the cap share its indent
        drop.add(id(cap))
    return [ln for ln in lines if id(ln) not in drop]


def remove_running_lines(pages: list[list[Line]], heights: list[float]) -> tuple[list[list[Line]], int]:
    """Drop running headers/footers and page numbers; returns the pages and the count dropped."""
    def in_margin(line: Line, height: float) -> bool:
        # by the line's middle: a footer's ascenders may reach just above the margin
        middle = (line.y0 + line.y1) / 2
        return middle <= height * _MARGIN_SHARE or middle >= height * (1 - _MARGIN_SHARE)

    # only lines near a page's edge can be furniture: their keys are worked out once
    near: list[list[tuple[Line, str]]] = [
        [(ln, _DIGITS.sub("#", ln.text.lower())) for ln in lines
         if ln.y0 <= height * _NEAR_MARGIN_SHARE or ln.y1 >= height * (1 - _NEAR_MARGIN_SHARE)]
        for lines, height in zip(pages, heights, strict=True)]
    seen: Counter[str] = Counter()
    # just inside the margin (a tall glyph, a third header line) only text printed at the very
    # same place on many pages is furniture: body text never repeats where it stood
    placed: Counter[tuple[str, int]] = Counter()
    for edge, height in zip(near, heights, strict=True):
        seen.update({key for ln, key in edge if in_margin(ln, height)})
        placed.update({(key, round(ln.y0)) for ln, key in edge})
    threshold = max(2, int(0.4 * len(pages) + 0.999))
    kept_pages: list[list[Line]] = []
    removed = 0
    for index, (lines, edge, height) in enumerate(zip(pages, near, heights, strict=True)):
        dropped = set()
        for ln, key in edge:
            if in_margin(ln, height) and (
                    _PAGE_NUMBER.match(ln.text) or _MARGIN_DATE.match(ln.text)
                    or (len(pages) >= 2 and seen[key] >= threshold and len(ln.text) <= 200)
                    or (index > 0 and _lone_header(ln, lines, height))
                    or _lone_footer(ln, lines, height)):
                dropped.add(id(ln))
            elif len(pages) >= 3 and placed[(key, round(ln.y0))] >= threshold:
                dropped.add(id(ln))
        removed += len(dropped)
        kept_pages.append([ln for ln in lines if id(ln) not in dropped] if dropped else lines)
    return kept_pages, removed


def _lone_header(line: Line, lines: list[Line], height: float) -> bool:
    """A header printed once (a two-page paper's short title on its second page): in the top
    margin, not a sentence's end, and standing apart from the text below it."""
    if (line.y1 > height * _MARGIN_SHARE or len(line.text) > 100
            or line.text.rstrip().endswith(_CLOSING[:3])):
        return False
    below = [ln.y0 for ln in lines if ln.y0 > line.y1 and ln.x0 < line.x1 and line.x0 < ln.x1]
    return not below or min(below) - line.y1 > 0.8 * (line.y1 - line.y0)


def _lone_footer(line: Line, lines: list[Line], height: float) -> bool:
    """A footer printed once (a publisher's line or the journal's citation line on the first
    page): in the bottom margin, below the text and standing apart from it. A footnote starts
    with its mark and stays."""
    if (line.y0 + line.y1) / 2 < height * (1 - _MARGIN_SHARE) or _MARKED_NOTE.match(line.text):
        return False
    # every line starting higher up counts: boxes taller than the pitch overlap the next line's
    above = [ln.y1 for ln in lines if ln is not line and ln.y0 < line.y0 - 1 and ln.x0 < line.x1 and line.x0 < ln.x1]
    # by the font size, not the line's box: some typesetters give a line twice its size's height
    return not above or line.y0 - max(above) > 1.2 * line.size


def _gaps(intervals: list[tuple[float, float]], min_gap: float) -> list[tuple[float, float]]:
    """Empty stretches at least ``min_gap`` wide between the union of ``intervals``."""
    gaps = []
    ordered = sorted(intervals)
    reach = ordered[0][1]
    for lo, hi in ordered[1:]:
        if lo - reach >= min_gap:
            gaps.append((reach, lo))
        reach = max(reach, hi)
    return gaps


def _split(lines: list[Line], gaps: list[tuple[float, float]], axis: str) -> list[list[Line]]:
    parts: list[list[Line]] = [[] for _ in range(len(gaps) + 1)]
    for ln in lines:
        centre = (ln.x0 + ln.x1) / 2 if axis == "x" else (ln.y0 + ln.y1) / 2
        index = sum(1 for g in gaps if centre > g[0])
        parts[index].append(ln)
    return [p for p in parts if p]


def _gutters(lines: list[Line], col_gap: float) -> list[tuple[float, float]]:
    if len(lines) < 2:
        return []
    return _gaps([(ln.x0, ln.x1) for ln in lines], col_gap)


def _column_order(lines: list[Line]) -> list[Line]:
    return sorted(lines, key=lambda ln: (round(ln.y1, 0), ln.x0))


def reading_order(lines: list[Line], page_width: float, depth: int = 0) -> list[list[Line]]:
    """Lines of one page grouped into columns, in reading order (see the module docstring)."""
    if not lines:
        return []
    col_gap = max(5.0, 0.01 * page_width)
    heights = [ln.y1 - ln.y0 for ln in lines]
    band_gap = 0.3 * statistics.median(heights)
    bands = _split(lines, _gaps([(ln.y0, ln.y1) for ln in lines], band_gap), "y")
    groups: list[tuple[list[Line], bool]] = []  # (lines, multi-column)
    # the gutter between the body columns, from lines of a column's width (when the page has
    # them): a band joins the group above only while their shared gap is that gutter, so a
    # heading under a two-box title block is not read as part of the boxes' columns
    column_lines = [ln for ln in lines if 0.3 * page_width <= ln.x1 - ln.x0 <= 0.5 * page_width]
    if len(column_lines) >= 6:  # justified body lines share one width; an affiliation line does not
        usual = statistics.median(ln.x1 - ln.x0 for ln in column_lines)
        column_lines = [ln for ln in column_lines if abs(ln.x1 - ln.x0 - usual) <= 0.03 * page_width]
        # ... and one left edge with others: a centred line of that width (a journal's homepage
        # line) would cover the gutter
        edges = Counter(round(ln.x0 / 2) for ln in column_lines)
        column_lines = [ln for ln in column_lines if edges[round(ln.x0 / 2)] >= 3]
    body_gutters = _gutters(column_lines, col_gap) if len(column_lines) >= 6 else []
    for band in bands:
        band_cols = bool(_gutters(band, col_gap))
        if groups:
            previous, multi = groups[-1]
            union = previous + band
            if not multi and not band_cols:
                groups[-1] = (union, False)
                continue
            shared = _gutters(union, col_gap)
            if shared and (not body_gutters or any(g[0] < b[1] and b[0] < g[1]
                                                   for g in shared for b in body_gutters)):
                groups[-1] = (union, True)
                continue
        groups.append((list(band), band_cols))
    columns: list[list[Line]] = []
    for group, multi in groups:
        gutters = _gutters(group, col_gap) if multi else []
        if not gutters:
            columns.append(_column_order(group))
            continue
        for col in _split(group, gutters, "x"):
            # a column may hold columns of its own under a block that spans them (Science's
            # title and abstract over two of three columns hide the gutter between those two)
            wide = max(ln.x1 for ln in col) - min(ln.x0 for ln in col) >= 0.55 * page_width
            inner = reading_order(col, page_width, depth + 1) if wide and depth < _MAX_DEPTH else [col]
            columns.extend(_column_order(c) for c in inner)
    return columns


def _pitches(columns: list[list[Line]]) -> tuple[float, dict[float, float]]:
    """The page's usual line pitch, and the usual pitch of each font size: a page of references
    in small print must not make the body's ordinary line pitch look like a paragraph gap."""
    steps: dict[float, list[float]] = {}
    for col in columns:
        for a, b in zip(col, col[1:], strict=False):
            if 0 < b.y1 - a.y1 < 3 * max(a.size, 1.0):
                steps.setdefault(a.size if abs(a.size - b.size) < 0.5 else -1.0, []).append(b.y1 - a.y1)
    every = [step for group in steps.values() for step in group]
    by_size = {size: statistics.median(group) for size, group in steps.items() if size > 0 and len(group) >= 3}
    return (statistics.median(every) if every else 0.0), by_size


def _heading_line(line: Line, width: float) -> bool:
    """A line that can be a whole heading set in the body font: short, not a sentence's end,
    and a known section name, numbered (``3.``, ``2.1``, ``IV.``) or a styled ``B.`` title."""
    text = line.text
    if line.x1 - line.x0 > 0.75 * width or len(text) > 100 or text.endswith((",", ";", ")")) \
            or line.cell or cannot_be_heading(text):
        return False
    if text.endswith("."):  # "Results." alone on its line; any other full stop ends a sentence
        return classify_heading(heading_words(text)).kind is not None
    style, _level, cut = numbering_of(text)
    if style is None:
        return classify_heading(heading_words(text)).kind is not None
    rest = text[cut:]
    if not rest[:1].isupper() or figures_in(rest) > 4:
        return False
    return style != "letter" or line.italic or line.bold or rest.isupper()


def _opened(line: Line, usual_left: float, left: float, right: float, column_start: bool = False) -> Block:
    """A new block starting at ``line`` in a column spanning ``left``..``right``."""
    width = max(right - left, 1.0)
    indent = line.x0 - usual_left
    return Block(lines=[line], column_start=column_start, indent=indent,
                 centred=indent > 0.02 * width and abs(line.x0 - left - (right - line.x1)) < 0.02 * width)


def build_blocks(columns: list[list[Line]]) -> list[Block]:
    """Paragraph blocks of one page's columns (continuation across columns is decided later)."""
    page_pitch, pitch_of = _pitches(columns)
    blocks: list[Block] = []
    for col in columns:
        if not col:
            continue
        left = min(ln.x0 for ln in col)
        right = max(ln.x1 for ln in col)
        width = max(right - left, 1.0)
        # where most of the column's lines start: a stray line further left (a table's, a
        # hanging label) must not make every line look indented
        usual_left = Counter(round(ln.x0) for ln in col).most_common(1)[0][0]
        current = _opened(col[0], usual_left, left, right, column_start=True)
        for prev, line in zip(col, col[1:], strict=False):
            step = line.y1 - prev.y1
            # a heading's title wrapped onto a second, hanging line
            wraps = (line.text[:1].islower() and line.bold == prev.bold and abs(line.size - prev.size) < 0.5
                     and (prev.bold or prev.x1 < left + 0.8 * width and _heading_line(prev, width)))
            new = not wraps and (
                # a size with few lines on the page (a title) is set at least 1.2 times its size
                ((pitch := pitch_of.get(prev.size) or max(page_pitch, 1.2 * prev.size)) and step > pitch * 1.3)
                or abs(line.size - prev.size) >= 0.5
                or line.bold != prev.bold
                or (line.x0 - left > max(4.0, 0.018 * width) and prev.x0 - left <= 1.0
                    and step > 0)
                or (prev.x1 < left + 0.6 * width and prev.text.endswith(_CLOSING[:3]))
                # a heading in the body font on a line of its own
                or (prev.x1 < left + 0.8 * width and _heading_line(prev, width))
                or ((prev.text.rstrip(_MARKS).endswith(_CLOSING[:3]) or line.italic != prev.italic)
                    and line.x1 < left + 0.8 * width and _heading_line(line, width))
            )
            if new:
                blocks.append(current)
                current = _opened(line, usual_left, left, right)
            else:
                current.lines.append(line)
        blocks.append(current)
    return blocks
