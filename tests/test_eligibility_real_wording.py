"""Eligibility on wording seen in published papers: Russian hemisphere abbreviations, places named
as bounds or reference points (landmarks), large regions far from the Arctic, marginal seas almost
wholly north of the circle, global studies with straddling regions, places named only with cited
work, and mainland Norway's glaciers.

Every rule that can turn a mention into "not a site" or "not Arctic" is also tested on text where
it must not fire: a check that proves something false must never fire on a true thing.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.geo.citations import cited_phrase
from arcticqa.geo.coordinates import parse_coordinates
from arcticqa.geo.gazetteer import load_gazetteer
from arcticqa.geo.landmarks import landmark_phrase
from arcticqa.llm.types import RoleReply
from arcticqa.papers import PaperRecord
from arcticqa.stages.eligibility import (
    SiteExtractorReply,
    assess,
    baseline_site_proposals,
    extract_sites_llm,
    find_sites,
    load_eligibility_policy,
)
from tests.document_factories import sectioned_document

CIRCLE = 66.56
FAR_NOTE = "far from the Arctic"


@pytest.fixture(scope="module")
def policy():
    return load_eligibility_policy()


@pytest.fixture(scope="module")
def gazetteer(policy):
    return load_gazetteer(policy.gazetteer_file)


def _paper(abstract: str | None) -> PaperRecord:
    return PaperRecord(paperId="p1", title=None, abstract=abstract)




def _points(text: str) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for c in parse_coordinates(text).coordinates:
        if c.lat_min is not None and c.lat_max is not None:
            out.append(("band", round(c.lat_min, 4), round(c.lat_max, 4)))
        else:
            out.append((round(c.lat, 4), None if c.lon is None else round(c.lon, 4)))
    return out


def _landmarks(text: str, gazetteer) -> dict[str, str | None]:
    places = gazetteer.find(text)
    anchors = ([(p.start, p.end) for p in places]
               + [(c.start, c.end) for c in parse_coordinates(text).coordinates])
    return {p.text: landmark_phrase(text, p.start, p.end, anchors) for p in places}


# --- Russian hemisphere abbreviations ---------------------------------------------------------
RUSSIAN: list[tuple[str, list[tuple[Any, ...]]]] = [
    ("(72°22′ с. ш., 126°29′ в. д.)", [(72.3667, 126.4833)]),
    ("72°22' с.ш., 126°29' в.д.", [(72.3667, 126.4833)]),
    ("72°22' с.ш.", [(72.3667, None)]),
    ("72°22′ с.ш", [(72.3667, None)]),
    ("71,59° с. ш., 128,92° в. д.", [(71.59, 128.92)]),
    ("71,59° с. ш. 128,92° в. д.", [(71.59, 128.92)]),
    ("77°51′ ю. ш., 166°40′ в. д.", [(-77.85, 166.6667)]),
    ("64°09′ с. ш., 21°56′ з. д.", [(64.15, -21.9333)]),
    ("68°38′ с. ш. и 149°36′ з. д.", [(68.6333, -149.6)]),
    ("72° 22′ 30″ с. ш., 126° 29′ в. д.", [(72.375, 126.4833)]),
    ("72°22′ С. Ш., 126°29′ В. Д.", [(72.3667, 126.4833)]),
    ("72°22′ сев. шир., 126°29′ вост. долг.", [(72.3667, 126.4833)]),
    ("72° северной широты и 126° восточной долготы", [(72.0, 126.0)]),
    ("широта 72,5° с. ш., долгота 126,5° в. д.", [(72.5, 126.5)]),
    ("72–74° с. ш.", [("band", 72.0, 74.0)]),
    ("от 70° до 75° с. ш.", [("band", 70.0, 75.0)]),
    ("72°22′ с. ш., 126°29′ в. д. Далее", [(72.3667, 126.4833)]),
]


@pytest.mark.parametrize(("text", "expected"), RUSSIAN)
def test_russian_hemisphere_abbreviations_read_as_coordinates(text: str, expected: list) -> None:
    assert _points(text) == expected
    assert not parse_coordinates(text).rejected


@pytest.mark.parametrize("text", [
    "72° с шагом 5°",             # the preposition "с" (with) after a degree value
    "нагрев до 10° в докладе",     # the preposition "в" (in)
    "угол 35° с учётом наклона",
    "при 20 °C в день",
    "72 с. ш.",                    # no degree mark: too weak, like "72 N"
])
def test_russian_prepositions_are_not_hemispheres(text: str) -> None:
    assert parse_coordinates(text).coordinates == []


def test_russian_abbreviations_on_generated_points() -> None:
    rng = random.Random(34)
    forms = {"N": ["с. ш.", "с.ш.", "с. ш", "сев. шир."], "S": ["ю. ш.", "ю.ш."],
             "E": ["в. д.", "в.д.", "вост. долг."], "W": ["з. д.", "з.д."]}
    for _ in range(300):
        lat_hem, lon_hem = rng.choice("NS"), rng.choice("EW")
        d, m = rng.randint(0, 89), rng.randint(0, 59)
        e, n = rng.randint(0, 179), rng.randint(0, 59)
        text = (f"({d}°{m:02d}′ {rng.choice(forms[lat_hem])}, {e}°{n:02d}′ {rng.choice(forms[lon_hem])})")
        lat = (d + m / 60) * (1 if lat_hem == "N" else -1)
        lon = (e + n / 60) * (1 if lon_hem == "E" else -1)
        assert _points(text) == [(round(lat, 4), round(lon, 4))], text


def test_russian_lena_delta_island_is_eligible_in_explain() -> None:
    text = ("Полевые работы проводились на острове в дельте Лены (72°22′ с. ш., 126°29′ в. д.) "
            "в 2016–2018 гг.")
    result = CliRunner().invoke(app, ["eligibility", "explain", "--text", text, "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["decision"] == "eligible", out
    (site,) = out["sites"]
    assert site["source"] == "coordinates" and site["lat"] == pytest.approx(72.3667, abs=1e-3)
    assert site["lon"] == pytest.approx(126.4833, abs=1e-3)


@pytest.mark.parametrize(("abstract", "decision", "rule"), [
    ("Скважина у посёлка (71,59° с. ш., 128,92° в. д.).", "eligible", "eligibility.site_in_arctic_region"),
    ("Отбор проб на станции (77°51′ ю. ш., 166°40′ в. д.).", "ineligible", "eligibility.southern_hemisphere"),
    ("Измерения в Рейкьявике (64°09′ с. ш., 21°56′ з. д.).", "ineligible", "eligibility.south_of_arctic_circle"),
])
def test_russian_coordinates_decide(policy, abstract: str, decision: str, rule: str) -> None:
    d = assess(_paper(abstract), None, policy=policy)
    assert d.decision == decision and rule in d.rule_ids, [(v.mention.name, v.reason) for v in d.sites]


# --- landmarks: places named as bounds or reference points --------------------------------------
PALERME_LIKE = ("Two parts of the ice edge in the observations were located between Iceland and the "
                "southeast coast of Greenland (about 68°N, 25°W) the first day, but not the second day.")


@pytest.mark.parametrize(("text", "landmarks"), [
    (PALERME_LIKE, {"Iceland", "Greenland"}),
    ("Moorings were deployed off Svalbard.", {"Svalbard"}),
    ("Moorings were deployed off the west coast of Greenland.", {"Greenland"}),
    ("Drift buoys were placed offshore of Tromsø.", {"Tromsø"}),
    ("The Barents Sea south of Svalbard was ice-free.", {"Svalbard"}),
    ("Ice was sampled north of Iceland.", {"Iceland"}),
    ("The floe drifted to the north of Tromsø.", {"Tromsø"}),
    ("The core site lies 360 km east of Greenland.", {"Greenland"}),
    ("The sea ice extended as far as Novaya Zemlya.", {"Novaya Zemlya"}),
    ("Drift ice reached as far south as Iceland.", {"Iceland"}),
    ("The ship sailed from Tromsø to Longyearbyen.", {"Tromsø", "Longyearbyen"}),
    ("The transect ran from 70°N to Svalbard.", {"Svalbard"}),
    ("The basin is bounded by Greenland and Svalbard.", {"Greenland", "Svalbard"}),
    ("Observations in the northern Fram Strait between Greenland and Svalbard.", {"Greenland", "Svalbard"}),
    ("Bjørnøya lies halfway between Svalbard and the Norwegian mainland.", {"Svalbard"}),
])
def test_bound_and_reference_phrases_name_landmarks(gazetteer, text: str, landmarks: set[str]) -> None:
    found = _landmarks(text, gazetteer)
    assert {name for name, phrase in found.items() if phrase} == landmarks, found


@pytest.mark.parametrize("text", [
    "Soil respiration was measured at Ny-Ålesund.",
    "Snow pits were dug in Svalbard in April.",
    "The field station near Tromsø.",
    "Data from Zackenberg were analysed.",
    "Data from Ny-Ålesund to evaluate the model were used.",
    "Samples from Ny-Ålesund (78.92°N, 11.93°E) to the laboratory.",
    "Differences between Svalbard and Greenland sites were small.",
    "We compared snow depth between Abisko and Kiruna.",
    "We compared data from Zackenberg to Abisko.",
    "Between 1999 and 2014, moorings in the Barents Sea and Svalbard fjords were serviced.",
    "Plots were set 3 km south of Ny-Ålesund.",
    "Plots lie just north of Utqiaġvik.",
    "Lakes in the north of Greenland and in the far north of Alaska were sampled.",
    "The transect runs from the southern Barents Sea to the area south-east of the archipelago.",
    "The station lies on the west coast of Svalbard.",
    "Permafrost cores came from the Lena Delta.",
    "A survey off-season in Svalbard.",
    "The Ayles Ice Shelf broke off Ellesmere Island in 2005.",
])
def test_plain_sites_are_not_landmarks(gazetteer, text: str) -> None:
    found = _landmarks(text, gazetteer)
    assert found and not any(found.values()), found


@pytest.mark.parametrize("template", [
    "Measurements were made at {p}.",
    "Samples were collected in {p} in 2019.",
    "We worked near {p} for three summers.",
    "Data from {p} were analysed.",
    "The {p} site was visited twice.",
    "Soil cores ({p}) were frozen.",
])
def test_no_gazetteer_place_is_a_landmark_in_plain_wording(gazetteer, template: str) -> None:
    for place in gazetteer.places:
        for spelling in (place.name, *place.alternates):
            text = template.format(p=spelling)
            found = _landmarks(text, gazetteer)
            assert not any(found.values()), (text, found)


@pytest.mark.parametrize("template", [
    "Floes were tracked between {a} and the coast of {b} ({c}).",
    "Moorings were deployed off {a} ({c}).",
    "Samples were taken north of {a} ({c}).",
    "The ship drifted as far as {a} ({c}).",
])
def test_the_coordinates_decide_not_the_landmarks_around_them(policy, template: str) -> None:
    rng = random.Random(template)
    arctic, south = ["Tromsø", "Svalbard", "Jan Mayen", "Longyearbyen"], ["Reykjavík", "Trondheim", "Iceland", "Nuuk"]
    for _ in range(20):
        # Arctic landmarks around a point far south, and southern landmarks around an Arctic point
        for names, point, decision in ((arctic, "58.0°N, 3.0°E", "ineligible"), (south, "74.0°N, 5.0°E", "eligible")):
            a, b = rng.sample(names, 2)
            text = template.format(a=a, b=b, c=point)
            d = assess(_paper(text), None, policy=policy)
            assert d.decision == decision, (text, [(v.mention.name, v.verdict, v.reason) for v in d.sites])
            assert all(v.verdict in ("landmark", "eligible", "ineligible") for v in d.sites)
            assert [v.mention.source for v in d.sites if v.verdict != "landmark"] == ["coordinates"], text


def test_palerme_like_sentence_is_eligible_and_the_coordinates_stay_the_site(policy) -> None:
    doc = sectioned_document([("methods", "The ice edge is evaluated in the East Greenland Sea and the Barents Sea."),
                     ("results", PALERME_LIKE)])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "eligible", [(v.mention.name, v.verdict, v.reason) for v in d.sites]
    by_name = {v.mention.name: v for v in d.sites}
    assert by_name["Iceland"].verdict == by_name["Greenland"].verdict == "landmark"
    assert by_name["Iceland"].rule_id == "eligibility.landmark_mention"
    assert "between Iceland and" in by_name["Iceland"].reason
    point = by_name["68°N, 25°W"]
    # the landmark lends its land kind to nothing: the point is judged as a point at sea
    assert point.verdict == "eligible" and point.mention.place is None and point.mention.kind == "unknown"


def test_landmarks_alone_leave_the_paper_for_review(policy) -> None:
    d = assess(_paper("The ice edge lay between Iceland and the southeast coast of Greenland."), None,
               policy=policy)
    assert d.decision == "needs_review" and d.rule_ids == ["eligibility.no_site_found"]
    assert "landmarks: Iceland, Greenland" in d.rejections[0].message


def test_a_landmark_does_not_hide_the_same_place_named_plainly(policy) -> None:
    d = assess(_paper("Ice drifted off Iceland. Harbour sediments were sampled in Reykjavík, Iceland."), None,
               policy=policy)
    assert d.decision == "ineligible", [(v.mention.name, v.verdict) for v in d.sites]
    verdicts = sorted(v.verdict for v in d.sites if v.mention.name == "Iceland")
    assert verdicts == ["ineligible", "landmark"]


def test_coordinates_beside_a_landmark_are_not_that_place(policy) -> None:
    sites = find_sites(None, _paper("Moorings off the coast of Svalbard (78.5°N, 10.0°E)."), policy)
    point = next(s for s in sites if s.source == "coordinates")
    assert point.place is None and point.kind == "unknown"
    d = assess(_paper("Moorings off the coast of Svalbard (78.5°N, 10.0°E)."), None, policy=policy)
    assert d.decision == "eligible"
    near = find_sites(None, _paper("Moorings at Ny-Ålesund (78.92°N, 11.93°E)."), policy)
    assert next(s for s in near if s.source == "coordinates").place == "Ny-Ålesund"


def test_baseline_and_model_sites_respect_landmarks(policy) -> None:
    doc = sectioned_document([("results", PALERME_LIKE)])
    span = doc.spans[0]
    proposals = baseline_site_proposals({"spans": [{"id": span.id, "text": span.text}]})
    assert [p.name for p in proposals.sites] == []

    class _Model:
        async def ask(self, role: str, prompt: str, variables: Any, schema: Any, *, subject: str = "") -> RoleReply:
            reply = SiteExtractorReply.model_validate({"sites": [{"name": "Iceland", "span_id": span.id}]})
            return RoleReply(role=role, provider="fake", model="m", prompt_version=prompt, request_hash="h",
                             output=reply, cached=False, cost_usd=0.0)

    extraction = asyncio.run(extract_sites_llm(doc, _paper(None), _Model(), policy))  # type: ignore[arg-type]
    (site,) = extraction.sites
    assert site.landmark is not None and site.place == "Iceland"
    d = assess(_paper(None), doc, extraction, policy)
    assert d.decision == "eligible"


# --- large regions far from the Arctic ----------------------------------------------------------
def _far_spellings(gazetteer) -> list[tuple[str, Any]]:
    return [(s, p) for p in gazetteer.places if FAR_NOTE in p.note for s in (p.name, *p.alternates)]


def test_far_regions_lie_wholly_south_of_the_circle(gazetteer) -> None:
    far = _far_spellings(gazetteer)
    assert len({p.name for _, p in far}) >= 15
    for _, place in far:
        assert place.lat_min is not None and place.lat_max is not None and place.lat_max < CIRCLE, place


def test_every_far_region_makes_a_paper_ineligible_naming_it(policy, gazetteer) -> None:
    for spelling, place in _far_spellings(gazetteer):
        d = assess(_paper(f"Glacier mass balance was measured in {spelling} from 2000 to 2016."), None,
                   policy=policy)
        assert d.decision == "ineligible", (spelling, [(v.mention.name, v.reason) for v in d.sites])
        assert set(d.rule_ids) <= {"eligibility.south_of_arctic_circle", "eligibility.southern_hemisphere",
                                   "eligibility.outside_arctic_regions"}, (spelling, d.rule_ids)
        assert place.name in d.rejections[0].message, (spelling, d.rejections[0].message)


def test_high_mountain_asia_paper_is_ineligible(policy) -> None:
    doc = sectioned_document([
        ("abstract", "To understand simultaneous mass losses in the Himalayas and Hengduan Shan with slight "
                     "mass gains in the Karakoram and West Kunlun, we calculated mass-balance sensitivity."),
        ("methods", "In the HMA, the APHRODITE dataset was the most appropriate for precipitation."),
        ("discussion", "Selected data lie in the Tien Shan and Tibetan Plateau; Greenland glaciers differ."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "ineligible" and d.rule_ids == ["eligibility.south_of_arctic_circle"]
    named = set(d.rejections[0].evidence["sites"])
    assert {"Himalaya", "Hengduan Shan", "Karakoram", "Kunlun Shan"} <= named


def test_european_alps_paper_stays_ineligible(policy) -> None:
    doc = sectioned_document([("study_area", "We define the European Alps as the region located between the "
                                    "coordinates 44° to 48°N and 5° to 14°E.")])
    assert assess(_paper(None), doc, policy=policy).decision == "ineligible"


def test_background_mention_of_a_far_region_keeps_an_arctic_paper_eligible(policy) -> None:
    doc = sectioned_document([
        ("introduction", "Glaciers are shrinking worldwide, from the Himalaya and the Alps to the Andes."),
        ("methods", "Snow pits were dug at Ny-Ålesund and in Adventdalen, Svalbard."),
        ("discussion", "Unlike glaciers of the Tibetan Plateau, Svalbard glaciers lose mass in every season."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "eligible", [(v.mention.name, v.verdict) for v in d.sites]
    far = [v for v in d.sites if v.mention.place in {"Himalaya", "European Alps", "Andes", "Tibetan Plateau"}]
    assert far and all(v.verdict == "background" for v in far)


@pytest.mark.parametrize("abstract", [
    "Vegetation plots in alpine tundra at Ny-Ålesund, Svalbard.",
    "Alpine glaciers of Svalbard were mapped.",
    "Cirque glaciers in the Lyngen Alps, northern Norway.",
    "Moraines in the Stauning Alps of East Greenland (72°N).",
    "An alpine-type landscape near Abisko.",
    "Tibetan-style prayer flags were not present at Toolik Lake.",
    "Alps-like peaks in Svalbard.",
])
def test_alps_and_asia_names_do_not_fire_on_arctic_wording(policy, abstract: str) -> None:
    d = assess(_paper(abstract), None, policy=policy)
    assert d.decision == "eligible", [(v.mention.name, v.verdict, v.reason) for v in d.sites]


def test_kunlun_station_is_antarctic_not_the_kunlun_mountains(policy) -> None:
    d = assess(_paper("Snow was sampled at Kunlun Station on Dome A."), None, policy=policy)
    assert d.decision == "ineligible" and d.rule_ids == ["eligibility.southern_hemisphere"]


def test_a_band_across_the_equator_south_of_the_circle_is_ineligible(policy) -> None:
    d = assess(_paper("Tropical glaciers of the Andes were surveyed."), None, policy=policy)
    assert d.decision == "ineligible" and d.rule_ids == ["eligibility.south_of_arctic_circle"]


# --- marginal seas almost wholly north of the circle ---------------------------------------------
def test_a_bare_kara_sea_counts_as_north(policy) -> None:
    d = assess(_paper("Sea ice concentration was retrieved in the Kara Sea."), None, policy=policy)
    assert d.decision == "eligible" and d.rule_ids == ["eligibility.sea_mostly_north"]
    (site,) = d.sites
    assert site.region == "Kara Sea" and "0.2% of its area lies south of 66.56°N" in site.reason


@pytest.mark.parametrize("sea", ["Chukchi Sea", "Baffin Bay", "Greenland Sea", "Iceland Sea", "White Sea",
                                 "Norwegian Sea", "Foxe Basin"])
def test_seas_with_real_water_south_of_the_circle_stay_uncertain(policy, sea: str) -> None:
    d = assess(_paper(f"Sea ice concentration was retrieved in the {sea}."), None, policy=policy)
    assert d.decision == "needs_review", (sea, [(v.mention.name, v.reason) for v in d.sites])
    assert d.rule_ids == ["eligibility.uncertain_sites", "eligibility.site_straddles_circle"]


def test_a_zero_share_keeps_the_kara_sea_uncertain(policy) -> None:
    strict = policy.model_copy(update={"marginal_sea_south_share": 0.0})
    d = assess(_paper("Sea ice concentration was retrieved in the Kara Sea."), None, policy=strict)
    assert d.decision == "needs_review" and "eligibility.site_straddles_circle" in d.rule_ids


def test_a_kara_sea_point_south_of_the_circle_is_still_not_arctic(policy) -> None:
    """The share admits a bare mention only: a coordinate in the Gulf of Ob at 66.43°N is judged
    by its latitude."""
    d = assess(_paper("Water was sampled in the Kara Sea (66.43°N, 72.57°E)."), None, policy=policy)
    point = next(v for v in d.sites if v.mention.source == "coordinates")
    assert point.verdict == "ineligible" and point.rule_id == "eligibility.outside_arctic_regions"
    # the point is the Kara Sea site of this paper (a coordinate beside a name is that place)
    assert d.decision == "ineligible" and d.rule_ids == ["eligibility.outside_arctic_regions"]


def test_melsom_like_ice_edges_are_eligible(policy) -> None:
    doc = sectioned_document([
        ("methods", "Forecasts of the Arctic ice edge are compared with ice charts of the Barents Sea."),
        ("results", "In 2017 the ice edge lay near Franz Josef Land, in the southern Kara Sea, in the "
                    "southeastern Barents Sea and in Fram Strait."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "eligible", [(v.mention.name, v.verdict, v.reason) for v in d.sites]
    assert "eligibility.sea_mostly_north" in d.rule_ids


def test_a_kara_sea_never_makes_a_non_arctic_or_mixed_paper_eligible(policy, gazetteer) -> None:
    south = [p for p in gazetteer.places if p.kind == "land" and not p.context
             and (p.lat_max if p.lat_max is not None else p.lat) < CIRCLE]
    south += [p for p in gazetteer.places if p.region in ("Baltic Sea", "Bering Sea", "Labrador Sea", "Hudson Bay")]
    assert len(south) > 40
    for place in south:
        text = f"Sea ice was mapped in the Kara Sea, and soils were sampled in {place.name}."
        d = assess(_paper(text), None, policy=policy)
        assert d.decision == "needs_review" and d.rule_ids == ["eligibility.mixed_sites"], (place.name, d.rule_ids)


# --- global studies: uncertain sites beside non-Arctic ones ----------------------------------------
GLOBAL_LIKE = ("Glaciers lost mass in every region: Alaska, Greenland's periphery, the Andes, High Mountain "
               "Asia and Antarctica.")


def test_a_global_study_with_straddling_regions_needs_review(policy) -> None:
    """Under site_rule "all" a paper is ineligible only when no primary site is eligible and none is
    uncertain: Alaska and Greenland may hold the study's Arctic part, so a person decides."""
    d = assess(_paper(GLOBAL_LIKE), None, policy=policy)
    assert d.decision == "needs_review", [(v.mention.name, v.verdict) for v in d.sites]
    assert d.rule_ids == ["eligibility.uncertain_sites", "eligibility.site_straddles_circle"]
    (rejection,) = d.rejections
    assert set(rejection.evidence["sites"]) == {"Alaska", "Greenland"}
    assert set(rejection.evidence["ineligible"]) == {"Andes", "High Mountain Asia", "Antarctica"}
    assert "not Arctic: " in rejection.message


