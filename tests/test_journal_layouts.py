"""Extraction of short fictional papers typeset by real LaTeX journal classes.

Each ``tests/data/journal_layouts/<name>.pdf`` was made by ``make fixtures`` from its ``.tex``
(elsarticle 5p, cas-dc, IEEEtran journal, revtex4-2, a body-size-heading preprint, an AGU-like
submission). Nobody tuned the PDFs to the extractor: TeX chose the line breaks, hyphens,
ligatures, raised exponents, footnote and float placement. Each ``<name>.json`` is the ground
truth written from the source: section titles in order, marker words in reading order, words
TeX hyphenated, ligature words, exponents in the normal form, footnote, caption and float text,
reference titles and surnames, and the paper's eligibility.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import pymupdf
import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.evidence import Document
from arcticqa.text.extract import extract_pdf_bytes
from arcticqa.text.sections import heading_words

LAYOUTS = Path(__file__).parent / "data" / "journal_layouts"
NAMES = sorted(p.stem for p in LAYOUTS.glob("*.json"))


@cache
def _truth(name: str) -> dict[str, Any]:
    return json.loads((LAYOUTS / f"{name}.json").read_text(encoding="utf-8"))


@cache
def _doc(name: str) -> Document:
    document = extract_pdf_bytes((LAYOUTS / f"{name}.pdf").read_bytes())
    assert document.status == "ok", document.message
    return document


def _evidence(document: Document) -> list[str]:
    return [s.text for s in document.spans]


def _flat(text: str) -> str:
    return " ".join(heading_words(text).casefold().split())


def test_every_fixture_has_its_source_pdf_and_truth() -> None:
    assert len(NAMES) >= 5
    for name in NAMES:
        assert (LAYOUTS / f"{name}.tex").is_file() and (LAYOUTS / f"{name}.pdf").is_file()
        # small enough to commit: a page or two each
        assert (LAYOUTS / f"{name}.pdf").stat().st_size < 400_000


@pytest.mark.parametrize("name", NAMES)
def test_sections_found_with_their_titles_in_order(name: str) -> None:
    doc = _doc(name)
    titles = [_flat(s.title) for s in doc.sections]
    expected = [_flat(t) for t in _truth(name)["sections"]]
    positions = [titles.index(t) if t in titles else -1 for t in expected]
    assert -1 not in positions, f"missing {[t for t, p in zip(expected, positions, strict=True) if p < 0]} in {titles}"
    assert positions == sorted(positions), titles


@pytest.mark.parametrize("name", NAMES)
def test_abstract_found_and_is_evidence(name: str) -> None:
    doc = _doc(name)
    abstracts = [s for s in doc.sections if s.kind == "abstract"]
    assert abstracts, [s.title for s in doc.sections]
    body = doc.text[abstracts[0].start:abstracts[0].end]
    assert _truth(name)["abstract_start"] in body
    assert any(_truth(name)["abstract_start"] in sp.text and sp.section == "abstract" for sp in doc.spans)
    assert "no abstract heading found" not in doc.warnings


@pytest.mark.parametrize("name", NAMES)
def test_no_reference_entry_in_any_span(name: str) -> None:
    truth = _truth(name)
    spans = _evidence(_doc(name))
    for title in truth["reference_titles"]:
        assert not any(title in s for s in spans), title
    for surname in truth["reference_surnames"]:
        if surname in truth["cited_in_text"]:
            continue  # an in-text citation stays in its sentence
        assert not any(re.search(rf"\b{surname}\b", s) for s in spans), surname
    for surname in truth["cited_in_text"]:
        assert any(surname in s for s in spans), f"in-text citation of {surname} lost"
    # and the entries are kept, out of the evidence, in a references section
    refs = [s for s in _doc(name).sections if s.kind == "references"]
    assert refs and not refs[0].evidence
    assert truth["reference_titles"][0] in _doc(name).text


@pytest.mark.parametrize("name", NAMES)
def test_markers_in_reading_order(name: str) -> None:
    text = "\n".join(_evidence(_doc(name)))
    positions = [text.find(m) for m in _truth(name)["markers"]]
    assert -1 not in positions, [m for m, p in zip(_truth(name)["markers"], positions, strict=True) if p < 0]
    assert positions == sorted(positions)


@pytest.mark.parametrize("name", NAMES)
def test_sentences_whole_across_floats_footnotes_and_drop_caps(name: str) -> None:
    spans = _evidence(_doc(name))
    for sentence in _truth(name)["whole_sentences"]:
        assert any(sentence in s for s in spans), sentence


@pytest.mark.parametrize("name", NAMES)
def test_hyphenated_words_whole(name: str) -> None:
    pdf_lines = [ln for page in pymupdf.open(LAYOUTS / f"{name}.pdf") for ln in page.get_text().splitlines()]
    text = _doc(name).text
    for word in _truth(name)["hyphenated"]:
        # the fixture really has the word broken at a line end (line numbers may stand between) ...
        assert any(ln.endswith(word[:k] + "-") and any(nxt.startswith(word[k:]) for nxt in pdf_lines[i + 1:i + 3])
                   for i, ln in enumerate(pdf_lines) for k in range(2, len(word) - 1)), word
        # ... and the extraction has it whole
        assert re.search(rf"\b{word}\b", text), word


@pytest.mark.parametrize("name", NAMES)
def test_ligatures_decoded(name: str) -> None:
    text = _doc(name).text
    assert not re.search("[\ufb00-\ufb06]", text)
    for word in _truth(name)["ligatures"]:
        assert re.search(rf"\b{word}\b", text), word


@pytest.mark.parametrize("name", NAMES)
def test_exponents_in_the_normal_form(name: str) -> None:
    spans = "\n".join(_evidence(_doc(name)))
    for unit in _truth(name)["exponents"]:
        assert unit in spans, unit
    # never a detached exponent ("yr −1", "m −2", "km 2") nor a degree left as a bullet
    assert not re.search(r"\b(?:yr|[kcm]?m|s|d|K|kg|g)\s?[−-]?[123]\b(?![.,]?\d)", spans)
    assert "◦" not in _doc(name).text


@pytest.mark.parametrize("name", NAMES)
def test_footnotes_captions_and_float_text_not_in_body_sentences(name: str) -> None:
    doc, truth = _doc(name), _truth(name)
    spans = _evidence(doc)
    for kind, key in (("footnotes", "footnotes"), ("captions", "captions"), ("tables", "float_text")):
        kept = "\n".join(doc.text[s.start:s.end] for s in doc.sections if s.kind == kind)
        for text in truth[key]:
            assert not any(text in s for s in spans), text
            assert text in kept, f"{text!r} not kept in the {kind} section"
    for text in truth["not_evidence"]:
        assert not any(text in s for s in spans), text


@pytest.mark.parametrize("name", NAMES)
def test_eligibility_from_the_pdf(name: str) -> None:
    expected = _truth(name)["eligibility"]
    result = CliRunner().invoke(app, ["eligibility", "explain", "--file", str(LAYOUTS / f"{name}.pdf"), "--json"])
    assert result.exit_code == 0, result.output
    decision = json.loads(result.output)
    assert decision["decision"] == expected["decision"], decision["rule_ids"]
    lat, lon = expected["site"]
    points = [(s["lat"], s["lon"]) for s in decision["sites"] if s["source"] == "coordinates"]
    assert any(abs(a - lat) < 0.01 and b is not None and abs(b - lon) < 0.01 for a, b in points), points
    # every coordinate found is the study site: no minutes read as a site near the equator
    assert all(a > 60 for a, _ in points), points
    names = {s["name"] for s in decision["sites"]}
    for town in expected["not_sites"]:
        assert town not in names, f"affiliation town {town} taken as a site"
    assert not decision["warnings"], decision["warnings"]


# The exponent normal form is a contract with the number grammar (docs/fulltext.md): whatever
# the grammar becomes, it must read "yr⁻¹" as it reads "yr-1".
@pytest.mark.parametrize(("normal", "ascii_form"), [
    ("332 km²", "332 km2"), ("0.2 g kg⁻¹", "0.2 g kg-1"), ("0.62 mm² s⁻¹", "0.62 mm2 s-1"),
    ("38 m³ s⁻¹", "38 m3 s-1"), ("0.8 K d⁻¹", "0.8 K d-1"), ("2.5×10⁻³ m", "2.5×10^-3 m"),
])
def test_exponent_normal_form_reads_like_ascii_in_the_number_grammar(normal: str, ascii_form: str) -> None:
    from arcticqa.gates.numbers import parse_numbers

    def read(text: str) -> list[tuple[float, float, str | None]]:
        return [(n.value, n.scale, n.unit) for n in parse_numbers(text)]

    assert read(normal) and read(normal) == read(ascii_form)


def test_no_published_sentence_has_the_shape_of_a_reference(arcticqa_v1: Path) -> None:
    """The list-shape cut must never take a real sentence for a reference entry: v1's questions
    and contexts (written from real papers, not here) are all body-like text."""
    from arcticqa.text.sections import looks_like_reference

    texts = []
    for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        texts += [item["question"], item.get("question_context") or ""]
    assert len(texts) > 300
    assert [t for t in texts if t and looks_like_reference(t)] == []
