"""Unit tests of the deterministic gate library (arcticqa.gates): numbers, units, leaks,
standalone phrasing, direction antonyms, the distractor prefilter and contradiction rules."""

from __future__ import annotations

import json

import pytest

from arcticqa.gates import (
    answer_leak,
    check_distractor,
    contradiction,
    evidence_supports_value,
    is_direction_reversal,
    language_script,
    length_bounds,
    not_standalone,
    numeric_within_tolerance,
    options_equivalent,
    parse_numbers,
    prefilter_distractors,
    scope_dropped,
)
from arcticqa.gates.evidence import answer_in_evidence, cites_other_work, scope_in_evidence

# ---- numbers and units ----------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("18%", "28%", False),
    ("2.3 mm/yr", "2.30 mm yr⁻¹", True),
    ("2.3 mm/yr", "2.30 mm yr-1", True),
    ("0.5 m", "50 cm", True),
    ("0.5 m", "55 cm", False),  # on the rounding boundary
    ("−13.9‰", "13.9‰", False),
    ("5 °C", "278.15 K", True),
    ("0.2 °C/decade", "0.02 °C/yr", True),
    ("1,200 m", "1.2 km", True),
    ("18%", "18.4%", True),  # 18.4 rounds to the stated 18
    ("110–112°E", "115–117°E", False),
    ("3 times", "3-fold", True),
])
def test_numeric_within_tolerance(a: str, b: str, expected: bool) -> None:
    assert numeric_within_tolerance(a, b) is expected


@pytest.mark.parametrize(("a", "b"), [
    ("Cassiope", "Silene"),  # no numbers
    ("2.3 mm/yr", "2.3 kg"),  # incompatible units
    ("1.7 and 2.4 times", "1.7 times"),  # different counts
    ("12 psu", "12 °E"),  # label units only match themselves
])
def test_numeric_not_comparable(a: str, b: str) -> None:
    assert numeric_within_tolerance(a, b) is None


def test_parse_numbers_reads_sign_range_plusminus_and_identifiers() -> None:
    (neg,) = parse_numbers("δ13C was −13.9‰")
    assert neg.value == pytest.approx(-13.9) and neg.unit == "‰"
    low, high = parse_numbers("1979–2021")
    assert (low.value, high.value) == (1979, 2021)  # a range, not a negative number
    (rate,) = parse_numbers("a rise of 2.3 ± 0.4 mm/yr")
    assert rate.plusminus == pytest.approx(0.4) and rate.unit == "mm/yr"
    assert [n.value for n in parse_numbers("CO2 under SSP5")] == []
    (approx,) = parse_numbers("~8.9%")
    assert approx.approx and approx.tolerance == pytest.approx(0.445)
    (sci,) = parse_numbers("1.2 × 10^3 kg")
    assert sci.value == pytest.approx(1200) and sci.unit == "kg"


def test_precision_tolerance_follows_written_digits() -> None:
    (a,) = parse_numbers("2.3")
    (b,) = parse_numbers("2.30")
    assert a.tolerance == pytest.approx(0.05) and b.tolerance == pytest.approx(0.005)
    assert numeric_within_tolerance("2.3", "2.34") is True  # within the coarser precision 0.05
    assert numeric_within_tolerance("2.3", "2.36") is False
    assert numeric_within_tolerance("2.30", "2.34") is False


# ---- options --------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("2.3 mm/yr", "2.30 mm yr⁻¹", True),
    ("0.5 m", "50 cm", True),
    ("Polar cod (Boreogadus saida)", "Boreogadus saida", True),
    ("The glaciers", "glacier", True),
    ("40% reduction", "40% increase", False),
    ("Cassiope", "Silene", False),
    ("18%", "28%", False),
])
def test_options_equivalent(a: str, b: str, expected: bool) -> None:
    assert options_equivalent(a, b) is expected


@pytest.mark.parametrize(("a", "b", "expected"), [
    ("increased", "decreased", True),
    ("40% reduction", "40% increase", True),
    ("warming", "cooling", True),
    ("thinning", "thickening", True),
    ("glacier retreat", "glacier advance", True),
    ("earlier onset", "later onset", True),
    ("higher", "higher", False),
    ("increased", "did not decrease", False),  # "not decrease" reads as +1, same polarity
    ("Cassiope", "Silene", None),
    ("warming", "increased", None),  # different axes: not comparable
])
def test_is_direction_reversal(a: str, b: str, expected: bool | None) -> None:
    assert is_direction_reversal(a, b) is expected


