"""ArcticAbstain prompt variants (``--variants``): ids, calls, the parser over the v1 options, runs
through the loopback server with scripted policies whose per-variant results are known, resume per
variant, and the robustness report (spread, ranking flips)."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import random
import sqlite3
import statistics
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.config import EvalModel, VariantPlanSettings
from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import EvalItem, abstain_slot, load_items
from arcticqa.evaluate.arcticabstain.metrics import OutcomeCounts
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, score_reply
from arcticqa.evaluate.arcticabstain.prompt import (
    ABSTAIN_POSITIONS,
    INSTRUCTIONS,
    LABEL_SETS,
    build_call,
    load_prompt,
    load_variant,
    parse_variant_id,
    plan_calls,
    variant_id,
)
from arcticqa.evaluate.arcticabstain.records import ResponseRecord
from arcticqa.evaluate.arcticabstain.report import StatsSettings, build_report, figure_1, write_report
from arcticqa.evaluate.arcticabstain.variants import (
    build_variant_report,
    plan_ids,
    read_plan_file,
    render_variants_md,
    resolve_variants,
    write_variant_report,
)
from arcticqa.evaluate.policies import policy_responder
from arcticqa.evaluate.runner import RunResult, run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins.replies import Reply, Response
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine

FAST = StatsSettings(resamples=300, draws=300)
runner = CliRunner()


def _items(n: int) -> list[EvalItem]:
    return [EvalItem(f"q-{i:03d}", f"Question number {i}?", "" if i % 2 else f"Context {i}.", f"gold {i}",
                     (f"d0 {i}", f"d1 {i}", f"d2 {i}", f"d3 {i}")) for i in range(n)]


def _model(label: str, url: str) -> EvalModel:
    return EvalModel(label=label, model=label, base_url=url, api_key_env=None, max_concurrency=8, max_retries=1,
                     backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)


def _responder(items: list[EvalItem]) -> Any:
    """The reference policies, plus ``always-A``: the letter A whatever the labels are."""
    policies = policy_responder({it.question: it.gold_answer for it in items})

    def respond(body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        if body.get("model") == "always-A":
            return Reply(content="A", completion_tokens=1)
        return policies(body, headers)

    return respond


def _run(items: list[EvalItem], labels: list[str], db: Path, variants: tuple[str, ...], *, trials: int,
         resume: bool = False) -> RunResult:
    engine = make_engine(f"sqlite:///{db}")
    live = ARCTICABSTAIN.live(RunOptions(trials=trials, variants=variants), items=items)
    with FakeOpenAIServer(_responder(items)) as server:
        return asyncio.run(run_protocol(live, [_model(m, server.base_url) for m in labels], engine, resume=resume))


def _counts(records: list[ResponseRecord], model: str, variant: str) -> dict[str, int]:
    found = {f"N{i}": 0 for i in range(6)}
    for r in records:
        if r.model == model and r.variant == variant:
            found[r.outcome] += 1
    return found


# -- ids and prompts -------------------------------------------------------------------------------

def test_the_published_instruction_with_letters_is_the_published_prompt_byte_for_byte() -> None:
    published = load_prompt()
    for position in ("first", "last"):
        assert load_variant(f"published.letters.{position}").prompt.system_text == published.system_text
    numbers = load_variant("published.numbers.shuffled").prompt
    assert "one number from this list: 1, 2, 3, 4, or 5." in numbers.system_text
    assert numbers.letters == "12345"


@pytest.mark.parametrize("instruction", list(INSTRUCTIONS))
def test_every_bundled_instruction_names_its_labels_and_keeps_the_published_user_turn(instruction: str) -> None:
    published = load_prompt()
    for labels, (letters, kind) in LABEL_SETS.items():
        prompt = load_variant(variant_id(instruction, labels, "last")).prompt
        assert "{label" not in prompt.system_text and kind in prompt.system_text
        assert all(label in prompt.system_text for label in letters)
        assert prompt.user_template == published.user_template
        assert prompt.abstention_option_text == published.abstention_option_text


def test_variant_ids_parse_back_to_what_made_them() -> None:
    for instruction in INSTRUCTIONS:
        for labels in LABEL_SETS:
            for position in ABSTAIN_POSITIONS:
                for seed in (0, 7):
                    made = variant_id(instruction, labels, position, seed)
                    expected_seed = seed if position == "seeded" else 0
                    assert parse_variant_id(made) == (instruction, labels, position, expected_seed)
    assert variant_id("published", "letters", "shuffled") == "published"


@pytest.mark.parametrize("bad", ["", "nope", "nope.letters.last", "brief.roman.last", "brief.letters.middle",
                                 "brief.letters.seeded", "brief.letters.last-2", "published.letters.shuffled",
                                 "a.b.c.d"])
def test_a_bad_variant_id_is_a_config_error_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError, match="variant"):
        parse_variant_id(bad)


def test_a_plan_is_the_cross_product_or_the_explicit_list_with_the_reference_first() -> None:
    plan = VariantPlanSettings(instructions=["published", "brief"], labels=["letters", "numbers"],
                               abstain_positions=["shuffled", "seeded"], seed=3)
    assert plan_ids(plan) == ["published", "published.letters.seeded-3", "published.numbers.shuffled",
                              "published.numbers.seeded-3", "brief.letters.shuffled", "brief.letters.seeded-3",
                              "brief.numbers.shuffled", "brief.numbers.seeded-3"]
    assert plan_ids(VariantPlanSettings(ids=["brief.numbers.last"])) == ["published", "brief.numbers.last"]
    assert resolve_variants("brief.numbers.last, reworded.letters.first", plan) == [
        "brief.numbers.last", "reworded.letters.first"]
    assert resolve_variants("plan", plan) == plan_ids(plan)


# -- calls -----------------------------------------------------------------------------------------

def test_the_reference_variant_plans_exactly_the_calls_of_a_run_without_variants() -> None:
    items, prompt = _items(6), load_prompt()
    plain = plan_calls(items, "m", prompt, trials=2, eval_set="s")
    via = plan_calls(items, "m", prompt, trials=2, eval_set="s", variants=[load_variant("published")])
    assert plain == via


def test_a_variant_keeps_the_reference_order_and_moves_only_what_it_names() -> None:
    item, prompt = _items(1)[0], load_prompt()
    for condition in CONDITIONS:
        reference = build_call(item, condition, 1, "m", prompt)
        listed = [o.option_id for o in reference.options if o.kind != "abstain"]
        for position, slot in (("first", 0), ("last", 4), ("seeded", abstain_slot(item.item_id, 5))):
            for labels, (letters, _) in LABEL_SETS.items():
                variant = load_variant(variant_id("brief", labels, position, 5))
                call = build_call(item, condition, 1, "m", prompt, variant=variant)
                assert [o.letter for o in call.options] == list(letters)
                assert call.options[slot].kind == "abstain"
                assert [o.option_id for o in call.options if o.kind != "abstain"] == listed
                assert call.eval_set == f"arcticqa@{variant.id}" and call.order_seed == reference.order_seed
                assert call.variant_details is not None and call.variant_details["variant"] == variant.id


# -- the parser over the v1 items' real options ------------------------------------------------------

_WRAPPINGS = ("{}", " {}\n", "{}.", "({})", "**{}**", "Answer: {}", "The answer is {}", "Option {}")


@pytest.mark.shared
def test_the_label_asked_for_is_read_as_that_option_over_every_v1_item(arcticqa_v1: Path) -> None:
    """Every v1 item, both conditions, 2 trials, 6 variants: the correct option's label (bare for the
    strict parser, wrapped for the lenient one) is graded correct; every other label is not."""
    items, prompt = load_items(arcticqa_v1 / "items.jsonl"), load_prompt()
    variants = [load_variant(v) for v in ("published", "published.numbers.shuffled", "reworded.numbers.last",
                                          "brief.letters.first", "checklist.numbers.seeded-11",
                                          "reworded.letters.seeded-11")]
    checked = 0
    for variant in variants:
        for call in plan_calls(items, "model-x", prompt, trials=2, eval_set="arcticqa-v1", variants=[variant]):
            right = "N1" if call.condition == "answer_present" else "N5"
            target = "gold" if call.condition == "answer_present" else "abstain"
            for option in call.options:
                for wrapping in _WRAPPINGS:
                    scored = score_reply(call.condition, call.options, wrapping.format(option.letter))
                    assert (scored.lenient_outcome == right) == (option.kind == target), (call.item.item_id, option)
                bare = score_reply(call.condition, call.options, option.letter)
                assert (bare.outcome == right) == (option.kind == target)
                checked += 1
    assert checked == 194 * 2 * 2 * 6 * 5  # every option of every call


@pytest.mark.shared
def test_a_letter_reply_to_a_numbered_prompt_is_never_graded(arcticqa_v1: Path) -> None:
    items, prompt = load_items(arcticqa_v1 / "items.jsonl"), load_prompt()
    variant = load_variant("published.numbers.shuffled")
    for call in plan_calls(items[:40], "m", prompt, trials=1, eval_set="x", variants=[variant]):
        for reply in "ABCDE":
            assert score_reply(call.condition, call.options, reply).outcome == "N0"


# -- runs through the loopback server ---------------------------------------------------------------

_VARIANTS = ("published", "published.letters.first", "published.letters.last", "published.numbers.last",
             "brief.numbers.seeded-3")


@pytest.fixture(scope="module")
def variant_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[EvalItem], Path, RunResult]:
    items, db = _items(12), tmp_path_factory.mktemp("variants") / "v.db"
    labels = ["always-abstain", "first-option", "always-A", "oracle"]
    return items, db, _run(items, labels, db, _VARIANTS, trials=2)


def test_scripted_policies_give_the_known_result_of_every_variant(
        variant_run: tuple[list[EvalItem], Path, RunResult]) -> None:
    items, db, result = variant_run
    assert result.recorded == 4 * len(_VARIANTS) * 12 * 2 * 2 and result.skipped == 0
    records = ARCTICABSTAIN.records_from_store(make_engine(f"sqlite:///{db}"), variant=None)
    per_condition = 12 * 2
    for variant in _VARIANTS:
        # always abstaining is invariant: every present call N3, every absent call N5
        assert _counts(records, "always-abstain", variant) == {
            "N0": 0, "N1": 0, "N2": 0, "N3": per_condition, "N4": 0, "N5": per_condition}
        assert _counts(records, "oracle", variant)["N1"] == per_condition
    # the first label listed is the abstain option when it is listed first
    assert _counts(records, "first-option", "published.letters.first")["N3"] == per_condition
    assert _counts(records, "first-option", "published.letters.first")["N5"] == per_condition
    # listed last it is never the first label: the absent condition is all N4, and the present
    # condition is N1 exactly when the gold answer leads the published order without the abstain option
    # (the order is seeded by the model's label, so it is first-option's own reference rows)
    reference_rows = [r for r in _published_rows(db) if r["condition"] == "answer_present"
                      and r["model"] == "first-option"]
    gold_leads = sum(1 for r in reference_rows if [o for o in r["options"] if o["kind"] != "abstain"][0]["kind"]
                     == "gold")
    for variant in ("published.letters.last", "published.numbers.last"):
        counts = _counts(records, "first-option", variant)
        assert (counts["N1"], counts["N2"], counts["N3"], counts["N4"], counts["N5"]) == (
            gold_leads, per_condition - gold_leads, 0, per_condition, 0)
    # seeded: abstains exactly on the items whose abstain slot is 0 (both conditions, every trial)
    slot_zero = sum(1 for it in items if abstain_slot(it.item_id, 3) == 0)
    seeded = _counts(records, "first-option", "brief.numbers.seeded-3")
    assert (seeded["N3"], seeded["N5"]) == (2 * slot_zero, 2 * slot_zero)
    # replying "A" is a valid label with letters and a format violation with numbers
    assert _counts(records, "always-A", "published.numbers.last")["N0"] == 2 * per_condition
    assert _counts(records, "always-A", "brief.numbers.seeded-3")["N0"] == 2 * per_condition
    always_a = _counts(records, "always-A", "published.letters.last")
    assert (always_a["N0"], always_a["N3"], always_a["N4"], always_a["N5"]) == (0, 0, per_condition, 0)


def _published_rows(db: Path) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        rows = connection.execute("SELECT model, condition, options, details FROM eval_response WHERE eval_set = ?",
                                  ("arcticqa",)).fetchall()
    return [{"model": r["model"], "condition": r["condition"], "options": json.loads(r["options"]), "details": r["details"]}
            for r in rows]


def test_rows_carry_their_variant_and_the_paper_tables_read_the_reference_only(
        variant_run: tuple[list[EvalItem], Path, RunResult]) -> None:
    _, db, _ = variant_run
    engine = make_engine(f"sqlite:///{db}")
    assert all(r["details"] is None for r in _published_rows(db))
    every = ARCTICABSTAIN.records_from_store(engine, variant=None)
    assert {r.variant for r in every} == set(_VARIANTS)
    reference = ARCTICABSTAIN.records_from_store(engine)
    assert {r.variant for r in reference} == {"published"} and len(reference) == 4 * 12 * 2 * 2


def test_the_reference_variant_through_the_new_path_gives_the_same_tables(tmp_path: Path) -> None:
    items, labels = _items(10), ["random", "first-option", "oracle", "always-abstain"]
    _run(items, labels, tmp_path / "plain.db", (), trials=2)
    _run(items, labels, tmp_path / "plan.db", ("published", "reworded.numbers.last"), trials=2)
    written = []
    for name in ("plain", "plan"):
        records = ARCTICABSTAIN.records_from_store(make_engine(f"sqlite:///{tmp_path / name}.db"), models=labels)
        report = build_report(records, settings=FAST, source="run", models=labels)
        written.append(write_report(report, tmp_path / f"rep-{name}", figure=False).out_dir)
    texts = sorted(p.name for p in written[0].iterdir())
    assert texts == sorted(p.name for p in written[1].iterdir()) and "TABLES.md" in texts
    for name in texts:
        assert (written[0] / name).read_bytes() == (written[1] / name).read_bytes(), name


def test_resume_runs_only_the_missing_variants(tmp_path: Path) -> None:
    items, db = _items(5), tmp_path / "r.db"
    first = _run(items, ["first-option"], db, ("published", "brief.letters.last"), trials=1)
    assert first.recorded == 2 * 5 * 2
    with pytest.raises(Exception, match="already recorded"):
        _run(items, ["first-option"], db, ("published", "brief.letters.last", "brief.numbers.first"), trials=1)
    again = _run(items, ["first-option"], db, ("published", "brief.letters.last", "brief.numbers.first"), trials=1,
                 resume=True)
    assert (again.recorded, again.skipped, again.planned) == (5 * 2, 2 * 5 * 2, 3 * 5 * 2)


# -- the robustness report ----------------------------------------------------------------------

def _synthetic(model: str, variant: str, n1: int, n: int = 50) -> list[ResponseRecord]:
    return [ResponseRecord(model=model, model_label=model, item_id=f"q{i:03d}", condition="answer_present", trial=1,
                           outcome="N1" if i < n1 else "N2", lenient_outcome="N1" if i < n1 else "N2",
                           variant=variant) for i in range(n)]


def test_spread_and_ranking_flips_with_the_noise_rule() -> None:
    records = (_synthetic("x", "published", 50) + _synthetic("y", "published", 0)   # x far ahead
               + _synthetic("x", "u", 0) + _synthetic("y", "u", 50)                # y far ahead: beyond noise
               + _synthetic("x", "w", 24) + _synthetic("y", "w", 26))              # y barely ahead
    report = build_variant_report(records, source="synthetic", resamples=400, seed=3)
    assert report.variants == ["published", "u", "w"] and report.models == ["x", "y"]
    acc = {(f.first, f.second): f for f in report.flips if f.metric == "acc"}
    assert set(acc) == {("published", "u"), ("published", "w")}  # u and w agree: y ahead in both
    assert acc[("published", "u")].beyond_noise and (acc[("published", "u")].higher, acc[("published", "u")].lower) \
        == ("x", "y")
    assert not acc[("published", "w")].beyond_noise  # 24/50 vs 26/50: the intervals overlap
    spread = {(s.model, s.metric): s for s in report.spreads}
    x = spread[("x", "acc")]
    assert (x.minimum, x.maximum, x.range, x.min_variant, x.max_variant) == (0.0, 1.0, 1.0, "u", "published")
    assert x.sd == pytest.approx(statistics.stdev([1.0, 0.0, 0.48]))


def _counted(model: str, variant: str, **outcomes: int) -> list[ResponseRecord]:
    """Records with the given outcome counts (N1=2, N3=1, ...), one question each."""
    rows = [(o, "answer_absent" if o in ("N4", "N5") else "answer_present")
            for o, n in sorted(outcomes.items()) for _ in range(n)]
    return [ResponseRecord(model=model, model_label=model, item_id=f"q{i:03d}", condition=condition, trial=1,
                           outcome=o, lenient_outcome=o, variant=variant) for i, (o, condition) in enumerate(rows)]


def test_a_tie_reached_two_ways_is_a_tie_not_a_flip() -> None:
    # shift under u: x 2/3 - 1/2, y 1/2 - 1/3 — both exactly 1/6, yet 0.16666666666666663 and
    # 0.16666666666666669 as float rates, which put y ahead; under the reference x is strictly ahead
    records = (_counted("x", "published", N1=3, N5=2) + _counted("y", "published", N1=2, N3=1, N4=2)
               + _counted("x", "u", N1=1, N3=1, N4=1, N5=2) + _counted("y", "u", N1=2, N3=1, N4=1, N5=1))
    report = build_variant_report(records, source="synthetic", resamples=50, seed=3)
    x, y = report.cell("x", "u"), report.cell("y", "u")
    assert x is not None and y is not None
    assert 2 / 3 - 1 / 2 < 1 / 2 - 1 / 3  # the float noise a comparison of float rates would call an order
    assert x.value("shift") == y.value("shift")
    assert x.exact("shift") == y.exact("shift") == Fraction(1, 6)
    assert [f for f in report.flips if f.metric == "shift"] == []
    assert ("shift", "x", "y", "u") in report.ties
    md = render_variants_md(report)
    assert "compared as exact fractions of outcome counts" in md and "A tie under either variant is not a flip" in md


def test_exact_metrics_agree_with_the_published_float_formulas() -> None:
    rng = random.Random(11)
    for _ in range(500):
        counts = OutcomeCounts([rng.randint(0, 3)] + [rng.randint(0, 40) for _ in range(5)])
        n1, n2, n3, n4, n5 = counts.counts[1:]
        p = n5 / (n3 + n5) if n3 + n5 else 0.0
        r = n5 / (n2 + n4 + n5) if n2 + n4 + n5 else 0.0
        assert counts.acc == pytest.approx((n1 + n5) / counts.valid if counts.valid else 0.0, abs=1e-15)
        assert counts.f1_abs == pytest.approx(2 * p * r / (p + r) if p + r else 0.0, abs=1e-15)
        assert counts.r_acc == pytest.approx(n1 / (n1 + n2 + n4) if n1 + n2 + n4 else 0.0, abs=1e-15)


@pytest.mark.parametrize(("table", "field"), [('instructions = ["published", "essay"]', "variants.instructions[1]"),
                                              ('ids = ["published", "essay.letters.last"]', "variants.ids[1]")])
def test_a_plan_file_with_an_unknown_instruction_or_id_names_the_file_and_the_key(
        tmp_path: Path, table: str, field: str) -> None:
    plan = tmp_path / "plan.toml"
    plan.write_text(f"[variants]\n{table}\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_plan_file(plan)
    message = str(caught.value)
    assert str(plan) in message and field in message and "'essay'" in message and caught.value.exit_code == 2


def test_the_variants_report_folder(variant_run: tuple[list[EvalItem], Path, RunResult], tmp_path: Path) -> None:
    _, db, _ = variant_run
    records = ARCTICABSTAIN.records_from_store(make_engine(f"sqlite:///{db}"), variant=None)
    report = build_variant_report(records, source="loopback", resamples=300, seed=7)
    out = write_variant_report(report, tmp_path / "rep", figure=True)
    assert {p.name for p in out.iterdir()} == {"VARIANTS.md", "variant-metrics.csv", "variant-spread.csv",
                                              "ranking-flips.csv", "variants.json", "variants.png",
                                              "variants.svg"}
    text = (out / "VARIANTS.md").read_text(encoding="utf-8")
    assert "| `published.letters.first` | published | letters | first |" in text
    # first-option abstains always with the abstain option first and never with it last
    line = next(ln for ln in text.split("## Abst. rate")[1].splitlines() if ln.startswith("| first-option |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[1 + _VARIANTS.index("published.letters.first")] == "1.000"
    assert cells[1 + _VARIANTS.index("published.letters.last")] == "0.000"
    rows = (out / "variant-metrics.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 1 + 4 * len(_VARIANTS)


# -- the CLI -----------------------------------------------------------------------------------------

def _write_items(items: list[EvalItem], path: Path) -> Path:
    lines = [json.dumps({"item_id": it.item_id, "question": it.question, "question_context": it.question_context,
                         "gold_answer": it.gold_answer,
                         "distractors": [{"rank": r, "text": t} for r, t in enumerate(it.distractors)]})
             for it in items]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_run_and_report_variants_from_the_cli(tmp_path: Path) -> None:
    items = _items(4)
    items_path = _write_items(items, tmp_path / "items.jsonl")
    with FakeOpenAIServer(_responder(items)) as server:
        config = tmp_path / "eval.toml"
        config.write_text(
            f'[evaluate]\ntrials = 1\ndb_url = "sqlite:///{tmp_path / "e.db"}"\n'
            f'[evaluate.variants]\ninstructions = ["published", "checklist"]\nlabels = ["numbers"]\n'
            f'abstain_positions = ["last"]\n'
            + "".join(f'[[evaluate.models]]\nlabel = "{m}"\nmodel = "{m}"\nbase_url = "{server.base_url}"\n'
                      f'api_key_env = ""\n' for m in ("first-option", "oracle")), encoding="utf-8")
        result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--items", str(items_path),
                                     "--variants", "plan", "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    assert "48 recorded" in result.output  # 2 models x 3 variants x 4 items x 2 conditions
    assert (tmp_path / "rep" / "VARIANTS.md").exists()
    again = runner.invoke(app, ["evaluate", "report", "--db", str(tmp_path / "e.db"), "--variants", "--out",
                                str(tmp_path / "rep2"), "--no-figure", "--resamples", "200"])
    assert again.exit_code == 0, again.output
    text = (tmp_path / "rep2" / "VARIANTS.md").read_text(encoding="utf-8")
    assert "`checklist.numbers.last`" in text and "`published.numbers.last`" in text
    paper = runner.invoke(app, ["evaluate", "report", "--db", str(tmp_path / "e.db"), "--out", str(tmp_path / "rep3"),
                                "--no-figure", "--resamples", "200", "--draws", "200"])
    assert paper.exit_code == 0 and "responses 16 " in paper.output  # the reference variant only


def test_bad_variants_input_exits_2_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text('[[evaluate.models]]\nlabel = "m"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\n'
                      'api_key_env = ""\n', encoding="utf-8")
    items = _write_items(_items(2), tmp_path / "items.jsonl")
    result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--items", str(items), "--db",
                                 str(tmp_path / "e.db"), "--variants", "published,nope.letters.last"])
    assert result.exit_code == 2 and "unknown instruction 'nope'" in result.output
    plan = tmp_path / "plan.toml"
    plan.write_text('[variants]\nlabels = ["roman"]\n', encoding="utf-8")
    result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--items", str(items), "--db",
                                 str(tmp_path / "e.db"), "--variants", str(plan)])
    assert result.exit_code == 2 and "plan.toml" in result.output and "variants.labels.0" in result.output


def test_the_reference_policies_over_variants_from_the_cli(tmp_path: Path) -> None:
    items = _write_items(_items(6), tmp_path / "items.jsonl")
    result = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--trials", "1", "--db",
                                 str(tmp_path / "p.db"), "--variants", "published,published.letters.first",
                                 "--out", str(tmp_path / "rep")])
    assert result.exit_code == 0, result.output
    rows = {(r["model_id"], r["variant"]): r for r in _csv_rows(tmp_path / "rep" / "variant-metrics.csv")}
    assert len(rows) == 4 * 2
    for variant in ("published", "published.letters.first"):
        assert rows[("always-abstain", variant)]["abstention_rate"] == "1.000000"
        assert rows[("oracle", variant)]["acc"] == "1.000000"
    assert rows[("first-option", "published.letters.first")]["abstention_rate"] == "1.000000"


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_documented_option_id_scheme_reproduces_every_v1_option_id(arcticqa_v1: Path) -> None:
    # docs/evaluation.md: sha256 of json.dumps([text], ensure_ascii=False); with the default
    # ensure_ascii=True the ids of the non-ASCII options (275 of them) would not be reproduced
    non_ascii = 0
    for line in (arcticqa_v1 / "conditions.jsonl").read_text(encoding="utf-8").splitlines():
        for option in json.loads(line)["options"]:
            if option["kind"] != "distractor":
                continue
            digest = hashlib.sha256(json.dumps([option["text"]], ensure_ascii=False).encode("utf-8")).hexdigest()
            assert option["option_id"] == f"distractor-{digest[:20]}", option
            non_ascii += not option["text"].isascii()
    assert non_ascii > 100


def test_figure_1_keeps_its_legend_clear_of_every_point_and_label() -> None:
    # an oracle (0% -> 100%, "+100.0 pp" at the right edge) and always-abstain (100% both): the
    # two places a legend inside the axes covered
    records = (_counted("oracle", "published", N1=4, N5=4) + _counted("always-abstain", "published", N3=4, N5=4)
               + _counted("first-option", "published", N1=1, N2=2, N3=1, N4=3, N5=1))
    report = build_report(records, settings=FAST)
    fig = figure_1(report)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        [ax] = fig.axes
        legend = ax.get_legend().get_window_extent(renderer)
        labels = [t.get_window_extent(renderer) for t in ax.texts]
        points = [xy for c in ax.collections for xy in ax.transData.transform(c.get_offsets())]
        assert len(labels) == 3 and not any(legend.overlaps(box) for box in labels)
        assert len(points) == 6 and not any(legend.contains(x, y) for x, y in points)
        axes_box = ax.get_window_extent(renderer)
        assert all(box.x1 <= axes_box.x1 for box in labels)  # "+100.0 pp" ends inside the axes
    finally:
        fig.clf()
