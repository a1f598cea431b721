"""Eligibility says where a site is in the site's own terms: a land site (kind from the gazetteer,
or a coordinate written beside a land place) is never placed in a marine polygon, a sea keeps the
region that decides it, and a rejection names each site once."""

from __future__ import annotations

import pytest

from arcticqa.geo.gazetteer import load_gazetteer
from arcticqa.papers import PaperRecord
from arcticqa.stages.eligibility import assess, load_eligibility_policy


@pytest.fixture(scope="module")
def policy():
    return load_eligibility_policy()


def _assess(policy, abstract: str):  # type: ignore[no-untyped-def]
    return assess(PaperRecord(paperId="p1", abstract=abstract), None, policy=policy)


def test_no_land_place_of_the_gazetteer_gets_a_marine_region(policy) -> None:
    gazetteer = load_gazetteer(policy.gazetteer_file)
    land = [p for p in gazetteer.places if p.kind == "land"]
    assert len(land) > 20
    for place in land:
        decision = _assess(policy, f"Fieldwork took place at {place.name}.")
        for v in decision.sites:
            if v.mention.kind == "land":
                assert v.region is None, (place.name, v.region, v.reason)


@pytest.mark.parametrize("abstract", [
    "Snow measurements at Utqiaġvik (71.29°N, 156.79°W) in 2019.",
    "Snow measurements at Utqiaġvik in 2019.",
    "Soil cores from Ny-Ålesund (78°55′N, 11°56′E).",
    "Soil cores from Ny-Ålesund.",
])
def test_the_reported_land_sites_carry_no_marine_region(policy, abstract: str) -> None:
    decision = _assess(policy, abstract)
    assert decision.decision == "eligible"
    land = [v for v in decision.sites if v.mention.kind == "land"]
    assert land and all(v.region is None for v in land)
    assert all("Ocean" not in v.reason and "waters" not in v.reason for v in land)


def test_a_sea_keeps_the_region_that_decides_it(policy) -> None:
    decision = _assess(policy, "Ice algae were sampled at five stations in the Fram Strait.")
    seas = [v for v in decision.sites if v.mention.kind == "sea"]
    assert seas and all(v.region for v in seas)


def test_an_antarctic_site_found_twice_is_named_once(policy) -> None:
    # the same coordinate beside a sea name and beside a station name: two mentions, one site
    decision = _assess(policy, "Platelet ice was sampled in McMurdo Sound (77.85°S, 166.20°E). The ice camp "
                               "lay off McMurdo Station (77.85°S, 166.20°E).")
    assert decision.decision == "ineligible"
    southern = [r for r in decision.rejections if r.rule_id == "eligibility.southern_hemisphere"]
    assert len(southern) == 1
    parts = southern[0].message.split("; ")
    assert len(parts) == len(set(parts)), southern[0].message
    assert "77.85°S, 166.20°E: Antarctic site at 77.85°S" in parts
    assert "-77.85" not in southern[0].message
    assert len(southern[0].evidence["sites"]) == len(set(southern[0].evidence["sites"]))
