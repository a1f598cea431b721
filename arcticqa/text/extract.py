"""PDF bytes → :class:`arcticqa.evidence.Document`: the extraction machinery behind the stage.

Steps: open with PyMuPDF (status on failure, never an exception), read each page's ``"dict"``
text with ligature preservation off (exponents joined in their Unicode normal form), drop
running headers/footers and page numbers, put lines in reading order (column detection, drop
caps), rebuild paragraphs (continuing across columns, pages and floats), rejoin line-wrap
hyphens, score headings and name section kinds, cut references by heading or by the shape of
the list, move captions, footnotes and table/figure text to their own non-evidence sections,
then cut evidence paragraphs into sentence-complete spans and chunks (docs/fulltext.md).

Limits: a page cap checked before any page is read, and a time limit checked *between* pages
(and once after layout) — a single pathological page can overrun it, because MuPDF cannot be
interrupted inside one ``get_text`` call. That is why the stage runs this in a child process
(:mod:`arcticqa.text.isolate`) with a hard memory cap and a wall-clock kill: a decompression bomb
of a few hundred KiB can otherwise take gigabytes and minutes inside one call.
"""

from __future__ import annotations

import functools
import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pymupdf

from arcticqa.config import ExtractionLimits
from arcticqa.evidence import Chunk, Document, Section, Span, chunk_id_for, sha256_text, span_id_for
from arcticqa.text.clean import Vocabulary, join_wrapped
from arcticqa.text.layout import (
    Block,
    Line,
    build_blocks,
    join_drop_caps,
    page_lines,
    reading_order,
    remove_running_lines,
)
from arcticqa.text.sections import (
    CAPTION_START,
    NON_EVIDENCE_LINE,
    cannot_be_heading,
    classify_heading,
    figures_in,
    heading_words,
    looks_like_reference,
    numbering_of,
    split_inline_heading,
    split_run_in_heading,
)
from arcticqa.text.spacing import PaperWords, long_runs, respace_page, suspect_pages
from arcticqa.text.spans import pack_chunks, pack_spans, sentence_bounds

__all__ = ["extract_pdf_bytes", "TEXT_FLAGS", "PDF_MAGIC"]

#: ``get_text`` flags: the dict defaults minus ligature preservation (so "ﬁ" comes out as "fi")
#: and minus images (never decoded: a huge embedded image costs nothing).
TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES
PDF_MAGIC = b"%PDF-"
_CLOSING = (".", "!", "?", ":", ";", "\"", "”", "»", ")", "]")
_FOOTNOTE_MARK = re.compile(r"^[∗*†‡§¶⁰¹²³⁴⁵⁶⁷⁸⁹]")
_LINK = re.compile(r"https?://|www\.", re.IGNORECASE)
_LEAD_NUMBER = re.compile(r"^(\d{1,3})(?:\.\d|\.?\s)")
_MAX_SECTION_NUMBER = 25
_TABLE_LABEL = re.compile(r"^(?:table|tab\.|таблица)", re.IGNORECASE)
_CAPTION_LABEL = re.compile(r"^(?:fig(?:ure)?\.?|table|tab\.|рис(?:унок)?\.?|таблица)\s*[A-Z]?\d+[a-z]?\s+(?=\S)",
                            re.IGNORECASE)


@dataclass
class _Paragraph:
    text: str
    pages: list[tuple[int, int]]  # (offset in text, page) at each line start
    style: tuple[float, bool, str] = (0.0, False, "")  # the first line's size, weight and face
    labelled: bool = False  # opens with words set in bold or italics (a run-in label)


@dataclass
class _Section:
    title: str
    kind: str
    evidence: bool
    paragraphs: list[_Paragraph] = field(default_factory=list)
    #: a title the extractor gave (references found by their shape): shown, never put in the text
    inferred_title: bool = False


@dataclass
class _Elements:
    """A document's blocks sorted by what they are."""

    flow: list[tuple[str, list[Line]]] = field(default_factory=list)  # ("heading"|"para", lines)
    captions: list[list[Line]] = field(default_factory=list)
    footnotes: list[list[Line]] = field(default_factory=list)
    tables: list[list[Line]] = field(default_factory=list)


def _is_memory_error(exc: BaseException) -> bool:
    # MuPDF reports a refused allocation as a generic error naming malloc/calloc/realloc
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "alloc (" in text or "out of memory" in text