def test_a_global_study_is_dropped_when_mixed_papers_are(policy) -> None:
    d = assess(_paper(GLOBAL_LIKE), None, policy=policy.model_copy(update={"on_mixed": "ineligible"}))
    assert d.decision == "ineligible"
    assert d.rule_ids == ["eligibility.uncertain_sites", "eligibility.south_of_arctic_circle",
                          "eligibility.southern_hemisphere"]


def test_other_site_rules_on_a_global_study(policy) -> None:
    any_rule = assess(_paper(GLOBAL_LIKE), None, policy=policy.model_copy(update={"site_rule": "any"}))
    assert any_rule.decision == "needs_review" and "eligibility.uncertain_sites" in any_rule.rule_ids
    majority = assess(_paper(GLOBAL_LIKE), None, policy=policy.model_copy(update={"site_rule": "majority"}))
    assert majority.decision == "ineligible"  # three of five are not Arctic


def test_uncertain_and_non_arctic_sites_are_never_eligible(policy, gazetteer) -> None:
    rng = random.Random(11)
    uncertain = ["Greenland", "Alaska", "Chukchi Sea", "Baffin Bay", "Svartisen", "Lapland", "Nunavut"]
    # none of these lies inside a straddling feature above, which it would make precise
    south = ["the Andes", "Hardangerjøkulen", "Trondheim", "the Baltic Sea", "Jostedalsbreen", "the Caucasus",
             "McMurdo Station", "the Himalaya"]
    for _ in range(200):
        names = rng.sample(uncertain, rng.randint(1, 3)) + rng.sample(south, rng.randint(1, 3))
        rng.shuffle(names)
        text = "Measurements were made in " + ", ".join(names) + "."
        for site_rule in ("all", "any", "majority"):
            d = assess(_paper(text), None, policy=policy.model_copy(update={"site_rule": site_rule}))
            assert d.decision != "eligible", (text, site_rule)
            if site_rule == "all":
                assert d.decision == "needs_review", text


