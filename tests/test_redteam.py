"""The red team's catalogue (:mod:`arcticqa.standins.redteam`): each class plants a real defect of
its kind, the choice is seeded and independent of call order, judges lie only about the planted
thing, and the log is written whole.

The calls are made by hand the way :class:`~arcticqa.standins.passthrough.OfflineOverWire` makes
them: the variables a stage renders and the offline role's honest answer to them.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from arcticqa.gates.numbers import comparable, parse_numbers
from arcticqa.standins.offline.roles import OFFLINE_ROLES
from arcticqa.standins.passthrough import Call, _AnyOutput
from arcticqa.standins.redteam import BY_NAME, CATALOGUE, Plant, RedTeam, number_words, score
from arcticqa.standins.replies import Reply

SPANS = [
    {"id": "sp-r1", "section": "results",
     "text": "Mean end-of-season active-layer thickness increased by 18% between 2012 and 2021 in the Bayelva "
             "catchment, from 1.52 m to 1.79 m."},
    {"id": "sp-r2", "section": "results",
     "text": "Mean annual ground temperature at 2 m depth rose by 0.9 °C between 2012 and 2021."},
    {"id": "sp-m1", "section": "study_area",
     "text": "The study site is a monitoring grid in the Bayelva catchment near Ny-Ålesund, Svalbard (78.92°N)."},
]
FINDING = {"claim": SPANS[0]["text"], "answer": "18%", "answer_type": "numeric", "unit": "%",
           "claim_type": "observation", "scope": {"location": "Bayelva catchment", "period": "2012 and 2021"},
           "span_ids": ["sp-r1"], "scope_span_ids": ["sp-m1"]}
DEGREES = {**FINDING, "claim": SPANS[1]["text"], "answer": "0.9 °C", "unit": "°C",
           "scope": {"period": "2012 and 2021"}, "span_ids": ["sp-r2"]}


def _call(role: str, prompt: str, variables: dict[str, Any], honest: dict[str, Any] | None = None) -> Call:
    if honest is None:
        honest = OFFLINE_ROLES[role](variables, _AnyOutput).model_dump(mode="json")  # type: ignore[union-attr]
    return Call(role=role, prompt=prompt, variables=variables, honest=honest, body={"model": "offline-baseline"})


def _findings_call(*findings: dict[str, Any]) -> Call:
    return _call("finding_extractor", "finding_extractor/v1",
                 {"paper_id": "p-1", "title": "t", "k": max(3, len(findings)), "spans": SPANS},
                 {"findings": list(findings)})


def _sent(reply: Any) -> dict[str, Any]:
    assert isinstance(reply, Reply) and reply.content is not None
    return dict(json.loads(reply.content))


def _question_vars(finding: dict[str, Any]) -> dict[str, Any]:
    return {"finding": {k: finding[k] for k in ("claim", "answer_type", "unit", "claim_type", "scope")},
            "answer": finding["answer"], "spans": [s for s in SPANS if s["id"] in finding["span_ids"]
                                                   + finding["scope_span_ids"]],
            "revision": 0, "feedback": [], "previous": None}


def _planted_team(name: str, finding: dict[str, Any] = FINDING, seed: int = 1) -> tuple[RedTeam, Any]:
    team = RedTeam(seed, [name])
    reply = team(_findings_call(finding))
    return team, reply


def _ask_question(team: RedTeam, finding: dict[str, Any] = FINDING) -> dict[str, Any]:
    call = _call("question_writer", "question_writer/v1", _question_vars(finding))
    reply = team(call)
    return _sent(reply) if reply is not None else dict(call.honest)


def _value(text: str) -> float:
    return parse_numbers(text)[0].value


# ---- the catalogue itself ------------------------------------------------------------------------

def test_the_catalogue_has_at_least_eight_named_documented_classes_over_every_target() -> None:
    names = [c.name for c in CATALOGUE]
    assert len(names) == len(set(names)) >= 8
    assert all(c.doc and re.fullmatch(r"[a-z_]+", c.name) for c in CATALOGUE)
    assert {c.target for c in CATALOGUE} == {"finding", "question", "reconstruction", "options", "entailment",
                                             "transport"}
    with pytest.raises(ValueError, match="unknown defect classes"):
        RedTeam(1, ["no_such_class"])


def test_a_seed_picks_the_same_class_for_an_item_in_any_call_order_and_seeds_walk_the_catalogue() -> None:
    findings = [{**FINDING, "claim": f"Claim {i}: thaw depth grew by {i + 2}%.", "answer": f"{i + 2}%"}
                for i in range(40)]
    first, second = RedTeam(7), RedTeam(7)
    first(_findings_call(*findings[:20]))
    first(_findings_call(*findings[20:]))
    second(_findings_call(*reversed(findings[20:])))
    second(_findings_call(*reversed(findings[:20])))
    assert {k: i.defect.name for k, i in first._items.items()} == {k: i.defect.name for k, i in second._items.items()}
    # one item over consecutive seeds: every class that applies to it, once each
    from arcticqa.standins.redteam import _facts
    facts = _facts("p-1", FINDING, tuple((s["id"], s["section"], s["text"]) for s in SPANS))
    usable = [c.name for c in CATALOGUE if c.applies(facts)]
    assert sorted(RedTeam(seed).choose(facts).name for seed in range(len(usable))) == sorted(usable)  # type: ignore[union-attr]


def test_number_words() -> None:
    assert number_words("18") == "eighteen"
    assert number_words("27", hyphen=False) == "twenty seven"
    assert number_words("0.73") == "zero point seven three"
    assert number_words("2,6") == "two point six"
    assert number_words("117") == "one hundred seventeen"
    assert number_words("12", ru=True) == "двенадцать"
    assert number_words("0,6", ru=True) == "ноль целых шесть десятых"


# ---- each class plants a defect of its kind ----------------------------------------------------

def test_finding_classes_plant_unresolvable_or_unsupported_findings() -> None:
    paper = {s["id"]: s["text"] for s in SPANS}
    for seed in range(6):
        _, reply = _planted_team("wrong_span_ids", seed=seed)
        ids = _sent(reply)["findings"][0]["span_ids"]
        assert any(i not in paper for i in ids)
        _, reply = _planted_team("misattributed_span", seed=seed)
        (sid,) = _sent(reply)["findings"][0]["span_ids"]
        assert "18%" not in paper[sid]
        _, reply = _planted_team("fabricated_finding", seed=seed)
        planted = _sent(reply)["findings"][0]
        assert planted["answer"] != "18%" and planted["answer"] not in paper["sp-r1"]
        assert planted["answer"] in planted["claim"]
        _, reply = _planted_team("fabricated_scope", seed=seed)
        period = _sent(reply)["findings"][0]["scope"]["period"]
        assert all(period not in text for text in paper.values())


def test_question_classes_plant_leaks_and_unresolvable_wording() -> None:
    for seed in range(12):
        team, _ = _planted_team("leak_verbatim", seed=seed)
        q = _ask_question(team)
        assert "18%" in q["question"] + q["question_context"]

        team, _ = _planted_team("leak_words", DEGREES, seed=seed)
        q = _ask_question(team, DEGREES)
        assert "zero point nine degrees Celsius" in q["question_context"]

        team, _ = _planted_team("leak_converted_unit", DEGREES, seed=seed)
        q = _ask_question(team, DEGREES)
        leaked = team.plants[0].planted
        assert leaked in q["question_context"]
        number = parse_numbers(leaked)[0]
        assert number.unit in ("K", "°F")
        assert math.isclose(number.value, 0.9 * (1.8 if number.unit == "°F" else 1.0), rel_tol=1e-6)

        team, _ = _planted_team("relative_period", seed=seed)
        q = _ask_question(team)
        text = q["question"] + " " + q["question_context"]
        plant = team.plants[0]
        if plant.variant == "years_replaced":
            assert not re.search(r"\b(?:19|20)\d\d\b", text) and plant.planted in q["question"]
        else:
            assert re.search(r"\blast (?:year|season)\b", text, re.I)

        team, _ = _planted_team("not_standalone", seed=seed)
        q = _ask_question(team)
        assert re.search(r"this study|Figure 3|the authors|Table 2|the present paper|the study site", q["question"])
        if "the study site" in q["question"]:
            assert "Bayelva catchment" not in q["question"] + q["question_context"]

        team, _ = _planted_team("dropped_scope", seed=seed)
        q = _ask_question(team)
        assert not re.search(r"\b(?:2012|2021)\b", q["question"] + q["question_context"])

        team, _ = _planted_team("causal_question", seed=seed)
        q = _ask_question(team)
        assert re.match(r"(?:Because of|Driven by|As a result of|Due to) ", q["question"])

        for finding in (FINDING, DEGREES):
            team, _ = _planted_team("leak_derivable", finding, seed=seed)
            q = _ask_question(team, finding)
            _check_derivable(team.plants[0].variant, q["question_context"], finding["answer"])


def _check_derivable(variant: str, context: str, answer: str) -> None:
    """The planted sentence gives the answer by arithmetic, within the answer's precision."""
    target = parse_numbers(answer)[0]
    sentence = context.rsplit(". ", 1)[-1] if ". " in context else context
    values = [n.value for n in parse_numbers(sentence)]
    a, b = values[-2], values[-1]
    derived = {"relative_change": 100 * abs(b - a) / a, "ratio": 100 * min(a, b) / max(a, b),
               "difference": abs(b - a)}[variant]
    assert abs(derived - target.value) < target.tolerance, (variant, sentence, answer)


