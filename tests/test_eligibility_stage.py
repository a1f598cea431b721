"""The eligibility stage: finding sites, judging them, combining verdicts, and the site_extractor role."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from arcticqa.errors import InputError
from arcticqa.llm.types import RoleReply
from arcticqa.papers import PaperRecord
from arcticqa.rules import all_rules
from arcticqa.stages.eligibility import (
    SITE_EXTRACTOR_PROMPT,
    LLMSiteExtraction,
    ProposedSite,
    SiteExtractorReply,
    assess,
    baseline_site_proposals,
    decide_eligibility,
    extract_sites_llm,
    find_sites,
    load_eligibility_policy,
    site_extractor_variables,
)
from tests.document_factories import sectioned_document

REPO = Path(__file__).resolve().parent.parent


def _paper(abstract: str | None, title: str | None = None) -> PaperRecord:
    return PaperRecord(paperId="p1", title=title, abstract=abstract)




@pytest.fixture(scope="module")
def policy():
    return load_eligibility_policy()


# --- policy -----------------------------------------------------------------------------------
def test_default_policy_loads_from_any_cwd_with_its_hash(policy, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    again = load_eligibility_policy()
    path = REPO / "data" / "policies" / "eligibility.toml"
    assert again.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() == policy.sha256
    assert again.site_rule == "all" and again.arctic_circle_lat == 66.56
    assert again.regions_file.is_file() and again.gazetteer_file.is_file()


@pytest.mark.parametrize(("body", "field", "line"), [
    ('version = "x"\nsite_rule = "some"\nregions_file = "r"\ngazetteer_file = "g"\n', "site_rule", None),
    ('version = "x"\nregions_file = "r"\n', "gazetteer_file", None),
    ('version = "x"\nsite_rule = all\n', None, 2),
    ('version = "x"\nlab_model_cues = ["(unclosed"]\nregions_file = "r"\ngazetteer_file = "g"\n',
     "lab_model_cues", None),
    ('version = "x"\nsha256 = "forged"\nregions_file = "r"\ngazetteer_file = "g"\n', "sha256", None),
    ('version = "x"\nmarginal_sea_south_share = 0.9\nregions_file = "r"\ngazetteer_file = "g"\n',
     "marginal_sea_south_share", None),
    ('version = "x"\nmarginal_sea_south_share = -0.01\nregions_file = "r"\ngazetteer_file = "g"\n',
     "marginal_sea_south_share", None),
])
def test_bad_policy_files_name_file_field_and_line(tmp_path, body, field, line) -> None:
    p = tmp_path / "policy.toml"
    p.write_text(body, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_eligibility_policy(p)
    assert err.value.path == str(p)
    assert err.value.field == field
    assert err.value.line == line


# --- decisions --------------------------------------------------------------------------------
@pytest.mark.parametrize(("abstract", "decision", "rule_ids"), [
    ("Soil respiration was measured at Ny-Ålesund, Svalbard.", "eligible",
     ["eligibility.site_north_of_circle"]),
    ("CTD casts in Fram Strait at 79°N, 0°E.", "eligible", ["eligibility.site_in_arctic_region"]),
    ("Sediment traps were moored at 70°N, 170°W and 70°N, 175°E.", "eligible",
     ["eligibility.site_in_arctic_region"]),
    ("Harbour sediments were sampled in Reykjavík.", "ineligible", ["eligibility.south_of_arctic_circle"]),
    ("Ice cores were drilled near McMurdo Station.", "ineligible", ["eligibility.southern_hemisphere"]),
    ("Phytoplankton were sampled in the Baltic Sea.", "ineligible", ["eligibility.outside_arctic_regions"]),
    ("A cruise in the Chukchi Sea.", "needs_review",
     ["eligibility.uncertain_sites", "eligibility.site_straddles_circle"]),
    ("Greenland ice melt was analysed.", "needs_review",
     ["eligibility.uncertain_sites", "eligibility.site_straddles_circle"]),
    ("We compare Abisko with Uppsala (59.86°N, 17.64°E).", "needs_review", ["eligibility.mixed_sites"]),
    ("A laboratory experiment on brine channel growth.", "ineligible", ["eligibility.lab_or_model_only"]),
    ("We present a numerical model of sea ice rheology.", "ineligible", ["eligibility.lab_or_model_only"]),
    ("Sea ice is thinning; we review the literature.", "needs_review", ["eligibility.no_site_found"]),
    ("Polar bear movements in Hudson Bay.", "ineligible", ["eligibility.outside_arctic_regions"]),
])
def test_abstract_only_decisions(policy, abstract: str, decision: str, rule_ids: list[str]) -> None:
    d = assess(_paper(abstract), None, policy=policy)
    assert (d.decision, d.rule_ids) == (decision, rule_ids), [(v.mention.name, v.reason) for v in d.sites]
    assert d.policy_sha256 == policy.sha256 and len(d.regions_sha256) == 64 and len(d.gazetteer_sha256) == 64
    if decision != "eligible":
        assert d.rejections and all(r.stage == "eligibility" for r in d.rejections)
    declared = {r.id for r in all_rules()}
    assert set(d.rule_ids) <= declared


def test_site_rules_any_all_majority(policy) -> None:
    abstract = "Sites: Abisko, Tromsø and Trondheim."  # two Arctic, one not
    decisions = {rule: assess(_paper(abstract), None, policy=policy.model_copy(update={"site_rule": rule}))
                 for rule in ("all", "any", "majority")}
    assert decisions["all"].decision == "needs_review"
    assert decisions["any"].decision == "eligible"
    assert decisions["majority"].decision == "eligible"
    minority = "Sites: Abisko, Trondheim and Reykjavík."
    assert assess(_paper(minority), None,
                  policy=policy.model_copy(update={"site_rule": "majority"})).decision == "ineligible"
    strict = assess(_paper(abstract), None, policy=policy.model_copy(update={"on_mixed": "ineligible"}))
    assert strict.decision == "ineligible"
    assert strict.rule_ids == ["eligibility.mixed_sites", "eligibility.south_of_arctic_circle"]


def test_policy_choices_change_named_sea_decisions(policy) -> None:
    chukchi = _paper("A cruise in the Chukchi Sea.")
    assert assess(chukchi, None, policy=policy.model_copy(
        update={"marginal_seas": "whole_region"})).decision == "eligible"
    hudson = _paper("Polar bear movements in Hudson Bay.")
    assert assess(hudson, None, policy=policy.model_copy(update={"hudson_bay": "eligible"})).decision == "eligible"


def test_coordinates_next_to_a_place_are_that_place(policy) -> None:
    sites = find_sites(None, _paper("Samples from Ny-Ålesund (78°55′N, 11°56′E) were analysed."), policy)
    coords = [s for s in sites if s.source == "coordinates"]
    assert len(coords) == 1 and coords[0].place == "Ny-Ålesund" and coords[0].kind == "land"
    d = decide_eligibility(_paper(None), sites, policy)
    assert d.decision == "eligible"
    assert {v.site_key for v in d.sites} == {"place:Ny-Ålesund"}


def test_background_sections_do_not_decide_but_are_listed(policy) -> None:
    doc = sectioned_document([
        ("introduction", "Earlier work near Uppsala (59.86°N, 17.64°E) and at McMurdo Station motivated us."),
        ("study_area", "The study site is Zackenberg in Northeast Greenland (74.47°N, 20.57°W)."),
        ("references", "Smith (2001) Sea ice off Reykjavík. J. Glaciol."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "eligible"
    background = [v for v in d.sites if v.verdict == "background"]
    assert {v.mention.name for v in background} >= {"McMurdo Station", "Reykjavík"}
    assert all(v.rule_id == "eligibility.background_mention" for v in background)
    primary = [v for v in d.sites if v.mention.primary]
    assert all(v.mention.span_id in {s.id for s in doc.spans} for v in primary)
    for v in d.sites:  # offsets address the cited span's text exactly
        span = doc.span(v.mention.span_id)
        assert span is not None and span.text[v.mention.start:v.mention.end] == v.mention.text
        assert doc.text[v.mention.doc_start:v.mention.doc_start + len(v.mention.text)] == v.mention.text


def test_only_background_sites_need_review(policy) -> None:
    doc = sectioned_document([("introduction", "Svalbard glaciers are retreating."),
                     ("methods", "We analysed satellite altimetry records.")])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "needs_review" and d.rule_ids == ["eligibility.no_site_found"]
    assert d.rejections[0].evidence["background"] == ["Svalbard"]


def test_explain_json_shape(policy) -> None:
    d = assess(_paper("CTD casts in Fram Strait at 79°N, 0°E."), None, policy=policy)
    js = d.explain_json()
    assert js["decision"] == "eligible" and js["rule_ids"] == d.rule_ids
    for site in js["sites"]:
        assert {"name", "lat", "lon", "kind", "source", "region", "eligible"} <= set(site)
    assert {s["region"] for s in js["sites"]} == {"Fram Strait"}


# --- the site_extractor role ------------------------------------------------------------------
class _FakeRole:
    """A RoleClient that answers with a fixed reply and records what it was asked."""

    def __init__(self, reply: SiteExtractorReply) -> None:
        self.reply = reply
        self.calls: list[tuple[str, str, Mapping[str, Any], str | None]] = []

    async def ask(self, role, prompt, variables, response_model, *, subject=None):
        self.calls.append((role, prompt, variables, subject))
        assert response_model is SiteExtractorReply
        return RoleReply(output=self.reply, role=role, provider="fake", model="fake-1",
                         prompt_version=f"{prompt}#000000000000", request_hash="h" * 64, cached=False)


def test_llm_sites_are_checked_against_their_spans(policy) -> None:
    doc = sectioned_document([
        ("abstract", "We studied thaw ponds."),
        ("study_area", "Ponds near the Trail Valley Creek station and a lake at 68°45′N, 133°30′W were sampled."),
        ("methods", "Water samples were filtered."),
    ])
    area = doc.spans[1].id
    reply = SiteExtractorReply(sites=[
        ProposedSite(name="Trail Valley Creek", span_id=area, kind="land"),
        ProposedSite(name="a lake", span_id=area, kind="land"),
        ProposedSite(name="Ny-Ålesund", span_id=area),                 # not in that span
        ProposedSite(name="Tiksi", span_id="sp-doesnotexist00"),       # no such span
        ProposedSite(name="the pond field", span_id=doc.spans[2].id),  # not in that span either
    ])
    fake = _FakeRole(reply)
    result = asyncio.run(extract_sites_llm(doc, _paper(None), fake, policy))
    role, prompt, variables, subject = fake.calls[0]
    assert (role, prompt, subject) == ("site_extractor", SITE_EXTRACTOR_PROMPT, "p1")
    assert [s["id"] for s in variables["spans"]] == [s.id for s in doc.spans]
    assert [s.name for s in result.sites] == ["Trail Valley Creek", "a lake"]
    trail, lake = result.sites
    assert (trail.lat, trail.place, trail.kind) == (68.74, "Trail Valley Creek", "land")
    assert lake.lat == pytest.approx(68.75) and lake.lon == pytest.approx(-133.5)  # from the span, not the model
    assert lake.kind == "unknown"
    assert sorted(r.rule_id for r in result.rejections) == [
        "eligibility.llm_name_not_in_span", "eligibility.llm_name_not_in_span", "eligibility.llm_span_unresolved"]
    assert result.provenance["prompt_version"].startswith("site_extractor/v1")
    d = assess(_paper(None), doc, llm_sites=result, policy=policy)
    assert d.decision == "eligible"
    assert len(d.warnings) == 3
    assert {v.mention.source for v in d.sites} == {"gazetteer", "coordinates", "llm"}


def test_llm_site_without_location_is_listed_not_decisive(policy) -> None:
    paper = _paper("Sampling took place at the Kangerlussuaq airport site and at a remote fen.")
    reply = SiteExtractorReply(sites=[ProposedSite(name="a remote fen", span_id="abstract")])
    result = asyncio.run(extract_sites_llm(None, paper, _FakeRole(reply), policy))
    assert result.sites[0].lat is None
    d = assess(paper, None, llm_sites=result, policy=policy)
    unlocated = [v for v in d.sites if v.verdict == "unlocated"]
    assert [v.rule_id for v in unlocated] == ["eligibility.site_unlocated"]
    assert d.decision == "eligible"  # Kangerlussuaq, 67.01°N, decides


def test_baseline_proposals_cite_real_spans(policy) -> None:
    doc = sectioned_document([("study_area", "Moorings in Fram Strait and at HAUSGARTEN."), ("methods", "No places.")])
    variables = site_extractor_variables(doc, _paper(None), policy)
    reply = baseline_site_proposals(variables)
    assert [(s.name, s.span_id) for s in reply.sites] == [("Fram Strait", doc.spans[0].id),
                                                          ("HAUSGARTEN", doc.spans[0].id)]
    fake = _FakeRole(reply)
    result = asyncio.run(extract_sites_llm(doc, _paper(None), fake, policy))
    assert isinstance(result, LLMSiteExtraction) and result.rejections == []
    assert [s.region_hint for s in result.sites] == ["Fram Strait", None]


def test_prompt_file_renders_with_the_stage_variables(policy) -> None:
    import jinja2

    raw = (REPO / "prompts" / "site_extractor" / "v1.md").read_text(encoding="utf-8")
    assert "=== system ===" in raw and "=== user ===" in raw
    user = raw.split("=== user ===", 1)[1]
    doc = sectioned_document([("study_area", "Moorings in Fram Strait.")])
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(user).render(
        **site_extractor_variables(doc, _paper(None, title="Moorings"), policy))
    assert doc.spans[0].id in rendered and "Moorings in Fram Strait." in rendered


@pytest.mark.parametrize(("abstract", "decision", "context"), [
    ("Ponds were sampled at Zackenberg in Northeast Greenland.", "eligible", ["Greenland"]),
    ("We surveyed the Chukchi Sea shelf. " + "Filler sentence without places. " * 6
     + "Station C1 was at 72°N, 165°W.", "eligible", ["Chukchi Sea"]),
    ("Glaciers of Greenland and of Svalbard were compared.", "needs_review", []),  # Svalbard is far from Greenland
    ("Lakes in Greenland near Nuuk were sampled.", "ineligible", ["Greenland"]),
])
def test_a_site_inside_a_straddling_feature_makes_it_precise(policy, abstract, decision, context) -> None:
    d = assess(_paper(abstract), None, policy=policy)
    assert d.decision == decision, [(v.mention.name, v.verdict, v.reason) for v in d.sites]
    assert [v.mention.name for v in d.sites if v.verdict == "context"] == context
    assert all(v.rule_id == "eligibility.region_refined_by_site" for v in d.sites if v.verdict == "context")


def test_coordinates_take_the_most_specific_nearby_place(policy) -> None:
    # 77°N 33°E lies in the Barents Sea, east of Svalbard: the sea, not the archipelago, is the place
    sites = find_sites(None, _paper("Stations in the Barents Sea east of Svalbard, e.g. 77.00°N, 33.00°E."), policy)
    coord = next(s for s in sites if s.source == "coordinates")
    assert (coord.place, coord.kind) == ("Barents Sea", "sea")
    # a latitude band with no longitude is placed by the named sea next to it
    band = find_sites(None, _paper("Survey of the Kara Sea between 72°N and 76°N."), policy)
    lats = [s for s in band if s.source == "coordinates"]
    assert [s.region_hint for s in lats] == ["Kara Sea", "Kara Sea"]
    d = decide_eligibility(_paper(None), band, policy)
    assert d.decision == "eligible" and d.rule_ids == ["eligibility.site_in_arctic_region"]
