"""A true answer written another way is never proved false, never graded wrong and never a
reconstruction mismatch; the same value written another way in the question is a leak.

Equivalent forms: another unit pint converts into (km/m, min/s, Gg/t, kyr/years, °C/K as a
difference), the decimal comma, numbers in words (English and Russian, decimals too: "zero point
seven three", "ноль целых шесть десятых"). The forms are drawn by a
seeded generator (a few hundred per run, the same every run) and built from every v1 gold answer
that holds a number; an unknown unit in the reply makes it undecided, never wrong.
"""

from __future__ import annotations

import json
import math
import random
import re
from decimal import Decimal
from pathlib import Path

import pytest

from arcticqa.evaluate.open.parse import grade_reply
from arcticqa.gates import answer_leak, contradiction, parse_numbers
from arcticqa.gates.contradiction import set_members
from arcticqa.gates.distractors import check_distractor
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.stages.verify import match_answers

_EN_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen " \
            "sixteen seventeen eighteen nineteen".split()
_EN_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_RU_UNITS = "ноль один два три четыре пять шесть семь восемь девять десять одиннадцать двенадцать " \
            "тринадцать четырнадцать пятнадцать шестнадцать семнадцать восемнадцать девятнадцать".split()
_RU_TENS = "двадцать тридцать сорок пятьдесят шестьдесят семьдесят восемьдесят девяносто".split()
_RU_HUNDREDS = "сто двести триста четыреста пятьсот шестьсот семьсот восемьсот девятьсот".split()


