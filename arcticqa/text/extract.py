"""PDF bytes → :class:`arcticqa.evidence.Document`: the extraction machinery behind the stage.

Steps: open with PyMuPDF (status on failure, never an exception), read each page's ``"dict"``
text with ligature preservation off, drop running headers/footers and page numbers, put lines
in reading order (column detection), rebuild paragraphs (continuing across columns and pages),
rejoin line-wrap hyphens, detect headings and section kinds, move captions to their own
non-evidence section, then cut evidence paragraphs into sentence-complete spans and chunks.

Limits: a page cap checked before any page is read, and a time limit checked *between* pages
(and once after layout) — a single pathological page can overrun it, because MuPDF cannot be
interrupted inside one ``get_text`` call. That is why the stage runs this in a child process
(:mod:`arcticqa.text.isolate`) with a hard memory cap and a wall-clock kill: a decompression bomb
of a few hundred KiB can otherwise take gigabytes and minutes inside one call.
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pymupdf
from pydantic import BaseModel, Field

from arcticqa.evidence import Chunk, Document, Section, Span, chunk_id_for, sha256_text, span_id_for
from arcticqa.text.clean import Vocabulary, join_wrapped
from arcticqa.text.layout import Block, Line, build_blocks, page_lines, reading_order, remove_running_lines
from arcticqa.text.sections import CAPTION_START, classify_heading, split_inline_heading
from arcticqa.text.spans import pack_chunks, pack_spans

__all__ = ["ExtractionLimits", "extract_pdf_bytes", "TEXT_FLAGS", "PDF_MAGIC"]

#: ``get_text`` flags: the dict defaults minus ligature preservation (so "ﬁ" comes out as "fi")
#: and minus images (never decoded: a huge embedded image costs nothing).
TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES
PDF_MAGIC = b"%PDF-"
_CLOSING = (".", "!", "?", ":", ";", "\"", "”", "»", ")", "]")


class ExtractionLimits(BaseModel):
    """Bounds on one document's extraction and the sizes of its spans and chunks."""

    max_pages: int = Field(600, ge=1)
    time_limit_s: float = Field(120.0, gt=0)
    span_target_chars: int = Field(600, ge=50)
    max_span_chars: int = Field(1600, ge=100)
    chunk_chars: int = Field(6000, ge=500)
    chunk_overlap_chars: int = Field(500, ge=0)
    #: also cut figure/table captions into spans (flagged ``is_caption=True``); off by default
    caption_spans: bool = False
    #: run each extraction in a child process with the hard limits below (see arcticqa.text.isolate)
    isolate: bool = True
    #: the child's address-space cap (RLIMIT_AS; the interpreter and MuPDF take ~0.6 GB of it
    #: before the PDF is read); a PDF needing more is ``too_large``
    memory_limit_mb: int = Field(2048, ge=768)


@dataclass
class _Paragraph:
    text: str
    pages: list[tuple[int, int]]  # (offset in text, page) at each line start


@dataclass
class _Section:
    title: str
    kind: str
    evidence: bool
    paragraphs: list[_Paragraph] = field(default_factory=list)


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
                widths.append(595.0)
                heights.append(842.0)
                continue
            lines, skipped = page_lines(page_dict, index + 1)
            rotated += skipped
            pages.append(lines)
            widths.append(float(page.rect.width))
            heights.append(float(page.rect.height))
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
                           "failed_pages": failed_pages, "time_pymupdf_s": round(in_mupdf, 4),
                           "time_postprocess_s": round(total - in_mupdf, 4),
                           "time_total_s": round(total, 4)})
    return document


def _body_size(pages: list[list[Line]]) -> float:
    sizes: Counter[float] = Counter()
    for lines in pages:
        for ln in lines:
            sizes[ln.size] += len(ln.text)
    return sizes.most_common(1)[0][0] if sizes else 10.0


