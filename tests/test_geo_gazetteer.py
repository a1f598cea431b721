"""The gazetteer: spellings, word boundaries, ambiguous names, and consistency with the regions."""

from __future__ import annotations

from pathlib import Path

import pytest

from arcticqa.errors import InputError
from arcticqa.geo.gazetteer import load_gazetteer
from arcticqa.geo.regions import load_regions


@pytest.fixture(scope="module")
def gaz():
    return load_gazetteer()


@pytest.mark.parametrize(("text", "place"), [
    ("at Ny-Ålesund in June", "Ny-Ålesund"),
    ("at Ny-Alesund in June", "Ny-Ålesund"),
    ("near Utqiaġvik, Alaska", "Utqiaġvik"),
    ("near Utqiagvik, Alaska", "Utqiaġvik"),
    ("near Barrow, Alaska", "Utqiaġvik"),
    ("the Zackenberg valley", "Zackenberg"),
    ("the Tiksi observatory", "Tiksi"),
    ("Abisko Scientific Research Station", "Abisko"),
    ("Toolik Lake (Alaska)", "Toolik Lake"),
    ("Alert, Nunavut", "Alert"),
    ("the archipelago of Svalbard", "Svalbard"),
    ("in Kongsfjorden", "Kongsfjorden"),
    ("across Fram Strait", "Fram Strait"),
    ("the HAUSGARTEN observatory", "HAUSGARTEN"),
    ("the Tromsø harbour", "Tromsø"),
    ("samples from McMurdo Sound", "McMurdo Sound"),
])
def test_spellings_resolve_to_one_place(gaz, text: str, place: str) -> None:
    found = [m.place.name for m in gaz.find(text)]
    assert found[0] == place


@pytest.mark.parametrize("text", [
    "a wheelbarrow", "an alert was issued", "Alert levels rose in the model", "Eureka! said the student",
    "hopen", "the Tiksian", "NY-ÅLESUND in capitals",
])
def test_word_boundaries_and_cues_prevent_false_matches(gaz, text: str) -> None:
    assert gaz.find(text) == []


def test_longest_name_wins_and_offsets_are_exact(gaz) -> None:
    text = "We worked at Point Barrow and Toolik Field Station."
    matches = gaz.find(text)
    assert [m.place.name for m in matches] == ["Point Barrow", "Toolik Lake"]
    assert all(text[m.start:m.end] == m.text for m in matches)


def test_lookup_is_case_insensitive_over_all_spellings(gaz) -> None:
    assert gaz.lookup("ny-alesund").name == "Ny-Ålesund"
    assert gaz.lookup("The  Fram Strait").name == "Fram Strait"
    assert gaz.lookup("Atlantis") is None


def test_every_named_sea_points_at_a_known_region_and_northern_seas_are_mapped(gaz) -> None:
    regions = load_regions()
    assert len(gaz.places) >= 100
    for place in gaz.places:
        if place.region is not None:
            j = regions.index_of(place.region)
            assert j is not None, place.name
            assert regions.geometries[j].intersects(
                __import__("shapely").Point(place.lon, place.lat)), place.name
        elif place.kind == "sea" and place.lat >= 66.56:
            assert regions.regions_at(place.lat, place.lon), f"{place.name} is in no region"


def _tsv(tmp_path: Path, rows: list[str]) -> Path:
    p = tmp_path / "places.tsv"
    header = "name\talternates\tlat\tlon\tkind\tlat_min\tlat_max\tregion\tcontext\tnote"
    p.write_text("# comment\n" + header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return p


@pytest.mark.parametrize(("row", "line", "field"), [
    ("Somewhere\t\t95\t10\tland\t\t\t\t\t", 3, "lat"),
    ("Somewhere\t\t70\tten\tland\t\t\t\t\t", 3, "lon"),
    ("Somewhere\t\t70\t10\tlake\t\t\t\t\t", 3, "kind"),
    ("Somewhere\t\t70\t10\tland\t60\t\t\t\t", 3, "lat_min"),
    ("Somewhere\t\t50\t10\tland\t60\t80\t\t\t", 3, "lat"),
])
def test_bad_rows_name_file_line_and_field(tmp_path: Path, row: str, line: int, field: str) -> None:
    path = _tsv(tmp_path, [row])
    with pytest.raises(InputError) as err:
        load_gazetteer(path)
    assert (err.value.path, err.value.line, err.value.field) == (str(path), line, field)


def test_duplicate_spelling_and_wrong_column_count_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="already used on line 3"):
        load_gazetteer(_tsv(tmp_path, ["A\tB\t70\t10\tland\t\t\t\t\t", "C\tB\t71\t10\tland\t\t\t\t\t"]))
    with pytest.raises(InputError, match="columns"):
        load_gazetteer(_tsv(tmp_path, ["A\t70\t10"]))