def test_prefilter_rejects_each_free_gate_with_its_rule() -> None:
    answer = "18%"
    candidates = ["28%", "18.0%", "28 %", "18.3% rise", "none of the above", "12% or 15%", "45 mm",
                  "9%"]
    kept, rejections = prefilter_distractors(answer, candidates)
    by_index = {r.evidence["index"]: r.rule_id for r in rejections}
    assert kept == ["28%", "9%"]
    assert by_index == {
        1: "distractor.equals_answer",
        2: "distractor.duplicate",
        3: "distractor.within_tolerance",
        4: "distractor.all_none_of_above",
        5: "distractor.compound",
        6: "distractor.format_mismatch",
    }


def test_prefilter_text_gates() -> None:
    kept, rejections = prefilter_distractors("present in the littoral zone", [
        "not present in the littoral zone", "absent from the sublittoral zone",
        "present in the littoral zone", "abundant in every zone and season while rare in pools",
    ])
    rules = [r.rule_id for r in rejections]
    assert "distractor.negation_only" in rules
    assert "distractor.equals_answer" in rules
    assert "distractor.compound" in rules
    assert kept == ["absent from the sublittoral zone"]


def test_prefilter_keeps_direction_reversal_with_same_number() -> None:
    kept, rejections = prefilter_distractors("40% reduction", ["40% increase", "40% decline"])
    assert kept == ["40% increase"]
    assert [r.rule_id for r in rejections] == ["distractor.within_tolerance"]


def test_prefilter_format_parity_decimals_and_length() -> None:
    kept, rejections = prefilter_distractors("53.1 mol%", ["35.1 mol%", "50.95 mol%", "58 mol%"])
    assert kept == ["35.1 mol%"]
    assert {r.rule_id for r in rejections} == {"distractor.format_mismatch"}


# ---- deterministic contradiction ------------------------------------------------------------

EVIDENCE = ("Sea-ice thickness increased by 18% between 2000 and 2020 at the mooring. The mean rise "
            "rate was 2.3 ± 0.4 mm/yr. The δ13C value of the bulk sediment was −13.9‰. Only Cassiope "
            "responded positively to autumn temperature. Late-winter snow depth was 0.5 m.")


def test_contradiction_numeric_18_vs_28_percent() -> None:
    found = contradiction("28%", EVIDENCE, "18%", "numeric")
    assert found is not None and found.rule == "numeric_outside_tolerance"
    assert "18%" in found.evidence


def test_contradiction_sign_flip() -> None:
    found = contradiction("13.9‰", EVIDENCE, "−13.9‰", "numeric")
    assert found is not None and found.rule == "numeric_outside_tolerance"


def test_contradiction_with_unit_conversion() -> None:
    found = contradiction("80 cm", EVIDENCE, "0.5 m", "numeric")
    assert found is not None and found.detail["option_value"] == pytest.approx(0.8)
    assert contradiction("50 cm", EVIDENCE, "0.5 m", "numeric") is None  # the same value


def test_value_inside_stated_tolerance_is_not_a_contradiction() -> None:
    assert contradiction("2.5 mm/yr", EVIDENCE, "2.3 mm/yr", "numeric") is None
    found = contradiction("3.2 mm/yr", EVIDENCE, "2.3 mm/yr", "numeric")
    assert found is not None and found.detail["tolerance"] == pytest.approx(0.4)


def test_option_matching_another_evidence_value_is_never_contradicted() -> None:
    evidence = "Thickness increased by 18% at site A and by 28% at site B."
    assert contradiction("28%", evidence, "18%", "numeric") is None
    assert evidence_supports_value("28%", evidence, "18%") is not None
    assert evidence_supports_value("35%", evidence, "18%") is None


def test_contradiction_direction_reversal() -> None:
    found = contradiction("decreased", EVIDENCE, "increased", "direction")
    assert found is not None and found.rule == "direction_reversal"
    mixed = "Thickness increased in spring and decreased in autumn."
    assert contradiction("decreased", mixed, "increased", "direction") is None


def test_contradiction_closed_set() -> None:
    found = contradiction("Silene", EVIDENCE, "Cassiope", "entity")
    assert found is not None and found.rule == "closed_set"
    open_evidence = "Cassiope responded positively to autumn temperature."
    assert contradiction("Silene", open_evidence, "Cassiope", "entity") is None


def test_no_rule_no_contradiction() -> None:
    assert contradiction("Dryas", "Cassiope flowered early.", "Cassiope", "entity") is None
    assert contradiction("28%", "The value was 18%.", "18 mm", "numeric") is None  # answer not stated


# ---- question gates -------------------------------------------------------------------------