def test_a_non_arctic_paper_without_uncertain_sites_stays_ineligible(policy) -> None:
    d = assess(_paper("Glaciers of the Andes and the Himalaya were surveyed."), None, policy=policy)
    assert d.decision == "ineligible" and d.rule_ids == ["eligibility.south_of_arctic_circle"]


# --- places named only with cited work -----------------------------------------------------------
def _cited(text: str, gazetteer) -> dict[str, str | None]:
    return {p.text: cited_phrase(text, p.start, p.end) for p in gazetteer.find(text)}


@pytest.mark.parametrize(("text", "cited"), [
    ("Scaling laws were taken from the literature, some fitted globally (Bahr, 2012; Grinsted, 2013) "
     "and one for the European Alps (Chen and Ohmura, 1990).", {"European Alps"}),
    ("Gradients are similar to findings in the European Alps [12].", {"European Alps"}),
    ("Relations published for the Caucasus and the Pyrenees (Lopez, 2015) were also tried.",
     {"Caucasus", "Pyrenees"}),
    ("Melt was faster than in the Swiss Alps (Huss et al., 2011).", {"Swiss Alps"}),
    ("As in the Alps (Huss, 2011), small glaciers thin fastest.", {"the Alps"}),
    ("The trend is consistent with results from the Himalaya (Bolch and others, 2012).", {"Himalaya"}),
    ("Previous studies in the Karakoram (Gardelle et al. 2012) found balanced budgets.", {"Karakoram"}),
    ("The result agrees with earlier analyses made in the Pyrenees (e.g., Lopez, 2015; Rico, 2017).",
     {"Pyrenees"}),
    ("Our value is lower than estimates for the European Alps and the Caucasus (Huss, 2011).",
     {"European Alps", "Caucasus"}),
    ("Unlike glaciers in Patagonia [3, 4], these glaciers do not calve.", {"Patagonia"}),
    ("Snow here is deeper, like that in the Tien Shan (Sorg et al., 2012).", {"Tien Shan"}),
    ("In contrast to Svalbard (Nuth et al., 2010), the Andes show thinning at all elevations.", {"Svalbard"}),
    ("Unlike Svalbard and the Canadian Arctic Archipelago (Gardner et al., 2011), the Alps lose mass at all "
     "elevations.", {"Svalbard", "Canadian Arctic Archipelago"}),
    ("Measurements are compared with those of Greenland (van den Broeke et al., 2009).", {"Greenland"}),
])
def test_places_named_with_cited_work_are_cited(gazetteer, text: str, cited: set[str]) -> None:
    found = _cited(text, gazetteer)
    assert {name for name, phrase in found.items() if phrase} == cited, found


