"""Extraction of generated PDFs: reading order, cleaning, sections, spans, failure statuses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest
from typer.testing import CliRunner

from arcticqa.errors import UnknownSpanError
from arcticqa.evidence import (
    find_quote,
    render_spans_for_prompt,
    resolve_span,
    sha256_text,
    span_id_for,
)
from arcticqa.stages.extract_text import ExtractionLimits, extract_document, rejection_for
from arcticqa.text.clean import Vocabulary, join_wrapped
from arcticqa.text.render import PaperSection, PaperSource, render_paper_pdf
from arcticqa.text.spans import pack_chunks, pack_spans, sentence_bounds

SHY = "\u00ad"
HEADER = "Journal of Arctic Studies — Test et al."
VENUE = "Polar Test Letters 12 (2024) 101–118"
REFERENCE_SENTENCE = "Walrus haul-out counts in Svalbard were reviewed by the reference author"
_TOPICS = ["sea-ice extent", "snow depth", "permafrost temperature", "river discharge", "tundra greening",
           "glacier mass balance", "ocean heat flux", "aerosol optical depth"]


_FILLER = "mean monthly winter and summer surface air layer hourly".split()


def _filler(k: int) -> str:
    return "".join(f"{w} " for w in _FILLER[:k])


def _paragraph(n: int) -> str:
    topic = _TOPICS[n % len(_TOPICS)]
    sentences = [
        f"Paragraph {n} reports {topic} observations from station number {100 + n}.",
        f"The {_filler(n % 9)}measured tempera{SHY}ture anomaly at site {n} was {n + 0.5:.1f} K above the "
        f"1981–2010 mean, with sea-ice conditions recorded daily.",
        f"Seasonal {_filler(n * 7 % 10)}variabil{SHY}ity in record {n} was larger in autumn than in spring, "
        f"according to the field log kept by team {n}.",
        f"These results for case {n} are consistent with earlier surveys of the region.",
    ]
    return _hyphenable(" ".join(sentences))


def _hyphenable(text: str) -> str:
    """Let the typesetter break long words (as TeX would), so the PDF has many wrap hyphens."""
    return re.sub(r"\b([a-z]{5})([a-z]{4,})\b", lambda m: f"{m.group(1)}{SHY}{m.group(2)}", text)


def _paper(paragraphs_per_section: int = 3, language: str = "en") -> PaperSource:
    n = iter(range(1, 1000))
    names = ["1. Introduction", "2. Study area", "3. Methods", "4. Results", "5. Discussion", "6. Conclusions"]
    sections = []
    for name in names:
        paras = [_paragraph(next(n)) for _ in range(paragraphs_per_section)]
        captions = ["Figure 1. Map of the stations on the coast of the test sea."] if name.startswith("4") else []
        sections.append(PaperSection(heading=name, paragraphs=paras, captions=captions))
    return PaperSource(
        title="Sea-ice retreat and permafrost warming in a test archipelago",
        authors=["A. Author", "B. Writer"],
        venue=VENUE,
        abstract="We report a decade of observations. Warming was strongest in winter months.",
        sections=sections,
        back_matter=[PaperSection(heading="Acknowledgements",
                                  paragraphs=["We thank the station crew for logistic support."])],
        references=[f"{REFERENCE_SENTENCE} in 2019. Polar Biol. 42, 1–10.",
                    "Smith, J. and Doe, A. (2020). Snow on sea ice. J. Glaciol. 66, 1–12."],
        language=language,
    )


@pytest.fixture(scope="module")
def two_column(tmp_path_factory: pytest.TempPathFactory) -> tuple[PaperSource, bytes]:
    paper = _paper(paragraphs_per_section=6)
    data = render_paper_pdf(paper, columns=2, running_header=HEADER)
    return paper, data


@pytest.fixture(scope="module")
def two_column_doc(two_column: tuple[PaperSource, bytes]):  # type: ignore[no-untyped-def]
    return extract_document(two_column[1])


def _flat(text: str) -> str:
    return " ".join(text.replace(SHY, "").split())


def test_fixture_really_is_two_column_with_wraps(two_column: tuple[PaperSource, bytes]) -> None:
    # guards the other tests: the raw PDF must contain the hard cases they claim to handle
    with pymupdf.open(stream=two_column[1], filetype="pdf") as doc:
        assert doc.page_count >= 3
        pages = doc.page_count
        raw = "\n".join(page.get_text() for page in doc)
        xs = {round(b[0]) for page in doc for b in page.get_text("blocks")}
    assert len(re.findall(r"[a-z]-\n[a-z]", raw)) >= 10, "too few line-wrap hyphens in the fixture"
    assert re.search(r"tempera-\nture", raw)
    assert raw.count(HEADER) == pages
    assert any(x > 300 for x in xs) and any(x < 100 for x in xs)


def test_reading_order_every_paragraph_once(two_column: tuple[PaperSource, bytes], two_column_doc) -> None:  # type: ignore[no-untyped-def]
    paper, _ = two_column
    text = _flat(two_column_doc.text)
    positions = []
    for section in paper.sections:
        for para in section.paragraphs:
            expected = _flat(para)
            assert text.count(expected) == 1, expected[:60]
            positions.append(text.index(expected))
    assert positions == sorted(positions)


def test_running_header_footer_and_page_numbers_removed(two_column_doc) -> None:  # type: ignore[no-untyped-def]
    doc = two_column_doc
    assert HEADER not in doc.text
    assert "Polar Test Letters" not in doc.text
    assert not re.search(r"(^|\n)\d{1,3}(\n|$)", doc.text)
    assert doc.stats["running_lines_removed"] >= 3 * doc.pages


def test_hyphenation_rejoined_real_hyphens_kept(two_column, two_column_doc) -> None:  # type: ignore[no-untyped-def]
    text = two_column_doc.text
    paragraphs = sum(len(s.paragraphs) for s in two_column[0].sections)
    assert "tempera-" not in text and "tempera- " not in text
    assert text.count("measured temperature anomaly") == paragraphs
    assert "variability in record" in text
    assert "sea-ice conditions" in text


def test_join_wrapped_uses_document_vocabulary() -> None:
    vocab = Vocabulary(["the sea-ice edge moved", "sea-ice cover", "temperature rose"])
    assert join_wrapped("the sea-", "ice edge", vocab) == "the sea-ice edge"
    assert join_wrapped("the tempera-", "ture rose", vocab) == "the temperature rose"
    # a compound broken at its own hyphen keeps the hyphen and gains no space
    assert join_wrapped("CO2-", "Rich waters", vocab) == "CO2-Rich waters"
    assert join_wrapped("near Ny-", "Ålesund (78°55′N)", vocab) == "near Ny-Ålesund (78°55′N)"
    assert join_wrapped("in 1990-", "2000 the", vocab) == "in 1990-2000 the"
    assert join_wrapped("a dash -", "Then", vocab) == "a dash - Then"
    assert join_wrapped("end of line", "next line", vocab) == "end of line next line"


def test_sections_detected_and_back_matter_cut(two_column_doc) -> None:  # type: ignore[no-untyped-def]
    doc = two_column_doc
    kinds = [s.kind for s in doc.sections]
    for kind in ("abstract", "introduction", "study_area", "methods", "results", "discussion",
                 "conclusions", "acknowledgements", "references", "captions"):
        assert kind in kinds
    order = [k for k in kinds if k not in ("front_matter", "captions")]
    assert order == ["abstract", "introduction", "study_area", "methods", "results", "discussion",
                     "conclusions", "acknowledgements", "references"]
    by_kind = {s.kind: s for s in doc.sections}
    assert not by_kind["references"].evidence and not by_kind["acknowledgements"].evidence
    assert REFERENCE_SENTENCE in doc.text[by_kind["references"].start:by_kind["references"].end]
    assert not any("Walrus" in s.text for s in doc.spans)
    assert find_quote(doc, REFERENCE_SENTENCE) == []
    assert not any("station crew" in s.text for s in doc.spans)
    # spans carry their section kind and never point into a non-evidence section
    for span in doc.spans:
        section = next(s for s in doc.sections if s.start <= span.start and span.end <= s.end)
        assert section.evidence and section.kind == span.section


def test_captions_are_not_evidence_spans(two_column_doc, two_column) -> None:  # type: ignore[no-untyped-def]
    doc = two_column_doc
    captions = next(s for s in doc.sections if s.kind == "captions")
    assert "Map of the stations" in doc.text[captions.start:captions.end]
    assert not any("Map of the stations" in s.text for s in doc.spans)
    with_captions = extract_document(two_column[1], ExtractionLimits(caption_spans=True))
    flagged = [s for s in with_captions.spans if s.is_caption]
    assert flagged and all("Map of the stations" in s.text for s in flagged)


def test_span_invariants(two_column_doc) -> None:  # type: ignore[no-untyped-def]
    doc = two_column_doc
    assert doc.status == "ok" and len(doc.spans) > 10
    previous_end = -1
    for span in doc.spans:
        assert span.text == doc.text[span.start:span.end]
        assert span.sha256 == sha256_text(span.text)
        assert span.id == span_id_for(doc.sha256, span.start, span.end)
        assert len(span.text) <= 1600
        assert span.start >= previous_end  # in order, no overlap
        previous_end = span.end
        assert span.text[-1] in ".!?" , span.text[-40:]  # sentence-complete
        assert 1 <= span.page <= doc.pages
    assert len({s.id for s in doc.spans}) == len(doc.spans)
    # a later paragraph is on a later page than the first
    assert doc.spans[-1].page > doc.spans[0].page


def test_chunks_cover_spans_with_overlap() -> None:
    paper = _paper(paragraphs_per_section=12)
    doc = extract_document(render_paper_pdf(paper, columns=1),
                           ExtractionLimits(span_target_chars=150, chunk_chars=2000, chunk_overlap_chars=400))
    ids = {s.id: s for s in doc.spans}
    assert doc.chunks
    for chunk in doc.chunks:
        assert chunk.end - chunk.start <= 2000
        assert all(ids[i].section == chunk.section for i in chunk.span_ids)
        assert ids[chunk.span_ids[0]].start == chunk.start and ids[chunk.span_ids[-1]].end == chunk.end
    covered = {i for c in doc.chunks for i in c.span_ids}
    assert covered == set(ids)
    methods = [c for c in doc.chunks if c.section == "methods"]
    assert len(methods) >= 2 and set(methods[0].span_ids) & set(methods[1].span_ids)


def test_evidence_helpers(two_column_doc) -> None:  # type: ignore[no-untyped-def]
    doc = two_column_doc
    span = next(s for s in doc.spans if "temperature anomaly at site 7 " in s.text)
    assert resolve_span(doc, span.id) == span
    assert find_quote(doc, "measured tempera- ture   anomaly at site 7 was") == [span.id]
    assert find_quote(doc, "sea ice conditions recorded daily")  # hyphen/space normalised
    assert find_quote(doc, "") == []
    with pytest.raises(UnknownSpanError):
        resolve_span(doc, "sp-0000000000000000")
    tampered = doc.model_copy(deep=True)
    tampered.spans[0].text = tampered.spans[0].text + "!"
    with pytest.raises(UnknownSpanError):
        resolve_span(tampered, tampered.spans[0].id)
    rendered = render_spans_for_prompt(doc.spans[:3])
    lines = rendered.splitlines()
    assert len(lines) == 3 and lines[1].startswith(f"2. [{doc.spans[1].id}] ({doc.spans[1].section}, p. ")


def test_cyrillic_paper() -> None:
    sentence = "Температура морского льда у побережья Шпицбергена повысилась на два градуса."
    paper = PaperSource(
        title="Изменения морского льда", authors=["И. Иванов"], abstract="Краткое содержание работы.",
        sections=[("Введение", [sentence + " Измерения проводились ежегодно."]),
                  ("Материалы и методы", ["Использованы спутниковые данные за 2000–2020 гг. и наблюдения."]),
                  ("Результаты", ["Толщина льда уменьшилась. Площадь льда сократилась."])],
        references=["Петров П. П. Лёд Арктики. М.: Наука, 1999."], language="ru")
    doc = extract_document(render_paper_pdf(paper, abstract_heading="Аннотация",
                                            references_heading="Список литературы"))
    assert doc.status == "ok"
    assert sentence in doc.text
    assert [s.kind for s in doc.sections if s.kind != "front_matter"] == [
        "abstract", "introduction", "methods", "results", "references"]
    assert find_quote(doc, sentence)
    assert not any("Петров" in s.text for s in doc.spans)


def test_ligatures_and_unicode_normalised() -> None:
    paper = PaperSource(title="T", abstract="The ﬁrst ﬂux measurements were made in 2001.",
                        sections=[("1. Introduction", ["Soft\u00adhyphen text is here. Zero\u200bwidth too."])])
    doc = extract_document(render_paper_pdf(paper))
    assert "first flux measurements" in doc.text
    assert "ﬁ" not in doc.text and "\u00ad" not in doc.text and "\u200b" not in doc.text


def _image_only_pdf(text_pdf: bytes) -> bytes:
    src = pymupdf.open(stream=text_pdf, filetype="pdf")
    out = pymupdf.open()
    pix = src[0].get_pixmap(dpi=40)
    page = out.new_page(width=595, height=842)
    page.insert_image(page.rect, pixmap=pix)
    return out.tobytes()


def test_failure_statuses(two_column: tuple[PaperSource, bytes]) -> None:
    good = two_column[1]
    encrypted = pymupdf.open(stream=good, filetype="pdf").tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    cases = {
        "encrypted": encrypted,
        "empty": b"",
        "not_pdf": b"<!DOCTYPE html><html><head><title>Sign in</title></head><body>Sign in</body></html>",
        "corrupt": b"%PDF-1.7\n" + bytes(range(256)) * 20,
        "no_text_layer": _image_only_pdf(good),
    }
    for status, data in cases.items():
        doc = extract_document(data)
        assert doc.status == status, (status, doc.status, doc.message)
        assert doc.message and not doc.spans
        assert rejection_for(doc) is not None
    truncated = extract_document(good[: len(good) // 3])
    assert truncated.status in ("corrupt", "empty") or truncated.warnings
    assert truncated.status == "corrupt", truncated.message
    assert extract_document(good, ExtractionLimits(max_pages=1)).status == "too_many_pages"
    assert extract_document(good, ExtractionLimits(time_limit_s=1e-9)).status == "timeout"
    assert rejection_for(extract_document(good)) is None


def test_blank_pdf_is_empty() -> None:
    doc = pymupdf.open()
    doc.new_page()
    assert extract_document(doc.tobytes()).status == "empty"


def test_render_is_deterministic_and_small() -> None:
    paper = _paper()
    a = render_paper_pdf(paper, columns=2, running_header=HEADER)
    b = render_paper_pdf(paper, columns=2, running_header=HEADER)
    assert a == b
    with pymupdf.open(stream=a, filetype="pdf") as doc:
        pages = doc.page_count
    assert len(a) / pages < 40_000


def test_extract_from_path_and_missing_path(tmp_path: Path, two_column: tuple[PaperSource, bytes]) -> None:
    from arcticqa.errors import StageError

    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(two_column[1])
    assert extract_document(pdf).sha256 == extract_document(two_column[1]).sha256
    with pytest.raises(StageError):
        extract_document(tmp_path / "missing.pdf")


def test_sentence_and_span_packing() -> None:
    text = ("Ice was thin (Smith et al. 2020). See Fig. 2 for details. J. Smith agreed. "
            "The mean was 3.5 m. Done!")
    sentences = [text[s:e] for s, e in sentence_bounds(text)]
    assert sentences == ["Ice was thin (Smith et al. 2020).", "See Fig. 2 for details.", "J. Smith agreed.",
                         "The mean was 3.5 m.", "Done!"]
    long = " ".join(f"Sentence number {i} is about sea ice." for i in range(200))
    spans = pack_spans(long, target=300, cap=400)
    assert all(e - s <= 400 for s, e in spans)
    assert all(long[s:e].endswith(".") for s, e in spans)
    assert " ".join(long[s:e] for s, e in spans) == long
    one_huge = "word " * 1000
    assert all(e - s <= 400 for s, e in pack_spans(one_huge.strip(), cap=400))
    groups = pack_chunks([(i * 100, i * 100 + 90) for i in range(50)], budget=1000, overlap=250)
    assert all(g[-1] - g[0] <= 9 for g in groups) and groups[1][0] <= groups[0][-1]


def test_cli_extract_text_json(tmp_path: Path, two_column: tuple[PaperSource, bytes]) -> None:
    import arcticqa.cli.text  # noqa: F401  (registers the commands)
    from arcticqa.cli.app import app

    pdf = tmp_path / "paper.pdf"
    pdf.write_bytes(two_column[1])
    result = CliRunner().invoke(app, ["extract-text", str(pdf), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["status"] == "ok" and payload["pages"] >= 3
    assert {"title", "start", "end"} <= set(payload["sections"][0])
    span = payload["spans"][0]
    assert payload["text"][span["start"]:span["end"]] == span["text"]
    human = CliRunner().invoke(app, ["extract-text", str(pdf)])
    assert human.exit_code == 0 and "Introduction" in human.output and "spans" in human.output
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"<html>no</html>")
    failed = CliRunner().invoke(app, ["extract-text", str(bad)])
    assert failed.exit_code == 2 and "not_pdf" in failed.output  # the file is not a PDF: bad input
    missing = CliRunner().invoke(app, ["extract-text", str(tmp_path / "nope.pdf")])
    assert missing.exit_code == 2


def test_two_column_headings_in_the_body_font(tmp_path: Path) -> None:
    """The reported case: headings ("1. Introduction", "References") set in the body font and
    size on lines of their own, no larger and not bold, in two columns."""
    import arcticqa.cli.text  # noqa: F401  (registers the commands)
    from arcticqa.cli.app import app

    paper = _paper(paragraphs_per_section=3).model_copy(update={"references": [
        "Tundrastein A. 1999. Imaginary snow. Journal of Fictional Glaciology 12, 45–67.",
        f"{REFERENCE_SENTENCE} in 2019. Polar Biol. 42, 1–10.",
    ]})
    pdf = tmp_path / "body-headings.pdf"
    render_paper_pdf(paper, pdf, columns=2, running_header=HEADER, body_headings=True)
    with pymupdf.open(pdf) as doc:  # the fixture really sets headings like body text
        sizes = {round(s["size"], 1) for page in doc for b in page.get_text("dict")["blocks"]
                 for ln in b.get("lines", ()) for s in ln["spans"]
                 if s["text"].strip() in ("1. Introduction", "References", "Abstract")}
        fonts = {s["font"] for page in doc for b in page.get_text("dict")["blocks"]
                 for ln in b.get("lines", ()) for s in ln["spans"] if s["text"].strip() == "4. Results"}
    assert sizes == {9.0} and not any("bold" in f.lower() for f in fonts), (sizes, fonts)
    result = CliRunner().invoke(app, ["extract-text", str(pdf), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    kinds = [s["kind"] for s in payload["sections"]]
    for kind in ("abstract", "introduction", "study_area", "results", "discussion", "conclusions", "references"):
        assert kind in kinds, (kind, [s["title"] for s in payload["sections"]])
    assert [s["title"] for s in payload["sections"] if s["kind"] == "results"] == ["4. Results"]
    assert "no abstract heading found" not in payload["warnings"]
    for span in payload["spans"]:
        assert "Tundrastein" not in span["text"] and REFERENCE_SENTENCE not in span["text"]
        assert not re.search(r"\b\d\. (Introduction|Results|Discussion)\b", span["text"]), span["text"]
    # every body paragraph is still whole in one section
    doc = extract_document(pdf.read_bytes())
    for section in paper.sections:
        for para in section.paragraphs:
            assert any(_flat(para)[:80] in sp.text for sp in doc.spans), _flat(para)[:80]


def test_roman_initial_in_the_front_matter_is_not_a_section() -> None:
    """"V. Petrov" set bold above the abstract is an author, not section V: the affiliation
    under it must stay front matter, out of the evidence."""
    body = "Snow depth was measured at twelve stakes along the transect every week. " * 4
    paper = PaperSource(title="V. Petrov", authors=["Geophysical Institute, Fairbanks, AK, USA"],
                        sections=[PaperSection(heading="1. Introduction", paragraphs=[body])])
    doc = extract_document(render_paper_pdf(paper, columns=2))
    assert [s.kind for s in doc.sections][:2] == ["front_matter", "introduction"]
    assert not any("Fairbanks" in sp.text for sp in doc.spans)
