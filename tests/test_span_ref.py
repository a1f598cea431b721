"""One span model (``arcticqa.evidence.SpanRef``) in each of its uses, on the spans of real PDFs.

The spans come from the journal-layout fixtures (papers typeset by real LaTeX journal classes).
Each span, as a finding cites it, as an accepted item keeps it, as a release writes it and as
the store's table gives it back, must keep the exact JSON layout its use had before the model was
shared (stored memo hashes and the release bytes depend on it) and round-trip without loss.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from arcticqa.evidence import Span, SpanRef, sha256_text
from arcticqa.release.models import EvidenceRef
from arcticqa.store.tables import SpanRow
from arcticqa.text.extract import extract_pdf_bytes

REPO = Path(__file__).resolve().parent.parent
LAYOUTS = REPO / "tests" / "data" / "journal_layouts"
NAMES = sorted(p.stem for p in LAYOUTS.glob("*.pdf"))
#: the layouts each use wrote before the model was shared (findings, accepted items, releases)
FINDING_KEYS = ["id", "section", "page", "start", "end", "sha256", "text"]
ITEM_KEYS = ["id", "section", "page", "start", "end", "sha256"]
RELEASE_KEYS = ["span_id", "role", "section", "page", "start", "end", "sha256", "text"]


@cache
def _spans(name: str) -> list[Span]:
    document = extract_pdf_bytes((LAYOUTS / f"{name}.pdf").read_bytes())
    assert document.status == "ok", document.message
    assert document.spans
    return document.spans


@cache
def _release_evidence_schema() -> dict[str, Any]:
    schema = json.loads((REPO / "schemas" / "item.schema.json").read_text(encoding="utf-8"))
    return {"$defs": schema["$defs"], "$ref": "#/$defs/EvidenceRef"}


def test_there_are_layouts_to_read() -> None:
    assert len(NAMES) >= 5


@pytest.mark.parametrize("name", NAMES)
def test_a_finding_cites_a_span_in_the_layout_findings_are_stored_in(name: str) -> None:
    for span in _spans(name):
        ref = span.ref()
        data = ref.model_dump(mode="json")
        assert list(data) == FINDING_KEYS
        assert (data["id"], data["start"], data["end"], data["text"]) == (span.id, span.start, span.end, span.text)
        assert ref.sha256 == sha256_text(span.text)
        assert SpanRef.model_validate_json(json.dumps(data)) == ref


@pytest.mark.parametrize("name", NAMES)
def test_an_accepted_item_keeps_the_reference_without_the_text(name: str) -> None:
    for span in _spans(name):
        ref = span.ref().without_text()
        data = ref.model_dump(mode="json")
        assert list(data) == ITEM_KEYS
        assert SpanRef.model_validate(data) == ref


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("include_text", [False, True], ids=["without_text", "with_text"])
def test_a_release_writes_the_span_in_its_published_layout(name: str, include_text: bool) -> None:
    schema = _release_evidence_schema()
    for span in _spans(name):
        stored = span.ref().without_text().model_dump(mode="json")  # what the export reads
        evidence = EvidenceRef(span_id=stored["id"], section=stored["section"], page=stored["page"],
                               start=stored["start"], end=stored["end"], sha256=stored["sha256"],
                               text=span.text if include_text else None)
        data = evidence.model_dump(mode="json")
        assert list(data) == RELEASE_KEYS
        assert data["text"] == (span.text if include_text else None)  # null stays in a release
        assert (evidence.span_id, data["role"]) == (span.id, "finding")
        jsonschema.validate(data, schema)
        assert EvidenceRef.model_validate_json(json.dumps(data)) == evidence


@pytest.mark.parametrize("name", NAMES)
def test_the_span_table_gives_back_the_same_reference(name: str) -> None:
    for span in _spans(name):
        row = SpanRow(document_id=1, span_id=span.id, section=span.section, page=span.page, start=span.start,
                      end=span.end, sha256=span.sha256, text=span.text)
        assert row.ref(role="eligibility.no_site") == span.ref(role="eligibility.no_site")


def test_only_unset_role_and_text_are_left_out() -> None:
    empty = SpanRef(id="sp-0", role="", section="results", page=0, start=0, end=0, sha256=sha256_text(""), text="")
    assert list(empty.model_dump()) == ["id", "role", "section", "page", "start", "end", "sha256", "text"]


def test_a_release_span_refuses_what_the_format_refuses() -> None:
    good: dict[str, Any] = {"span_id": "sp-1", "section": "results", "page": 1, "start": 0, "end": 4,
                            "sha256": sha256_text("text")}
    EvidenceRef.model_validate(good)
    for bad in ({"page": -1}, {"sha256": "not-a-hash"}, {"span_id": ""}, {"extra": 1}):
        with pytest.raises(ValueError):
            EvidenceRef.model_validate(good | bad)