def _failed(sha: str, status: str, message: str, pages: int = 0, **stats: Any) -> Document:
    return Document(sha256=sha, status=status, message=message, pages=pages, stats=stats)


def _sniff(data: bytes) -> str | None:
    head = data[:1024].lstrip().lower()
    if head.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        return "looks like HTML/XML, not a PDF (a landing page served instead of the file?)"
    return None


def extract_pdf_bytes(data: bytes, limits: ExtractionLimits | None = None) -> Document:
    """Extract one PDF. Failures are statuses on the returned Document, not exceptions."""
    limits = limits or ExtractionLimits()
    started = time.perf_counter()
    sha = hashlib.sha256(data).hexdigest()
    if not data:
        return _failed(sha, "empty", "zero-byte file")
    if PDF_MAGIC not in data[:1024]:
        return _failed(sha, "not_pdf", _sniff(data) or "no %PDF- header in the first 1024 bytes")
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except pymupdf.EmptyFileError as exc:
        return _failed(sha, "empty", str(exc))
    except Exception as exc:  # MuPDF raises FileDataError/RuntimeError for damaged files
        status = "too_large" if _is_memory_error(exc) else "corrupt"
        return _failed(sha, status, f"{type(exc).__name__}: {str(exc)[:300]}")
    with doc:
        if doc.needs_pass:
            return _failed(sha, "encrypted", "the PDF needs a password to open")
        page_count = doc.page_count
        if page_count == 0:
            return _failed(sha, "corrupt", "the PDF has no pages")
        if page_count > limits.max_pages:
            return _failed(sha, "too_many_pages",
                           f"{page_count} pages exceeds the cap of {limits.max_pages}", pages=page_count)
        warnings: list[str] = []
        if doc.is_repaired:
            warnings.append("the PDF was damaged and repaired by MuPDF")
        pages: list[list[Line]] = []
        runs: list[list[tuple[tuple[int, int, int], str]]] = []
        widths: list[float] = []
        heights: list[float] = []
        images = rotated = failed_pages = 0
        in_mupdf = time.perf_counter() - started  # opening; then only the get_text calls count
        for index in range(page_count):
            if time.perf_counter() - started > limits.time_limit_s:
                return _failed(sha, "timeout", f"time limit of {limits.time_limit_s}s exceeded after "
                               f"{index} of {page_count} pages", pages=page_count)
            try:
                t0 = time.perf_counter()
                page = doc[index]
                page_dict = page.get_text("dict", flags=TEXT_FLAGS)
                images += len(page.get_images(full=False))
                in_mupdf += time.perf_counter() - t0
            except Exception as exc:
                if _is_memory_error(exc):  # a bomb: the next pages would only fail the same way
                    return _failed(sha, "too_large", f"page {index + 1} needs more memory than allowed "
                                   f"({type(exc).__name__}: {str(exc)[:200]})", pages=page_count)
                failed_pages += 1
                warnings.append(f"page {index + 1}: {type(exc).__name__}: {exc}")
                pages.append([])
                runs.append([])
                widths.append(595.0)
                heights.append(842.0)
                continue
            # each page's dict is dropped once read: holding them all makes every collection
            # of the garbage collector walk them, and MuPDF's reads slow down by a third
            runs.append(long_runs(page_dict))
            lines, skipped = page_lines(page_dict, index + 1)
            rotated += skipped
            pages.append(lines)
            widths.append(float(page.rect.width))
            heights.append(float(page.rect.height))
        words = PaperWords(runs, lambda: (" ".join(ln.text for ln in lines) for lines in pages))
        spaces_added = 0
        for index, keys in suspect_pages(words).items():
            if time.perf_counter() - started > limits.time_limit_s:
                return _failed(sha, "timeout", f"time limit of {limits.time_limit_s}s exceeded while "
                               "reading glyph positions", pages=page_count)
            t0 = time.perf_counter()
            try:  # the page again, with its glyph boxes (one text page read for both)
                page = doc[index]
                textpage = page.get_textpage(flags=TEXT_FLAGS)
                page_dict = page.get_text("dict", textpage=textpage)
                raw = page.get_text("rawdict", textpage=textpage)
            except Exception as exc:  # the page read once already: keep its text as it was
                warnings.append(f"page {index + 1}: glyph positions unreadable ({type(exc).__name__})")
                continue
            finally:
                in_mupdf += time.perf_counter() - t0
            added = respace_page(page_dict, raw, keys)
            if added:
                spaces_added += added
                pages[index] = page_lines(page_dict, index + 1)[0]
        mupdf_log = pymupdf.TOOLS.mupdf_warnings(reset=True)
        repaired = doc.is_repaired
    if mupdf_log:
        warnings.append("MuPDF: " + "; ".join(mupdf_log.splitlines()[:5]))
    chars = sum(len(ln.text) for lines in pages for ln in lines)
    if failed_pages == page_count:
        return _failed(sha, "corrupt", "no page could be read: " + warnings[-1], pages=page_count)
    if chars == 0 or chars < 20 * page_count and images >= page_count:
        if images:
            return _failed(sha, "no_text_layer", f"{page_count} pages with {images} images and "
                           f"{chars} characters of text (an image-only scan; OCR is not attempted)",
                           pages=page_count)
        if repaired:
            return _failed(sha, "corrupt", "damaged PDF (repaired by MuPDF) with no readable text: "
                           + (mupdf_log.splitlines()[0] if mupdf_log else "no text"), pages=page_count)
        return _failed(sha, "empty", "the PDF has no text and no images", pages=page_count)
    unreadable = sum(ln.text.count("\ufffd") for lines in pages for ln in lines)
    if unreadable > 0.2 * chars:
        return _failed(sha, "no_text_layer", f"{unreadable} of {chars} characters have no Unicode "
                       "mapping (fonts without ToUnicode)", pages=page_count)

    document = _assemble(sha, pages, widths, heights, limits, warnings)
    document.pages = page_count
    total = time.perf_counter() - started
    if total > limits.time_limit_s:
        return _failed(sha, "timeout", f"time limit of {limits.time_limit_s}s exceeded during layout",
                       pages=page_count)
    document.stats.update({"pages": page_count, "images": images, "rotated_lines_skipped": rotated,
                           "failed_pages": failed_pages, "spaces_from_glyph_gaps": spaces_added,
                           "time_pymupdf_s": round(in_mupdf, 4),
                           "time_postprocess_s": round(total - in_mupdf, 4),
                           "time_total_s": round(total, 4)})
    return document