def _options_for(name: str, seed: int, finding: dict[str, Any] = FINDING) -> tuple[RedTeam, list[str], Plant]:
    team, _ = _planted_team(name, finding, seed=seed)
    q = _ask_question(team, finding)
    variables = {"question": q["question"], "question_context": q["question_context"], "answer": finding["answer"],
                 "finding": {k: finding[k] for k in ("claim", "answer_type", "unit")},
                 "spans": [s for s in SPANS if s["id"] in finding["span_ids"] + finding["scope_span_ids"]]}
    reply = team(_call("distractor_writer", "distractor_writer/v2", variables))
    options = [c["text"] for c in _sent(reply)["candidates"]]
    assert len(options) >= 4
    return team, options, team.plants[0]


def _same_value(a: str, b: str) -> bool:
    """Independent of the gates: both read as one number (words included), equal after the
    conversion, within half a unit of the coarser last digit."""
    words = {number_words(str(n)): str(n) for n in range(0, 100)}
    for w, d in sorted(words.items(), key=lambda x: -len(x[0])):
        a, b = a.replace(w, d), b.replace(w, d)
    na, nb = parse_numbers(a), parse_numbers(b)
    if len(na) != 1 or len(nb) != 1:
        return False
    cmp = comparable(na[0], nb[0])
    return cmp is not None and abs(cmp[0] - cmp[1]) <= max(cmp[2], 1e-9)


