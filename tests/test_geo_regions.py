"""The marine region polygons: known points, the antimeridian, coverage, and bad region files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import shapely

from arcticqa.errors import InputError
from arcticqa.geo.policy import load_eligibility_policy
from arcticqa.geo.regions import DEFAULT_REGIONS_PATH, load_regions, normalize_lon
from arcticqa.stages.eligibility import SiteMention, judge_sites


@pytest.fixture(scope="module")
def regions():
    return load_regions()


def _names(regions, lat: float, lon: float) -> list[str]:
    return [regions.regions[j].name for j in regions.regions_at(lat, lon)]


@pytest.mark.parametrize(("lat", "lon", "region"), [
    (79.0, 0.0, "Fram Strait"),
    (70.0, -170.0, "Chukchi Sea"),
    (70.0, 175.0, "Chukchi Sea"),
    (72.0, 180.0, "Chukchi Sea"),
    (72.0, -180.0, "Chukchi Sea"),
    (88.0, 179.99, "Central Arctic Ocean"),
    (88.0, -179.99, "Central Arctic Ocean"),
    (89.9, 45.0, "Central Arctic Ocean"),
    (74.0, 40.0, "Barents Sea"),
    (75.0, 75.0, "Kara Sea"),
    (76.0, 125.0, "Laptev Sea"),
    (73.0, 160.0, "East Siberian Sea"),
    (72.5, -140.0, "Beaufort Sea"),
    (83.5, -56.0, "Lincoln Sea"),
    (75.0, -5.0, "Greenland Sea"),
    (68.0, 3.0, "Norwegian Sea"),
    (73.0, -65.0, "Baffin Bay"),
    (74.2, -90.0, "Canadian Arctic Archipelago waters"),
    (60.0, -85.0, "Hudson Bay"),
    (58.0, 20.0, "Baltic Sea"),
    (58.0, -175.0, "Bering Sea"),
    (55.0, 170.0, "Bering Sea"),
    (78.95, 11.95, "Svalbard waters"),
])
def test_known_points_fall_in_their_region(regions, lat: float, lon: float, region: str) -> None:
    assert region in _names(regions, lat, lon)


@pytest.mark.parametrize(("lat", "lon"), [(-77.5, 165.0), (40.0, -30.0), (0.0, 0.0), (50.0, -150.0)])
def test_points_outside_every_region(regions, lat: float, lon: float) -> None:
    assert _names(regions, lat, lon) == []


def test_antimeridian_regions_are_split_and_cover_both_sides(regions) -> None:
    for name in ("Chukchi Sea", "Bering Sea"):
        geom = regions.geometries[regions.index_of(name)]
        assert geom.geom_type == "MultiPolygon"
        minx, _, maxx, _ = geom.bounds
        assert minx == -180.0 and maxx == 180.0
    # the naive unsplit polygon would cover the Atlantic; the split one must not
    assert "Chukchi Sea" not in _names(regions, 70.0, 0.0)
    assert "Bering Sea" not in _names(regions, 58.0, 0.0)


def test_zero_to_360_longitudes_are_accepted(regions) -> None:
    assert normalize_lon(190.0) == pytest.approx(-170.0)
    assert "Chukchi Sea" in _names(regions, 70.0, 190.0)


def test_every_polygon_is_valid_and_named_once(regions) -> None:
    assert len(regions) >= 15
    assert all(g.is_valid for g in regions.geometries)
    assert len({r.name for r in regions.regions}) == len(regions)
    assert {r.eligibility for r in regions.regions} == {"eligible", "north_of_circle", "policy:hudson_bay",
                                                         "ineligible"}
    assert all(r.method and r.note for r in regions.regions)


def test_arctic_seas_leave_no_gap_north_of_the_circle(regions) -> None:
    # open water north of the circle in every sector must be in some non-ineligible region
    water = [(67.5, 5.0), (70.0, -10.0), (67.0, -20.0), (69.5, -167.0), (71.0, -163.0), (73.0, -157.0),
             (72.0, -150.0), (74.5, -135.0), (76.5, -122.0), (80.0, -110.0), (82.5, -75.0), (84.0, -30.0),
             (82.0, -5.0), (81.5, 30.0), (81.5, 60.0), (80.5, 90.0), (79.5, 130.0), (77.5, 160.0),
             (75.5, 175.0), (75.5, -175.0), (71.0, 33.0), (76.0, 60.5), (69.0, 56.0), (71.0, 73.5),
             (74.0, 135.0), (71.0, 165.0), (69.5, -60.0), (76.0, -70.0), (68.0, -80.0), (70.0, -120.0),
             (85.0, -120.0), (79.5, 5.0), (77.5, -5.0)]
    lats = np.array([p[0] for p in water])
    lons = np.array([p[1] for p in water])
    member = regions.membership(lats, lons)
    usable = np.array([r.eligibility != "ineligible" for r in regions.regions])
    covered = (member & usable).any(axis=1)
    assert covered.all(), [water[i] for i in np.flatnonzero(~covered)]


def test_strtree_query_agrees_with_membership(regions) -> None:
    rng = np.random.default_rng(7)
    lats = rng.uniform(45, 90, 2000)
    lons = rng.uniform(-180, 180, 2000)
    member = regions.membership(lats, lons)
    pairs = regions.query(lats, lons)
    via_tree = np.zeros_like(member)
    via_tree[pairs[0], pairs[1]] = True
    assert (via_tree == member).all()
    assert member.any()


def _sea(lat: float, lon: float, kind: str = "sea") -> SiteMention:
    return SiteMention(source="coordinates", name=f"{lat},{lon}", text="x", span_id="abstract",
                       section="abstract", start=0, end=1, lat=lat, lon=lon, kind=kind)


@pytest.mark.parametrize(("lat", "lon", "kind", "verdict", "rule_id"), [
    (69.65, 18.96, "land", "eligible", "eligibility.site_north_of_circle"),        # Tromsø
    (64.15, -21.94, "land", "ineligible", "eligibility.south_of_arctic_circle"),   # Reykjavík
    (79.0, 0.0, "sea", "eligible", "eligibility.site_in_arctic_region"),           # Fram Strait
    (70.0, -170.0, "sea", "eligible", "eligibility.site_in_arctic_region"),        # Chukchi, west of 180
    (70.0, 175.0, "sea", "eligible", "eligibility.site_in_arctic_region"),         # Chukchi, east of 180
    (58.0, 20.0, "sea", "ineligible", "eligibility.outside_arctic_regions"),       # Baltic
    (58.0, -175.0, "sea", "ineligible", "eligibility.outside_arctic_regions"),     # Bering
    (-77.5, 165.0, "sea", "ineligible", "eligibility.southern_hemisphere"),        # McMurdo Sound
    (66.0, -168.5, "sea", "ineligible", "eligibility.outside_arctic_regions"),     # Chukchi, south of circle
    (66.0, -168.5, "unknown", "ineligible", "eligibility.south_of_arctic_circle"),
    (67.0, 0.0, "unknown", "eligible", "eligibility.site_in_arctic_region"),       # Norwegian Sea, north part
    (40.0, -30.0, "sea", "ineligible", "eligibility.outside_arctic_regions"),
])
def test_point_verdicts(lat, lon, kind, verdict, rule_id) -> None:
    v = judge_sites([_sea(lat, lon, kind)])[0]
    assert (v.verdict, v.rule_id) == (verdict, rule_id), v.reason


def test_policy_choices_move_the_straddling_and_hudson_points() -> None:
    policy = load_eligibility_policy()
    chukchi_south = _sea(66.0, -168.5)
    hudson = _sea(60.0, -85.0)
    strict = judge_sites([chukchi_south, hudson], policy)
    assert [v.verdict for v in strict] == ["ineligible", "ineligible"]
    loose = judge_sites([chukchi_south, hudson],
                        policy.model_copy(update={"marginal_seas": "whole_region", "hudson_bay": "eligible"}))
    assert [v.verdict for v in loose] == ["eligible", "eligible"]
    assert [v.region for v in loose] == ["Chukchi Sea", "Hudson Bay"]


def test_region_hash_is_the_file_hash(regions) -> None:
    assert regions.sha256 == hashlib.sha256(DEFAULT_REGIONS_PATH.read_bytes()).hexdigest()


def _write(tmp_path: Path, features: list[dict]) -> Path:
    p = tmp_path / "regions.geojson"
    p.write_text(json.dumps({"type": "FeatureCollection", "features": features}), encoding="utf-8")
    return p


def _feature(name: str, coords: list, eligibility: str = "eligible") -> dict:
    return {"type": "Feature", "properties": {"name": name, "eligibility": eligibility},
            "geometry": {"type": "Polygon", "coordinates": [coords]}}


def test_bad_region_files_name_the_problem(tmp_path: Path) -> None:
    box = [[0, 70], [10, 70], [10, 80], [0, 80], [0, 70]]
    with pytest.raises(InputError, match="split antimeridian"):
        load_regions(_write(tmp_path, [_feature("Naive", [[170, 65], [200, 65], [200, 75], [170, 75], [170, 65]])]))
    with pytest.raises(InputError, match="eligibility"):
        load_regions(_write(tmp_path, [_feature("X", box, "maybe")]))
    with pytest.raises(InputError, match="duplicate region name"):
        load_regions(_write(tmp_path, [_feature("X", box), _feature("x", box)]))
    with pytest.raises(InputError, match="invalid polygon"):
        load_regions(_write(tmp_path, [_feature("Bow", [[0, 70], [10, 80], [10, 70], [0, 80], [0, 70]])]))
    bad = tmp_path / "bad.geojson"
    bad.write_text('{"type": "FeatureCollection",\n "features": [,]}', encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_regions(bad)
    assert err.value.line == 2 and str(bad) in str(err.value)
    ok = load_regions(_write(tmp_path, [_feature("Box", box)]))
    assert shapely.intersects_xy(ok.geometries[0], 5.0, 75.0)


# --- the share of a region south of the circle ---------------------------------------------------
CIRCLE = 66.56


def test_south_share_is_zero_north_one_south_and_between_for_straddling_seas(regions) -> None:
    for j, region in enumerate(regions.regions):
        share = regions.south_share(j, CIRCLE)
        _, miny, _, maxy = regions.geometries[j].bounds
        assert 0.0 <= share <= 1.0, region.name
        if miny >= CIRCLE:
            assert share == 0.0, region.name
        if maxy <= CIRCLE:
            assert share == 1.0, region.name
        if miny < CIRCLE < maxy:
            assert 0.0 < share < 1.0, region.name
    # a lower line leaves less of every region south of it
    for j in range(len(regions)):
        assert regions.south_share(j, 60.0) <= regions.south_share(j, CIRCLE) <= regions.south_share(j, 70.0)


def test_south_share_agrees_with_equal_area_sampling(regions) -> None:
    """Points uniform on the sphere (uniform longitude and sine of latitude) inside each straddling
    region: the share south of the circle matches the polygon measurement."""
    rng = np.random.default_rng(7)
    for j, region in enumerate(regions.regions):
        minx, miny, maxx, maxy = regions.geometries[j].bounds
        if not miny < CIRCLE < maxy:
            continue
        lon = rng.uniform(minx, maxx, 200_000)
        lat = np.degrees(np.arcsin(rng.uniform(np.sin(np.radians(miny)), np.sin(np.radians(maxy)), 200_000)))
        inside = shapely.intersects_xy(regions.geometries[j], lon, lat)
        sampled = float(np.mean(lat[inside] < CIRCLE))
        assert abs(sampled - regions.south_share(j, CIRCLE)) < 0.005, (region.name, sampled)


def test_only_the_kara_sea_is_within_one_percent(regions) -> None:
    """Which straddling seas a bare mention admits at the default 1%: only the Kara Sea, whose
    polygon dips below the circle at the head of the Gulf of Ob."""
    policy = load_eligibility_policy()
    assert policy.marginal_sea_south_share == 0.01
    within = {r.name for j, r in enumerate(regions.regions)
              if r.eligibility == "north_of_circle" and 0.0 < regions.south_share(j, CIRCLE) <= 0.01}
    assert within == {"Kara Sea"}
    for name in ("Baffin Bay", "Chukchi Sea", "Greenland Sea"):
        j = regions.index_of(name)
        assert j is not None and 0.02 < regions.south_share(j, CIRCLE) < 0.06, name
