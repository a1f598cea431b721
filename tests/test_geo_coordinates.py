"""The coordinate parser against real-world notations, and against values it must refuse."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from arcticqa.geo.coordinates import parse_coordinates

# (text, expected): a point is (lat, lon), a latitude alone is (lat, None), a band is ("band", lo, hi)
ACCEPTED: list[tuple[str, list[tuple]]] = [
    ("78.92°N, 11.93°E", [(78.92, 11.93)]),
    ("78.92° N, 11.93° E", [(78.92, 11.93)]),
    ("78.92 °N 11.93 °E", [(78.92, 11.93)]),
    ("78.92°N 11.93°W", [(78.92, -11.93)]),
    ("N 78.92°, E 11.93°", [(78.92, 11.93)]),
    ("N78.92 E11.93", [(78.92, 11.93)]),
    ("78.92N, 11.93E", [(78.92, 11.93)]),
    ("78,92°N, 11,93°E", [(78.92, 11.93)]),
    ("78°55′30″N, 11°56′00″E", [(78.925, 11.93333)]),
    ("78°55'30\"N, 11°56'00\"E", [(78.925, 11.93333)]),
    ("78° 55' 30\" N 11° 56' 00\" E", [(78.925, 11.93333)]),
    ("78°55.5′N, 11°56.0′E", [(78.925, 11.93333)]),
    ("78d 55m 30s N, 11d 56m 0s E", [(78.925, 11.93333)]),
    ("78 deg 55 min N", [(78.91667, None)]),
    ("66°33′N", [(66.55, None)]),
    ("66° 33′ 47″ N", [(66.56306, None)]),
    ("69°39′N 18°57′E", [(69.65, 18.95)]),
    ("S 77°51′, E 166°40′", [(-77.85, 166.66667)]),
    ("77°51′S, 166°40′E", [(-77.85, 166.66667)]),
    ("lat -77.85, lon 166.67", [(-77.85, 166.67)]),
    ("latitude: 71.29°, longitude: −156.79°", [(71.29, -156.79)]),
    ("Lat 64.15 N, Lon 21.94 W", [(64.15, -21.94)]),
    ("lat. = 78.9, long. = 11.9", [(78.9, 11.9)]),
    ("78–80°N", [("band", 78.0, 80.0)]),
    ("78-80°N", [("band", 78.0, 80.0)]),
    ("78°–80°N", [("band", 78.0, 80.0)]),
    ("78°N–80°N", [("band", 78.0, 80.0)]),
    ("66°33′–67°N", [("band", 66.55, 67.0)]),
    ("from 70° to 75° N", [("band", 70.0, 75.0)]),
    ("70 to 75°N", [("band", 70.0, 75.0)]),
    ("80–78°N", [("band", 78.0, 80.0)]),
    ("60–55°S", [("band", -60.0, -55.0)]),
    ("79°N 0°E", [(79.0, 0.0)]),
    ("70°N, 170°W", [(70.0, -170.0)]),
    ("70°N, 175°E", [(70.0, 175.0)]),
    ("0°N, 0°E", [(0.0, 0.0)]),
    ("90°N", [(90.0, None)]),
    ("89.999°N, 180°E", [(89.999, 180.0)]),
    ("64.15°N 21.94°W", [(64.15, -21.94)]),
    ("68° 21′ N, 18° 49′ E", [(68.35, 18.81667)]),
    ("71.2906° N, 156.7886° W", [(71.2906, -156.7886)]),
    ("N 68°37.8′, W 149°36.0′", [(68.63, -149.6)]),
    ("78°55'N 11°56'E", [(78.91667, 11.93333)]),
    ("78º55’N 11º56’E", [(78.91667, 11.93333)]),
    ("78˚55′N", [(78.91667, None)]),
    ("78°55´N", [(78.91667, None)]),
    ("(78.92°N; 11.93°E)", [(78.92, 11.93)]),
    ("78.92°N and 11.93°E", [(78.92, 11.93)]),
    ("78.92°N / 11.93°E", [(78.92, 11.93)]),
    ("11.93°E, 78.92°N", [(78.92, 11.93)]),
    ("the mooring at 75°N was recovered", [(75.0, None)]),
    ("north of 70°N", [(70.0, None)]),
    ("between 78°N and 80°N", [(78.0, None), (80.0, None)]),
    ("67° 51' 21\" N, 20° 13' 28\" E", [(67.85583, 20.22444)]),
    ("78°55′30″N,11°56′E", [(78.925, 11.93333)]),
    ("stations at 72.5°N, 130.2°E and 73.1°N, 128.9°E", [(72.5, 130.2), (73.1, 128.9)]),
    ("S64.77 W64.05", [(-64.77, -64.05)]),
    ("64°46′S 64°03′W", [(-64.76667, -64.05)]),
    ("latitude 82.5° N", [(82.5, None)]),
    ("longitude 62.3°W, latitude 82.5°N", [(82.5, -62.3)]),
    ("N 82°30′ W 62°20′", [(82.5, -62.33333)]),
    ("+78.92°N", [(78.92, None)]),
    ("Station B (74.5°N, 19.0°E) was ice-free", [(74.5, 19.0)]),
    ("at 78° 55.500′ N, 011° 56.000′ E", [(78.925, 11.93333)]),
]

# impossible values: each must be reported as a rejection and yield no coordinate
IMPOSSIBLE = [
    "91°N", "90.5°N, 10°E", "123°N", "N 91°30′", "78°N, 181°E", "78°61′N", "66°60′N", "78°55′61″N",
    "-78°N", "−78.5°S", "78.5°55′N", "78°55.5′30″N", "95–100°N", "78°N–80°S", "lat 95.2", "lon 200.1",
    "latitude 78°E", "longitude 12°N", "lon −190°",
]

# look like numbers with letters but are not coordinates: nothing must be found
NOT_COORDINATES = [
    "−1.8 °C", "a force of 5.2 N", "Table S2", "Fig. 3N", "pH 7.8", "25 °F", "12 m depth", "N = 45 samples",
    "2019–2020", "an angle of 45°", "78.5 W lamp", "S1 Table", "CO2 at 400 ppm",
]


def _as_tuple(c) -> tuple:
    if c.lat_min is not None:
        return ("band", c.lat_min, c.lat_max)
    return (c.lat, c.lon)


def _close(a: tuple, b: tuple) -> bool:
    if len(a) != len(b) or (a[0] == "band") != (b[0] == "band"):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, str) or x is None or y is None:
            if x != y:
                return False
        elif abs(x - y) > 1e-4:
            return False
    return True


def test_tables_are_big_enough() -> None:
    assert len(ACCEPTED) >= 60
    assert len(IMPOSSIBLE) >= 15


@pytest.mark.parametrize(("text", "expected"), ACCEPTED, ids=[t for t, _ in ACCEPTED])
def test_accepted_notations(text: str, expected: list[tuple]) -> None:
    parsed = parse_coordinates(text)
    got = [_as_tuple(c) for c in parsed.coordinates]
    assert parsed.rejected == []
    assert len(got) == len(expected), got
    for g, e in zip(got, expected, strict=True):
        assert _close(g, e), (g, e)


@pytest.mark.parametrize("text", IMPOSSIBLE)
def test_impossible_values_are_rejected_with_a_reason(text: str) -> None:
    parsed = parse_coordinates(text)
    assert parsed.coordinates == []
    assert len(parsed.rejected) == 1
    assert parsed.rejected[0].reason
    assert parsed.rejected[0].text.strip() in text


@pytest.mark.parametrize("text", NOT_COORDINATES)
def test_non_coordinates_are_ignored(text: str) -> None:
    parsed = parse_coordinates(text)
    assert parsed.coordinates == [] and parsed.rejected == []


def test_offsets_point_at_the_written_text() -> None:
    text = "Samples were taken near Ny-Ålesund (78°55′N, 11°56′E) and at 79°N."
    parsed = parse_coordinates(text)
    assert [text[c.start:c.end] for c in parsed.coordinates] == ["78°55′N, 11°56′E", "79°N"]
    assert all(c.text == text[c.start:c.end] for c in parsed.coordinates)


def test_longitude_alone_is_not_a_site() -> None:
    assert parse_coordinates("the transect along 30°E").coordinates == []


# --- degree look-alikes: equivalent rewrites must parse the same -------------------------------
_LOOKALIKES = ["º", "˚", "◦", "∘", "⁰", "ᵒ"]


def _values(text: str) -> list[tuple[float, float | None]]:
    return [(round(c.lat, 6), None if c.lon is None else round(c.lon, 6)) for c in parse_coordinates(text).coordinates]


def test_every_degree_lookalike_reads_as_a_degree_on_generated_points() -> None:
    rng = random.Random(16)
    for _ in range(300):
        lat_d, lat_m = rng.randint(0, 89), rng.randint(0, 59)
        lon_d, lon_m = rng.randint(0, 179), rng.randint(0, 59)
        ns, ew = rng.choice("NS"), rng.choice("EW")
        sep = rng.choice(["", " "])
        form = rng.choice([
            "{a}°{sep}{am}′{ns}, {b}°{sep}{bm}′{ew}",
            "{a}°{am}'{ns} {b}°{bm}'{ew}",
            "{a}.{am}°{sep}{ns}, {b}.{bm}°{sep}{ew}",
            "{ns} {a}°{am}′, {ew} {b}°{bm}′",
        ])
        text = "Samples were taken at " + form.format(a=lat_d, am=f"{lat_m:02d}", b=lon_d, bm=f"{lon_m:02d}",
                                                     ns=ns, ew=ew, sep=sep) + " in April."
        expected = _values(text)
        assert len(expected) == 1, text
        for mark in _LOOKALIKES:
            assert _values(text.replace("°", mark)) == expected, (mark, text)


def test_degree_lookalikes_on_the_published_items(arcticqa_v1: Path) -> None:
    """On text nobody here wrote, writing each ° as a look-alike changes no parse, and the
    extractor's line normalisation maps every look-alike after a number back to °."""
    from arcticqa.text.clean import normalise_line

    texts = []
    for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        texts += [item["question"], item.get("question_context") or "", item["gold_answer"],
                  *(d["text"] for d in item["distractors"])]
    with_degrees = [t for t in texts if re.search(r"\d\s?°", t)]
    assert with_degrees
    for text in texts:
        parsed = parse_coordinates(text)
        for mark in ("◦", "∘", "˚", "º"):
            rewritten = text.replace("°", mark)
            again = parse_coordinates(rewritten)
            assert _values(rewritten) == _values(text), (mark, text)
            assert [r.reason for r in again.rejected] == [r.reason for r in parsed.rejected], (mark, text)
            if text in with_degrees and not re.search(r"\D°", text):
                assert normalise_line(rewritten) == normalise_line(text), (mark, text)


def test_impossible_coordinates_are_reported_not_dropped() -> None:
    from arcticqa.papers import PaperRecord
    from arcticqa.stages.eligibility import assess

    decision = assess(PaperRecord(paperId="x", abstract="Samples were collected at 95°N, 200°E in April."))
    assert {w.rule_id for w in decision.warnings} == {"eligibility.impossible_coordinate"}
    assert any("95°N" in w.message and "beyond ±90°" in w.message for w in decision.warnings)
    # a refused non-coordinate ("−2.4 W m⁻²": a minus sign with a hemisphere letter) is not reported
    quiet = assess(PaperRecord(paperId="x", abstract="Flux was −2.4 W m⁻² at Ny-Ålesund (78.92°N, 11.93°E)."))
    assert not quiet.warnings and quiet.decision == "eligible"


def test_impossible_coordinates_never_reported_on_the_published_items(arcticqa_v1: Path) -> None:
    from arcticqa.papers import PaperRecord
    from arcticqa.stages.eligibility import impossible_coordinates

    for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        text = " ".join([item["question"], item.get("question_context") or ""])
        assert impossible_coordinates(None, PaperRecord(paperId="x", abstract=text)) == [], text
