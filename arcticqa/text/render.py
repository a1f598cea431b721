"""A small, deterministic PDF typesetter for test fixtures and the bundled sample corpus.

It lays out a :class:`PaperSource` (title, authors, abstract, sections, captions, references)
like a journal article: one or two columns, a running header, a footer line and page numbers.
It places text itself with :class:`pymupdf.TextWriter` and MuPDF's built-in Nimbus fonts
(``helv``/``hebo``/``heit``, which cover Latin, Greek and Cyrillic), embedded as subsets, so
files stay small (a few kB per page) and are byte-identical from run to run (fixed metadata
dates, no random file id).

A soft hyphen (U+00AD) inside a word marks where the typesetter may break it with a visible
hyphen (``tempera\\u00adture`` → ``tempera-`` / ``ture``), which is how the line-wrap
hyphenation that extraction must undo gets into fixtures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymupdf
from pydantic import BaseModel, Field, field_validator

__all__ = ["PaperSection", "PaperSource", "render_paper_pdf"]

_SOFT_HYPHEN = "\u00ad"
_PAGE_W, _PAGE_H = 595.0, 842.0  # A4
_MARGIN_X, _TOP, _BOTTOM = 56.0, 64.0, 778.0
_GUTTER = 18.0
_BODY_SIZE, _BODY_LEAD = 9.0, 11.5
_PARA_SKIP, _HEAD_SKIP = 5.0, 8.0
_FIXED_DATE = "D:20240101000000Z"


class PaperSection(BaseModel):
    """One headed section: its paragraphs, then figure/table captions drawn below them."""

    heading: str
    paragraphs: list[str] = Field(default_factory=list)
    captions: list[str] = Field(default_factory=list)


class PaperSource(BaseModel):
    """The content of a paper to typeset. ``sections`` also accepts ``(heading, paragraphs)``."""

    title: str
    authors: list[str] = Field(default_factory=list)
    venue: str | None = None  # the footer line, e.g. "Polar Research 42 (2023)"
    abstract: str | None = None
    sections: list[PaperSection] = Field(default_factory=list)
    #: acknowledgements, funding, ... typeset after the body and before the references
    back_matter: list[PaperSection] = Field(default_factory=list)
    references: list[str] = Field(default_factory=list)
    language: str = "en"

    @field_validator("sections", "back_matter", mode="before")
    @classmethod
    def _pairs_to_sections(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"heading": v[0], "paragraphs": list(v[1])} if isinstance(v, tuple | list) else v
                    for v in value]
        return value


@dataclass
class _Cursor:
    """Where the next line goes: page index, column index and baseline y."""

    page: int = 0
    column: int = 0
    y: float = _TOP
    column_top: float = _TOP


@dataclass
class _Typesetter:
    columns: int
    doc: Any = field(default_factory=pymupdf.open)
    writers: list[Any] = field(default_factory=list)
    cursor: _Cursor = field(default_factory=_Cursor)
    fonts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.fonts = {name: pymupdf.Font(name) for name in ("helv", "hebo", "heit")}
        self._new_page()

    # -- geometry -------------------------------------------------------------------------
    def _new_page(self) -> None:
        page = self.doc.new_page(width=_PAGE_W, height=_PAGE_H)
        self.writers.append(pymupdf.TextWriter(page.rect))
        self.cursor = _Cursor(page=len(self.writers) - 1, column=0, y=_TOP, column_top=_TOP)

    def column_box(self, full_width: bool = False) -> tuple[float, float]:
        if full_width or self.columns == 1:
            return _MARGIN_X, _PAGE_W - _MARGIN_X
        width = (_PAGE_W - 2 * _MARGIN_X - _GUTTER * (self.columns - 1)) / self.columns
        x0 = _MARGIN_X + self.cursor.column * (width + _GUTTER)
        return x0, x0 + width

    def advance(self, height: float) -> None:
        """Move down by ``height``, flowing to the next column or page when it does not fit."""
        if self.cursor.y + height > _BOTTOM:
            if self.cursor.column + 1 < self.columns:
                self.cursor.column += 1
                self.cursor.y = self.cursor.column_top
            else:
                self._new_page()
        self.cursor.y += height

    def start_columns(self) -> None:
        """Columns start below whatever full-width material is on the page."""
        self.cursor.column_top = self.cursor.y
        self.cursor.column = 0

    # -- text -----------------------------------------------------------------------------
    def text_width(self, text: str, font: str, size: float) -> float:
        return float(self.fonts[font].text_length(text, fontsize=size))

    def wrap(self, text: str, font: str, size: float, width: float) -> list[str]:
        """Greedy line breaking at spaces, and at soft hyphens with a visible hyphen."""
        lines: list[str] = []
        current, current_w = "", 0.0
        space = self.text_width(" ", font, size)
        for word in text.split():
            word_w = self.text_width(word.replace(_SOFT_HYPHEN, ""), font, size)
            if current_w + (space if current else 0.0) + word_w <= width:
                current, current_w = (f"{current} {word}", current_w + space + word_w) if current \
                    else (word, word_w)
                continue
            head, tail = self._hyphenate(current, word, font, size, width)
            if head is not None:
                lines.append(head)
                current = tail
            else:
                if current:
                    lines.append(current.replace(_SOFT_HYPHEN, ""))
                current = word
            current_w = self.text_width(current.replace(_SOFT_HYPHEN, ""), font, size)
        if current:
            lines.append(current.replace(_SOFT_HYPHEN, ""))
        return lines

    def _hyphenate(self, current: str, word: str, font: str, size: float,
                   width: float) -> tuple[str | None, str]:
        if _SOFT_HYPHEN not in word:
            return None, word
        parts = word.split(_SOFT_HYPHEN)
        for cut in range(len(parts) - 1, 0, -1):
            piece = "".join(parts[:cut]) + "-"
            head = f"{current} {piece}" if current else piece
            if self.text_width(head.replace(_SOFT_HYPHEN, ""), font, size) <= width:
                return head.replace(_SOFT_HYPHEN, ""), _SOFT_HYPHEN.join(parts[cut:])
        return None, word

    def paragraph(self, text: str, *, font: str = "helv", size: float = _BODY_SIZE,
                  lead: float = _BODY_LEAD, full_width: bool = False, center: bool = False,
                  skip_before: float = _PARA_SKIP) -> None:
        x0, x1 = self.column_box(full_width)
        lines = self.wrap(text, font, size, x1 - x0)
        for i, line in enumerate(lines):
            self.advance(lead + (skip_before if i == 0 else 0.0))
            x0, x1 = self.column_box(full_width)  # the column may have changed
            x = x0
            if center:
                x = x0 + (x1 - x0 - self.text_width(line, font, size)) / 2
            self.writers[self.cursor.page].append((x, self.cursor.y), line,
                                                  font=self.fonts[font], fontsize=size)

    def figure(self, caption: str) -> None:
        """An empty framed box standing for a figure, with its caption below it."""
        box_h = 48.0
        self.advance(box_h + _PARA_SKIP)
        x0, x1 = self.column_box()
        page = self.doc[self.cursor.page]
        page.draw_rect(pymupdf.Rect(x0, self.cursor.y - box_h, x1, self.cursor.y), color=(0.5, 0.5, 0.5),
                       width=0.5)
        self.paragraph(caption, font="heit", size=8.0, lead=10.0, skip_before=3.0)

    def finish(self, running_header: str | None, footer: str | None, page_numbers: bool) -> bytes:
        for index, writer in enumerate(self.writers):
            if running_header:
                writer.append((_MARGIN_X, 40.0), running_header, font=self.fonts["heit"], fontsize=8.0)
            if footer:
                writer.append((_MARGIN_X, 800.0), footer, font=self.fonts["helv"], fontsize=7.5)
            if page_numbers:
                number = str(index + 1)
                x = (_PAGE_W - self.text_width(number, "helv", 8.0)) / 2
                writer.append((x, 815.0), number, font=self.fonts["helv"], fontsize=8.0)
            writer.write_text(self.doc[index])
        self.doc.subset_fonts()
        self.doc.set_metadata({"creationDate": _FIXED_DATE, "modDate": _FIXED_DATE,
                               "producer": "arcticqa", "creator": "arcticqa"})
        data: bytes = self.doc.tobytes(garbage=3, deflate=True, no_new_id=True)
        self.doc.close()
        return data


def _typeset_section(ts: _Typesetter, section: PaperSection, *, size: float = _BODY_SIZE,
                     lead: float = _BODY_LEAD, body_headings: bool = False) -> None:
    if body_headings:  # the body font and size, no gap to its paragraph: only the words tell
        ts.paragraph(section.heading, size=_BODY_SIZE, lead=_BODY_LEAD)
    else:
        ts.paragraph(section.heading, font="hebo", size=10.0, lead=12.0, skip_before=_HEAD_SKIP)
    for i, para in enumerate(section.paragraphs):
        ts.paragraph(para, size=size, lead=lead, skip_before=0.0 if body_headings and i == 0 else _PARA_SKIP)
    for caption in section.captions:
        ts.figure(caption)


def render_paper_pdf(paper: PaperSource, path: Path | str | None = None, *, columns: int = 1,
                     running_header: str | None = None, page_numbers: bool = True,
                     abstract_heading: str = "Abstract", references_heading: str = "References",
                     repeat: int = 1, body_headings: bool = False) -> bytes:
    """Typeset ``paper`` and return the PDF bytes; also write them to ``path`` when given.

    ``repeat`` typesets the body sections that many times (for page-count benchmarks).
    ``body_headings`` sets every heading (abstract and references too) in the body font and
    size on a line of its own, as many journals do, instead of bold.
    """
    if columns not in (1, 2, 3):
        raise ValueError("columns must be 1, 2 or 3")
    ts = _Typesetter(columns=columns)
    ts.paragraph(paper.title, font="hebo", size=15.0, lead=18.0, full_width=True, center=True,
                 skip_before=0.0)
    if paper.authors:
        ts.paragraph(", ".join(paper.authors), size=10.0, lead=13.0, full_width=True, center=True)
    if paper.abstract:
        if body_headings:
            ts.paragraph(abstract_heading, full_width=True, skip_before=_HEAD_SKIP + 4)
        else:
            ts.paragraph(abstract_heading, font="hebo", size=10.0, lead=12.0, full_width=True,
                         skip_before=_HEAD_SKIP + 4)
        ts.paragraph(paper.abstract, full_width=True, skip_before=0.0 if body_headings else _PARA_SKIP)
    ts.advance(12.0)
    ts.start_columns()
    sections: Sequence[PaperSection] = list(paper.sections) * max(1, repeat)
    for section in [*sections, *paper.back_matter]:
        _typeset_section(ts, section, body_headings=body_headings)
    if paper.references:
        _typeset_section(ts, PaperSection(heading=references_heading, paragraphs=paper.references),
                         size=8.0, lead=10.0, body_headings=body_headings)
    data = ts.finish(running_header, paper.venue, page_numbers)
    if path is not None:
        target = Path(path)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return data