def _is_heading(block: Block, body: float) -> bool:
    text = " ".join(ln.text for ln in block.lines)
    if len(block.lines) > 3 or len(text) > 140 or not text[:1].isupper() and not text[:1].isdigit():
        return False
    if classify_heading(text).kind is not None and len(block.lines) <= 2:
        return True
    styled = all(ln.bold for ln in block.lines) or block.first.size >= 1.08 * body
    return styled and not text.endswith((",", ";"))


def _paragraph(lines: list[Line], vocabulary: Vocabulary) -> _Paragraph:
    text = ""
    pages: list[tuple[int, int]] = []
    for ln in lines:
        text = join_wrapped(text, ln.text, vocabulary)
        pages.append((len(text) - len(ln.text), ln.page))
    return _Paragraph(text, pages)


def _elements(pages: list[list[Line]], widths: list[float], body: float
              ) -> tuple[list[tuple[str, list[Line]]], list[list[Line]]]:
    """(kind, lines) for headings and paragraphs in reading order, and the caption blocks."""
    elements: list[tuple[str, list[Line]]] = []
    captions: list[list[Line]] = []
    column_break = False
    for lines, width in zip(pages, widths, strict=True):
        for block in build_blocks(reading_order(lines, width)):
            column_break = column_break or block.column_start
            first = block.first.text
            if CAPTION_START.match(first):
                captions.append(block.lines)
                continue
            if _is_heading(block, body):
                elements.append(("heading", block.lines))
                column_break = False
                continue
            previous = elements[-1] if elements else None
            continues = (previous is not None and previous[0] == "para" and column_break
                         and block.first.size == previous[1][-1].size
                         and (not previous[1][-1].text.endswith(_CLOSING) or first[:1].islower()))
            if continues and previous is not None:
                previous[1].extend(block.lines)
            else:
                elements.append(("para", list(block.lines)))
            column_break = False
    return elements, captions


def _sections(elements: list[tuple[str, list[Line]]], vocabulary: Vocabulary) -> list[_Section]:
    sections = [_Section("", "front_matter", False)]
    recognised = False
    for kind, lines in elements:
        if kind == "para":
            para = _paragraph(lines, vocabulary)
            inline = split_inline_heading(para.text) if not recognised else None
            if inline is not None:
                title, rest = inline
                cut = len(para.text) - len(rest)
                sections.append(_Section(title, "abstract", True, [
                    _Paragraph(rest, [(max(0, o - cut), p) for o, p in para.pages])]))
                recognised = True
                continue
            sections[-1].paragraphs.append(para)
            continue
        title = " ".join(ln.text for ln in lines)
        info = classify_heading(title)
        current = sections[-1]
        if info.kind is not None:
            sections.append(_Section(title, info.kind, info.evidence))
            recognised = True
        elif not recognised:
            if info.numbered:
                sections.append(_Section(title, "other", True))
                recognised = True
            else:  # the paper's title or a bold line of the front matter
                current.paragraphs.append(_paragraph(lines, vocabulary))
        elif info.numbered and info.level == 1 and current.evidence:
            sections.append(_Section(title, "other", True))
        else:  # a sub-heading keeps the kind of the section it belongs to
            sections.append(_Section(title, current.kind, current.evidence))
    if not recognised:
        sections[0].kind, sections[0].evidence = "other", True
    return [s for s in sections if s.paragraphs or s.title]


def _assemble(sha: str, pages: list[list[Line]], widths: list[float], heights: list[float],
              limits: ExtractionLimits, warnings: list[str]) -> Document:
    pages, removed = remove_running_lines(pages, heights)
    body = _body_size(pages)
    vocabulary = Vocabulary(ln.text for lines in pages for ln in lines)
    elements, caption_blocks = _elements(pages, widths, body)
    sections = _sections(elements, vocabulary)
    if caption_blocks:
        sections.append(_Section("Figure and table captions", "captions", False,
                                 [_paragraph(b, vocabulary) for b in caption_blocks]))

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
        sec_start = emit(section.title) if section.title else None
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
             "captions": len(caption_blocks), "running_lines_removed": removed,
             "body_font_size": body}
    return Document(sha256=sha, status="ok", text=text, sections=out_sections, spans=spans,
                    chunks=chunks, warnings=warnings, stats=stats)
