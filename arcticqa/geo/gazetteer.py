"""The project's gazetteer: Arctic, near-Arctic and Antarctic place names with coordinates.

Names (and alternate spellings) are matched case-sensitively on word boundaries, so "Barrow"
does not fire inside "wheelbarrow" and "Alert" does not fire on "alert" — and a name that is also
an ordinary English word only counts when one of its cue words (``context`` column) is nearby.
Large features carry a latitude extent; named seas point at the marine region that decides them.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from arcticqa.errors import InputError

__all__ = ["Place", "PlaceMatch", "Gazetteer", "DEFAULT_GAZETTEER_PATH", "load_gazetteer"]

DEFAULT_GAZETTEER_PATH = Path(__file__).resolve().parents[2] / "data" / "gazetteer" / "arctic_places.tsv"

_COLUMNS = ("name", "alternates", "lat", "lon", "kind", "lat_min", "lat_max", "region", "context", "note")
_CONTEXT_WINDOW = 80


class Place(BaseModel):
    name: str
    alternates: list[str] = []
    lat: float
    lon: float
    kind: Literal["land", "sea"]
    lat_min: float | None = None
    lat_max: float | None = None
    region: str | None = None
    context: list[str] = []
    note: str = ""
    line: int = 0


@dataclass(frozen=True)
class PlaceMatch:
    place: Place
    start: int
    end: int
    text: str


def _nfc(s: str) -> str:
    return unicodedata.normalize("NFC", s)


class Gazetteer:
    """Loaded places plus one compiled alternation over every spelling (longest first)."""

    def __init__(self, places: list[Place], *, path: Path, sha256: str) -> None:
        self.places = places
        self.path = path
        self.sha256 = sha256
        self._by_spelling: dict[str, Place] = {}
        self._by_folded: dict[str, Place] = {}
        for p in places:
            for s in (p.name, *p.alternates):
                self._by_spelling[_nfc(s)] = p
                self._by_folded.setdefault(_nfc(s).casefold(), p)
        spellings = sorted(self._by_spelling, key=len, reverse=True)
        alternation = "|".join(re.escape(s) for s in spellings)
        self._pattern = re.compile(rf"(?<![\w\-])(?:{alternation})(?![\w\-])")

    def lookup(self, name: str) -> Place | None:
        """The place spelled ``name`` (any listed spelling, case-insensitive, surrounding 'the' ignored)."""
        key = re.sub(r"\s+", " ", _nfc(name)).strip().casefold()
        key = key.removeprefix("the ")
        return self._by_folded.get(key)

    def find(self, text: str) -> list[PlaceMatch]:
        """Every place name in ``text``; offsets index ``text``."""
        matches: list[PlaceMatch] = []
        norm = _nfc(text)
        # NFC can change lengths; only use its offsets when it did not
        source = norm if len(norm) == len(text) else text
        for m in self._pattern.finditer(source):
            place = self._by_spelling[m.group(0)]
            if place.context and not self._has_cue(source, m.start(), m.end(), place.context):
                continue
            matches.append(PlaceMatch(place=place, start=m.start(), end=m.end(), text=text[m.start():m.end()]))
        return matches

    @staticmethod
    def _has_cue(text: str, start: int, end: int, cues: list[str]) -> bool:
        window = text[max(0, start - _CONTEXT_WINDOW):start] + " " + text[end:end + _CONTEXT_WINDOW]
        return any(re.search(rf"(?<!\w){re.escape(c)}(?!\w)", window) for c in cues)


def _float(value: str, path: Path, line: int, field: str, lo: float, hi: float) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"not a number: {value!r}", path=str(path), line=line, field=field) from None
    if not lo <= x <= hi:
        raise InputError(f"{x:g} is outside [{lo:g}, {hi:g}]", path=str(path), line=line, field=field)
    return x


def _parse(path: Path, raw: bytes) -> list[Place]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8: {exc.reason}", path=str(path)) from exc
    places: list[Place] = []
    seen: dict[str, int] = {}
    header_seen = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if not header_seen:
            if tuple(c.strip() for c in cells) != _COLUMNS:
                raise InputError(f"header must be the columns {', '.join(_COLUMNS)} (tab-separated)",
                                 path=str(path), line=lineno)
            header_seen = True
            continue
        if len(cells) != len(_COLUMNS):
            raise InputError(f"expected {len(_COLUMNS)} tab-separated columns, found {len(cells)}",
                             path=str(path), line=lineno)
        row = dict(zip(_COLUMNS, (c.strip() for c in cells), strict=True))
        if not row["name"]:
            raise InputError("empty name", path=str(path), line=lineno, field="name")
        if row["kind"] not in ("land", "sea"):
            raise InputError(f"kind must be 'land' or 'sea', not {row['kind']!r}", path=str(path),
                             line=lineno, field="kind")
        lat = _float(row["lat"], path, lineno, "lat", -90, 90)
        lon = _float(row["lon"], path, lineno, "lon", -180, 180)
        lat_min = _float(row["lat_min"], path, lineno, "lat_min", -90, 90) if row["lat_min"] else None
        lat_max = _float(row["lat_max"], path, lineno, "lat_max", -90, 90) if row["lat_max"] else None
        if (lat_min is None) != (lat_max is None):
            raise InputError("lat_min and lat_max go together", path=str(path), line=lineno, field="lat_min")
        if lat_min is not None and lat_max is not None and not lat_min <= lat <= lat_max:
            raise InputError("lat must lie within [lat_min, lat_max]", path=str(path), line=lineno,
                             field="lat")
        alternates = [_nfc(a.strip()) for a in row["alternates"].split("|") if a.strip()]
        name = _nfc(row["name"])
        for spelling in dict.fromkeys((name, *alternates)):
            if spelling in seen and seen[spelling] != lineno:
                raise InputError(f"spelling {spelling!r} already used on line {seen[spelling]}",
                                 path=str(path), line=lineno, field="alternates")
            seen[spelling] = lineno
        places.append(Place(
            name=name, alternates=list(dict.fromkeys(a for a in alternates if a != name)), lat=lat, lon=lon,
            kind=row["kind"],
            lat_min=lat_min, lat_max=lat_max, region=row["region"] or None,
            context=[c.strip() for c in row["context"].split("|") if c.strip()], note=row["note"], line=lineno,
        ))
    if not header_seen or not places:
        raise InputError("no places (a header line and at least one row are needed)", path=str(path))
    return places


@lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int) -> Gazetteer:
    raw = path.read_bytes()
    return Gazetteer(_parse(path, raw), path=path, sha256=hashlib.sha256(raw).hexdigest())


def load_gazetteer(path: Path | str | None = None) -> Gazetteer:
    """Load (and cache per file version) a gazetteer TSV; bad rows raise :class:`InputError`."""
    p = Path(path) if path is not None else DEFAULT_GAZETTEER_PATH
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as exc:
        raise InputError("gazetteer file not found", path=str(p)) from exc
    return _load_cached(p.resolve(), mtime)
