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

import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from arcticqa.text.clean import normalise_line

__all__ = ["Line", "Block", "page_lines", "remove_running_lines", "reading_order", "build_blocks"]

_BOLD_FLAG, _ITALIC_FLAG = 16, 2
_MARGIN_SHARE = 0.08
_PAGE_NUMBER = re.compile(r"^(?:page\s*)?[\divxlc]{1,5}(?:\s*(?:of|/)\s*\d{1,5})?$", re.IGNORECASE)
_DIGITS = re.compile(r"\d+")
_CLOSING = tuple(".!?:;\"'”»)]")


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


@dataclass
class Block:
    """A paragraph-like run of lines in reading order (heading, body or caption candidate)."""

    lines: list[Line] = field(default_factory=list)
    column_start: bool = False  # first block of a column (may continue the previous block)

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
            text = normalise_line("".join(s["text"] for s in spans))
            if not text:
                continue
            main = max(spans, key=lambda s: len(s["text"].strip()))
            visible = [s for s in spans if s["text"].strip()]
            bold = all(s["flags"] & _BOLD_FLAG or "bold" in s["font"].lower() for s in visible)
            italic = all(s["flags"] & _ITALIC_FLAG or "italic" in s["font"].lower()
                         or "oblique" in s["font"].lower() for s in visible)
            x0, y0, x1, y1 = ln["bbox"]
            lines.append(Line(text, x0, y0, x1, y1, round(float(main["size"]), 1), bold, italic,
                              page_number))
    return lines, rotated


def remove_running_lines(pages: list[list[Line]], heights: list[float]) -> tuple[list[list[Line]], int]:
    """Drop running headers/footers and page numbers; returns the pages and the count dropped."""
    def in_margin(line: Line, height: float) -> bool:
        return line.y1 <= height * _MARGIN_SHARE or line.y0 >= height * (1 - _MARGIN_SHARE)

    def key(line: Line) -> str:
        return _DIGITS.sub("#", line.text.lower())

    seen: Counter[str] = Counter()
    for lines, height in zip(pages, heights, strict=True):
        seen.update({key(ln) for ln in lines if in_margin(ln, height)})
    threshold = max(2, int(0.4 * len(pages) + 0.999))
    kept_pages: list[list[Line]] = []
    removed = 0
    for lines, height in zip(pages, heights, strict=True):
        kept = []
        for ln in lines:
            if in_margin(ln, height) and (
                    _PAGE_NUMBER.match(ln.text) or (len(pages) >= 2 and seen[key(ln)] >= threshold
                                                    and len(ln.text) <= 200)):
                removed += 1
                continue
            kept.append(ln)
        kept_pages.append(kept)
    return kept_pages, removed


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


def reading_order(lines: list[Line], page_width: float) -> list[list[Line]]:
    """Lines of one page grouped into columns, in reading order (see the module docstring)."""
    if not lines:
        return []
    col_gap = max(5.0, 0.01 * page_width)
    heights = [ln.y1 - ln.y0 for ln in lines]
    band_gap = 0.3 * statistics.median(heights)
    bands = _split(lines, _gaps([(ln.y0, ln.y1) for ln in lines], band_gap), "y")
    groups: list[tuple[list[Line], bool]] = []  # (lines, multi-column)
    for band in bands:
        band_cols = bool(_gutters(band, col_gap))
        if groups:
            previous, multi = groups[-1]
            union = previous + band
            if not multi and not band_cols:
                groups[-1] = (union, False)
                continue
            if _gutters(union, col_gap):
                groups[-1] = (union, True)
                continue
        groups.append((list(band), band_cols))
    columns: list[list[Line]] = []
    for group, multi in groups:
        gutters = _gutters(group, col_gap) if multi else []
        if gutters:
            columns.extend(_column_order(col) for col in _split(group, gutters, "x"))
        else:
            columns.append(_column_order(group))
    return columns


def _body_pitch(columns: list[list[Line]]) -> float:
    pitches = [b.y1 - a.y1 for col in columns for a, b in zip(col, col[1:], strict=False)
               if 0 < b.y1 - a.y1 < 3 * max(a.size, 1.0)]
    return statistics.median(pitches) if pitches else 0.0


def build_blocks(columns: list[list[Line]]) -> list[Block]:
    """Paragraph blocks of one page's columns (continuation across columns is decided later)."""
    pitch = _body_pitch(columns)
    blocks: list[Block] = []
    for col in columns:
        if not col:
            continue
        left = min(ln.x0 for ln in col)
        right = max(ln.x1 for ln in col)
        width = max(right - left, 1.0)
        current = Block(lines=[col[0]], column_start=True)
        for prev, line in zip(col, col[1:], strict=False):
            step = line.y1 - prev.y1
            new = (
                (pitch and step > pitch * 1.3)
                or abs(line.size - prev.size) >= 0.5
                or line.bold != prev.bold
                or (line.x0 - left > max(4.0, 0.018 * width) and prev.x0 - left <= 1.0
                    and step > 0)
                or (prev.x1 < left + 0.6 * width and prev.text.endswith(_CLOSING[:3]))
            )
            if new:
                blocks.append(current)
                current = Block(lines=[line])
            else:
                current.lines.append(line)
        blocks.append(current)
    return blocks