@pytest.mark.parametrize("text", [
    "Measurements at Zackenberg (Meltofte et al., 2008) were used.",      # a citation describing the site
    "The study area is the European Alps (Huss, 2011).",
    "Data were collected in Svalbard (Nuth et al., 2010) in 2015.",
    "We surveyed ice caps such as Blåmannsisen (Kennett and others, 1993).",  # examples are the study's own
    "Outlets like Engabreen (Jackson, 2005) were drilled.",
    "Unlike previous studies, we sampled in Kongsfjorden (Hop et al., 2002).",
    "We compared Abisko with Kiruna.",                                    # a comparison with no citation
    "Similar to Zackenberg, the Tromsø plots were wet.",
    "Samples from the European Alps (Huss, 2011) and Svalbard were compared.",
    "Region 1 is Alaska (1) and region 5 is Greenland (5).",              # numbers, not citations
    "We used the digital elevation model of Svalbard (NPI, 2014).",
    "Outlines of the glaciers around Greenland (Rastner et al. 2012) were used.",
    "As in 2019, sampling at Ny-Ålesund (Smith, 2020) began in May.",
    "Cores were drilled in Greenland as well as in Svalbard (Smith et al., 2010).",
])
def test_sites_with_a_citation_or_a_comparison_alone_are_not_cited(gazetteer, text: str) -> None:
    found = _cited(text, gazetteer)
    assert found and not any(found.values()), found


