"""Addressable evidence: a document's text, its sections and its spans.

A model never types a quote. It names a span id, and the program copies the exact text,
offsets and hash from here. ``Span.text == Document.text[start:end]`` always holds.
"""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field

__all__ = ["Section", "Span", "Document", "span_id_for", "sha256_text"]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span_id_for(document_sha256: str, start: int, end: int) -> str:
    """Stable span id: a hash of the document hash and the character offsets."""
    digest = hashlib.sha256(f"{document_sha256}:{start}:{end}".encode()).hexdigest()
    return f"sp-{digest[:16]}"


class Section(BaseModel):
    title: str
    kind: str  # abstract|introduction|study_area|methods|results|discussion|conclusions|other
    start: int
    end: int
    evidence: bool = True  # False for references, acknowledgements, funding, captions, ...


class Span(BaseModel):
    id: str
    section: str  # Section.kind
    page: int
    start: int
    end: int
    text: str
    sha256: str
    is_caption: bool = False


class Document(BaseModel):
    """The extracted, cleaned text of one PDF (or an abstract-only pseudo-document)."""

    sha256: str  # of the source bytes (PDF) or of the text for abstract-only documents
    status: str = "ok"  # ok|encrypted|corrupt|no_text_layer|empty|timeout|too_many_pages
    message: str | None = None
    pages: int = 0
    text: str = ""
    sections: list[Section] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def span(self, span_id: str) -> Span | None:
        for s in self.spans:
            if s.id == span_id:
                return s
        return None
