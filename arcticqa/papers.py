"""The paper record every stage starts from: Semantic Scholar's Graph API shape, kept as-is.

Discovery (S2 search, a snapshot JSONL, or S2 Datasets files) produces these; later stages only
read them. Unknown fields are kept (``extra='allow'``) so nothing the source said is lost.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OpenAccessPdf", "PaperRecord", "S2_FIELDS"]

#: fields requested from the Graph API (bulk search and batch lookup)
S2_FIELDS: tuple[str, ...] = (
    "paperId", "corpusId", "externalIds", "title", "abstract", "year", "publicationDate",
    "venue", "journal", "publicationTypes", "fieldsOfStudy", "s2FieldsOfStudy",
    "isOpenAccess", "openAccessPdf",
)


class OpenAccessPdf(BaseModel):
    model_config = ConfigDict(extra="allow")
    url: str | None = None
    status: str | None = None
    license: str | None = None


class PaperRecord(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    paperId: str
    corpusId: int | None = None
    externalIds: dict[str, Any] | None = None
    title: str | None = None
    abstract: str | None = None
    year: int | None = None
    publicationDate: str | None = None
    venue: str | None = None
    journal: dict[str, Any] | None = None
    publicationTypes: list[str] | None = None
    fieldsOfStudy: list[str] | None = None
    s2FieldsOfStudy: list[dict[str, Any]] | None = None
    isOpenAccess: bool | None = None
    openAccessPdf: OpenAccessPdf | None = None
    #: set by the sample corpus / ingest: a local PDF path relative to the snapshot file
    localPdf: str | None = Field(default=None)

    @property
    def doi(self) -> str | None:
        ids = self.externalIds or {}
        doi = ids.get("DOI")
        return str(doi).lower() if doi else None
