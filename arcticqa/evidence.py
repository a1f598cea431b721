"""Addressable evidence: a document's text, its sections and its spans.

A model never types a quote. It names a span id, and the program copies the exact text,
offsets and hash from here. ``Span.text == Document.text[start:end]`` always holds.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer

from arcticqa.errors import UnknownSpanError

__all__ = [
    "Section",
    "Span",
    "SpanRef",
    "Chunk",
    "Document",
    "span_id_for",
    "chunk_id_for",
    "sha256_text",
    "resolve_span",
    "find_quote",
    "render_spans_for_prompt",
    "match_key",
]


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def span_id_for(document_sha256: str, start: int, end: int) -> str:
    """Stable span id: a hash of the document hash and the character offsets."""
    digest = hashlib.sha256(f"{document_sha256}:{start}:{end}".encode()).hexdigest()
    return f"sp-{digest[:16]}"


def chunk_id_for(document_sha256: str, start: int, end: int) -> str:
    """Stable chunk id, built like a span id but with its own prefix."""
    digest = hashlib.sha256(f"chunk:{document_sha256}:{start}:{end}".encode()).hexdigest()
    return f"ch-{digest[:16]}"


class Section(BaseModel):
    title: str
    # evidence kinds: abstract|introduction|study_area|methods|results|discussion|conclusions|other;
    # non-evidence kinds (evidence=False): front_matter|references|acknowledgements|
    # author_contributions|funding|competing_interests|supplementary|data_availability|captions|
    # footnotes|tables
    kind: str
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

    def ref(self, role: str | None = None) -> SpanRef:
        """This span as a reference, text included."""
        return SpanRef(id=self.id, role=role, section=self.section, page=self.page, start=self.start,
                       end=self.end, sha256=self.sha256, text=self.text)


class SpanRef(BaseModel):
    """A reference to one span of one document: the one shape in which findings, accepted items,
    releases and the audit page cite evidence.

    ``sha256`` is the hash of the span text, so a reference can be checked against the document
    it names. ``text`` is carried where the span is quoted (findings; releases built with
    ``--include-evidence``; the audit page) and left out where it is not (accepted items);
    ``role`` says why an item or a rule cites the span (``finding``, a rule id, ...). Unset
    ``role`` and ``text`` are left out of a dump, so stored findings and items keep the exact
    JSON they had before this model replaced their own span shapes (their memo hashes too).
    The release format is :class:`arcticqa.release.models.EvidenceRef`, a subclass that names
    ``id`` ``span_id`` on the wire; the store's table is ``SpanRow`` (``SpanRow.ref()``).
    """

    id: str
    role: str | None = None
    section: str
    page: int
    start: int
    end: int
    sha256: str
    text: str | None = None

    @model_serializer(mode="wrap")
    def _unset_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("role", "text"):
            if data.get(key, "") is None:
                del data[key]
        return data

    def without_text(self) -> SpanRef:
        return self.model_copy(update={"text": None})


class Chunk(BaseModel):
    """A run of consecutive spans of one section, sized for a model's context window.

    Chunks of a long section overlap by a few spans; ``document.text[start:end]`` is the chunk
    text and ``span_ids`` lists, in order, the spans it contains.
    """

    id: str
    section: str  # Section.kind
    start: int
    end: int
    span_ids: list[str]


class Document(BaseModel):
    """The extracted, cleaned text of one PDF (or an abstract-only pseudo-document)."""

    sha256: str  # of the source bytes (PDF) or of the text for abstract-only documents
    status: str = "ok"  # ok|encrypted|corrupt|not_pdf|no_text_layer|empty|timeout|too_many_pages
    message: str | None = None
    pages: int = 0
    text: str = ""
    sections: list[Section] = Field(default_factory=list)
    spans: list[Span] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    chunks: list[Chunk] = Field(default_factory=list)
    #: extraction statistics (pages, chars, spans, removed running lines, timings in seconds)
    stats: dict[str, Any] = Field(default_factory=dict)

    def span(self, span_id: str) -> Span | None:
        for s in self.spans:
            if s.id == span_id:
                return s
        return None


def resolve_span(document: Document, span_id: str) -> Span:
    """The span named ``span_id``, checked against the document text it points into.

    Raises :class:`UnknownSpanError` for an id the document does not have (e.g. one a model
    invented) or a span whose text or hash no longer matches ``document.text[start:end]``.
    """
    span = document.span(span_id)
    if span is None:
        raise UnknownSpanError(f"document {document.sha256[:12]} has no span {span_id!r}")
    if document.text[span.start:span.end] != span.text or sha256_text(span.text) != span.sha256:
        raise UnknownSpanError(f"span {span_id!r} does not match document {document.sha256[:12]} "
                               f"text at {span.start}:{span.end}")
    return span


# Line-wrap hyphens, dashes used as hyphens and soft hyphens all vanish from the match key,
# so "sea-ice", "sea\u2011ice", "seaice" and "sea ice" compare equal; so do "tempera- ture" and
# "temperature". Whitespace is dropped too: quotes from models re-wrap and re-space text freely.
_MATCH_DROP = re.compile(r"[\s\-\u00ad\u2010\u2011\u2012\u2043\u200b\ufeff]+")


def match_key(text: str) -> str:
    """The normalised form ``find_quote`` compares: NFKC, case-folded, no whitespace or hyphens."""
    return _MATCH_DROP.sub("", unicodedata.normalize("NFKC", text).casefold())


def find_quote(document: Document, text: str, *, include_captions: bool = False) -> list[str]:
    """Ids of the spans (in document order) that contain ``text`` after normalisation.

    See :func:`match_key` for what is ignored. An empty quote matches nothing.
    """
    key = match_key(text)
    if not key:
        return []
    return [s.id for s in document.spans
            if (include_captions or not s.is_caption) and key in match_key(s.text)]


def render_spans_for_prompt(spans: Iterable[Span]) -> str:
    """A numbered span list for prompts: ``1. [sp-…] (methods, p. 3) text`` one per line.

    Models cite the bracketed id; the program then copies the text with :func:`resolve_span`.
    Newlines inside a span are flattened so that one span is always one line.
    """
    lines = []
    for i, s in enumerate(spans, start=1):
        flat = " ".join(s.text.split())
        tag = f"{s.section}, p. {s.page}" + (", caption" if s.is_caption else "")
        lines.append(f"{i}. [{s.id}] ({tag}) {flat}")
    return "\n".join(lines)