def test_option_classes_plant_a_second_true_option_or_a_broken_one_first() -> None:
    for seed in range(12):
        _, options, plant = _options_for("answer_restated_as_distractor", seed)
        assert options[0] == plant.planted
        assert options[0] == "18%" or _same_value("18%", options[0])

        _, options, plant = _options_for("true_bound_distractor", seed)
        text = options[0]
        low, high = (float(x) for x in re.findall(r"\d+(?:\.\d+)?", text)[:2]) if re.search(
            r"between|–", text) else (None, None)
        if low is not None:
            assert low <= 18 <= high
        elif re.search(r"less than|up to", text):
            assert 18 < (_value(text) if re.search(r"\d", text) else 36)
        else:
            assert re.search(r"more than|at least", text) and _value(text) <= 18

        _, options, plant = _options_for("duplicate_options", seed)
        assert options[0] == plant.planted and plant.marks[1] in options[1:]
        assert _same_value(options[0], plant.marks[1]) or options[0].strip().lower() == plant.marks[1].lower()

        _, options, plant = _options_for("garbage_option", seed)
        assert not re.search(r"\d", options[0])


def test_evidence_value_distractor_is_a_value_the_span_states() -> None:
    finding = {**FINDING, "answer": "1.79 m", "unit": "m", "claim": SPANS[0]["text"]}
    for seed in range(4):
        _, options, plant = _options_for("evidence_value_distractor", seed, finding)
        assert options[0] == "1.52 m" and options[0] in SPANS[0]["text"]


