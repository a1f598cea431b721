"""The region stratum of an accepted item: the marine region of its paper's first eligible site,
and for a site on land (which the eligibility rule places in no marine region) the region
containing or nearest to its coordinates, never ``unknown`` when the site has coordinates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arcticqa.geo.regions import load_regions
from arcticqa.review.items import load_review_items
from tests.review_fixtures import make_review_store


def _site(name: str, lat: float | None, lon: float | None, *, region: str | None = None, kind: str = "land",
          verdict: str = "eligible") -> dict[str, Any]:
    return {"mention": {"source": "gazetteer", "name": name, "text": name, "span_id": "abstract", "section": "abstract",
                        "start": 0, "end": len(name), "lat": lat, "lon": lon, "kind": kind, "primary": True},
            "site_key": f"place:{name}", "region": region, "verdict": verdict,
            "rule_id": "eligibility.site_north_of_circle", "reason": "test"}


@pytest.mark.parametrize(("lat", "lon", "region"), [
    (78.92, 11.83, "Svalbard waters"),  # Bayelva, Ny-Ålesund (inside the region's box)
    (74.47, -20.57, "Greenland Sea"),  # Zackenberg
    (68.63, -149.6, "Beaufort Sea"),  # Toolik Lake, 160 km inland
    (68.35, 18.82, "Norwegian Sea"),  # Abisko
    (71.2, 179.9, "Chukchi Sea"),  # Wrangel Island, on the antimeridian
    (71.2, -179.9, "Chukchi Sea"),
])
def test_the_nearest_region_of_a_place_on_land(lat: float, lon: float, region: str) -> None:
    regions = load_regions()
    j, km = regions.nearest(lat, lon)
    assert regions.regions[j].name == region and 0 <= km < 250


def test_a_land_site_gets_the_region_it_borders_not_unknown(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "review.db", accepted=4, rejected=0)
    sites = {
        0: [_site("Svalbard", 78.5, 17.0, verdict="background"), _site("Bayelva", 78.92, 11.83),
            _site("Greenland Sea", 75.0, -5.0, region="Greenland Sea", kind="sea")],
        1: [_site("Zackenberg", 74.47, -20.57), _site("Fram Strait", 79.0, 0.0, region="Fram Strait", kind="sea")],
        2: [_site("78°N", 78.0, None), _site("Barents Sea", 74.0, 35.0, region="Barents Sea", kind="sea")],
        3: [_site("somewhere", None, None)],
    }
    for i, listed in sites.items():
        store.record_run(f"paper{i:036d}", "eligibility", "", input_hash=f"e{i}", status="succeeded",
                         output={"decision": "eligible", "sites": listed})
    regions = {i.key: i.strata["region"] for i in load_review_items(store.engine) if i.population == "accepted"}
    store.close()
    assert regions == {
        "aqa-test0000": "Svalbard waters",  # the first eligible site (the background mention does not count)
        "aqa-test0001": "Greenland Sea",  # the first site, not the later sea
        "aqa-test0002": "Barents Sea",  # a latitude without a longitude cannot be placed: the next site
        "aqa-test0003": "unknown",  # nothing to place
    }
