"""Rules that match what the option says, recheck severities, the option-set cue audit, checked
on rule-level examples and on the published ArcticQA v1 release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.gates import check_distractor, contradiction, is_direction_reversal
from arcticqa.gates.distractors import balance_answer_rank
from arcticqa.release.cues import CUE_MIN_ITEMS, audit_cues, wilson_interval
from arcticqa.release.recheck import answer_format_odd
from tests.release_factories import export, make_item

runner = CliRunner()

SET_ANSWER = ("Bacillariophyta (28 species), Miozoa (Dinophyta) (18 species), Ochrophyta (2 species), "
              "Cryptophyta (1 taxon), Haptophyta (1 taxon)")
SET_OPTION = SET_ANSWER.replace("Cryptophyta", "Chlorophyta")


def test_set_answers_compare_as_entity_count_pairs() -> None:
    assert check_distractor(SET_ANSWER, SET_OPTION) is None  # other names, not other numbers
    same_set = SET_ANSWER.replace("Haptophyta (1 taxon)", "Haptophyta (1 taxa)")
    rejection = check_distractor(SET_ANSWER, same_set)
    assert rejection is not None and rejection.rule_id in ("distractor.within_tolerance", "distractor.equals_answer")
    # a count changed for a named member is proved false when the evidence states the answer
    changed = SET_ANSWER.replace("28 species", "35 species")
    proof = contradiction(changed, f"All taxa belonged to five divisions: {SET_ANSWER}.", SET_ANSWER, "set")
    assert proof is not None and proof.rule == "numeric_outside_tolerance"


def test_direction_word_with_the_answers_number_is_a_direction_distractor() -> None:
    question = "What percentage increase in N 15-100 is associated with exposure to high-tDOM waters?"
    assert check_distractor("60%", "A decrease of 60%", question=question) is None
    assert check_distractor("60%", "An increase of 60.2%", question=question) is not None  # same direction
    proof = contradiction("A decrease of 60%", f"{question}\nN 15-100 rose by 60%.", "60%", "numeric")
    assert proof is not None and proof.rule == "direction_reversal"


@pytest.mark.parametrize(("answer", "option"), [
    ("на 0,01–0,04 м в. э. в год больше", "на 0,01–0,04 м в. э. в год меньше"),
    ("температура выше", "температура ниже"),
    ("увеличение площади", "уменьшение площади"),
    ("рост численности", "снижение численности"),
    ("потепление", "похолодание"),
    ("начался раньше", "начался позже"),
    ("more than doubled", "more than halved"),
])
def test_direction_antonyms_beyond_english(answer: str, option: str) -> None:
    assert is_direction_reversal(answer, option) is True
    assert is_direction_reversal(answer, answer) is False
    assert check_distractor(answer, option) is None


def test_mixed_directions_are_not_comparable() -> None:
    assert is_direction_reversal("в мае уменьшился, а в ноябре увеличился", "увеличился во все месяцы") is None
    assert is_direction_reversal("не увеличился", "увеличился") is True


def test_duplicates_and_variants_at_precision() -> None:
    dup = check_distractor("17.9 %", "23 %", ["15 %", "22.7 %"])
    assert dup is not None and dup.rule_id == "distractor.duplicate"  # 22.7 is 23 at its precision
    assert check_distractor("2.018 ppm", "2 ppm") is not None  # the answer at the option's precision
    variant = check_distractor("0.34 ± 0.15 lower", "0.34 ± 0.10 lower")
    assert variant is not None and variant.rule_id == "distractor.equals_answer"
    assert check_distractor("17.9 %", "28.3 %", ["15.0 %", "9.9 %"]) is None


def test_format_parity_is_an_error_only_when_the_answer_is_odd() -> None:
    assert answer_format_odd("97%", ["87%", "0.7%", "1.6%", "0.3%"]) is None  # nothing singles out 97%
    assert answer_format_odd("99.27%", ["84%", "92.70%", "97.85%", "95.50%"]) is None
    assert answer_format_odd("14.2%", ["14%", "23%", "7%", "28%"]) == "the answer is the only option with decimals"
    assert answer_format_odd("42 m", ["40", "45", "50", "38"]) == "the answer is the only option with a unit"
    assert answer_format_odd("Cassiope", ["Silene", "Dryas"]) is None


def test_cue_audit_scores_ties_fairly_and_flags_a_middle_cue() -> None:
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-3) and high == pytest.approx(0.7634, abs=1e-3)
    middle = [("How much?", ["18", "9", "14", "27", "36"], 0)] * CUE_MIN_ITEMS
    results = {r.strategy: r for r in audit_cues(middle)}
    assert results["middle numeric value"].accuracy == 1.0 and results["middle numeric value"].chance == pytest.approx(0.2)
    assert results["middle numeric value"].severity == "error"
    assert results["extreme numeric value"].accuracy == 0.0
    balanced = [("How much?", opts, 0) for opts in (["9", "14", "18", "27"], ["14", "9", "18", "27"],
                                                    ["18", "9", "14", "27"], ["27", "9", "14", "18"])]
    spread = {r.strategy: r for r in audit_cues(balanced * 10)}["middle numeric value"]
    assert spread.accuracy == pytest.approx(0.25) and spread.severity is None
    few = {r.strategy: r for r in audit_cues(middle[:5])}["middle numeric value"]
    assert few.severity == "warning"


def test_recheck_on_the_published_release(arcticqa_v1: Path) -> None:
    result = runner.invoke(app, ["validate-release", str(arcticqa_v1), "--recheck", "--json"])
    assert result.exit_code == 2, result.output  # real defects make the release invalid
    records = [json.loads(line) for line in result.stdout.splitlines() if line.strip().startswith("{")]
    flags = [r for r in records if "item_id" in r]
    assert flags and all(r["severity"] in ("error", "warning") for r in flags)
    errors = {(r["item_id"], r["option_rank"], r["rule_id"]) for r in flags if r["severity"] == "error"}
    # options a reader sees as clearly wrong are not flagged (a set answer, a % beside a %, больше/меньше)
    for item_id, rank in [("aqa-045259006a74fb22b627", 0), ("aqa-055b7890d47481779018", 0),
                          ("aqa-ee4c44e31fb4b75f07c1", 0), ("aqa-11b24e2f07b6e96e98cb", 1)]:
        assert not any(e[0] == item_id and e[1] == rank for e in errors), item_id
    # the real defects are still errors
    assert ("aqa-173bc3300f366771b964", None, "question.not_standalone") in errors  # "our period of record"
    assert ("aqa-d6ab0fab85965a057672", 1, "distractor.equals_answer") in errors  # 2 ppm vs 2.018 ppm
    assert ("aqa-8070072f4cb8c995e496", 0, "distractor.equals_answer") in errors  # 0.34 ± 0.10 lower
    assert ("aqa-5903b596b017f0d4310e", 3, "distractor.duplicate") in errors  # 23 % vs 22.7 %
    format_flags = [r for r in flags if r["rule_id"] == "distractor.format_mismatch"]
    assert format_flags and all(r["severity"] == "warning" for r in format_flags)
    cues = [r["cue_audit"] for r in records if "cue_audit" in r]
    assert {c["strategy"] for c in cues} >= {"middle numeric value", "odd format"}
    # at least three in four published distractors are proved false by a rule, not left to a model
    (coverage,) = [r["deterministic_coverage"] for r in records if "deterministic_coverage" in r]
    assert coverage["distractors"] == 776 and coverage["proved"] >= 0.75 * 776


def test_numeric_distractors_spread_the_answers_rank() -> None:
    candidates = ["9", "27", "36", "14", "13", "24", "30", "5"]  # writer order, both sides of 18
    seen = []
    for key in range(200):
        order = balance_answer_rank("18", candidates, f"item-{key}")
        assert sorted(order) == list(range(len(candidates)))  # a reordering, nothing lost
        first = [float(candidates[i]) for i in order[:4]]
        seen.append(sum(v < 18 for v in first))
    assert balance_answer_rank("18", candidates, "item-7") == balance_answer_rank("18", candidates, "item-7")
    counts = [seen.count(k) for k in range(5)]
    assert all(25 <= c <= 55 for c in counts), counts  # about 40 each of 0..4 below the answer
    # one side too short: clamped to what exists; no numbers: the writer's order stands
    clamped = balance_answer_rank("18", ["27", "36", "30", "24", "9"], "k")
    assert sum(float(["27", "36", "30", "24", "9"][i]) < 18 for i in clamped[:4]) <= 1
    assert balance_answer_rank("Cassiope", ["Silene", "Dryas"], "k") == [0, 1]


def test_release_card_carries_the_cue_audit(tmp_path: Path) -> None:
    out = export([make_item(n) for n in range(1, 4)], tmp_path / "rel")
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "### Option-set cue audit" in card and "| middle numeric value |" in card