def test_a_sycophantic_judge_lies_only_about_the_planted_option() -> None:
    team, options, plant = _options_for("true_bound_distractor", 3)
    base = {"question": "q", "question_context": "", "answer": "18%", "scope": {}, "spans": SPANS[:1]}
    question = next(iter(team._by_question))
    base["question"] = question
    lie = team(_call("option_verifier", "option_verifier/v1", {**base, "option": plant.planted,
                                                                "option_type": "numeric"}))
    assert _sent(lie)["verdict"] == "contradicted" and _sent(lie)["span_ids"] == ["sp-r1"]
    honest = team(_call("option_verifier", "option_verifier/v1", {**base, "option": "a moderate change",
                                                                   "option_type": "numeric"}))
    assert honest is None
    multi = team(_call("option_verifier", "option_verifier/multi-v1", {
        **base, "options": [{"id": 0, "type": "numeric", "text": plant.planted},
                            {"id": 5, "type": "numeric", "text": "a moderate change"}]}))
    verdicts = {v["option_id"]: v["verdict"] for v in _sent(multi)["verdicts"]}
    assert verdicts == {0: "contradicted", 5: "not_addressed"}


def _reconstruct(team: RedTeam, question: str) -> dict[str, Any]:
    variables = {"question": question, "question_context": "", "spans": SPANS[:1] + SPANS[2:]}
    call = _call("reconstructor", "reconstructor/v1", variables)
    reply = team(call)
    return _sent(reply) if reply is not None else dict(call.honest)


def test_reconstruction_classes_answer_otherwise_and_the_verifier_calls_it_equivalent() -> None:
    for seed in range(10):
        team, _ = _planted_team("wrong_reconstruction", seed=seed)
        q = _ask_question(team)
        rebuilt = _reconstruct(team, q["question"])
        assert rebuilt["answer"] and not _same_value("18%", rebuilt["answer"]) and rebuilt["answer"] != "18%"
        verdict = team(_call("verifier", "verifier/v1", {
            "question": q["question"], "question_context": q["question_context"], "answer": "18%",
            "finding": {k: FINDING[k] for k in ("claim", "claim_type", "scope")},
            "reconstruction": {"answer": rebuilt["answer"], "claim_type": "observation", "alternatives": []},
            "spans": SPANS[:1] + SPANS[2:], "judge_equivalence": True}))
        assert _sent(verdict)["answers_equivalent"] is True and _sent(verdict)["entailed"] is True

        team, _ = _planted_team("non_answer_reconstruction", seed=seed)
        q = _ask_question(team)
        rebuilt = _reconstruct(team, q["question"])
        assert not re.search(r"\d", rebuilt["answer"])

        team, _ = _planted_team("reconstruction_wrong_span", seed=seed)
        q = _ask_question(team)
        rebuilt = _reconstruct(team, q["question"])
        assert rebuilt["span_ids"] and all(i not in {s["id"] for s in SPANS} for i in rebuilt["span_ids"])


def test_a_leak_makes_the_blind_reconstructor_cooperate() -> None:
    team, _ = _planted_team("leak_verbatim", seed=2)
    q = _ask_question(team)
    rebuilt = _reconstruct(team, q["question"])
    assert rebuilt["answer"] == "18%"


