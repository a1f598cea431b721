"""The open-ended protocol: abstention rules, the answer matcher (never grading a true rewrite of a
real v1 answer wrong), McNemar, and scripted policies through the loopback server."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import EvalModel
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.open import OPEN
from arcticqa.evaluate.open.items import load_open_items
from arcticqa.evaluate.open.metrics import mcnemar_exact
from arcticqa.evaluate.open.parse import abstention_rule, grade_reply, match_answer
from arcticqa.evaluate.policies import (
    OPEN_ABSTENTION,
    REFERENCE_POLICIES,
    gold_map,
    policy_responder,
    run_open_reference_policies,
    run_reference_policies,
)
from arcticqa.evaluate.protocols import get_protocol
from arcticqa.evaluate.reportio import check_report_folder
from arcticqa.evaluate.runner import run_protocol
from arcticqa.evaluate.shape import ReportOptions, RunOptions
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine

# -- abstention rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "rule"), [
    ("I don't know.", "open.abstain.dont_know"),
    ("I do not know the exact value; it was not reported.", "open.abstain.dont_know"),
    ("I’m not sure which species that was.", "open.abstain.dont_know"),
    ("This cannot be determined from the context.", "open.abstain.cannot_determine"),
    ("I am unable to answer this question.", "open.abstain.cannot_determine"),
    ("There is not enough information to say.", "open.abstain.no_information"),
    ("The context does not mention the flux.", "open.abstain.no_information"),
    ("Unknown", "open.abstain.explicit"),
    ("I abstain.", "open.abstain.explicit"),
    ("I have no idea.", "open.abstain.dont_know"),
    ("No idea, sorry.", "open.abstain.dont_know"),
    ("Hard to say without the full paper.", "open.abstain.dont_know"),
    ("I'm not certain.", "open.abstain.dont_know"),
    ("There is no way to know from this.", "open.abstain.dont_know"),
    ("It could not be determined.", "open.abstain.cannot_determine"),
    ("I can't know that.", "open.abstain.cannot_determine"),
    ("Not stated in the evidence.", "open.abstain.no_information"),
    ("The evidence does not specify the depth.", "open.abstain.no_information"),
    ("Not reported.", "open.abstain.no_information"),
    ("The value is not given.", "open.abstain.no_information"),
    ("No information is available.", "open.abstain.no_information"),
    ("It is unclear.", "open.abstain.explicit"),
    ("Uncertain", "open.abstain.explicit"),
])
def test_abstention_rules_recognise_own_words(reply: str, rule: str) -> None:
    assert abstention_rule(reply) == rule
    assert grade_reply("Cassiope", reply).outcome == "abstained"


@pytest.mark.parametrize(("reply", "rule"), [
    ("Не знаю.", "open.abstain.dont_know"),
    ("Я не уверена, какой вид зацвёл первым.", "open.abstain.dont_know"),
    ("Затрудняюсь ответить.", "open.abstain.dont_know"),
    ("Невозможно определить по приведённому тексту.", "open.abstain.cannot_determine"),
    ("По контексту нельзя точно сказать.", "open.abstain.cannot_determine"),
    ("Я не могу ответить на этот вопрос.", "open.abstain.cannot_determine"),
    ("Значение не может быть определено.", "open.abstain.cannot_determine"),
    ("Недостаточно информации для ответа.", "open.abstain.no_information"),
    ("Нет данных о толщине слоя.", "open.abstain.no_information"),
    ("В контексте не указано, как изменилась концентрация.", "open.abstain.no_information"),
    ("Информация об этом отсутствует.", "open.abstain.no_information"),
    ("Воздерживаюсь", "open.abstain.explicit"),
    ("Неизвестно.", "open.abstain.explicit"),
    ("Сложно сказать.", "open.abstain.dont_know"),
    ("Трудно сказать.", "open.abstain.dont_know"),
    ("Понятия не имею.", "open.abstain.dont_know"),
    ("Не имею представления.", "open.abstain.dont_know"),
    ("Без понятия.", "open.abstain.dont_know"),
    ("Затрудняюсь.", "open.abstain.dont_know"),
    ("Не указано.", "open.abstain.no_information"),
    ("Данных нет.", "open.abstain.no_information"),
    ("В статье об этом не говорится.", "open.abstain.no_information"),
    ("Неясно.", "open.abstain.explicit"),
])
def test_russian_abstentions(reply: str, rule: str) -> None:
    assert abstention_rule(reply) == rule
    # the rules read the first sentence whatever its case or the sentence that follows
    assert abstention_rule(reply.upper()) == rule
    assert abstention_rule(f"{reply.rstrip('.')}. Вероятно, 195 см.") == rule
    assert grade_reply("195 см", reply).outcome == "abstained"


@pytest.mark.parametrize("reply", ["Cassiope", "An unknown Salix hybrid", "Dryas, I think.",
                                   "It increased by 31%", "0.5 m", "в мае — июле не изменился",
                                   "Не изменился", "Енисея, Лены и Маккензи", "не было обнаружено",
                                   "Невозможность определения возраста образцов", "данные спутника MODIS",
                                   "No data gaps were found", "not detected", "no significant trend",
                                   "No information was collected on birds", "Not reported in 2010 but in 2012",
                                   "Unclear banding in the upper core", "нет изменений", "не обнаружено",
                                   "Сложность рельефа", "no change in idea of", "It was hard to detect"])
def test_answers_are_not_abstentions(reply: str) -> None:
    assert abstention_rule(reply) is None


def _v1_answers(arcticqa_v1: Path) -> list[tuple[str, str]]:
    """(kind, text) of every gold answer and distractor of the v1 release."""
    found: list[tuple[str, str]] = []
    for item in load_open_items(arcticqa_v1 / "items.jsonl"):
        found += [("gold", item.gold_answer), *(("distractor", d) for d in item.distractors)]
    return found


@pytest.mark.shared
def test_no_v1_answer_or_distractor_is_an_abstention(arcticqa_v1: Path) -> None:
    # real answers (English and Russian, nobody here wrote them) and the ways a model may wrap
    # them: none may be taken for an abstention, however it is written
    answers = _v1_answers(arcticqa_v1)
    assert len(answers) == 194 * 5 and any(re.search("[а-я]", t) for _, t in answers)
    wrapped = [(kind, reply) for kind, text in answers for reply in
               (text, text.lower(), text.upper(), f"The answer is {text}.", f"Ответ: {text}.", f"{text}. I think so.")]
    assert [(kind, reply) for kind, reply in wrapped if abstention_rule(reply) is not None] == []
    assert [(kind, text) for kind, text in answers if grade_reply(text, text).outcome == "abstained"] == []


@pytest.mark.shared
def test_no_real_v1_option_or_response_is_an_abstention(arcticqa_v1: Path) -> None:
    # every option a model was shown (conditions.jsonl, responses.csv) and every raw response a
    # model gave: nothing real reads as an abstention unless it is the abstain option itself
    import csv

    texts: set[str] = set()
    for line in (arcticqa_v1 / "conditions.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            record = json.loads(line)
            texts |= {o["text"] for o in record["options"] if o["kind"] != "abstain"}
            texts |= {record["question"], record["question_context"]}
    with (arcticqa_v1 / "responses.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            abstain = row["abstain_letter"]
            texts |= {row[f"option_{letter}"] for letter in "ABCDE" if letter != abstain}
            texts.add(row["raw_response_text"])
    texts.discard("")
    assert len(texts) > 1000
    assert sorted(t for t in texts if abstention_rule(t) is not None) == []


def test_transport_outcomes() -> None:
    assert grade_reply("x", None, failure="timeout").outcome == "no_answer"
    assert grade_reply("x", None, failure="refusal").outcome == "unparseable"
    assert grade_reply("x", "  ").outcome == "unparseable"


# -- the matcher ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("gold", "reply", "outcome", "rule"), [
    ("Cassiope", "The answer is cassiope.", "correct", "exact"),
    ("0.5 m", "50 cm", "correct", "numbers"),
    ("0.5 m", "80 cm", "wrong", "numbers"),
    ("2.018 ppm", "2 ppm", "undecided", None),  # a rounding: not proven either way
    ("Silene, Dryas and Salix", "Salix, Silene, Dryas", "correct", "set"),
    ("40% reduction", "a 40% increase", "wrong", "direction"),
    ("60%", "A decrease of 60%", "undecided", None),  # adds a claim the gold answer does not make
    ("Cassiope", "Cassiope tetragona", "correct", "contains"),
    ("Cassiope", "not Cassiope", "undecided", None),
    ("Cassiope", "Silene", "undecided", None),
])
def test_matcher_examples(gold: str, reply: str, outcome: str, rule: str | None) -> None:
    grade = match_answer(gold, reply)
    assert (grade.outcome, grade.rule) == (outcome, rule)


def test_mcnemar_exact_known_values() -> None:
    # b=1, c=9: 2 * (C(10,0) + C(10,1)) / 2**10 = 22/1024 (R: binom.test(1, 10)$p.value = 0.02148438)
    assert mcnemar_exact(1, 9) == pytest.approx(0.021484375)
    assert mcnemar_exact(9, 1) == mcnemar_exact(1, 9)
    assert mcnemar_exact(0, 4) == pytest.approx(0.125)
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0


def _rewrites(gold: str) -> list[str]:
    """Equivalent rewrites of a gold answer: case, a lead-in, final punctuation, spacing, an article,
    a list in reverse order."""
    parts = re.split(r"\s*,\s*", gold)
    reorder = [", ".join(reversed(parts))] if len(parts) > 2 and not re.search(r"\d|\(", gold) else []
    return [gold, gold.lower(), gold.upper(), f"The answer is {gold}.", f"{gold}.", f"  {gold}  ",
            f"Answer: {gold}", f"It was {gold}", f"the {gold}", gold.replace(" ", "  "), *reorder]


@pytest.mark.shared
def test_matcher_never_grades_a_rewrite_of_a_real_answer_wrong(arcticqa_v1: Path) -> None:
    golds = [json.loads(line)["gold_answer"]
             for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    # every rewrite of every real answer (exhaustive, so no sample can miss one): never wrong, and
    # these plain rewrites are all recognised as correct
    graded = [(gold, reply, grade_reply(gold, reply).outcome) for gold in golds for reply in _rewrites(gold)]
    assert len(graded) > 10 * len(golds) - 1
    assert [g for g in graded if g[2] != "correct"] == []


@pytest.mark.shared
def test_matcher_never_grades_a_v1_distractor_correct(arcticqa_v1: Path) -> None:
    # the release's distractors are verified wrong answers: the matcher may leave them undecided only
    graded = []
    for item in load_open_items(arcticqa_v1 / "items.jsonl"):
        graded += [(item.gold_answer, d, match_answer(item.gold_answer, d).outcome) for d in item.distractors]
    assert [g for g in graded if g[2] == "correct"] == []
    assert sum(g[2] == "wrong" for g in graded) > len(graded) / 2  # the matcher decides most of them


# -- scripted policies through the loopback server ---------------------------------------------

ITEMS = [
    ("q1", "Which plant flowered first?", "Cassiope", ["Silene", "Dryas", "Salix", "Papaver"]),
    ("q2", "How thick was the active layer?", "0.5 m", ["80 cm", "1.2 m", "2 m", "3 m"]),
    ("q3", "How did the total PLFA concentration change?", "increased by 31%",
     ["decreased by 31%", "did not change", "increased by 5%", "decreased by 5%"]),
    ("q4", "What mean temperature was measured?", "-4.2 °C", ["-1.0 °C", "-8 °C", "0 °C", "2 °C"]),
]


def _items_file(tmp_path: Path) -> Path:
    rows = [{"item_id": i, "question": q, "question_context": f"Context of {i}.", "gold_answer": g,
             "distractors": [{"rank": r, "text": t} for r, t in enumerate(ds)]} for i, q, g, ds in ITEMS]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _responder(items_path: Path) -> Any:
    mc = policy_responder(gold_map(items_path))
    by_question = {q: (g, ds) for _, q, g, ds in ITEMS}

    def reply(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if not user.startswith("CONTEXT\n"):
            return mc(body, headers)  # the multiple-choice run of the same model
        gold, distractors = by_question[user.rsplit("QUESTION\n", 1)[1]]
        policy = body["model"]
        text = {"always-abstain": "I don't know.", "oracle": f"The answer is {gold}.",
                "gold-or-first-distractor": "This cannot be determined from the context.",
                "first-option": distractors[0]}[policy]
        return Reply(content=text)

    return reply


def _model(label: str, url: str) -> EvalModel:
    return EvalModel(label=label, model=label, base_url=url, api_key_env=None, max_concurrency=4, max_retries=1,
                     backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=5.0)


def test_scripted_policies_give_known_results(tmp_path: Path) -> None:
    items_path = _items_file(tmp_path)
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    policies = ["always-abstain", "oracle", "gold-or-first-distractor", "first-option"]
    assert get_protocol("open") is OPEN
    with FakeOpenAIServer(_responder(items_path)) as server:
        models = [_model(p, server.base_url) for p in policies]
        opened = asyncio.run(run_protocol(OPEN.live(RunOptions(items=items_path, trials=2)), models, engine))
        asyncio.run(run_protocol(ARCTICABSTAIN.live(RunOptions(items=items_path, trials=2)), models[:3], engine))
    n = len(ITEMS) * 2
    assert opened.recorded == len(policies) * n
    report_dir = tmp_path / "report"
    summary = OPEN.report_from_store(engine, report_dir, ReportOptions(), source="e.db")
    data = json.loads((report_dir / "summary.json").read_text(encoding="utf-8"))
    by = {g["model_id"]: g for g in data["groups"]}

    assert (by["always-abstain"]["abstention_rate"], by["always-abstain"]["accuracy"]) == (1.0, 0.0)
    assert (by["oracle"]["accuracy"], by["oracle"]["r_acc"], by["oracle"]["abstention_rate"]) == (1.0, 1.0, 0.0)
    # rank-0 distractors: q2 and q4 are proven wrong by the number grammar, q3 by the direction
    # words, "Silene" for "Cassiope" cannot be decided without the verifier
    first = by["first-option"]
    assert (first["wrong"], first["undecided"], first["correct"]) == (6, 2, 0)
    assert first["r_acc"] == 0.0 and first["accuracy"] == 0.0

    pairs = {p["model"]: p for p in data["pairing"]}
    assert set(pairs) == {"always-abstain", "oracle", "gold-or-first-distractor"}  # first-option had no MC run
    assert (pairs["always-abstain"]["both_abstained"], pairs["always-abstain"]["mcnemar_exact_p"]) == (n, 1.0)
    assert (pairs["oracle"]["neither_abstained"], pairs["oracle"]["mc_wrong"]) == (n, 0)
    # MC picked the gold answer, open abstained every time: c = 8, b = 0, p = 2 / 2**8
    gold_first = pairs["gold-or-first-distractor"]
    assert (gold_first["open_only_abstained"], gold_first["mc_only_abstained"]) == (n, 0)
    assert gold_first["mcnemar_exact_p"] == pytest.approx(2 / 2 ** n)
    assert (report_dir / "pairing.csv").exists() and "McNemar" in (report_dir / "TABLES.md").read_text("utf-8")
    assert any("R-Acc 1.000" in line for line in summary.lines)


def test_score_external_responses(tmp_path: Path) -> None:
    items_path = _items_file(tmp_path)
    lines = [{"model": "m", "item_id": "q1", "trial": 1, "raw_response_text": "Cassiope"},
             {"model": "m", "item_id": "q2", "trial": 1, "raw_response_text": "I do not know."},
             {"model": "m", "item_id": "q4", "trial": 1, "raw_response_text": "-9 °C"}]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    OPEN.score_external(items_path, responses, tmp_path / "out", ReportOptions(figure=False))
    assert not list((tmp_path / "out").glob("open-outcomes.*"))
    group = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))["groups"][0]
    assert (group["correct"], group["abstained"], group["wrong"], group["r_acc"]) == (1, 1, 1, 0.5)


def test_reference_policies_answer_open_questions(tmp_path: Path) -> None:
    # the demo's path: the MC reference run, then the same policies open-ended, into one store
    items_path = _items_file(tmp_path)
    db = f"sqlite:///{tmp_path / 'p.db'}"
    asyncio.run(run_reference_policies(items_path, tmp_path / "mc", db_url=db, trials=2, concurrency=4))
    summary = asyncio.run(run_open_reference_policies(items_path, tmp_path / "open", db_url=db, trials=2,
                                                      concurrency=4))
    data = json.loads((summary.out_dir / "summary.json").read_text(encoding="utf-8"))
    by = {g["model_id"]: g for g in data["groups"]}
    n = len(ITEMS) * 2
    assert [g["model_id"] for g in data["groups"]] == sorted(REFERENCE_POLICIES)
    assert (by["always-abstain"]["abstained"], by["oracle"]["correct"]) == (n, n)
    # the rank-0 distractors: six provably wrong, "Silene" for "Cassiope" undecided (see above)
    assert (by["first-option"]["wrong"], by["first-option"]["undecided"]) == (6, 2)
    # random: each reply is one of the three, and the counts add up
    rnd = by["random"]
    assert rnd["correct"] + rnd["abstained"] + rnd["wrong"] + rnd["undecided"] == n
    pairs = {p["model"]: p for p in data["pairing"]}
    assert set(pairs) == set(REFERENCE_POLICIES) and all(p["cells"] == n for p in pairs.values())
    assert pairs["always-abstain"]["both_abstained"] == n and pairs["oracle"]["neither_abstained"] == n
    # the figure: outcome shares per model and the MC-vs-open 2×2 per model
    assert (summary.out_dir / "open-outcomes.png").read_bytes()[:4] == b"\x89PNG"
    assert "<svg" in (summary.out_dir / "open-outcomes.svg").read_text(encoding="utf-8")
    # a second run resumes (nothing new is recorded) and may replace its own report, pairing.csv included
    tables = (summary.out_dir / "TABLES.md").read_text("utf-8")
    check_report_folder(summary.out_dir, overwrite=True)
    again = asyncio.run(run_open_reference_policies(items_path, tmp_path / "open", db_url=db, trials=2))
    assert (again.out_dir / "TABLES.md").read_text("utf-8") == tables


def test_policy_open_replies_are_the_policy_s_words() -> None:
    question = "How thick was the active layer?"
    answer = policy_responder(open_answers={question: ("0.5 m", "80 cm")})
    user = f"CONTEXT\nSome context.\n\nQUESTION\n{question}"
    replies = {name: answer({"model": name, "messages": [{"role": "user", "content": user}]}, {}).content
               for name in REFERENCE_POLICIES}
    assert replies == {"always-abstain": OPEN_ABSTENTION, "first-option": "80 cm", "oracle": "0.5 m",
                       "random": replies["random"]}
    assert replies["random"] in {"0.5 m", "80 cm", OPEN_ABSTENTION}
    unknown = answer({"model": "oracle", "messages": [{"role": "user", "content": "CONTEXT\nc\n\nQUESTION\nq?"}]}, {})
    assert unknown.content == OPEN_ABSTENTION