def test_answer_leak() -> None:
    assert answer_leak("Which genus flowered first at Zackenberg?", "", "Cassiope") is None
    leak = answer_leak("Did Cassiope flower first at Zackenberg?", "", "Cassiope")
    assert leak is not None and leak.rule_id == "question.answer_leak"
    assert answer_leak("What was the snow depth?", "Depth of 50 cm was typical.", "0.5 m") is not None
    assert answer_leak("Which fish (Boreogadus saida) declined?", "", "Polar cod (Boreogadus saida)")
    assert answer_leak("Did extent increase or decrease between 1979 and 2020?", "", "decrease") is None
    assert answer_leak("What was the rate between 1979 and 2018?", "", "2.3 mm/yr") is None


@pytest.mark.parametrize("question", [
    "In this study, what was the mean snow depth at Zackenberg?",
    "What did the authors find about snow depth at Zackenberg?",
    "As shown in Figure 3, what was the snow depth at Zackenberg?",
    "According to Table 2, what was the snow depth at Zackenberg?",
    "What was the mean snow depth we measured at Zackenberg?",
])
def test_not_standalone_always(question: str) -> None:
    rejection = not_standalone(question, "Snow depth was measured at Zackenberg, NE Greenland, 2010–2020.")
    assert rejection is not None and rejection.rule_id == "question.not_standalone"


def test_not_standalone_needs_context() -> None:
    q = "What was the mean snow depth at the site in 2015?"
    assert not_standalone(q, "") is not None
    assert not_standalone(q, "The site is Zackenberg in NE Greenland.") is None
    period = "What was the mean snow depth at Zackenberg during the study period?"
    assert not_standalone(period, "") is not None
    assert not_standalone(period, "Measurements ran from 2010 to 2020.") is None


def test_scope_dropped_and_length() -> None:
    scope = {"location": "Zackenberg, NE Greenland", "period": "2010–2020"}
    ok = scope_dropped("What was the mean snow depth at Zackenberg?", "Measured 2010–2020 in NE Greenland.",
                       scope)
    assert ok is None
    dropped = scope_dropped("What was the mean snow depth at Zackenberg, NE Greenland?", "", scope)
    assert dropped is not None and dropped.evidence["dimension"] == "period"
    assert length_bounds("Depth?", "") is not None
    assert length_bounds("What was the mean snow depth at Zackenberg?", "x" * 800) is not None
    assert length_bounds("What was the mean snow depth at Zackenberg?", "") is None


def test_evidence_gates() -> None:
    text = "Mean snow depth was 0.52 m at Zackenberg between 2010 and 2020."
    assert answer_in_evidence("0.52 m", text)
    assert answer_in_evidence("52 cm", text)
    assert not answer_in_evidence("0.7 m", text)
    assert scope_in_evidence("Zackenberg", text) and not scope_in_evidence("Svalbard", text)
    assert cites_other_work("Snow depth was 0.52 m (Smith et al., 2010).")
    assert cites_other_work("As reported by Jones [12], depth increased.")
    assert not cites_other_work(text)


def test_language_script() -> None:
    assert language_script("Cassiope") == "latin"
    assert language_script("Карское море") == "cyrillic"
    assert language_script("Kara Sea (Карское море)") == "mixed"


@pytest.mark.shared
def test_published_items_mostly_pass_question_gates(arcticqa_v1) -> None:  # type: ignore[no-untyped-def]
    rows = [json.loads(line) for line in (arcticqa_v1 / "items.jsonl").read_text().splitlines() if line]
    flagged = [r for r in rows
               if answer_leak(r["question"], r["question_context"] or "", r["gold_answer"])
               or not_standalone(r["question"], r["question_context"] or "")]
    assert len(flagged) <= 0.05 * len(rows)


@pytest.mark.parametrize(("answer", "option"), [
    ("-23.17 ‰", "23.17 ‰"), ("r = 0.968", "r = -0.968"), ("+245 %", "-245 %"), ("0.7 °C", "-0.7 °C"),
])
def test_sign_flips_are_not_equivalent(answer: str, option: str) -> None:
    assert not options_equivalent(answer, option)
    kept, _ = prefilter_distractors(answer, [option])
    assert kept == [option]


@pytest.mark.parametrize("option", ["", " ", "—", "?", "–", "...", "N/A", "None of the above"])
def test_an_option_without_a_word_or_number_or_saying_none_is_rejected(option: str) -> None:
    """Found by the red team: '—' as a distractor of a set answer passed every free gate (only
    the empty string and numeric answers' format were checked), and a sycophantic option verifier
    admitted it."""
    for answer in ("B7 and B8", "declined", "Salix arctica and Dryas octopetala", "18%"):
        rejection = check_distractor(answer, option)
        assert rejection is not None, (answer, option)