def en_words(n: int) -> str:
    """An integer below a million in English words ("one hundred and twenty-seven")."""
    if n >= 1000:
        rest = n % 1000
        return f"{en_words(n // 1000)} thousand" + (f" {en_words(rest)}" if rest else "")
    if n >= 100:
        rest = n % 100
        return f"{_EN_UNITS[n // 100]} hundred" + (f" and {en_words(rest)}" if rest else "")
    if n >= 20:
        return _EN_TENS[n // 10 - 2] + (f"-{_EN_UNITS[n % 10]}" if n % 10 else "")
    return _EN_UNITS[n]


def ru_words(n: int) -> str:
    """An integer below a thousand in Russian words (nominative)."""
    parts = []
    if n >= 100:
        parts.append(_RU_HUNDREDS[n // 100 - 1])
        n %= 100
    if n >= 20:
        parts.append(_RU_TENS[n // 10 - 2])
        n %= 10
    if n or not parts:
        parts.append(_RU_UNITS[n])
    return " ".join(parts)


#: unit -> (other unit as written, factor from the first into the second)
CONVERSIONS = {
    "m": [("km", "1e-3"), ("cm", "100"), ("metres", "1"), ("meters", "1")], "km": [("m", "1e3"), ("kilometres", "1")],
    "min": [("s", "60"), ("minutes", "1")], "Gg": [("tonnes", "1e3"), ("t", "1e3"), ("Tg", "1e-3")],
    "t": [("kg", "1e3"), ("tonnes", "1")], "kyr": [("years", "1e3"), ("ka", "1")], "%": [("percent", "1"), ("‰", "10")],
    "°C": [("K", "1")], "mm": [("cm", "0.1")], "м": [("км", "1e-3"), ("см", "100")], "км": [("м", "1e3")],
}
# °C -> K only as a difference (below 150 K): an absolute temperature needs the offset
_ONE = re.compile(r"^(?P<pre>\D*?)(?P<num>[-−]?\d+(?:[.,]\d+)?)(?P<sp> ?)(?P<unit>[^\d\s(),;]+)(?P<post>.*)$")


def _convert(num: str, factor: str) -> str:
    comma = "," in num
    text = format((Decimal(num.replace(",", ".").replace("−", "-")) * Decimal(factor)).normalize(), "f")
    return text.replace(".", ",") if comma else text


def converted_forms(answer: str) -> list[str]:
    """``answer`` with its one number written in another unit (and the decimal comma/point
    swapped), where the grammar reads the unit."""
    numbers = parse_numbers(answer)
    m = _ONE.match(answer)
    if len(numbers) != 1 or not m or "±" in answer or numbers[0].bound:
        return []
    unit = m.group("unit").rstrip(".")
    out = []
    squared = re.match(r"\s?(?:[23²³]|\^\d)(?!\d)", m.group("post")) or re.search(r"[²³]", unit)
    for other, factor in [] if squared else CONVERSIONS.get(unit, []):
        if other == "K" and abs(numbers[0].value) >= 150:
            continue
        value = _convert(m.group("num"), factor)
        if re.fullmatch(r"\d+,\d{3}", value.lstrip("-")) and not re.search("[а-яё]", answer, re.I):
            continue  # "6,068 cm" reads as six thousand outside Russian text: not the same value
        out.append(f"{m.group('pre')}{value} {other}{m.group('post')}")
    num = m.group("num")
    if "," in num:
        out.append(answer.replace(num, num.replace(",", "."), 1))
    elif "." in num and not (re.search(r"\.\d{3}$", num) and not re.search("[а-яё]", answer, re.I)):
        out.append(answer.replace(num, num.replace(".", ","), 1))  # "2,018" would read as thousands
    return out


def worded_forms(answer: str) -> list[str]:
    """``answer`` with a whole number below a thousand written in English (and Russian) words."""
    m = re.search(r"(?<![\w.,])(\d{1,3})(?![\d.,])", answer)
    if not m or len(parse_numbers(answer)) != 1:
        return []
    n = int(m.group(1))
    after = answer[m.end():]
    after = f" {after}" if after[:1].isalnum() or after[:1] in "%‰°" else after
    forms = [answer[:m.start()] + en_words(n) + after]
    if re.search("[а-яё]", answer, re.I):
        forms.append(answer[:m.start()] + ru_words(n) + after)
    return forms


_EN_DIGIT_WORDS = "zero one two three four five six seven eight nine".split()
_RU_PLACES = {1: "десятых", 2: "сотых", 3: "тысячных"}


def decimal_worded_forms(answer: str) -> list[str]:
    """``answer`` with a decimal below a thousand in words: "zero point seven three" (English, every
    digit after the point), "ноль целых семьдесят три сотых" (Russian, in Cyrillic answers)."""
    m = re.search(r"(?<![\w.,])(\d{1,3})[.,](\d{1,3})(?![\d.,])", answer)
    if not m or len(parse_numbers(answer)) != 1:
        return []
    whole, frac = int(m.group(1)), m.group(2)
    after = answer[m.end():]
    after = f" {after}" if after[:1].isalnum() or after[:1] in "%‰°" else after
    english = f"{en_words(whole)} point {' '.join(_EN_DIGIT_WORDS[int(d)] for d in frac)}"
    forms = [answer[:m.start()] + english + after]
    if re.search("[а-яё]", answer, re.I):
        russian = f"{ru_words(whole)} целых {ru_words(int(frac))} {_RU_PLACES[len(frac)]}"
        forms.append(answer[:m.start()] + russian + after)
    return forms


def _random_answers(count: int) -> list[str]:
    rng = random.Random(35)
    answers = []
    for _ in range(count):
        unit = rng.choice(sorted(CONVERSIONS))
        value = rng.choice([rng.randint(1, 999), round(rng.uniform(0.1, 99), rng.choice([1, 2]))])
        text = str(value)
        if rng.random() < 0.3 and "." in text:
            text = text.replace(".", ",")  # the decimal comma
        answers.append(f"{text} {unit}" if rng.random() < 0.8 else f"{text}{unit}")
    return answers


@pytest.mark.parametrize(("n", "en", "ru"), [(8, "eight", "восемь"), (27, "twenty-seven", "двадцать семь"),
                                             (40, "forty", "сорок"), (127, "one hundred and twenty-seven",
                                                                       "сто двадцать семь")])
def test_number_words_read_as_digits(n: int, en: str, ru: str) -> None:
    assert en_words(n) == en and ru_words(n) == ru
    assert spelled_as_digits(f"{en} percent") == f"{n} percent"
    assert spelled_as_digits(f"{ru} процентов") == f"{n} процентов"


@pytest.mark.parametrize(("words", "digits"), [
    ("zero point seven three metres", "0.73 metres"), ("two point six times", "2.6 times"),
    ("nineteen point nine five percent", "19.95 percent"), ("one point eight percent", "1.8 percent"),
    ("ноль целых шесть десятых градуса Цельсия", "0.6 градуса Цельсия"), ("шесть десятых градуса", "0.6 градуса"),
    ("одна целая двадцать пять сотых м", "1.25 м"),
])
def test_decimals_in_words_read_as_digits(words: str, digits: str) -> None:
    assert spelled_as_digits(words) == digits


@pytest.mark.parametrize("text", ["one of the lakes", "the one with most ice", "two three", "a thousand",
                                  "Cassiope", "no one knows", "at one point the ice broke", "the point is"])
def test_words_that_are_no_number_stay_words(text: str) -> None:
    assert spelled_as_digits(text) == text


def _check_equivalent(answer: str, form: str, failures: list[str]) -> None:
    evidence = f"The measured value was {answer}."
    for option, stated in ((form, answer), (answer, form)):
        proof = contradiction(option, f"The measured value was {stated}.", stated, "numeric")
        if proof is not None:
            failures.append(f"{option!r} proved false against {stated!r}: {proof.rule}")
    if grade_reply(answer, form).outcome == "wrong":
        failures.append(f"open grader: {form!r} graded wrong for {answer!r}")
    if match_answers(answer, form) == "mismatch":
        failures.append(f"matcher: {form!r} a mismatch for {answer!r}")
    del evidence


def test_generated_equivalent_forms_are_never_false() -> None:
    failures: list[str] = []
    checked = 0
    for answer in _random_answers(400):
        for form in converted_forms(answer) + worded_forms(answer) + decimal_worded_forms(answer):
            checked += 1
            _check_equivalent(answer, form, failures)
    assert checked > 700, checked
    assert failures == []


def test_generated_equivalent_forms_leak_through_the_question() -> None:
    missed = []
    for answer in _random_answers(200):
        for form in converted_forms(answer) + worded_forms(answer) + decimal_worded_forms(answer):
            if answer_leak("How large was the change in the monitored quantity?", f"It changed by {form}.",
                           answer) is None:
                missed.append((answer, form))
    assert missed == []


#: (answer unit, other unit as written, factor into it): conversions a reader rounds
ROUNDED = [("days", "weeks", 1 / 7), ("km", "miles", 0.621371), ("cm", "inches", 0.393701), ("m", "feet", 3.28084),
           ("°C", "°F", 1.8), ("hours", "minutes", 60.0), ("km", "m", 1000.0)]


def _rounded_forms(rng: random.Random, count: int) -> list[tuple[str, str, str]]:
    """(answer, the same value in another unit rounded one digit finer than the answer, another
    value in that unit at the same precision, off by more than the answer's own precision)."""
    out = []
    for _ in range(count):
        unit, other, factor = rng.choice(ROUNDED)
        decimals = rng.choice([0, 1])
        value = round(rng.uniform(1.0, 60.0), decimals)
        answer = f"{value:.{decimals}f} {unit}"
        digits = decimals + 1 + max(0, -int(math.floor(math.log10(factor))))
        same = f"{value * factor:.{digits}f} {other}"
        off = (value + rng.choice([-1, 1]) * rng.uniform(1.5, 4) * 10.0 ** (-decimals)) * factor
        out.append((answer, same, f"{off:.{digits}f} {other}"))
    return out


def test_a_value_in_another_unit_rounded_no_coarser_than_the_answer_leaks_and_another_does_not() -> None:
    """A rounded conversion the reader can take back is a leak ('1.6 weeks' for 11 days, '1.98 °F'
    for a 1.1 °C rise); a different value, or one coarser than the answer ('1 week' for 9 days), is
    no leak: the rule must not fire on a question that states another quantity."""
    missed, false = [], []
    for answer, same, off in _rounded_forms(random.Random(35), 300):
        question = "How large was the change in the monitored quantity?"
        if answer_leak(question, f"It changed by {same}.", answer) is None:
            missed.append((answer, same))
        if answer_leak(question, f"Another quantity changed by {off}.", answer) is not None:
            false.append((answer, off))
    assert missed == [] and false == []
    for answer, coarse in [("9 days", "1 week"), ("0.8 °C", "2 °F"), ("60 km", "40 miles"), ("18%", "4 °C")]:
        assert answer_leak("How much?", f"Over {coarse}.", answer) is None
    for answer, leak in [("11 days", "1.6 weeks"), ("1,1 °C", "1,98 °F"), ("about 60 km", "37.3 miles"),
                         ("0.9 °C", "33.6 °F"), ("9 cm", "3.5 inches"), ("12 см", "4,7 дюйма"),
                         ("60 км", "37,3 мили")]:
        assert answer_leak("How much?", f"It changed by {leak}.", answer) is not None


@pytest.mark.parametrize(("gold", "reply"), [
    ("20.0 ± 1.9 min", "1200 ± 114 s"), ("192 metres", "0.192 km"), ("8.4 Gg", "8400 tonnes"),
    ("30 kyr", "30000 years"), ("0,6 °C", "0.6 K"), ("27%", "twenty-seven percent"),
    ("8 percentage points", "eight percentage points"),
])
def test_open_grader_converts_units_and_reads_words(gold: str, reply: str) -> None:
    assert grade_reply(gold, reply).outcome == "correct"
    assert match_answers(gold, reply) == "match"


@pytest.mark.parametrize(("gold", "reply"), [
    ("30 kyr", "30000 sols"), ("9 days", "12 fortnights and a bit"), ("5 m", "5 furlongs"), ("18%", "18 somethings"),
])
def test_an_unknown_unit_is_undecided_never_wrong(gold: str, reply: str) -> None:
    assert grade_reply(gold, reply).outcome == "undecided"
    assert match_answers(gold, reply) == "undecided"
    assert contradiction(reply, f"The value was {gold}.", gold, "numeric") is None


@pytest.mark.parametrize(("gold", "reply", "decision"), [
    ("27%", "forty percent", "mismatch"), ("27%", "twenty-seven percent", "match"),
    ("27%", "Not stated in the evidence.", "mismatch"), ("Cassiope", "Cannot be determined from the spans.", "mismatch"),
    ("195 см", "В тексте не указано.", "mismatch"), ("Cassiope", "Cassiope", "match"),
    ("0.9 °C", "zero point four degrees Celsius", "mismatch"), ("0.9 °C", "zero point nine degrees Celsius", "match"),
    ("2.6 times", "five point two times", "mismatch"),
    ("0,6 °C", "ноль целых шесть десятых градуса Цельсия", "match"),
    ("0,6 °C", "ноль целых девять десятых градуса Цельсия", "mismatch"),
    # no answer at all: nothing for the verifier to judge equivalent
    ("B7 and B8", "—", "mismatch"), ("18%", "", "mismatch"), ("declined", " ? ", "mismatch"),
    # codes have no synonyms: another set is a mismatch, the same set in any order a match
    ("B7 and B8", "B2 and B3", "mismatch"), ("B7 and B8", "B7", "mismatch"), ("FS-4", "FS-9", "mismatch"),
    ("B7 and B8", "B8 and B7", "match"), ("FS-4", "FS-4", "match"), ("PS-106", "PS106", "match"),
    ("FS 4", "FS-4", "match"),
    ("Salix arctica and Dryas octopetala", "Salix polaris", "mismatch"),
    ("Salix arctica and Dryas octopetala", "D. octopetala and S. arctica", "match"),
    ("Salix arctica and Dryas octopetala", "Arctic willow and mountain avens", "undecided"),
])
def test_matcher_reads_words_and_non_answers(gold: str, reply: str, decision: str) -> None:
    assert match_answers(gold, reply) == decision


def _v1_numeric_golds(arcticqa_v1: Path) -> list[str]:
    items = [json.loads(line) for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    return [str(item["gold_answer"]) for item in items if parse_numbers(str(item["gold_answer"]))]


@pytest.mark.shared
def test_no_equivalent_form_of_a_v1_answer_is_false(arcticqa_v1: Path) -> None:
    failures: list[str] = []
    checked = 0
    for answer in _v1_numeric_golds(arcticqa_v1):
        for form in converted_forms(answer) + worded_forms(answer) + decimal_worded_forms(answer):
            checked += 1
            _check_equivalent(answer, form, failures)
    assert checked > 100, checked
    assert failures == []


def _reorderings(answer: str) -> list[str]:
    """``answer``'s members in another order (joined by "and" and by commas), genus names
    abbreviated ("Salix arctica" → "S. arctica")."""
    members = set_members(answer)
    forms = []
    if len(members) > 1:
        forms += [" and ".join(reversed(members)), ", ".join(members[1:] + members[:1])]
    short = [re.sub(r"^([A-Z])[a-z]+ (?=[a-z]{3,}$)", r"\1. ", m) for m in members]
    if short != members:
        forms.append(" and ".join(short))
    return forms


@pytest.mark.parametrize(("answer", "same", "other"), [
    ("Salix arctica and Dryas octopetala", "Dryas octopetala and Salix arctica", "Salix polaris and Dryas octopetala"),
    ("Salix arctica and Dryas octopetala", "S. arctica and D. octopetala", "S. polaris and D. octopetala"),
    ("B7 and B8", "B8, B7", "B7 and B9"),
    ("Calanus glacialis", "C. glacialis", "C. hyperboreus"),
    ("declined", "decreased", "increased"),
    ("earlier", "advanced", "later"),
])
def test_a_set_in_another_order_and_a_direction_synonym_are_the_answer(answer: str, same: str, other: str) -> None:
    """Found by the red team: 'B8 and B7' for 'B7 and B8' passed the distractor gates and a
    sycophantic option verifier put a second correct option in the item."""
    rejection = check_distractor(answer, same)
    assert rejection is not None and rejection.rule_id == "distractor.equals_answer"
    assert match_answers(answer, same) == "match"
    kept = check_distractor(answer, other)
    assert kept is None or kept.rule_id != "distractor.equals_answer"
    assert match_answers(answer, other) != "match"


@pytest.mark.shared
def test_no_reordering_of_a_v1_set_answer_is_false_or_a_mismatch(arcticqa_v1: Path) -> None:
    items = [json.loads(line) for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    checked, failures = 0, []
    for item in items:
        answer = str(item["gold_answer"])
        if parse_numbers(answer):
            continue
        for form in _reorderings(answer):
            checked += 1
            proof = contradiction(form, f"Only {answer} were found.", answer, "set")
            if proof is not None or match_answers(answer, form) == "mismatch":
                failures.append((answer, form, proof.rule if proof else "mismatch"))
    assert checked > 5, checked
    assert failures == []
