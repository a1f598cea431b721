"""Parsers, outcome classes, metrics and the option-order scheme."""

from __future__ import annotations

import pytest

from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.arcticabstain.metrics import OutcomeCounts
from arcticqa.evaluate.arcticabstain.parse import (
    CAUSE_FORMAT,
    CAUSE_INFRASTRUCTURE,
    CAUSE_REFUSAL,
    ShownOption,
    outcome_of,
    parse_lenient,
    parse_strict,
    score_reply,
)
from arcticqa.evaluate.arcticabstain.prompt import build_call, load_prompt

LETTERS = "ABCDE"
OPTIONS = [ShownOption("A", "distractor", "x"), ShownOption("B", "gold", "g"), ShownOption("C", "abstain", "I"),
           ShownOption("D", "distractor", "y"), ShownOption("E", "distractor", "z")]


@pytest.mark.parametrize("text,letter", [("B", "B"), (" B", "B"), ("B\n", "B"), ("\tE ", "E"),
                                         ("F", None), ("b", None), ("AB", None), ("B.", None), ("", None),
                                         (None, None), ("reason\n\nA", None)])
def test_strict(text: str | None, letter: str | None) -> None:
    assert parse_strict(text, LETTERS) == letter


@pytest.mark.parametrize("text,letter", [("Answer: B", "B"), ("(B)", "B"), ("B.", "B"), ("**B**", "B"),
                                         ("The answer is C", "C"), ("reason here\n\nA", "A"), ("B", "B"),
                                         ("F.", None), ("A or B", None), ("I think so", None), ("a", None)])
def test_lenient(text: str, letter: str | None) -> None:
    assert parse_lenient(text, LETTERS) == letter


def test_outcome_classes() -> None:
    assert [outcome_of("answer_present", k) for k in ("gold", "distractor", "abstain")] == ["N1", "N2", "N3"]
    assert [outcome_of("answer_absent", k) for k in ("distractor", "abstain")] == ["N4", "N5"]
    assert outcome_of("answer_absent", None) == "N0"
    with pytest.raises(ValueError):
        outcome_of("answer_absent", "gold")


def test_score_reply_records_parser_and_cause() -> None:
    strict = score_reply("answer_present", OPTIONS, " B")
    assert (strict.outcome, strict.chosen_kind, strict.parser, strict.cause) == ("N1", "gold", "strict", None)
    lenient = score_reply("answer_present", OPTIONS, "Answer: C")
    assert (lenient.outcome, lenient.cause, lenient.parser, lenient.lenient_outcome) == \
        ("N0", CAUSE_FORMAT, "lenient", "N3")
    assert score_reply("answer_present", OPTIONS, None, failure="infrastructure").cause == CAUSE_INFRASTRUCTURE
    assert score_reply("answer_present", OPTIONS, "policy text", failure="refusal").cause == CAUSE_REFUSAL


def test_metrics_from_counts() -> None:
    c = OutcomeCounts([2, 10, 5, 3, 6, 4])
    assert c.valid == 28 and c.responses == 30
    assert c.acc == pytest.approx(14 / 28)
    assert c.precision_abs == pytest.approx(4 / 7)
    assert c.recall_abs == pytest.approx(4 / 15)
    assert c.f1_abs == pytest.approx(2 * (4 / 7) * (4 / 15) / (4 / 7 + 4 / 15))
    assert c.abstention_rate == pytest.approx(7 / 28)
    assert c.r_acc == pytest.approx(10 / 21)
    assert c.present_abstention == pytest.approx(3 / 18) and c.absent_abstention == pytest.approx(0.4)
    assert c.shift == pytest.approx(0.4 - 3 / 18)
    assert OutcomeCounts().acc == 0.0


ITEM = EvalItem("aqa-1", "Which?", "", "gold text", ("d0", "d1", "d2", "d3"))


def test_calls_are_deterministic_and_depend_on_every_seed_part() -> None:
    prompt = load_prompt()
    a = build_call(ITEM, "answer_present", 1, "m", prompt)
    assert a == build_call(ITEM, "answer_present", 1, "m", prompt)
    assert {o.text for o in a.options} == {"gold text", "d0", "d1", "d2", "I abstain from answering"}
    absent = build_call(ITEM, "answer_absent", 1, "m", prompt)
    assert {o.kind for o in absent.options} == {"distractor", "abstain"} and len(absent.options) == 5
    seeds = {build_call(ITEM, "answer_present", t, m, prompt, eval_set=s).order_seed
             for t in (1, 2) for m in ("m", "n") for s in ("s1", "s2")}
    assert len(seeds) == 8
    assert "QUESTION_CONTEXT\n(none)\n" in a.user_text
    assert "\n".join(f"{o.letter}. {o.text}" for o in a.options) in a.user_text
    assert a.messages[0]["content"] == prompt.system_text
