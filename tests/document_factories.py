"""Documents built from text for tests that judge sections and spans without a PDF."""

from __future__ import annotations

from arcticqa.evidence import Document, Section, Span, sha256_text, span_id_for

__all__ = ["sectioned_document"]


def sectioned_document(sections: list[tuple[str, str]]) -> Document:
    """A document whose sections are each one span, given as (kind, text) pairs."""
    text = ""
    bounds = []
    for kind, body in sections:
        start = len(text)
        text += body + "\n\n"
        bounds.append((kind, start, start + len(body)))
    sha = sha256_text(text)
    return Document(
        sha256=sha, pages=1, text=text,
        sections=[Section(title=k, kind=k, start=a, end=b) for k, a, b in bounds],
        spans=[Span(id=span_id_for(sha, a, b), section=k, page=1, start=a, end=b, text=text[a:b],
                    sha256=sha256_text(text[a:b])) for k, a, b in bounds],
    )
