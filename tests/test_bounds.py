"""Bounds and ranges are evaluated against the answer: one that holds for it is a second correct
option (``distractor.true_for_answer``) and is never proved false; one that cannot hold is proved
false (``bound_excludes_answer``) or left undecided, never taken for true.

The property tests draw answers and bounds/ranges (English and Russian wording, symbols, units pint
converts, the decimal comma) from a seeded generator: the same few hundred cases every run.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from arcticqa.gates import check_distractor, contradiction
from arcticqa.gates.bounds import bound_verdict, read_interval
from arcticqa.gates.distractors import TRUE_FOR_ANSWER

# (answer unit, [(option unit, factor from the answer's unit to it)], Russian?)
_UNITS: list[tuple[str, list[tuple[str, float]], bool]] = [
    ("days", [("days", 1.0), ("weeks", 1 / 7), ("hours", 24.0)], False),
    ("m", [("m", 1.0), ("km", 1e-3), ("cm", 100.0), ("metres", 1.0)], False),
    ("min", [("min", 1.0), ("seconds", 60.0), ("minutes", 1.0)], False),
    ("%", [("%", 1.0)], False),
    ("t", [("t", 1.0), ("kg", 1e3), ("tonnes", 1.0)], False),
    ("дней", [("дней", 1.0), ("суток", 1.0)], True),
    ("м", [("м", 1.0), ("км", 1e-3), ("см", 100.0)], True),
    ("%", [("%", 1.0), ("процентов", 1.0)], True),
]
_EN_BELOW = ["less than {x}", "fewer than {x}", "below {x}", "under {x}", "< {x}", "<{x}", "≤ {x}", "up to {x}",
             "at most {x}", "no more than {x}", "{x} or less"]
_EN_ABOVE = ["more than {x}", "over {x}", "above {x}", "exceeding {x}", "> {x}", "≥ {x}", "at least {x}",
             "no less than {x}", "greater than {x}", "{x} or more"]
_EN_RANGE = ["between {lo} and {hi}", "from {lo} to {hi}", "{lo}–{hi}", "{lo}-{hi}", "{lo} to {hi}"]
_RU_BELOW = ["менее {x}", "меньше {x}", "не более {x}", "не больше {x}", "до {x}", "< {x}", "≤ {x}"]
_RU_ABOVE = ["более {x}", "больше {x}", "свыше {x}", "не менее {x}", "{x} или более", "> {x}", "≥ {x}"]
_RU_RANGE = ["от {lo} до {hi}", "между {lo} и {hi}", "{lo}–{hi}"]


def _fmt(value: float, russian: bool, rng: random.Random) -> str:
    """Three significant digits (fewer when whole), with the decimal comma in Russian text and,
    where it cannot read as a thousands group, sometimes in English too."""
    text = f"{value:.3g}" if abs(value) < 1000 else f"{round(value)}"
    if "e" in text:
        text = f"{value:.6f}".rstrip("0").rstrip(".")
    if "." in text and (russian or (len(text.split(".")[1]) != 3 and rng.random() < 0.3)):
        text = text.replace(".", ",")
    return text


def _answer(rng: random.Random) -> tuple[str, float, str, list[tuple[str, float]], bool]:
    unit, targets, russian = rng.choice(_UNITS)
    value = rng.choice([rng.randint(2, 90), round(rng.uniform(2, 90), 1)])
    written = _fmt(value, russian, rng)
    return f"{written} {unit}" if unit != "%" else f"{written}%", value, unit, targets, russian


def _quantity(value: float, unit: str, rng: random.Random, russian: bool) -> str:
    written = _fmt(value, russian, rng)
    return f"{written}%" if unit == "%" else f"{written} {unit}"


def _options(rng: random.Random, truth: bool) -> list[tuple[str, str]]:
    """(answer, option) pairs: bounds and ranges that hold for the answer (``truth``) or cannot."""
    out = []
    for _ in range(300):
        answer, value, _, targets, russian = _answer(rng)
        unit, factor = rng.choice(targets)
        k = rng.uniform(1.5, 3.0)
        kind = rng.choice(["below", "above", "range"])
        below, above, ranges = (_RU_BELOW, _RU_ABOVE, _RU_RANGE) if russian else (_EN_BELOW, _EN_ABOVE, _EN_RANGE)
        if kind == "range":
            if truth:
                lo, hi = value / k, value * rng.uniform(1.5, 3.0)
            elif rng.random() < 0.5:
                lo, hi = value * k, value * k * 1.5
            else:
                lo, hi = value / (k * 1.5), value / k
            lo_text, hi_text = _fmt(lo * factor, russian, rng), _quantity(hi * factor, unit, rng, russian)
            option = rng.choice(ranges).format(lo=lo_text, hi=hi_text)
        else:
            x = value * k if (kind == "below") == truth else value / k
            option = rng.choice(below if kind == "below" else above).format(x=_quantity(x * factor, unit, rng, russian))
        out.append((answer, option))
    return out


def _evidence(answer: str) -> str:
    # comparison words that a direction rule could misread as the option's direction
    return f"The mean was {answer}, more than in the previous decade and less than the model predicted."


@pytest.mark.parametrize("answer,option", [
    ("9 days", "less than 18 days"), ("27%", "more than 14%"), ("9 days", "between 5 and 12 days"),
    ("27%", "at least 20%"), ("9 days", "up to 10 days"), ("9 days", "less than 2 weeks"),
    ("9 дней", "менее 18 дней"), ("27%", "более 14%"), ("9 дней", "не более 10 дней"), ("9 дней", "свыше 5 дней"),
    ("9 дней", "от 5 до 12 дней"), ("9 days", "< 18 days"), ("9 days", "≥ 5 days"), ("0,6 °C", "менее 1,2 °C"),
    ("9 days", "at least 9 days"), ("9 days", "18 days or less"), ("20.0 ± 1.9 min", "less than 30 min"),
    ("9 days", "less than eighteen days"), ("more than 50%", "more than 40%"), ("5–12 days", "between 3 and 15 days"),
])
def test_a_bound_true_for_the_answer_is_a_second_correct_option(answer: str, option: str) -> None:
    assert bound_verdict(answer, option) is True
    rejection = check_distractor(answer, option)
    assert rejection is not None and rejection.rule_id == TRUE_FOR_ANSWER.id
    assert contradiction(option, _evidence(answer), answer, "numeric") is None


@pytest.mark.parametrize("answer,option", [
    ("9 days", "less than 5 days"), ("27%", "more than 40%"), ("9 days", "between 10 and 12 days"),
    ("9 дней", "от 10 до 12 дней"), ("27%", "> 40%"), ("9 дней", "14 дней или более"), ("9 days", "5 days or less"),
    ("more than 50%", "less than 30%"), ("9–17 years", "600–1,100 years"), ("0,6 °C", "более 1,2 °C"),
])
def test_a_bound_false_for_the_answer_is_proved_false(answer: str, option: str) -> None:
    assert bound_verdict(answer, option) is False
    assert check_distractor(answer, option) is None or check_distractor(answer, option).rule_id != TRUE_FOR_ANSWER.id
    proof = contradiction(option, _evidence(answer), answer, "numeric")
    assert proof is not None and proof.rule == "bound_excludes_answer", proof


@pytest.mark.parametrize("answer,option", [
    ("9 days", "less than 9 days"),  # the answer may be a rounded 8.7: not provable either way
    ("9 days", "~18 days"), ("9 days", "about 5 days"),  # an approximation is no bound
    ("9 days", "less than 1 week"),  # "1 week" is written to half a week: 9 − 7 days is within that margin
    ("20.0 ± 1.9 min", "less than 21 min"), ("more than 50%", "less than 60%"), ("more than 50%", "more than 50%"),
    ("5–12 days", "5–12 days"), ("34–35 psu", "35–36 psu"), ("27% increase", "more than 14% decrease"),
    ("9 days", "less than 18 sols"), ("9 days", "more than 5 km"),
])
def test_a_borderline_or_other_claim_is_left_undecided(answer: str, option: str) -> None:
    assert bound_verdict(answer, option) is None
    rejection = check_distractor(answer, option)
    assert rejection is None or rejection.rule_id != TRUE_FOR_ANSWER.id
    proof = contradiction(option, _evidence(answer), answer, "numeric")
    assert proof is None or proof.rule != "bound_excludes_answer"


def test_another_stated_value_that_satisfies_the_bound_blocks_the_proof() -> None:
    evidence = "The ice-free season lasted 9 days at the coast and 3 days inland."
    assert contradiction("less than 5 days", evidence, "9 days", "numeric") is None
    assert contradiction("less than 5 days", "The ice-free season lasted 9 days.", "9 days", "numeric") is not None


def test_the_evidence_must_state_the_answer() -> None:
    assert contradiction("less than 5 days", "The season was long.", "9 days", "numeric") is None


def _check_all(pairs: list[tuple[str, str]], check: Callable[[str, str], None]) -> None:
    failures = []
    for answer, option in pairs:
        try:
            check(answer, option)
        except AssertionError as exc:
            failures.append(f"{answer!r} / {option!r}: {exc}")
    assert not failures, "\n".join(failures[:20])


def test_generated_true_bounds_are_rejected_and_never_proved_false() -> None:
    pairs = _options(random.Random(20261207), truth=True)

    def check(answer: str, option: str) -> None:
        assert read_interval(option) is not None, "not read as a bound or range"
        assert bound_verdict(answer, option) is True, "not read as true"
        rejection = check_distractor(answer, option)
        assert rejection is not None and rejection.rule_id == TRUE_FOR_ANSWER.id, rejection
        assert contradiction(option, _evidence(answer), answer, "numeric") is None, "proved false"

    _check_all(pairs, check)


def test_generated_false_bounds_are_proved_false_or_undecided_never_true() -> None:
    pairs = _options(random.Random(7122026), truth=False)
    proved = 0

    def check(answer: str, option: str) -> None:
        nonlocal proved
        assert bound_verdict(answer, option) is not True, "read as true"
        rejection = check_distractor(answer, option)
        assert rejection is None or rejection.rule_id != TRUE_FOR_ANSWER.id, "rejected as true"
        proof = contradiction(option, _evidence(answer), answer, "numeric")
        proved += proof is not None

    _check_all(pairs, check)
    assert proved >= 0.95 * len(pairs), f"only {proved} of {len(pairs)} proved false"


def _v1_items(arcticqa_v1: Path) -> list[dict]:
    return [json.loads(line) for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]


def test_no_published_answer_is_decided_against_itself(arcticqa_v1: Path) -> None:
    items = _v1_items(arcticqa_v1)
    assert len(items) == 194
    for item in items:
        gold = item["gold_answer"]
        assert bound_verdict(gold, gold) is None, gold
        rejection = check_distractor(gold, gold)
        assert rejection is None or rejection.rule_id != TRUE_FOR_ANSWER.id, gold


def test_published_distractors_against_the_bound_rules(arcticqa_v1: Path) -> None:
    """No v1 distractor is a bound or range true for its answer; 33 (disjoint ranges, and two
    bounds below a range: '<0.5%' for '3–5%', 'less than 6 hours' for 'between 8 and 9 hours')
    are proved false by ``bound_excludes_answer``."""
    true_bounds, proved = [], 0
    for item in _v1_items(arcticqa_v1):
        evidence = "\n".join([item["question"], item["question_context"], item["gold_answer"]])
        for d in item["distractors"]:
            if bound_verdict(item["gold_answer"], d["text"]) is True:
                true_bounds.append((item["gold_answer"], d["text"]))
            proof = contradiction(d["text"], evidence, item["gold_answer"], "numeric" if item["numeric_answer"] else "other")
            proved += proof is not None and proof.rule == "bound_excludes_answer"
    assert true_bounds == []
    assert proved >= 33