def _cover_sheets(pages: list[list[Line]], heights: list[float], body: float) -> set[int]:
    """Leading pages that are a download service's or a publisher's cover sheet, not the paper
    (ResearchGate's profile page, AAAS's "This copy is for your personal, non-commercial use
    only"): the paper's title page is the one of the first three with the largest title, and
    every page before it has links and no line of body-size prose."""
    def title_size(index: int) -> float:  # a title, not a drop cap
        return max((ln.size for ln in pages[index] if ln.y1 < 0.5 * heights[index] and len(ln.text) >= 10),
                   default=0.0)

    first = range(min(3, len(pages) - 2))
    if not first:
        return set()
    title_page = max(first, key=lambda i: (title_size(i), -i))
    if title_page == 0 or title_size(title_page) < 1.4 * body:
        return set()
    for index in range(title_page):
        lines = pages[index]
        if not any(_LINK.search(ln.text) for ln in lines) or any(
                abs(ln.size - body) < 0.5 and len(ln.text) >= 60 for ln in lines):
            return set()
    return set(range(title_page))


def _body_size(pages: list[list[Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for ln in lines:
            sizes[ln.size] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _is_heading(block: Block, body: float) -> bool:
    """A heading stands apart from body text by several signs, scored together: a known section
    name, numbering (``3.``, ``3.1``, ``IV.``, ``B.``), bold, a larger size, italics, capitals,
    a line of its own; a sentence's full stop or a run of figures counts against it."""
    text = heading_words(" ".join(ln.text for ln in block.lines))
    if len(block.lines) > 3 or len(text) > 140 or not text[:1].isupper() and not text[:1].isdigit():
        return False
    if text.endswith((",", ";")) or any(ln.cell for ln in block.lines):
        return False
    if cannot_be_heading(text):
        return False
    number = _LEAD_NUMBER.match(text)
    if number and int(number.group(1)) > _MAX_SECTION_NUMBER:
        return False  # "50 IPSL-CM5A-LR", "71 PUBLICATIONS": a table row or a count, not section 50
    if classify_heading(text).kind is not None and len(block.lines) <= 2:
        return True
    if all(ln.bold for ln in block.lines) or block.first.size >= 1.08 * body:
        return True  # styled: the long-standing rule, kept for every layout that relies on it
    style, _level, cut = numbering_of(text)
    rest = text[cut:]
    if style is None or not rest[:1].isupper() or figures_in(rest) > 4:
        return False
    score = {"digits": 2, "roman": 2, "letter": 1}[style]
    score += len(block.lines) == 1
    score -= 2 * (block.indent > max(4.0, 0.5 * body) and not block.centred)  # a list's item, set in
    score += all(ln.italic for ln in block.lines)
    score += sum(ch.isupper() for ch in rest) > 0.8 * sum(ch.isalpha() for ch in rest)
    score -= 2 * text.endswith((".", "!", "?"))
    return score >= 3


def _is_float_text(block: Block, typical_width: float) -> bool:
    """Table cells and figure labels: a block whose lines are all short pieces (``0.12``,
    ``April 2019``), or most of whose lines share their row with another line."""
    lines = block.lines
    if all(ln.x1 - ln.x0 < 0.4 * typical_width for ln in lines):
        text = lines[-1].text
        pieces = not lines[0].text[:1].islower() and not text.endswith(_CLOSING[:3])
    else:
        same_row = sum(1 for a, b in zip(lines, lines[1:], strict=False) if abs(a.y1 - b.y1) < 1.5)
        short = sum(len(ln.text) for ln in lines) < 25 * len(lines)
        pieces = len(lines) >= 3 and same_row >= len(lines) / 2 and short
    # a justified reference entry also comes as pieces on one row
    return pieces and not looks_like_reference(lines[0].text + " " + " ".join(ln.text for ln in lines[1:4]))


@functools.lru_cache(maxsize=512)  # a paper has a few dozen fonts and ten thousands of lines
def _family(font: str) -> str:
    """A font's family: its name without the subset tag and the weight or style after ``-``/``,``."""
    return re.split(r"[-,]", font.split("+", 1)[-1], maxsplit=1)[0].lower()


def _body_family(pages: list[list[Line]], body: float) -> str:
    fonts: Counter[str] = Counter()
    for lines in pages:
        for ln in lines:
            if abs(ln.size - body) < 0.5:
                fonts[ln.font] += len(ln.text)
    families: Counter[str] = Counter()
    for font, chars in fonts.items():
        families[_family(font)] += chars
    return families.most_common(1)[0][0] if families else ""


def _footnote_blocks(blocks: list[Block], body: float, height: float, body_family: str) -> set[int]:
    """Ids of the blocks that are footnotes: at the foot of a column, below its body text, in a
    smaller font (IEEE's ``\\thanks``, elsarticle's corresponding-author note, numbered notes) or
    in another face than the body's (a licence box set in the body's size)."""
    found: set[int] = set()
    columns: list[list[Block]] = []
    for block in blocks:
        if block.column_start or not columns:
            columns.append([])
        columns[-1].append(block)
    for column in columns:
        run: list[Block] = []
        above: Block | None = None  # what the run sits under
        for block in reversed(column):
            if (block.first.size > 0.92 * body and (_family(block.first.font) == body_family
                                                      or _is_heading(block, body))
                    or block.first.y0 < 0.55 * height or _opens_caption(block.first)):
                above = block
                break
            run.append(block)
        if (above is None or above.first.size <= 0.92 * body or _is_heading(above, body)
                or any(looks_like_reference(b.first.text) for b in run)):
            # small print that fills the column or follows a heading is a reference list (or
            # other back matter), not notes under body text: only marked notes are footnotes
            run = [b for b in run if _FOOTNOTE_MARK.match(b.first.text)]
        found.update(id(b) for b in run)
    return found


def _paragraph(lines: list[Line], vocabulary: Vocabulary) -> _Paragraph:
    text = ""
    pages: list[tuple[int, int]] = []
    for ln in lines:
        text = join_wrapped(text, ln.text, vocabulary)
        pages.append((len(text) - len(ln.text), ln.page))
    if not lines:
        return _Paragraph(text, pages)
    return _Paragraph(text, pages, (lines[0].size, lines[0].bold, lines[0].font), lines[0].styled_lead > 0)


def _elements(pages: list[list[Line]], widths: list[float], heights: list[float], body: float,
              body_family: str) -> _Elements:
    """Headings and paragraphs in reading order; captions, footnotes and float text aside.

    A sentence left open at a column or page break goes on in the first block set in its own
    size and face that follows; the blocks in between (a sidebar, a table, a figure's words, a
    footer set smaller) are held and placed after it, before the next heading or at the end of
    the page.
    """
    out = _Elements()
    column_break = False
    label_only = False  # the last caption was a bare "Table 1": its words are the next block
    held: list[Block] = []

    def open_sentence() -> list[Line] | None:
        previous = out.flow[-1] if out.flow else None
        if previous is None or previous[0] != "para" or previous[1][-1].text.endswith(_CLOSING):
            return None
        last = previous[1][-1]
        return previous[1] if abs(last.size - body) < 0.5 else None  # body text, not an affiliation

    def release(typical_width: float) -> None:
        """The held blocks, classified as any other block (the next held block follows each)."""
        nonlocal column_break
        for index, block in enumerate(held):
            following = held[index + 1] if index + 1 < len(held) else None
            if _heads(block, following, body):
                out.flow.append(("heading", list(block.lines)))
            elif _is_float_text(block, typical_width):
                out.tables.append(block.lines)
            else:
                out.flow.append(("para", list(block.lines)))
        held.clear()
        column_break = False

    for lines, width, height in zip(pages, widths, heights, strict=True):
        cells = _table_cells(lines, body)
        if cells:
            out.tables.append(sorted((ln for ln in lines if id(ln) in cells), key=lambda ln: (ln.y0, ln.x0)))
            lines = [ln for ln in lines if id(ln) not in cells]
        blocks = build_blocks(reading_order(join_drop_caps(lines), width))
        footnotes = _footnote_blocks(blocks, body, height, body_family)
        wide = sorted(ln.x1 - ln.x0 for ln in lines if len(ln.text) > 40)
        typical_width = wide[len(wide) // 2] if wide else width / 2
        for index, block in enumerate(blocks):
            column_break = column_break or block.column_start
            first = block.first.text
            if label_only and len(block.lines) <= 4 and not _is_heading(block, body):
                out.captions[-1] = out.captions[-1] + block.lines
                label_only = False
                continue
            label_only = False
            if _opens_caption(block.first):
                out.captions.append(block.lines)
                label_only = len(block.lines) == 1 and not first.rstrip().endswith((".", ":", "|"))
                continue
            if id(block) in footnotes or NON_EVIDENCE_LINE.match(first):
                out.footnotes.append(block.lines)
                continue
            heading = _heads(block, blocks[index + 1] if index + 1 < len(blocks) else None, body)
            if not heading and _is_float_text(block, typical_width):
                out.tables.append(block.lines)
                continue
            sentence = open_sentence() if column_break else None
            if sentence is not None and (abs(block.first.size - sentence[-1].size) >= 0.5
                                         or block.first.bold != sentence[-1].bold
                                         or _family(block.first.font) != _family(sentence[-1].font)
                                         and not first[:1].islower()):
                held.append(block)  # set apart from the open sentence (size or face): place it after
                continue
            if heading:
                release(typical_width)
                out.flow.append(("heading", block.lines))
                column_break = False
                continue
            previous = out.flow[-1] if out.flow else None
            continues = (previous is not None and previous[0] == "para" and column_break
                         and abs(block.first.size - previous[1][-1].size) < 0.5
                         and (not previous[1][-1].text.endswith(_CLOSING) or first[:1].islower()))
            if continues and previous is not None:
                previous[1].extend(block.lines)
            else:
                release(typical_width)
                out.flow.append(("para", list(block.lines)))
            column_break = False
        release(typical_width)
    return out


def _table_cells(lines: list[Line], body: float) -> set[int]:
    """Ids of the lines of tables, cut out of a page before its reading order is found: below a
    table's caption, the lines set smaller than the body down to the first body-size line under
    the caption. A table's columns would otherwise be read as the page's columns, and its header
    cells as headings."""
    found: set[int] = set()
    for caption in (ln for ln in lines if _TABLE_LABEL.match(ln.text) and _opens_caption(ln)):
        left, right = caption.x0, caption.x1
        below = sorted((ln for ln in lines if ln.y0 >= caption.y1 - 1), key=lambda ln: ln.y0)
        bottom = caption.y1
        for ln in below:  # the caption's own further lines, at its pitch
            if abs(ln.size - caption.size) < 0.5 and ln.y0 - bottom <= 0.6 * ln.size and ln.x0 < right:
                bottom, right = ln.y1, max(right, ln.x1)
            elif ln.y0 > bottom:
                break
        for ln in below:
            if ln.y0 <= bottom - 1 or ln.x1 < left or ln.x0 > right:
                continue
            if ln.size >= body - 0.4:
                break
            found.add(id(ln))
    return found


def _opens_caption(line: Line) -> bool:
    """``Figure 3.``, ``Table 1 |``, a label alone; or Springer's ``Fig. 11`` set in bold before
    the caption's plain words, with no punctuation between."""
    if CAPTION_START.match(line.text):
        return True
    label = _CAPTION_LABEL.match(line.text)
    # the styled lead is counted without the spaces between its runs
    return label is not None and not line.bold and line.styled_lead >= len("".join(label.group(0).split()))


def _heads(block: Block, following: Block | None, body: float) -> bool:
    """Whether ``block`` opens a section, given the block that follows it on the page."""
    return _is_heading(block, body) and not _runs_on(block, following) and _heads_text(block, following)


def _heads_text(block: Block, following: Block | None) -> bool:
    """A heading known by its style alone (not a section name, not numbered) must stand over
    text: the block after it on the page is prose (plain, several lines or a sentence's end). A
    figure's bold or large words stand over more of the figure."""
    title = " ".join(ln.text for ln in block.lines)
    info = classify_heading(heading_words(title))
    if info.kind is not None or numbering_of(heading_words(title))[0] is not None:
        return True
    if following is None:
        return False
    if classify_heading(heading_words(" ".join(ln.text for ln in following.lines))).kind is not None:
        return True  # the title block over "Abstract"
    if following.first.bold or _opens_caption(following.first):
        return False  # more of a figure, or the figure's caption under its axis title
    words = sum(len(ln.text) for ln in following.lines)
    return words >= 40 and (len(following.lines) >= 2 or following.last.text.endswith(_CLOSING[:3]))


def _runs_on(block: Block, following: Block | None) -> bool:
    """A heading candidate whose words run on into the next block (it starts in lower case): a
    list item or a sentence's first line, not a heading. A known section name never runs on."""
    if following is None or not following.first.text[:1].islower():
        return False
    return classify_heading(" ".join(ln.text for ln in block.lines)).kind is None


# an affiliation list is long and has full stops too, but its towns must not become evidence
_AFFILIATION = re.compile(r"@|\b(?:Universit\w*|Institut\w*|Department|Laboratory|Faculty)\b")
_SECOND_ENTRY = re.compile(r"\s\[\d{1,3}\]\s+\S")


def _starts_reference_list(paras: list[_Paragraph | None], i: int) -> bool:
    """A reference list with no heading found: this paragraph and the next are entries (or this
    one holds two, or it is the last paragraph of the paper)."""
    para = paras[i]
    text = para.text if para is not None else ""
    if not looks_like_reference(text):
        return False
    following = paras[i + 1] if i + 1 < len(paras) else None
    return (i + 1 == len(paras) or _SECOND_ENTRY.search(text) is not None
            or following is not None and looks_like_reference(following.text))


def _body_after_small_print(section: _Section, para: _Paragraph, body: float) -> bool:
    return (not section.evidence and section.kind not in ("front_matter", "references")
            and bool(section.paragraphs) and all(p.style[0] < body - 0.4 for p in section.paragraphs)
            and abs(para.style[0] - body) < 0.5 and len(para.text) >= 200 and not para.labelled
            and len(sentence_bounds(para.text)) >= 2)


def _sections(flow: list[tuple[str, list[Line]]], vocabulary: Vocabulary, body: float) -> list[_Section]:
    sections = [_Section("", "front_matter", False)]
    recognised = False
    top_style: tuple[float, bool, bool, bool] | None = None  # how this paper sets a known top-level heading

    def style_of(lines: list[Line]) -> tuple[float, bool, bool, bool]:
        first = lines[0]
        return first.size, first.bold, first.italic, first.text.isupper()

    def open_section(title: str, lines: list[Line] | None) -> None:
        nonlocal recognised, top_style
        info = classify_heading(heading_words(title))
        current = sections[-1]
        if info.kind is not None:
            sections.append(_Section(title, info.kind, info.evidence))
            recognised = True
            if lines is not None and info.level == 1:
                top_style = style_of(lines)
        elif recognised and lines is not None and not info.numbered and top_style == style_of(lines) \
                and current.evidence:
            # unnumbered, unknown, but set like the paper's known top-level headings ("BOREHOLE
            # AND DATA" between "INTRODUCTION" and "RESULTS"): a section of its own
            sections.append(_Section(title, "other", True))
        elif not recognised:
            # only digits: in the front matter "V. Petrov" is an author, not section V
            if numbering_of(title)[0] == "digits":
                sections.append(_Section(title, "other", True))
                recognised = True
            elif lines is not None:  # the paper's title or a bold line of the front matter
                current.paragraphs.append(_paragraph(lines, vocabulary))
        elif current.kind == "references" and info.numbered and lines is not None:
            # a numbered entry of the list set apart like a heading, never a section of its own
            current.paragraphs.append(_paragraph(lines, vocabulary))
        elif info.numbered and info.level == 1 and current.evidence:
            sections.append(_Section(title, "other", True))
        else:  # a sub-heading keeps the kind of the section it belongs to
            sections.append(_Section(title, current.kind, current.evidence))

    paras = [_paragraph(lines, vocabulary) if kind == "para" else None for kind, lines in flow]
    for i, (_kind, lines) in enumerate(flow):
        para = paras[i]
        if para is None:
            open_section(" ".join(ln.text for ln in lines), lines)
            continue
        inline = split_inline_heading(para.text) if not recognised else None
        run_in = split_run_in_heading(para.text, lines[0].styled_lead) if inline is None else None
        if inline is not None or run_in is not None:
            title, rest = inline or run_in  # type: ignore[misc]
            cut = len(para.text) - len(rest)
            para = _Paragraph(rest, [(max(0, o - cut), p) for o, p in para.pages], para.style)
            if inline is not None:
                sections.append(_Section(title, "abstract", True))
                recognised = True
            else:
                open_section(title, None)
        current = sections[-1]
        if _body_after_small_print(current, para, body):
            # back matter set in small print does not go on in the body's size: this is body
            # text read after a sidebar's or a neighbouring article's back matter
            resumed = next((s for s in reversed(sections) if s.evidence and s.kind != "front_matter"), None)
            if resumed is None:  # no heading yet: the paper's text before it is front matter for now
                sections.append(_Section("Body (no heading in the PDF)", "other", True, inferred_title=True))
            else:
                sections.append(_Section(f"{resumed.title} (continued)", resumed.kind, True, inferred_title=True))
            current = sections[-1]
        if current.evidence and current.kind != "front_matter" and _starts_reference_list(paras, i):
            sections.append(_Section("References (found by the shape of the list)", "references",
                                     False, inferred_title=True))
        sections[-1].paragraphs.append(para)
    if not recognised:
        sections[0].kind, sections[0].evidence = "other", True
    elif not any(s.kind == "abstract" for s in sections) and sections[0].paragraphs:
        sections[1:1] = _unlabelled_abstract(sections[0])
    return [s for s in sections if s.paragraphs or s.title]


def _is_prose(para: _Paragraph) -> bool:
    """Prose that can be an abstract: long, sentences, no affiliation, no bold label before it
    ("Cite this article: …", "Keywords: …")."""
    return (len(para.text) >= 200 and para.text.endswith(".") and not para.labelled
            and len(sentence_bounds(para.text)) >= 2 and not _AFFILIATION.search(para.text))


def _unlabelled_abstract(front: _Section) -> list[_Section]:
    """The abstract (and introduction) of a paper that prints no abstract heading, taken out of
    its front matter.

    The first prose paragraph after the title block is the abstract, with the prose paragraphs
    right after it set in the same size, weight and face. Prose that follows in another style
    (Nature's bold abstract above a plain introduction without a heading) is the introduction.
    Notes after the abstract ("This article is part of …") stay front matter.
    """
    paragraphs = front.paragraphs
    prose = [i for i, para in enumerate(paragraphs) if _is_prose(para)]
    if not prose:
        return []
    first = prose[0]
    end = first + 1
    while end < len(paragraphs) and _is_prose(paragraphs[end]) and paragraphs[end].style == paragraphs[first].style:
        end += 1
    after = paragraphs[end:]
    body = next((para.style for para in after if _is_prose(para) and para.style != paragraphs[first].style), None)
    if body is not None:
        # the introduction's paragraphs; notes set apart from it (affiliations) stay front matter
        abstract = paragraphs[first:end]
        introduction = [para for para in after if para.style == body or _is_prose(para)]
        paragraphs[first:] = [para for para in after if not (para.style == body or _is_prose(para))]
        return [_Section("Abstract (no heading in the PDF)", "abstract", True, abstract, inferred_title=True),
                _Section("Introduction (no heading in the PDF)", "introduction", True, introduction,
                         inferred_title=True)]
    abstract = paragraphs[first:end]
    del paragraphs[first:end]
    return [_Section("Abstract (no heading in the PDF)", "abstract", True, abstract, inferred_title=True)]


def _assemble(sha: str, pages: list[list[Line]], widths: list[float], heights: list[float],
              limits: ExtractionLimits, warnings: list[str]) -> Document:
    pages, removed = remove_running_lines(pages, heights)
    body = _body_size(pages)
    covers = _cover_sheets(pages, heights, body)
    if covers:
        warnings.append(f"page{'s' if len(covers) > 1 else ''} {', '.join(str(i + 1) for i in covers)} "
                        "read as a cover sheet and left out")
        pages = [[] if i in covers else lines for i, lines in enumerate(pages)]
    vocabulary = Vocabulary(ln.text for lines in pages for ln in lines)
    elements = _elements(pages, widths, heights, body, _body_family(pages, body))
    sections = _sections(elements.flow, vocabulary, body)
    for title, kind, blocks in (("Figure and table captions", "captions", elements.captions),
                                ("Footnotes and notes", "footnotes", elements.footnotes),
                                ("Table and figure text", "tables", elements.tables)):
        if blocks:
            sections.append(_Section(title, kind, False, [_paragraph(b, vocabulary) for b in blocks]))

    parts: list[str] = []
    cursor = 0
    out_sections: list[Section] = []
    spans: list[Span] = []
    chunks: list[Chunk] = []

    def emit(text: str) -> int:
        nonlocal cursor
        if parts:
            parts.append("\n\n")
            cursor += 2
        start = cursor
        parts.append(text)
        cursor += len(text)
        return start

    for section in sections:
        sec_start = emit(section.title) if section.title and not section.inferred_title else None
        section_spans: list[Span] = []
        for para in section.paragraphs:
            p_start = emit(para.text)
            if sec_start is None:
                sec_start = p_start
            is_caption = section.kind == "captions"
            if not (section.evidence or (is_caption and limits.caption_spans)):
                continue
            for s, e in pack_spans(para.text, target=limits.span_target_chars, cap=limits.max_span_chars):
                page = next((pg for off, pg in reversed(para.pages) if off <= s), para.pages[0][1])
                text = para.text[s:e]
                start, end = p_start + s, p_start + e
                section_spans.append(Span(id=span_id_for(sha, start, end),
                                          section="other" if is_caption else section.kind,
                                          page=page, start=start, end=end, text=text,
                                          sha256=sha256_text(text), is_caption=is_caption))
        if sec_start is None:
            continue
        out_sections.append(Section(title=section.title or "(front matter)", kind=section.kind,
                                    start=sec_start, end=cursor, evidence=section.evidence))
        spans.extend(section_spans)
        body_spans = [sp for sp in section_spans if not sp.is_caption]
        bounds = [(sp.start, sp.end) for sp in body_spans]
        for group in pack_chunks(bounds, budget=limits.chunk_chars, overlap=limits.chunk_overlap_chars):
            c_start, c_end = bounds[group[0]][0], bounds[group[-1]][1]
            chunks.append(Chunk(id=chunk_id_for(sha, c_start, c_end), section=section.kind,
                                start=c_start, end=c_end, span_ids=[body_spans[i].id for i in group]))

    text = "".join(parts)
    if not spans:
        warnings.append("no evidence spans: no body text outside front and back matter")
    if not any(s.kind == "abstract" for s in out_sections):
        warnings.append("no abstract heading found")
    if any(s.kind == "front_matter" for s in out_sections) and all(
            s.kind in ("front_matter", "references") or not s.evidence for s in out_sections):
        warnings.append("no body sections recognised")
    stats = {"chars": len(text), "evidence_chars": sum(s.end - s.start for s in out_sections if s.evidence),
             "spans": len(spans), "chunks": len(chunks), "sections": len(out_sections),
             "captions": len(elements.captions), "footnotes": len(elements.footnotes),
             "float_text_blocks": len(elements.tables), "running_lines_removed": removed,
             "body_font_size": body}
    return Document(sha256=sha, status="ok", text=text, sections=out_sections, spans=spans,
                    chunks=chunks, warnings=warnings, stats=stats)
