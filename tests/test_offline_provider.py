"""The offline provider, role by role, on hand-written sentences (numbers with units, directions,
Cyrillic), always through the real Gateway with default settings, so every call is an
``llm_call`` record with provider ``offline`` and zero cost; plus one whole construction run."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from arcticqa.config import Settings
from arcticqa.evidence import Document, Section, Span, sha256_text, span_id_for
from arcticqa.gates.numbers import parse_numbers
from arcticqa.gates.question import answer_leak, not_standalone
from arcticqa.llm.gateway import Gateway, MemoryRecorder
from arcticqa.papers import PaperRecord
from arcticqa.stages.construct import ConstructionOptions, construct_items
from arcticqa.stages.distractors import DistractorWriterOutput
from arcticqa.stages.eligibility import SiteExtractorReply
from arcticqa.stages.findings import FindingExtractorOutput
from arcticqa.stages.option_check import OptionVerdict, OptionVerdicts
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.reconstruct import Reconstruction
from arcticqa.stages.verify import Verdict
from arcticqa.standins.offline.roles import OFFLINE_ROLES

RESULT = ("Mean end-of-season active-layer thickness increased by 18% between 2012 and 2021. "
          "In absolute terms the fitted mean was 0.73 m in 2021.")
SETTING = ("The monitoring grid lies in the Bayelva catchment near Ny-Ålesund, Svalbard (78.92°N, 11.83°E), "
           "25 m above sea level.")
RU_RESULT = "Среднегодовая температура пород на глубине 10 м повысилась на 0,6 °C за период 2008–2017 гг."
SPANS = [{"id": "sp-res", "section": "results", "text": RESULT},
         {"id": "sp-site", "section": "study_area", "text": SETTING}]


def _ask(role: str, prompt: str, variables: dict[str, Any], model: type[BaseModel],
         recorder: MemoryRecorder | None = None) -> Any:
    async def go() -> Any:
        async with Gateway(Settings(), recorder or MemoryRecorder(), offline_roles=OFFLINE_ROLES) as gw:
            return await gw.ask(role, prompt, variables, model, subject="t")
    return asyncio.run(go())


def test_finding_extractor_picks_number_with_unit_and_period_and_records_an_offline_call() -> None:
    recorder = MemoryRecorder()
    reply = _ask("finding_extractor", "finding_extractor/v1",
                 {"paper_id": "p", "title": "t", "k": 3, "spans": SPANS}, FindingExtractorOutput, recorder)
    assert reply.provider == "offline"
    top = reply.output.findings[0]
    assert (top.answer, top.answer_type, top.unit) == ("18%", "numeric", "%")
    assert top.span_ids == ["sp-res"]
    assert top.scope.period == "between 2012 and 2021"
    assert top.scope.location and "Bayelva" in top.scope.location
    assert "sp-site" in top.scope_span_ids
    [record] = recorder.records
    assert (record.provider, record.role, record.cost_usd, record.attempt) == ("offline", "finding_extractor", 0.0, 1)
    assert record.parsed is not None and record.error is None


def test_finding_extractor_skips_cited_work_no_trend_and_ranks_hedges_last() -> None:
    spans = [{"id": "a", "section": "results", "text": "Moss cover may have increased by 12% in some plots."},
             {"id": "b", "section": "results", "text": "Snow depth showed no significant trend (p = 0.41)."},
             {"id": "c", "section": "results", "text": "Smith et al. (2019) reported that shrub cover rose by 30%."},
             {"id": "d", "section": "results", "text": "Bottom temperature at station B8 rose by 0.8 °C between "
                                                        "2016 and 2022."}]
    out = _ask("finding_extractor", "finding_extractor/v1", {"paper_id": "p", "title": "", "k": 3, "spans": spans},
               FindingExtractorOutput).output
    assert [f.answer for f in out.findings] == ["0.8 °C", "12%"]


def test_cyrillic_numbers_units_and_question_template() -> None:
    spans = [{"id": "ru", "section": "results", "text": RU_RESULT}]
    finding = _ask("finding_extractor", "finding_extractor/v1", {"paper_id": "p", "title": "", "k": 1,
                                                                  "spans": spans}, FindingExtractorOutput).output
    top = finding.findings[0]
    assert top.answer == "0,6 °C" and top.scope.period == "за период 2008–2017 гг."
    draft = _ask("question_writer", "question_writer/v1", {
        "finding": {"claim": top.claim, "answer_type": top.answer_type, "unit": top.unit,
                    "claim_type": top.claim_type, "scope": top.scope.values()},
        "answer": top.answer, "spans": spans, "revision": 0, "feedback": [], "previous": None,
    }, QuestionDraft).output
    assert draft.question.startswith("На сколько повысилась") and draft.question.endswith("?")
    assert answer_leak(draft.question, draft.question_context, top.answer) is None
    rebuilt = _ask("reconstructor", "reconstructor/v1", {"question": draft.question,
                                                        "question_context": draft.question_context,
                                                        "spans": spans}, Reconstruction).output
    assert rebuilt.answer == "0,6 °C"
    options = _ask("distractor_writer", "distractor_writer/v1", {
        "question": draft.question, "question_context": "", "answer": top.answer,
        "finding": {"claim": top.claim, "answer_type": "numeric", "unit": top.unit, "claim_type": "observation",
                    "scope": {}}, "spans": spans}, DistractorWriterOutput).output
    assert all(o.text.endswith(" °C") and "," in o.text for o in options.candidates)
    assert "0,6 °C" not in [o.text for o in options.candidates]


def test_question_writer_replaces_answer_with_interrogative_and_moves_scope_to_context() -> None:
    draft = _ask("question_writer", "question_writer/v1", {
        "finding": {"claim": RESULT.split(". ")[0] + ".", "answer_type": "numeric", "unit": "%",
                    "claim_type": "observation",
                    "scope": {"location": "Bayelva catchment", "period": "between 2012 and 2021"}},
        "answer": "18%", "spans": SPANS, "revision": 0, "feedback": [], "previous": None,
    }, QuestionDraft).output
    assert draft.question == ("By what percentage did the mean end-of-season active-layer thickness increase "
                              "between 2012 and 2021 in the Bayelva catchment?")
    assert "78.92°N" in draft.question_context
    assert answer_leak(draft.question, draft.question_context, "18%") is None
    assert not_standalone(draft.question, draft.question_context) is None


def test_reconstructor_answers_blind_and_lists_same_unit_alternatives() -> None:
    q = {"question": "By what percentage did the mean end-of-season active-layer thickness increase between "
                     "2012 and 2021?", "question_context": "", "spans": SPANS}
    out = _ask("reconstructor", "reconstructor/v1", q, Reconstruction).output
    assert (out.answer, out.span_ids, out.alternatives) == ("18%", ["sp-res"], [])
    two = [{"id": "x", "section": "results",
            "text": "In 2019, mean moss cover was estimated at 35% by the first observer and at 52% by the second."}]
    out = _ask("reconstructor", "reconstructor/v1",
               {"question": "What was mean moss cover in 2019?", "question_context": "", "spans": two},
               Reconstruction).output
    assert out.answer in ("35%", "52%") and len(out.alternatives) == 1


def _verify(text: str, answer: str, recon_answer: str) -> Verdict:
    spans = [{"id": "v", "section": "results", "text": text}]
    return _ask("verifier", "verifier/v1", {
        "question": "By how many days did snowmelt advance between 2010 and 2018?", "question_context": "",
        "answer": answer, "finding": {"claim": text, "claim_type": "observation", "scope": {},
                                      "answer_type": "numeric", "unit": None},
        "spans": spans, "reconstruction": {"answer": recon_answer, "span_ids": ["v"], "claim_type": "observation",
                                           "alternatives": []},
        "judge_equivalence": False}, Verdict).output


def test_verifier_entails_plain_statements_and_rejects_hedged_ones() -> None:
    ok = _verify("Mean snowmelt advanced by 11 days between 2010 and 2018.", "11 days", "11 days")
    assert ok.entailed and ok.scope_preserved and not ok.defensible_alternatives
    hedged = _verify("Snowmelt may have advanced by 11 days between 2010 and 2018.", "11 days", "11 days")
    assert not hedged.entailed and "hedge" in hedged.reason
    either = _verify("Mean snowmelt was either 4 days earlier or 3 days later in 2020.", "4 days", "4 days")
    assert not either.entailed


def test_distractor_writer_numeric_keeps_unit_and_precision() -> None:
    spans = [{"id": "s", "section": "results", "text": "Transmittance averaged 1.8% at the five stations."}]
    out = _ask("distractor_writer", "distractor_writer/v1", {
        "question": "What was the average transmittance at the five stations?", "question_context": "",
        "answer": "1.8%", "finding": {"claim": "", "answer_type": "numeric", "unit": "%",
                                      "claim_type": "observation", "scope": {}}, "spans": spans},
        DistractorWriterOutput).output
    for c in out.candidates[:4]:
        [n] = parse_numbers(c.text)
        assert (n.unit, n.decimals, c.type) == ("%", 1, "numeric") and n.value != 1.8


def test_distractor_writer_reverses_directions_and_swaps_set_members() -> None:
    spans = [{"id": "s", "section": "results", "text": "Biomass of Calanus finmarchicus increased at the five "
                                                        "northernmost stations."}]
    out = _ask("distractor_writer", "distractor_writer/v1", {
        "question": "Did biomass of Calanus finmarchicus increase or decrease?", "question_context": "",
        "answer": "increased", "finding": {"claim": "", "answer_type": "direction", "unit": None,
                                           "claim_type": "observation", "scope": {}}, "spans": spans},
        DistractorWriterOutput).output
    assert out.candidates[0].text in ("decreased", "declined", "dropped", "fell", "reduced")
    spans = [{"id": "s", "section": "results",
              "text": "Only Salix arctica and Dryas octopetala flowered in all 24 plots."},
             {"id": "m", "section": "methods", "text": "Species monitored: Dryas octopetala, Salix arctica, "
                                                        "Cassiope tetragona and Papaver radicatum."}]
    out = _ask("distractor_writer", "distractor_writer/v1", {
        "question": "Which species were the only ones that flowered in all 24 plots?", "question_context": "",
        "answer": "Salix arctica and Dryas octopetala",
        "finding": {"claim": "", "answer_type": "set", "unit": None, "claim_type": "observation", "scope": {}},
        "spans": spans}, DistractorWriterOutput).output
    assert any("Cassiope tetragona" in c.text for c in out.candidates[:2])


def _option(option: str, answer: str = "18%") -> OptionVerdict:
    return _ask("option_verifier", "option_verifier/v1", {
        "question": "By what percentage did thickness increase?", "question_context": "", "answer": answer,
        "option": option, "option_type": "numeric", "scope": {}, "spans": SPANS}, OptionVerdict).output


def test_option_verifier_admits_only_what_a_rule_proves() -> None:
    assert _option("28%").verdict == "contradicted" and _option("28%").span_ids == ["sp-res"]
    assert _option("Cassiope tetragona", answer="Dryas octopetala").verdict == "not_addressed"
    assert _option("0.73 m", answer="0.5 m").verdict == "supported"


def test_option_verifier_judges_several_options_in_one_call_as_it_would_one_by_one() -> None:
    out = _ask("option_verifier", "option_verifier/multi-v1", {
        "question": "By what percentage did thickness increase?", "question_context": "", "answer": "18%",
        "options": [{"id": 3, "text": "28%", "type": "numeric"}, {"id": 7, "text": "0.73 m", "type": "numeric"}],
        "scope": {}, "spans": SPANS}, OptionVerdicts).output
    assert [(v.option_id, v.verdict) for v in out.verdicts] == [(3, _option("28%").verdict), (7, "supported")]
    assert out.verdicts[0].span_ids == ["sp-res"]


def test_site_extractor_names_gazetteer_places_and_bare_coordinates() -> None:
    spans = [{"id": "a", "section": "study_area", "text": SETTING},
             {"id": "b", "section": "study_area", "text": "A second plot lay at 69.10°N, 16.05°E on a hill."}]
    out = _ask("site_extractor", "site_extractor/v1", {"paper_id": "p", "title": "", "spans": spans},
               SiteExtractorReply).output
    names = {(s.name, s.span_id) for s in out.sites}
    assert ("Ny-Ålesund", "a") in names and ("Svalbard", "a") in names
    assert any(s.span_id == "b" and "69.10" in s.name for s in out.sites)


# ---- one whole construction -----------------------------------------------------------------

_PARTS = [
    ("abstract", "Ground temperature was monitored in the Bayelva catchment, Svalbard."),
    ("study_area", SETTING),
    ("methods", "Thaw depth was probed at 121 grid nodes every year."),
    ("results", "Mean annual ground temperature at 2 m depth rose by 0.9 °C between 2012 and 2021. Snow depth "
                "showed no significant trend."),
]


def _document() -> Document:
    text, sections, spans = "", [], []
    doc_sha = sha256_text("offline-paper")
    for kind, part in _PARTS:
        start = len(text)
        text += part
        end = len(text)
        text += "\n\n"
        sections.append(Section(title=kind, kind=kind, start=start, end=end))
        spans.append(Span(id=span_id_for(doc_sha, start, end), section=kind, page=1, start=start, end=end,
                          text=part, sha256=sha256_text(part)))
    return Document(sha256=doc_sha, pages=1, text=text, sections=sections, spans=spans)


def test_construct_items_offline_accepts_an_item_proved_by_rules_and_keeps_the_reconstructor_blind() -> None:
    recorder = MemoryRecorder()
    paper = PaperRecord(paperId="p-offline", title="Ground warming at Bayelva", year=2022)

    async def go() -> Any:
        async with Gateway(Settings(), recorder, offline_roles=OFFLINE_ROLES) as gw:
            return await construct_items(paper, _document(), gw, ConstructionOptions())

    result = asyncio.run(go())
    [item] = result.items
    assert item.gold_answer == "0.9 °C"
    assert item.question.startswith("By how many degrees Celsius did the mean annual ground temperature")
    assert len(item.distractors) == 4
    assert {d.verification for d in item.distractors} == {"deterministic-contradiction"}
    assert {d.rule for d in item.distractors} == {"numeric_outside_tolerance"}
    assert {r.provider for r in recorder.records} == {"offline"}
    assert sum(r.cost_usd for r in recorder.records) == 0.0
    recon = [r for r in recorder.records if r.role == "reconstructor"]
    assert recon
    for r in recon:
        assert set(r.request["variables"]) == {"question", "question_context", "spans"}
        assert "0.9" not in r.request["variables"]["question"] + r.request["variables"]["question_context"]
