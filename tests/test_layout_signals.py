"""The structural signals the extractor reads off real published pages, each tested on its own
and, where it proves something is *not* a heading or *not* one word, against true things it
must leave alone: every heading of the journal-class fixtures, every v1 question.
"""

from __future__ import annotations

import json
from pathlib import Path

import pymupdf
import pytest

from arcticqa.text.clean import normalise_line
from arcticqa.text.extract import extract_pdf_bytes
from arcticqa.text.sections import (
    _REF_AUTHOR_LIST,
    cannot_be_heading,
    classify_heading,
    figures_in,
    looks_like_reference,
)
from arcticqa.text.spacing import PaperWords
from arcticqa.text.spans import sentence_bounds

LAYOUTS = Path(__file__).parent / "data" / "journal_layouts"


@pytest.mark.parametrize("line", [
    "3. Validate the AMSR2 reSICCI3LF SIC to comprehend how its",  # a list item wrapped
    "1. The root mean square ice edge displacement is",
    "2 NO NM",  # an equation's indices
    "12. Kim, B.-M. et al. Weakening of the stratospheric polar vortex by Arctic sea ice",
    "48. Goodfellow I, Pouget-Abadie J, Mirza M, Xu B, Warde-Farley D",
    "[7] A. Surname, Title of the paper, 2019",
    "1997 [43]) PhyDNet (Le Guen, 2020 [76])",  # a figure's words: closes what it did not open
    "Results (continued from the",
])
def test_lines_that_are_never_headings(line: str) -> None:
    assert cannot_be_heading(line)


def _fixture_headings() -> list[str]:
    titles: list[str] = []
    for path in sorted(LAYOUTS.glob("*.json")):
        titles += json.loads(path.read_text(encoding="utf-8"))["sections"]
    return titles


def test_no_fixture_heading_is_ruled_out() -> None:
    """Headings of six real LaTeX journal classes, and the usual section names: none may read
    as a list item, an equation or a reference entry."""
    titles = _fixture_headings() + [
        "1. Introduction", "2.2 Observations of sea ice break-up in previous literature",
        "4.1 Global glacier volume change 2006–2100", "Appendix A. The Impact of the Ice Type",
        "IV. RESULTS AND DISCUSSIONS", "1) Quantitative Comparison", "(a) Study sites (Svalbard)", "Glacier Morpho-Topographic Features, One of the Multi-Decadal "
        "Mass Balance Drivers?", "Data availability", "Acknowledgements", "References"]
    assert len(titles) > 30
    ruled_out = [t for t in titles if cannot_be_heading(t)]
    assert not ruled_out


def test_no_v1_question_opens_like_a_reference_entry(arcticqa_v1: Path) -> None:
    """The reference-entry shapes that veto a heading must not match real prose either."""
    texts = [json.loads(line)["question"] for line in
             (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(texts) > 150
    assert not [t for t in texts if _REF_AUTHOR_LIST.match(t)]


def test_years_are_not_a_titles_figures() -> None:
    assert figures_in("Global glacier volume change 2006–2100") == 0
    assert figures_in("0.25 0.50 0.75 1.00") > 4


def test_author_contribution_statements_are_back_matter() -> None:
    for title in ("AUTHOR CONTRIBUTION STATEMENT", "CRediT authorship contribution statement",
                  "Author contributions"):
        assert classify_heading(title).kind == "author_contributions"


@pytest.mark.parametrize(("raw", "normal"), [
    ("Radic´ and Hock", "Radić and Hock"),   # the accent drawn after its letter
    ("Radic´, 2014", "Radić, 2014"),
    ("Utqia˙gvik", "Utqiaġvik"),              # LaTeX's accent before its letter, as before
])
def test_loose_accents_go_back_on_their_letter(raw: str, normal: str) -> None:
    assert normalise_line(raw) == normal


def test_an_acute_before_a_letter_is_not_put_on_it() -> None:
    assert "t́" not in normalise_line("don´t")  # as often an apostrophe


def test_a_parenthesised_abbreviation_ends_no_sentence() -> None:
    text = "The bias is small (Fig. 3) and constant. It grows (Figs. 4 and 5) later."
    assert [text[s:e] for s, e in sentence_bounds(text)] == [
        "The bias is small (Fig. 3) and constant.", "It grows (Figs. 4 and 5) later."]


def test_glued_words_are_found_by_function_words_compounds_are_not() -> None:
    words = PaperWords([[((0, 0, 0), "Tietscheetal.")]],
                       lambda: ["Tietsche et al. 2014 Tietsche et al. showed that the ice through thereafter "
                                "through out there by"])
    assert words.glued("tietscheetal")
    assert not words.glued("throughout")  # "through" + "out": content words
    assert not words.glued("thereby")


def _glued_pdf(words: list[str], gap_em: float, size: float = 10.0) -> bytes:
    """A page whose words are placed one by one with a gap and no space glyph between them,
    the way some typesetters set a justified line."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    font = pymupdf.Font("tiro")
    x, y = 72.0, 120.0
    for line in range(3):
        x = 72.0
        for word in words:
            page.insert_text((x, y + 14 * line), word, fontname="tiro", fontsize=size)
            x += font.text_length(word, fontsize=size) + gap_em * size
    data: bytes = doc.tobytes()
    return data


def test_word_spaces_come_back_from_glyph_gaps() -> None:
    words = ["To", "interpret", "the", "ratio,", "it", "is", "useful", "to", "think", "of", "the", "edge",
             "as", "a", "number", "of", "segments", "that", "vary", "independently", "of", "each", "other."]
    data = _glued_pdf(words, gap_em=0.13)
    with pymupdf.open(stream=data, filetype="pdf") as doc:
        plain = doc[0].get_text()
    assert "Tointerpret" in plain.replace(" ", "")  # MuPDF alone glues them (else no test)
    assert "To interpret the ratio" not in plain
    document = extract_pdf_bytes(data)
    assert "To interpret the ratio, it is useful to think of the edge as a number" in document.text
    assert document.stats["spaces_from_glyph_gaps"] > 0


def test_a_word_set_tight_is_never_split() -> None:
    words = ["Understanding", "throughout", "notwithstanding"]
    data = _glued_pdf(words, gap_em=0.0)
    document = extract_pdf_bytes(data)
    assert "Understanding" in document.text and "Under standing" not in document.text
    assert "notwithstanding" in document.text


def test_a_numbered_paragraph_of_prose_is_not_a_reference_entry() -> None:


    paragraph = ("[2] Glaciers have retreated in most mountain ranges since the end of the Little Ice Age "
                 "[Smith et al., 2006]. Their loss raises sea level and changes the runoff of rivers that "
                 "people depend on. The volume of ice that remains is therefore of wide interest, and it is "
                 "usually estimated from glacier area with a scaling relation [Bahr et al., 1997]. Here we "
                 "examine how well that relation holds when glaciers are out of balance with climate.")
    assert len(paragraph) > 400
    assert not looks_like_reference(paragraph)
    for entry in ("[12] A. Surname and B. Other, \u201cSea ice in the Fram Strait,\u201d J. Geophys. Res., "
                  "vol. 3, pp. 1\u20132, 2019.",
                  "[3] Surname, A. (2010), A long title about the ice. Glaciers were measured. They shrank. "
                  "Their volume fell by a third, which we describe at length in this entry for the test, and "
                  "it goes on, and on, and on, for more than four hundred characters of text in all, so "
                  "that only the author's name tells it is an entry of a reference list.",
                  "[7] Smith J, Jones K. Title of the work. Journal 2019;3:1-2."):
        assert looks_like_reference(entry), entry