@pytest.mark.parametrize("template", [
    "Measurements were made at {p} (Smith et al., 2010).",
    "Samples were collected in {p} [4] in 2019.",
    "Data from {p} (Smith and Jones, 2016) were analysed.",
    "The {p} site (Smith, 2010) was visited twice.",
    "Cores from {p} by Smith (2010) were reanalysed.",
])
def test_no_gazetteer_place_with_a_plain_citation_is_cited(gazetteer, template: str) -> None:
    for place in gazetteer.places:
        for spelling in (place.name, *place.alternates):
            text = template.format(p=spelling)
            found = _cited(text, gazetteer)
            assert not any(found.values()), (text, found)


def test_an_arctic_paper_citing_alpine_work_is_eligible(policy) -> None:
    doc = sectioned_document([
        ("methods", "Ice thickness was surveyed on Blåmannsisen and Langfjordjøkulen. The melt model was "
                    "calibrated as in the European Alps (Huss, 2011)."),
        ("results", "Thinning is faster than in the Swiss Alps [8]."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "eligible", [(v.mention.name, v.verdict, v.reason) for v in d.sites]
    cited = [v for v in d.sites if v.verdict == "cited"]
    assert {v.mention.text for v in cited} == {"European Alps", "Swiss Alps"}
    assert all(v.rule_id == "eligibility.cited_mention" for v in cited)


def test_a_place_named_plainly_elsewhere_still_votes(policy) -> None:
    """A cited mention hides only itself: a paper that also samples the Alps stays mixed."""
    doc = sectioned_document([
        ("methods", "Ice thickness was surveyed on Blåmannsisen and in the European Alps. The melt model "
                    "was calibrated as in the European Alps (Huss, 2011)."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "needs_review" and d.rule_ids == ["eligibility.mixed_sites"]


def test_an_alpine_paper_citing_arctic_work_stays_ineligible(policy) -> None:
    doc = sectioned_document([
        ("study_area", "The study area is Findelengletscher in the Swiss Alps (46.0°N, 7.87°E)."),
        ("results", "Runoff peaks earlier than in Svalbard (Nuth et al., 2010), similar to findings in "
                    "Alaska [14]."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "ineligible", [(v.mention.name, v.verdict, v.reason) for v in d.sites]
    assert {v.mention.name for v in d.sites if v.verdict == "cited"} == {"Svalbard", "Alaska"}


def test_cited_places_alone_leave_the_paper_for_review(policy) -> None:
    d = assess(_paper("Our rates are similar to findings in the European Alps (Huss, 2011)."), None, policy=policy)
    assert d.decision == "needs_review" and d.rule_ids == ["eligibility.no_site_found"]
    assert "named with cited work: European Alps" in d.rejections[0].message
    assert d.rejections[0].evidence["cited"] == ["European Alps"]


def test_coordinates_beside_a_cited_place_are_not_that_place(policy) -> None:
    sites = find_sites(None, _paper("As in Svalbard (Nuth et al., 2010), the glacier at 78.9°N, 12.0°E "
                                    "retreated."), policy)
    point = next(s for s in sites if s.source == "coordinates")
    assert point.place is None and point.kind == "unknown"


def test_cited_mentions_never_make_a_mixed_or_non_arctic_paper_eligible(policy) -> None:
    rng = random.Random(5)
    arctic = ["Svalbard", "Ny-Ålesund", "Tromsø", "Langfjordjøkulen", "Zackenberg", "Toolik Lake"]
    south = ["the European Alps", "the Himalaya", "Jostedalsbreen", "Reykjavík", "Trondheim", "the Andes"]
    frames = ["Rates are similar to findings in {p} (Smith, 2010).", "As in {p} [3], ice thinned.",
              "Melt was faster than in {p} (Jones et al., 2015).",
              "Previous studies in {p} (Lee and Kim, 2001) found the same."]
    for _ in range(150):
        quoted = " ".join(rng.choice(frames).format(p=rng.choice(arctic + south)) for _ in range(rng.randint(1, 4)))
        a, s = rng.choice(arctic), rng.choice(south)
        mixed = sectioned_document([("methods", f"Samples were taken at {a} and in {s}. {quoted}")])
        d = assess(_paper(None), mixed, policy=policy)
        assert d.decision == "needs_review" and d.rule_ids == ["eligibility.mixed_sites"], (mixed.text, d.rule_ids)
        southern = sectioned_document([("methods", f"Samples were taken in {s}. {quoted}")])
        assert assess(_paper(None), southern, policy=policy).decision == "ineligible", southern.text


def test_baseline_and_model_sites_respect_cited_places(policy) -> None:
    doc = sectioned_document([("methods", "The model was calibrated as in the European Alps (Huss, 2011) and run "
                                 "for Blåmannsisen.")])
    span = doc.spans[0]
    proposals = baseline_site_proposals({"spans": [{"id": span.id, "text": span.text}]})
    assert [p.name for p in proposals.sites] == ["Blåmannsisen"]

    class _Model:
        async def ask(self, role: str, prompt: str, variables: Any, schema: Any, *, subject: str = "") -> RoleReply:
            reply = SiteExtractorReply.model_validate({"sites": [{"name": "European Alps", "span_id": span.id}]})
            return RoleReply(role=role, provider="fake", model="m", prompt_version=prompt, request_hash="h",
                             output=reply, cached=False, cost_usd=0.0)

    extraction = asyncio.run(extract_sites_llm(doc, _paper(None), _Model(), policy))  # type: ignore[arg-type]
    (site,) = extraction.sites
    assert site.cited is not None and site.place == "European Alps"
    assert assess(_paper(None), doc, extraction, policy).decision == "eligible"


# --- mainland Norway's glaciers -------------------------------------------------------------------
@pytest.mark.parametrize(("glacier", "decision"), [
    ("Blåmannsisen", "eligible"), ("Blåmannisen", "eligible"), ("Langfjordjøkelen", "eligible"),
    ("Langfjordjøkulen", "eligible"), ("Engabreen", "eligible"),
    ("Svartisen", "needs_review"), ("Svartisen-Vestisen", "needs_review"),
    ("Jostedalsbreen", "ineligible"), ("Nigardsbreen", "ineligible"), ("Folgefonna", "ineligible"),
    ("Hardangerjøkulen", "ineligible"), ("Jotunheimen", "ineligible"),
])
def test_norwegian_glaciers_fall_on_their_side_of_the_circle(policy, glacier: str, decision: str) -> None:
    d = assess(_paper(f"Ice thickness was measured by radar on {glacier}."), None, policy=policy)
    assert d.decision == decision, (glacier, [(v.mention.name, v.reason) for v in d.sites])


def test_norwegian_glaciers_lie_in_mainland_norway(gazetteer) -> None:
    names = {"Svartisen", "Engabreen", "Blåmannsisen", "Langfjordjøkelen", "Jostedalsbreen", "Nigardsbreen",
             "Folgefonna", "Hardangerjøkulen", "Jotunheimen"}
    places = [p for p in gazetteer.places if p.name in names]
    assert {p.name for p in places} == names
    for p in places:
        assert 57.9 <= (p.lat_min if p.lat_min is not None else p.lat) <= p.lat <= 71.2 and 4.5 <= p.lon <= 31.1, p


def test_a_norway_wide_glacier_study_is_mixed(policy) -> None:
    doc = sectioned_document([
        ("abstract", "We estimate the ice volume of all glaciers of mainland Norway from radar data and a model."),
        ("methods", "Radar surveys covered the ice caps Jostedalsbreen, Folgefonna and Hardangerjøkulen in the "
                    "south and Svartisen, Blåmannsisen and Langfjordjøkelen in the north. Volume-area scaling "
                    "laws came from the literature: global ones (Bahr, 2012) and one for the European Alps "
                    "(Chen and Ohmura, 1990)."),
    ])
    d = assess(_paper(None), doc, policy=policy)
    assert d.decision == "needs_review" and d.rule_ids == ["eligibility.mixed_sites"], \
        [(v.mention.name, v.verdict) for v in d.sites]
    assert next(v for v in d.sites if v.mention.name == "European Alps").verdict == "cited"
