"""Item construction end to end through the real gateway (instructor + openai) and the local
OpenAI-compatible server with scripted role outputs: the happy path, the fallback to the next
finding, bounded revisions, and one scripted output per gate that makes it reject."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

from arcticqa.config import ROLES, ModelConfig, Settings
from arcticqa.evidence import Document, Section, Span, sha256_text, span_id_for
from arcticqa.llm.gateway import Gateway
from arcticqa.papers import PaperRecord
from arcticqa.stages.construct import ConstructionOptions, ConstructionResult, construct_items
from arcticqa.stages.reconstruct import reconstructor_variables
from arcticqa.standins.replies import Reply, by_role, json_reply
from arcticqa.standins.server import FakeOpenAIServer

# ---- a small paper --------------------------------------------------------------------------

_PARTS = [
    ("abstract", "We report sea-ice and zooplankton observations at a mooring in the Nansen Basin."),
    ("introduction", "Thinning of 27% was reported by Smith et al. (2015) for the Beaufort Sea."),
    ("methods", "Ice thickness was measured by upward-looking sonar at the Nansen Basin mooring from "
                "2010 to 2020."),
    ("results", "Mean sea-ice thickness at the Nansen Basin mooring decreased by 18% between 2010 and "
                "2020, while at the Fram Strait mooring it decreased by 31%."),
    ("results", "Calanus glacialis dominated the copepod biomass at the Nansen Basin mooring in 2015, "
                "well ahead of Calanus hyperboreus and Metridia longa."),
]


def _document() -> Document:
    text, sections, spans = "", [], []
    doc_sha = sha256_text("test-paper")
    for kind, part in _PARTS:
        start = len(text)
        text += part
        end = len(text)
        text += "\n\n"
        sections.append(Section(title=kind.title(), kind=kind, start=start, end=end))
        spans.append(Span(id=span_id_for(doc_sha, start, end), section=kind, page=1, start=start, end=end,
                          text=part, sha256=sha256_text(part)))
    return Document(sha256=doc_sha, pages=1, text=text, sections=sections, spans=spans)


DOC = _document()
SPAN = {i: s.id for i, s in enumerate(DOC.spans)}  # 0 abstract, 1 intro, 2 methods, 3/4 results
PAPER = PaperRecord(paperId="p-nansen", title="Sea ice at the Nansen Basin mooring", year=2022,
                    publicationDate="2022-03-15", externalIds={"DOI": "10.1234/NANSEN"})

NUMERIC_FINDING = {
    "claim": "Mean sea-ice thickness at the Nansen Basin mooring decreased by 18% from 2010 to 2020.",
    "answer": "18%", "answer_type": "numeric", "unit": "%", "claim_type": "observation",
    "scope": {"location": "Nansen Basin mooring", "period": "2010 to 2020"},
    "span_ids": [SPAN[3]], "scope_span_ids": [SPAN[2]],
}
ENTITY_FINDING = {
    "claim": "Calanus glacialis dominated copepod biomass at the Nansen Basin mooring in 2015.",
    "answer": "Calanus glacialis", "answer_type": "entity", "unit": None, "claim_type": "observation",
    "scope": {"location": "Nansen Basin mooring", "period": "2015"},
    "span_ids": [SPAN[4]], "scope_span_ids": [],
}
GOOD_QUESTION = {
    "question": "By what percentage did mean sea-ice thickness at the Nansen Basin mooring decrease "
                "between 2010 and 2020?",
    "question_context": "Sea-ice thickness was measured by upward-looking sonar at a mooring in the Nansen "
                        "Basin of the Arctic Ocean.",
}
ENTITY_QUESTION = {
    "question": "Which copepod species dominated copepod biomass at the Nansen Basin mooring in 2015?",
    "question_context": "Zooplankton were sampled at a mooring in the Nansen Basin of the Arctic Ocean.",
}
GOOD_RECONSTRUCTION = {"answer": "18 %", "span_ids": [SPAN[3]], "claim_type": "observation", "alternatives": []}
GOOD_VERDICT = {"entailed": True, "entailment_span_ids": [SPAN[3]], "scope_preserved": True,
                "question_claim_type": "observation", "context_sufficient": True,
                "context_discloses_answer": False, "defensible_alternatives": [], "reason": ""}
NUMERIC_DISTRACTORS = {"candidates": [
    {"text": "28%", "type": "numeric"},
    {"text": "28 %", "type": "numeric"},  # duplicate
    {"text": "18.2% decrease", "type": "numeric"},  # within tolerance of 18%
    {"text": "31%", "type": "scope"},  # true at Fram Strait: supported by the cited evidence
    {"text": "9%", "type": "numeric"},
    {"text": "42%", "type": "numeric"},
    {"text": "5%", "type": "numeric"},
]}
ENTITY_DISTRACTORS = {"candidates": [
    {"text": "Calanus hyperboreus", "type": "entity"},
    {"text": "Metridia longa", "type": "entity"},
    {"text": "Oithona similis", "type": "entity"},
    {"text": "Pseudocalanus minutus", "type": "entity"},
    {"text": "Microcalanus pygmaeus", "type": "entity"},
]}


def _option_verifier(body: dict[str, Any]) -> Reply:
    """Contradicts options the results span ranks below C. glacialis; the others are not addressed."""
    user = body["messages"][-1]["content"]
    option = user.split("Option to check", 1)[1].split(":", 1)[1].split("\n", 1)[0].strip()
    if option in ("Calanus hyperboreus", "Metridia longa"):
        return json_reply({"verdict": "contradicted", "span_ids": [SPAN[4]],
                           "interpretation": f"{option} dominated", "reason": "ranked below"})
    if option in ("Pseudocalanus minutus", "Microcalanus pygmaeus"):
        return json_reply({"verdict": "contradicted", "span_ids": [SPAN[4]], "interpretation": option,
                           "reason": "C. glacialis dominated, so this species did not"})
    return json_reply({"verdict": "not_addressed", "span_ids": [], "interpretation": option,
                       "reason": "not mentioned"})


def _scripts(**overrides: Any) -> dict[str, Any]:
    scripts: dict[str, Any] = {
        "finding_extractor": json_reply({"findings": [NUMERIC_FINDING]}),
        "question_writer": json_reply(GOOD_QUESTION),
        "reconstructor": json_reply(GOOD_RECONSTRUCTION),
        "verifier": json_reply(GOOD_VERDICT),
        "distractor_writer": json_reply(NUMERIC_DISTRACTORS),
        "option_verifier": _option_verifier,
    }
    scripts.update(overrides)
    return scripts


def _run(scripts: dict[str, Any], options: ConstructionOptions | None = None
         ) -> tuple[ConstructionResult, FakeOpenAIServer]:
    with FakeOpenAIServer(by_role(scripts)) as server:
        settings = Settings(
            models={"fake": ModelConfig(provider="openai", base_url=server.base_url, model="fake-model",
                                        api_key_env=None, max_retries=0, max_reasks=0)},
            roles={role: "fake" for role in ROLES})

        async def go() -> ConstructionResult:
            async with Gateway(settings) as gateway:
                return await construct_items(PAPER, DOC, gateway, options or ConstructionOptions())

        return asyncio.run(go()), server


def _rule_ids(result: ConstructionResult) -> set[str]:
    return {r.rule_id for r in result.rejections}


# ---- happy path -----------------------------------------------------------------------------


def test_happy_path_accepts_one_item_with_deterministic_distractors() -> None:
    result, server = _run(_scripts())
    assert len(result.items) == 1
    item = result.items[0]
    assert item.item_id.startswith("aqa-") and len(item.item_id) == 24
    assert item.status == "machine_accepted_unverified"
    assert item.gold_answer == "18%" and item.numeric_answer and item.answer_unit == "%"
    assert sorted(d.text for d in item.distractors) == ["28%", "42%", "5%", "9%"]
    assert [d.rank for d in item.distractors] == [0, 1, 2, 3]
    assert item.answer_present_drops == item.distractors[3].text
    assert all(d.verification == "deterministic-contradiction" for d in item.distractors)
    assert all(d.rule == "numeric_outside_tolerance" and d.evidence_span_id == SPAN[3] for d in item.distractors)
    assert {e.id for e in item.evidence_spans} == {SPAN[3], SPAN[2]}
    assert item.paper.doi == "10.1234/nansen" and item.language_script == "latin"
    assert item.paper.publication_date == "2022-03-15"  # discovery's date rides along for exposure splits
    assert item.writer_model == "fake-model"
    assert set(item.prompt_versions) >= {"finding_extractor", "question_writer", "reconstructor", "verifier",
                                         "distractor_writer"}
    assert item.prompt_versions["question_writer"].startswith("question_writer@v1#")
    # every deterministic option was decided without an option_verifier call
    assert server.requests_for("option_verifier") == []
    # the free gates and the evidence rule left their rule ids
    assert {"distractor.duplicate", "distractor.within_tolerance",
            "option.supported_by_evidence"} <= _rule_ids(result)
    assert [s.stage for s in result.steps] == ["findings", "question", "reconstruct", "verify", "distractors",
                                               "option_check", "accept"]
    # provenance is carried by every model-derived step result
    assert result.questions[0].provenance.request_hash and result.verifications[0].match == "match"


def test_item_id_and_order_are_stable_across_runs() -> None:
    first, _ = _run(_scripts())
    second, _ = _run(_scripts())
    assert first.items[0].item_id == second.items[0].item_id
    assert [d.text for d in first.items[0].distractors] == [d.text for d in second.items[0].distractors]
    other_seed, _ = _run(_scripts(), ConstructionOptions(seed="another-seed"))
    assert other_seed.items[0].item_id == first.items[0].item_id  # the id is content-derived


def test_reconstructor_prompt_never_contains_the_answer() -> None:
    result, server = _run(_scripts())
    assert result.items
    (request,) = server.requests_for("reconstructor")
    rendered = json.dumps(request.body["messages"], ensure_ascii=False)
    assert "answer" not in inspect.signature(reconstructor_variables).parameters
    # the spans themselves state 18%, so check the answer was not given outside them
    without_spans = rendered.replace(DOC.spans[3].text, "")
    assert "18" not in without_spans


def test_fallback_to_next_finding_with_model_verified_options() -> None:
    def question_writer(body: dict[str, Any]) -> Reply:
        user = body["messages"][-1]["content"]
        if "Calanus" in user.split("Evidence spans", 1)[0]:
            return json_reply(ENTITY_QUESTION)
        return json_reply({**GOOD_QUESTION, "question": "Did thickness at the Nansen Basin mooring decrease "
                                                        "by 18% between 2010 and 2020?"})

    def by_question(numeric: dict[str, Any], entity: dict[str, Any]) -> Callable[[dict[str, Any]], Reply]:
        return lambda body: json_reply(entity if "copepod" in body["messages"][-1]["content"] else numeric)

    scripts = _scripts(
        finding_extractor=json_reply({"findings": [NUMERIC_FINDING, ENTITY_FINDING]}),
        question_writer=question_writer,
        reconstructor=by_question(GOOD_RECONSTRUCTION, {**GOOD_RECONSTRUCTION,
                                                        "answer": "the copepod Calanus glacialis",
                                                        "span_ids": [SPAN[4]]}),
        verifier=by_question(GOOD_VERDICT, {**GOOD_VERDICT, "answers_equivalent": True,
                                            "entailment_span_ids": [SPAN[4]]}),
        distractor_writer=json_reply(ENTITY_DISTRACTORS),
    )
    result, server = _run(scripts, ConstructionOptions(max_revisions=1))
    assert "question.answer_leak" in _rule_ids(result)
    assert len(result.items) == 1
    item = result.items[0]
    assert item.gold_answer == "Calanus glacialis" and not item.numeric_answer
    # "the copepod Calanus glacialis" needed the verifier's judgement ("C. glacialis" is a rule's match)
    assert item.answer_match_confidence == "model"
    # two leaking drafts for the numeric finding (revision 0 and 1), then the entity finding
    assert [q.revision for q in result.questions] == [0, 1, 0]
    assert "question.answer_leak" in server.requests_for("question_writer")[1].body["messages"][-1]["content"]
    # the option verifier never saw a question writer's or distractor writer's role header
    assert all(r.role == "option_verifier" for r in server.requests_for("option_verifier"))
    admitted = {d.text for d in item.distractors}
    assert admitted == {"Calanus hyperboreus", "Metridia longa", "Pseudocalanus minutus", "Microcalanus pygmaeus"}
    assert all(d.verification == "model-verified" and d.evidence_span_id == SPAN[4] for d in item.distractors)
    assert "option.not_contradicted" in _rule_ids(result)
    assert item.option_verifier_models == ["fake-model"]


def test_revision_fixes_a_leaking_question() -> None:
    leaking = {**GOOD_QUESTION, "question": "Did thickness at the Nansen Basin mooring fall by 18% between "
                                            "2010 and 2020?"}
    result, server = _run(_scripts(question_writer=[json_reply(leaking), json_reply(GOOD_QUESTION)]))
    assert len(result.items) == 1
    assert [q.revision for q in result.questions] == [0, 1]
    assert result.questions[0].rejections[0].rule_id == "question.answer_leak"


# ---- one scripted output per gate -----------------------------------------------------------

_REJECTING = {
    "question.answer_leak": {"question_writer": json_reply(
        {**GOOD_QUESTION, "question_context": "Thickness fell by 18% at the Nansen Basin mooring."})},
    "question.not_standalone": {"question_writer": json_reply(
        {**GOOD_QUESTION, "question": "In this study, by what percentage did ice thickness at the Nansen "
                                      "Basin mooring decrease between 2010 and 2020?"})},
    "question.scope_dropped": {"question_writer": json_reply(
        {"question": "By what percentage did mean sea-ice thickness decrease between 2010 and 2020?",
         "question_context": ""})},
    "finding.unresolved_span": {"finding_extractor": json_reply(
        {"findings": [{**NUMERIC_FINDING, "span_ids": ["sp-0000000000000000"]}]})},
    "finding.answer_not_in_evidence": {"finding_extractor": json_reply(
        {"findings": [{**NUMERIC_FINDING, "answer": "23%"}]})},
    "finding.scope_not_in_evidence": {"finding_extractor": json_reply(
        {"findings": [{**NUMERIC_FINDING, "scope": {"location": "Laptev Sea"}}]})},
    "finding.background_claim": {"finding_extractor": json_reply(
        {"findings": [{**NUMERIC_FINDING, "answer": "27%", "span_ids": [SPAN[1]],
                       "scope": {"location": "Beaufort Sea"}}]})},
    "reconstruct.mismatch": {"reconstructor": json_reply({**GOOD_RECONSTRUCTION, "answer": "31%"})},
    "verify.not_entailed": {"verifier": json_reply({**GOOD_VERDICT, "entailed": False})},
    "verify.causal_overclaim": {"verifier": json_reply({**GOOD_VERDICT, "question_claim_type": "causal"})},
    "verify.defensible_alternative": {"verifier": json_reply(
        {**GOOD_VERDICT, "defensible_alternatives": ["31%"]})},
    "verify.context_insufficient": {"verifier": json_reply({**GOOD_VERDICT, "context_sufficient": False})},
    "distractor.duplicate": {},
    "distractor.within_tolerance": {},
    "distractor.equals_answer": {"distractor_writer": json_reply({"candidates": [
        {"text": "18 %", "type": "numeric"}, *NUMERIC_DISTRACTORS["candidates"]]})},
    "distractor.compound": {"distractor_writer": json_reply({"candidates": [
        {"text": "9% or 12%", "type": "numeric"}, *NUMERIC_DISTRACTORS["candidates"]]})},
    "option.supported_by_evidence": {},
    "option.not_contradicted": {"distractor_writer": json_reply(ENTITY_DISTRACTORS),
                                "finding_extractor": json_reply({"findings": [ENTITY_FINDING]}),
                                "question_writer": json_reply(ENTITY_QUESTION),
                                "reconstructor": json_reply({**GOOD_RECONSTRUCTION, "answer": "Calanus glacialis",
                                                             "span_ids": [SPAN[4]]})},
    "accept.too_few_distractors": {"distractor_writer": json_reply({"candidates": [
        {"text": "28%", "type": "numeric"}, {"text": "28 %", "type": "numeric"},
        {"text": "31%", "type": "scope"}, {"text": "9%", "type": "numeric"}]})},
}


@pytest.mark.parametrize("rule_id", sorted(_REJECTING))
def test_each_gate_rejects_its_scripted_output(rule_id: str) -> None:
    result, _ = _run(_scripts(**_REJECTING[rule_id]), ConstructionOptions(max_revisions=0))
    assert rule_id in _rule_ids(result)
    blocking = not rule_id.startswith(("distractor.", "option."))
    if blocking:
        assert result.items == []


def _multi_option_verifier(leave_out: str | None = None) -> Callable[[dict[str, Any]], Reply]:
    """The same verdicts as ``_option_verifier``, for several options in one prompt."""
    def answer(body: dict[str, Any]) -> Reply:
        user = body["messages"][-1]["content"]
        listed = user.split("Options to check:", 1)[1].split("Scope:", 1)[0]
        verdicts = []
        for line in listed.strip().splitlines():
            head, text = line.split(":", 1)
            option_id = int(head.split("option_id", 1)[1].split("(", 1)[0])
            if text.strip() == leave_out:
                continue
            single = _option_verifier({"messages": [{"role": "user", "content": f"Option to check (x): {text.strip()}\n"}]})
            verdicts.append({**json.loads(single.content or "{}"), "option_id": option_id})
        return json_reply({"verdicts": verdicts})
    return answer


def _entity_scripts(option_verifier: Callable[[dict[str, Any]], Reply]) -> dict[str, Any]:
    return _scripts(
        finding_extractor=json_reply({"findings": [ENTITY_FINDING]}),
        question_writer=json_reply(ENTITY_QUESTION),
        reconstructor=json_reply({**GOOD_RECONSTRUCTION, "answer": "C. glacialis", "span_ids": [SPAN[4]]}),
        verifier=json_reply({**GOOD_VERDICT, "answers_equivalent": True, "entailment_span_ids": [SPAN[4]]}),
        distractor_writer=json_reply(ENTITY_DISTRACTORS),
        option_verifier=option_verifier)


def test_several_options_per_verifier_call_give_the_same_item_in_fewer_calls() -> None:
    single, single_srv = _run(_entity_scripts(_option_verifier))
    multi, multi_srv = _run(_entity_scripts(_multi_option_verifier()), ConstructionOptions(options_per_call=4))
    assert len(single.items) == len(multi.items) == 1
    assert {d.text for d in multi.items[0].distractors} == {d.text for d in single.items[0].distractors}
    assert all(d.verification == "model-verified" for d in multi.items[0].distractors)
    single_calls = len(single_srv.requests_for("option_verifier"))
    multi_calls = multi_srv.requests_for("option_verifier")
    assert len(multi_calls) < single_calls and len(multi_calls) <= -(-single_calls // 4) + 1
    assert all("Options to check:" in r.body["messages"][-1]["content"] for r in multi_calls)
    assert [c.verdict for c in multi.option_checks[0].checks] == [c.verdict for c in single.option_checks[0].checks]


def test_an_option_the_multi_reply_leaves_out_is_rejected_not_admitted() -> None:
    result, _ = _run(_entity_scripts(_multi_option_verifier(leave_out="Metridia longa")),
                     ConstructionOptions(options_per_call=8))
    checks = {c.text: c for c in result.option_checks[0].checks}
    left_out = checks["Metridia longa"]
    assert not left_out.admitted and left_out.rejection is not None
    assert left_out.rejection.rule_id == "option.not_contradicted" and "no verdict" in left_out.rejection.message
    assert checks["Calanus hyperboreus"].admitted
