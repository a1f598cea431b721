"""Stage ``extract_text``: one PDF → a :class:`~arcticqa.evidence.Document` of addressable spans.

A plain function with no store and no Prefect: the runner persists the returned Document (its
``status``, ``message``, text, sections, spans, chunks, warnings and stats). Failures are
statuses (``encrypted``, ``corrupt``, ``not_pdf``, ``no_text_layer``, ``empty``, ``timeout``,
``too_many_pages``, ``too_large``), never exceptions; only a missing or unreadable file raises.
By default (``ExtractionLimits.isolate``) the PDF is parsed in a child process with a hard
memory cap and a wall-clock kill, so a hostile PDF cannot take the build down: on Linux a child
forked from the extraction pool's zygote (:mod:`arcticqa.text.pool`, one slot per core unless
``workers`` says otherwise), elsewhere a fresh interpreter per PDF (:mod:`arcticqa.text.isolate`). The method is described in ``docs/fulltext.md``; the machinery lives in
:mod:`arcticqa.text`.
"""

from __future__ import annotations

from pathlib import Path

from arcticqa.config import ExtractionLimits
from arcticqa.errors import StageError
from arcticqa.evidence import Document
from arcticqa.rules import Rejection, rule
from arcticqa.text.extract import extract_pdf_bytes
from arcticqa.text.isolate import extract_isolated
from arcticqa.text.pool import pool_supported, shared_pool

__all__ = ["STAGE", "ExtractionLimits", "extract_document", "NOT_EXTRACTED", "rejection_for"]

STAGE = "extract_text"

#: the rule recorded when a paper's PDF yields no usable text (the status names the reason)
NOT_EXTRACTED = rule("extract_text.not_extracted",
                     "the PDF could not be turned into evidence text (see the document status)")


def extract_document(pdf: Path | bytes, limits: ExtractionLimits | None = None, *,
                     workers: int | None = None) -> Document:
    """Extract ``pdf`` (a path or the bytes) into a Document; see the module docstring.

    ``workers`` sizes this process's extraction pool (default: one per core); it caps how many
    PDFs are parsed at once, not the result.
    """
    if isinstance(pdf, bytes | bytearray):
        data = bytes(pdf)
    else:
        try:
            data = Path(pdf).read_bytes()
        except OSError as exc:
            raise StageError(f"{pdf}: cannot read PDF: {exc.strerror or exc}") from exc
    limits = limits or ExtractionLimits()
    if limits.isolate:
        if pool_supported():
            return shared_pool(workers).extract(data, limits)
        return extract_isolated(data, limits)
    return extract_pdf_bytes(data, limits)


def rejection_for(document: Document) -> Rejection | None:
    """The :class:`~arcticqa.rules.Rejection` for a failed document, or ``None`` when usable."""
    if document.status == "ok" and document.spans:
        return None
    return NOT_EXTRACTED.reject(f"{document.status}: {document.message or 'no evidence spans'}",
                                status=document.status, sha256=document.sha256)