def test_the_entailment_lie_is_planted_only_where_the_honest_verifier_says_not_entailed() -> None:
    hedged = {**FINDING, "claim": "Thaw depth possibly increased by 18% in some plots.",
              "answer": "18%"}
    team = RedTeam(1, ["entailment_lie"])
    team(_findings_call(hedged))
    base = {"question": "q?", "question_context": "", "answer": "18%",
            "finding": {k: hedged[k] for k in ("claim", "claim_type", "scope")},
            "reconstruction": {"answer": "18%", "claim_type": "observation", "alternatives": []},
            "spans": SPANS[:1], "judge_equivalence": False}
    entailed = _call("verifier", "verifier/v1", base, {"entailed": True, "question_claim_type": "observation"})
    assert team(entailed) is None and not team.plants
    lie = team(_call("verifier", "verifier/v1", base, {"entailed": False, "question_claim_type": "observation"}))
    assert _sent(lie)["entailed"] is True and team.plants[0].defect == "entailment_lie"


def test_transport_faults_come_once_per_request_and_a_reask_gets_the_honest_answer() -> None:
    kinds: Counter[str] = Counter()
    for seed in range(16):
        for name in ("malformed_json", "schema_violation", "refusal", "truncated"):
            team, _ = _planted_team(name, seed=seed)
            role = team._items[next(iter(team._items))].transport_role
            if role == "question_writer":
                call = _call("question_writer", "question_writer/v1", _question_vars(FINDING))
                first, again = team(call), team(call)
                assert isinstance(first, Reply) and again is None and team.plants[0].reasked == 1
                kinds[f"{name}:{team.plants[0].variant}"] += 1
                if name == "malformed_json":
                    with pytest.raises(json.JSONDecodeError):
                        parsed = json.loads(first.content or "")
                        assert parsed == call.honest  # "prose" wraps it: still not the answer alone
                        raise json.JSONDecodeError("wrapped", "", 0)
                if name == "refusal":
                    assert first.refusal and not first.content
                if name == "truncated":
                    assert first.finish_reason == "length"
                if name == "schema_violation":
                    assert json.loads(first.content or "") != call.honest
            else:
                assert team(_call("question_writer", "question_writer/v1", _question_vars(FINDING))) is None
    assert len(kinds) >= 6


def test_the_log_is_one_json_line_per_plant_written_whole(tmp_path: Path) -> None:
    team = RedTeam(3, ["wrong_span_ids", "fabricated_scope"])
    team(_findings_call(*[{**FINDING, "claim": f"Claim {i}: grew by {i + 2}%.", "answer": f"{i + 2}%",
                           "span_ids": ["sp-r1"]} for i in range(12)]))
    path = team.write_log(tmp_path / "logs" / "plants.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(team.plants) > 0
    first = json.loads(lines[0])
    assert {"seed", "defect", "item", "role", "change", "planted", "touches"} <= set(first)
    assert [p.name for p in path.parent.iterdir()] == ["plants.jsonl"]  # no temporary file left


def test_score_reads_reached_and_caught_from_the_store_rows() -> None:
    leak = Plant(seed=1, defect="leak_verbatim", target="question", item="k", paper_id="p-1", claim="c",
                 answer="18%", role="question_writer", change="", planted="18%", marks=["Q (18%)?\x1fctx"])
    option = Plant(seed=1, defect="true_bound_distractor", target="options", item="k2", paper_id="p-1",
                   claim="c2", answer="9 days", role="distractor_writer", change="", planted="less than 18 days",
                   marks=["less than 18 days"])
    findings = [("p-1", {"findings": [{"id": "fd-1", "claim": "c", "answer": "18%"},
                                      {"id": "fd-2", "claim": "c2", "answer": "9 days"}], "rejected": []})]
    items = [{"item_id": "aqa-1", "finding_id": "fd-1", "question": "Q?", "question_context": "ctx",
              "distractors": []},
             {"item_id": "aqa-2", "finding_id": "fd-2", "question": "Q2?", "question_context": "",
              "distractors": [{"text": "less than 18 days"}]}]
    out = score([leak, option], findings_outputs=findings,
                rejections=[("fd-1/r0", "question.answer_leak", None),
                            ("fd-2/r0", "distractor.format_mismatch", "another option")], failures=[], items=items)
    assert [(o.reached, o.caught_by) for o in out] == [(False, ["question.answer_leak"]), (True, [])]
    assert BY_NAME["leak_verbatim"].target == "question"
