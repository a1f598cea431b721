"""The number-and-unit grammar on the notations papers and PDF text actually use.

Every notation is tested both ways: a value written in an equivalent form is the same value
(and no contradiction rule proves it false, in either direction), and another value in the same
notation is a different value (and is proved false when the evidence states the answer).
The property test at the end rewrites every published ArcticQA v1 gold answer that holds a
number into forms that keep its value and requires zero false proofs.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from arcticqa.gates import contradiction, evidence_supports_value, numeric_within_tolerance, parse_numbers

#: (answer as written, the same value in another notation, a different value in the first notation)
NOTATIONS = [
    ("5.2 TgC yr⁻¹", "5.2 TgC yr −1", "6.2 TgC yr⁻¹"),  # superscript vs detached PDF exponent
    ("5.2 TgC yr−1", "5.2 Tg C yr^-1", "5.9 TgC yr−1"),  # unicode minus, caret, spaced element
    ("5.2 Tg C/yr", "5200 Gg C yr-1", "5.2 Pg C/yr"),  # element-qualified masses convert
    ("3 m yr −1", "3 m/yr", "30 m yr −1"),
    ("2 g C m⁻² d⁻¹", "2 g C m −2 d −1", "4 g C m⁻² d⁻¹"),
    ("5 µmol L⁻¹", "5 µmol/L", "50 µmol L⁻¹"),
    ("2.4 mg cm−2 yr−1", "2.4 mg/cm^2/yr", "1.8 mg cm−2 yr−1"),
    ("129.81 km²", "129.81 km 2", "12.98 km²"),
    ("500 m 3", "500 m³", "50 m 3"),
    ("1200969 m 3 s -1", "1200969 m³/s", "120097 m 3 s -1"),
    ("3050 CFU/m 3", "3050 CFU/m³", "305 CFU/m 3"),  # an unknown token kept as an opaque unit
    ("14 cm/k.y.", "14 cm/k.y.", "12 cm/k.y."),
    ("−13.9‰", "-13.9 ‰", "13.9‰"),
    ("18%", "18 percent", "28%"),
    ("5 percentage points", "5 pp", "7 percentage points"),
    ("0.34 ± 0.15", "0.34±0.15", "0.64 ± 0.15"),  # the central value is the value
    ("0.01–0.04 m", "0.01-0.04 m", "0.01–0.08 m"),
    ("78–80°N", "78-80 °N", "78–84°N"),
    ("1.2 × 10⁻³ g", "1.2e-3 g", "1.2 × 10⁻² g"),
    ("11·10 3 km 2", "11000 km²", "11·10 4 km 2"),
    ("12\u2009500 m", "12500 m", "12\u2009900 m"),  # thin-space thousands
    ("12\u00a0500 m", "12.5 km", "13\u00a0500 m"),  # no-break-space thousands
    ("1,8 м", "1.8 м", "2,8 м"),  # the decimal comma of Russian text
    ("0,6 °C", "0.6 °C", "1,2 °C"),  # the decimal comma outside Cyrillic text too
    ("12,75 m", "12.75 m", "12,25 m"),
    ("0,01–0,04 м в. э. в год", "1–4 см в. э. в год", "0,01–0,09 м в. э. в год"),
    ("842 м", "0.842 км", "942 м"),
    ("29.73 км", "29730 м", "29.93 км"),
    ("195 см", "1.95 м", "295 см"),
    ("851 нг/м 3", "851 нг/м³", "951 нг/м 3"),
    ("25 °С", "25 °C", "35 °С"),  # a Cyrillic С after the degree sign
    ("3 см/с", "0.03 м/с", "5 см/с"),
    ("1.0 т", "1000 кг", "3.0 т"),
    ("1.0 t", "1000 kg", "3.0 t"),
    ("0.5 ◦ C", "0.5 °C", "1.5 ◦ C"),  # PDF degree look-alikes
    ("3.7 ̊C", "3.7°C", "4.7 ̊C"),
    ("March 11th", "11 March", "April 5th"),  # a date, not the day number
    ("1 September 2020", "September 1, 2020", "1 October 2020"),
]


@pytest.mark.parametrize(("answer", "same", "other"), NOTATIONS)
def test_equivalent_notation_is_the_same_value(answer: str, same: str, other: str) -> None:
    assert numeric_within_tolerance(answer, same) is True
    assert numeric_within_tolerance(same, answer) is True
    assert contradiction(same, f"The value was {answer}.", answer, "numeric") is None
    assert contradiction(answer, f"The value was {same}.", same, "numeric") is None


@pytest.mark.parametrize(("answer", "same", "other"), NOTATIONS)
def test_another_value_in_the_notation_is_different(answer: str, same: str, other: str) -> None:
    assert numeric_within_tolerance(answer, other) is False
    assert numeric_within_tolerance(other, answer) is False
    proof = contradiction(other, f"The value was {answer}.", answer, "numeric")
    assert proof is not None and proof.rule == "numeric_outside_tolerance"


@pytest.mark.parametrize(("text", "values", "unit"), [
    ("5.2 TgC yr −1", [5.2], "Tg*{C}/yr"),
    ("m yr −1", [], None),  # a detached exponent without a number is not the number −1
    ("the area (km 2)", [], None),
    ("δ 13 C = −13.9‰ and δ 15 N = 19.4‰", [-13.9, 19.4], "‰"),  # isotope names are not values
    ("в 2008 г.", [2008], None),  # "г." after a year is the word year, not grams
    ("March 11th", [70], "day of year"),
    ("0.022 Pg Cyear -1", [0.022], "Pg*{C}/yr"),
    ("5 percentage points", [5], "pp"),
    ("temperatures ranged from 5 to −3 °C", [5, -3], "°C"),  # a range, not 5 per "to" cubed
    ("δ 18 \u041e of 1,200 samples", [1200], None),  # a Cyrillic look-alike О is not Russian text
    ("values of 5 and -2 m", [5, -2], "m"),
    ("(Fig. 5 a) shows", [5], None),  # a panel letter is not the unit year
    ("3050 CFU/m 3", [3050], "{CFU}/m^3"),
    ("1.0 t", [1.0], "t"),
    ("1,2 °C", [1.2], "°C"),  # a decimal comma: one number, not 1 and 2
    ("−1,2 °C and 0,6 °C", [-1.2, 0.6], "°C"),
    ("1,200 km", [1200], "km"),  # a group of three digits is thousands
    ("2, 3 and 4 sites", [2, 3, 4], None),  # a list
    ("1,2,3", [1, 2, 3], None),
    ("2,4-D", [2, 4], None),  # a chemical locant
    ("68,5° N", [68.5], "°N"),
    ("as shown [1,2]", [1, 2], None),  # citations
])
def test_parse_reads_pdf_forms(text: str, values: list[float], unit: str | None) -> None:
    numbers = parse_numbers(text)
    assert [n.value for n in numbers] == pytest.approx(values)
    if numbers:
        assert numbers[0].unit == unit


def test_a_decimal_comma_option_has_the_answers_format() -> None:
    from arcticqa.gates import check_distractor

    for option in ("1,2 °C", "1,8 °C", "0,3 °C"):
        assert check_distractor("0,6 °C", option) is None, option


def test_percentage_points_never_compare_with_percent() -> None:
    assert numeric_within_tolerance("5 percentage points", "5%") is None


def test_bare_numbers_in_the_evidence_do_not_block_a_proof() -> None:
    evidence = "At station ARK-XXV/2 (24′ N) the flux was 5.2 mm/yr."
    assert evidence_supports_value("2 mm/yr", evidence, "5.2 mm/yr") is None
    assert contradiction("2 mm/yr", evidence, "5.2 mm/yr", "numeric") is not None
    # a stated quantity with the option's value still blocks it: it may be true elsewhere
    assert evidence_supports_value("2 mm/yr", evidence + " Upstream it was 2 mm/yr.", "5.2 mm/yr")


# ---- the invariant: equivalent rewrites of every published gold answer ----------------------

_DECIMAL_SHIFT = {  # unit -> (other unit, power of ten to multiply the value by)
    "km": ("m", 3), "m": ("cm", 2), "cm": ("mm", 1), "mm": ("m", -3), "км": ("м", 3), "м": ("см", 2),
    "см": ("м", -2), "%": ("‰", 1), "kg": ("g", 3), "Gg": ("Tg", -3), "Tg": ("Gg", 3), "t": ("kg", 3),
    "ppm": ("ppb", 3),
}
_FIRST = re.compile(r"(?<![\w.,])(?P<num>\d+(?:[.,]\d+)?)(?P<sp> ?)(?P<unit>km|cm|mm|m|км|см|мм|м|%|kg|Gg|Tg|t|ppm)"
                    r"(?![\w²³])(?! ?[23-−/]| ?(?:per|yr|s\b|a\b|year))")


def _shift(num: str, power: int) -> str:
    comma = "," in num
    shifted = format(Decimal(num.replace(",", ".")).scaleb(power), "f")
    return shifted.replace(".", ",") if comma else shifted


def equivalent_rewrites(answer: str) -> list[str]:
    """Forms of ``answer`` that state the same value (spacing, signs, units, zeros, hedges)."""
    out = {
        re.sub(r"(\d) ?(%|‰)", r"\1 \2", answer), re.sub(r"(\d) (%|‰)", r"\1\2", answer),
        answer.replace("−", "-"), re.sub(r"(?<![\d\w])-(?=\d)", "−", answer),
        answer.replace("yr−1", "yr⁻¹").replace("yr −1", "yr⁻¹").replace("yr-1", "yr −1"),
        answer.replace("km 2", "km²").replace("m 3", "m³").replace("km²", "km 2"),
        answer.replace("°C", "° C").replace("°C", "ºC"), answer.replace("years", "yr"),
        answer.replace("%", " percent") if "percentage" not in answer else answer,
        re.sub(r"(?<![\w.,])(\d+\.\d+)(?!\d)", r"\g<1>0", answer, count=1),
        # a decimal comma gains a zero; a thousands comma ("100,000") is no decimal
        re.sub(r"(?<![\w.,])(0,\d+|\d+,(?:\d{1,2}|\d{4,}))(?![\d,])", r"\g<1>0", answer, count=1),
        f"approximately {answer}", f"about {answer}",
        re.sub(r"(\w)/(yr|year|s|d|day|L)\b", r"\1 \2⁻¹", answer),  # "mm/yr" -> "mm yr⁻¹"
        re.sub(r"(\w)/(yr|year|s|d|day|L)\b", r"\1 \2 −1", answer),  # the detached PDF form
        answer.replace("°C", " °C").replace("  °C", " °C"), answer.replace(" ", "\u00a0", 1),
    }
    m = _FIRST.search(answer)
    if m and m.group("unit") in _DECIMAL_SHIFT and len(parse_numbers(answer)) == 1 and "±" not in answer:
        unit, power = _DECIMAL_SHIFT[m.group("unit")]
        out.add(answer[:m.start()] + _shift(m.group("num"), power) + m.group("sp") + unit + answer[m.end():])
    out.discard(answer)
    return sorted(out)


def test_rewrites_change_the_text_not_the_value() -> None:
    assert "4400 cm" in equivalent_rewrites("44 m")
    assert "0.842 км" in equivalent_rewrites("842 м") or "84200 см" in equivalent_rewrites("842 м")
    assert "2.30 mm/yr" in equivalent_rewrites("2.3 mm/yr")
    assert numeric_within_tolerance("44 m", "4400 cm") is True


def _published(items_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in items_path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_no_equivalent_rewrite_of_a_published_answer_is_proved_false(arcticqa_v1: Path) -> None:
    false_proofs: list[str] = []
    checked = 0
    for item in _published(arcticqa_v1 / "items.jsonl"):
        answer = str(item["gold_answer"])
        if not parse_numbers(answer):
            continue
        context = f"{item['question']} {item['question_context']}"
        if contradiction(answer, f"{context}\n{answer}", answer, "numeric") is not None:
            false_proofs.append(f"{item['item_id']}: the answer itself is proved false")
        for rewrite in equivalent_rewrites(answer):
            if not parse_numbers(rewrite):
                continue
            checked += 1
            for option, stated in ((rewrite, answer), (answer, rewrite)):
                proof = contradiction(option, f"{context}\n{stated}", stated, "numeric")
                if proof is not None:
                    false_proofs.append(f"{item['item_id']}: {option!r} vs {stated!r}: {proof.rule}")
    assert false_proofs == []
    assert checked > 600, checked  # every numeric answer gets several rewrites
