"""The eligible Arctic marine regions: polygons loaded from GeoJSON and vectorised point tests.

The region file is data, fixed for a build; its SHA-256 goes into every eligibility decision.
Antimeridian-crossing regions are stored split at 180° (RFC 7946), so every test runs on plain
[-180, 180] longitudes. Points are tested with ``intersects_xy`` on prepared geometries: a point
exactly on ±180° lies on a boundary and must still count as inside.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import shapely
from pydantic import BaseModel, ConfigDict, ValidationError
from shapely.geometry import shape

from arcticqa.errors import InputError

__all__ = [
    "RegionEligibility",
    "MarineRegion",
    "RegionSet",
    "DEFAULT_REGIONS_PATH",
    "load_regions",
    "normalize_lon",
]

RegionEligibility = Literal["eligible", "north_of_circle", "policy:hudson_bay", "ineligible"]

# edge length (degrees) before projecting a polygon to measure its area
_DENSIFY_DEG = 0.1
# spacing (degrees) of the points sampled along a region's edge to find the region nearest a point
_EDGE_DEG = 0.25
_EARTH_RADIUS_KM = 6371.0

DEFAULT_REGIONS_PATH = Path(__file__).resolve().parents[2] / "data" / "regions" / "arctic_marine_regions.geojson"


class MarineRegion(BaseModel):
    """One named marine region and how the eligibility rule treats points inside it."""

    model_config = ConfigDict(extra="allow")

    name: str
    eligibility: RegionEligibility
    aliases: list[str] = []
    source: str = ""
    method: str = ""
    note: str = ""


def normalize_lon(lon: Any) -> Any:
    """Map longitudes to [-180, 180); works on floats and numpy arrays (0–360 input accepted)."""
    return np.mod(np.asarray(lon, dtype=float) + 180.0, 360.0) - 180.0


def _equal_area(geom: Any) -> float:
    """Area on the unit sphere (steradians) of a lon/lat polygon.

    Lambert's cylindrical equal-area projection (x = longitude, y = sin latitude) keeps areas, so a
    square degree near the pole weighs less than one at the circle. Edges are densified first
    because they are straight in lon/lat, where the point tests are made, and curve once projected.
    """
    if geom.is_empty:
        return 0.0
    dense = shapely.segmentize(geom, _DENSIFY_DEG)
    projected = shapely.transform(
        dense, lambda xy: np.column_stack([np.radians(xy[:, 0]), np.sin(np.radians(xy[:, 1]))]))
    return float(projected.area)


class RegionSet:
    """The loaded region file: regions, their prepared geometries and an STRtree over them."""

    def __init__(self, regions: list[MarineRegion], geometries: list[Any], *, path: Path, sha256: str) -> None:
        self.regions = regions
        self.geometries = geometries
        self.path = path
        self.sha256 = sha256
        for geom in geometries:
            shapely.prepare(geom)
        self.tree = shapely.STRtree(geometries)
        self._south_share: dict[tuple[int, float], float] = {}
        self._edges: list[np.ndarray] | None = None
        self._by_name = {r.name.casefold(): i for i, r in enumerate(regions)}
        for i, r in enumerate(regions):
            for alias in r.aliases:
                self._by_name.setdefault(alias.casefold(), i)

    def __len__(self) -> int:
        return len(self.regions)

    def index_of(self, name: str) -> int | None:
        """The index of the region called ``name`` (or one of its aliases), case-insensitively."""
        return self._by_name.get(name.casefold())

    def membership(self, lats: Sequence[float] | np.ndarray, lons: Sequence[float] | np.ndarray) -> np.ndarray:
        """Boolean matrix ``(n_points, n_regions)``: point i lies in (or on the edge of) region j."""
        y = np.asarray(lats, dtype=float)
        x = normalize_lon(lons)
        out = np.zeros((y.shape[0], len(self.regions)), dtype=bool)
        for j, geom in enumerate(self.geometries):
            out[:, j] = shapely.intersects_xy(geom, x, y)
        return out

    def query(self, lats: Sequence[float] | np.ndarray, lons: Sequence[float] | np.ndarray) -> np.ndarray:
        """STRtree form of :meth:`membership`: a ``(2, k)`` array of (point index, region index) pairs."""
        pts = shapely.points(normalize_lon(lons), np.asarray(lats, dtype=float))
        result: np.ndarray = self.tree.query(pts, predicate="intersects")
        return result

    def south_share(self, index: int, lat: float) -> float:
        """The share of region ``index``'s area that lies south of ``lat`` (0 to 1), computed once
        per region and latitude from the polygon on an equal-area projection."""
        key = (index, float(lat))
        share = self._south_share.get(key)
        if share is None:
            geom = self.geometries[index]
            _, miny, _, maxy = geom.bounds
            if miny >= lat or maxy <= lat:
                share = 0.0 if miny >= lat else 1.0
            else:
                south = shapely.intersection(geom, shapely.box(-180.0, -90.0, 180.0, float(lat)))
                share = _equal_area(south) / _equal_area(geom)
            self._south_share[key] = share
        return share

    def regions_at(self, lat: float, lon: float) -> list[int]:
        """Indices of the regions containing one point, in file order (file order is priority)."""
        row = self.membership([lat], [lon])[0]
        return [int(j) for j in np.flatnonzero(row)]

    def nearest(self, lat: float, lon: float) -> tuple[int, float]:
        """(index, km) of the region nearest to a point: the first containing it (0 km), else the
        one whose edge comes closest on the sphere (edges sampled every 0.25°, so within ~15 km;
        across the antimeridian too). For a place on land, the sea it borders."""
        inside = self.regions_at(lat, lon)
        if inside:
            return inside[0], 0.0
        if self._edges is None:
            self._edges = [np.radians(shapely.get_coordinates(shapely.segmentize(shapely.boundary(g), _EDGE_DEG)))
                           for g in self.geometries]
        phi, lam = np.radians(lat), np.radians(float(normalize_lon(lon)))
        best, best_km = 0, float("inf")
        for j, xy in enumerate(self._edges):
            # haversine from the point to every sampled edge point (x = longitude, y = latitude)
            h = (np.sin((xy[:, 1] - phi) / 2) ** 2
                 + np.cos(phi) * np.cos(xy[:, 1]) * np.sin((xy[:, 0] - lam) / 2) ** 2)
            km = float(2 * _EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(h.min(), 0.0, 1.0))))
            if km < best_km:
                best, best_km = j, km
        return best, best_km


def _fail(path: Path, message: str, field: str | None = None) -> InputError:
    return InputError(message, path=str(path), field=field)


def _load(path: Path) -> RegionSet:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _fail(path, f"cannot read region file: {exc.strerror}") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=exc.lineno) from exc
    if not isinstance(data, dict) or data.get("type") != "FeatureCollection":
        raise _fail(path, "expected a GeoJSON FeatureCollection", "type")
    regions: list[MarineRegion] = []
    geometries: list[Any] = []
    seen: set[str] = set()
    for i, feat in enumerate(data.get("features") or []):
        where = f"features[{i}]"
        props = feat.get("properties") or {}
        try:
            region = MarineRegion.model_validate(props)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first["loc"])
            raise _fail(path, f"{where}: {first['msg']}", f"properties.{loc}") from exc
        if region.name.casefold() in seen:
            raise _fail(path, f"{where}: duplicate region name {region.name!r}", "properties.name")
        seen.add(region.name.casefold())
        try:
            geom = shape(feat.get("geometry") or {})
        except Exception as exc:  # shapely raises several types for malformed geometry
            raise _fail(path, f"{where} ({region.name}): bad geometry: {exc}", "geometry") from exc
        if geom.geom_type not in ("Polygon", "MultiPolygon") or geom.is_empty:
            raise _fail(path, f"{where} ({region.name}): geometry must be a (Multi)Polygon", "geometry")
        if not geom.is_valid:
            raise _fail(path, f"{where} ({region.name}): invalid polygon: {shapely.is_valid_reason(geom)}",
                        "geometry")
        minx, miny, maxx, maxy = geom.bounds
        if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
            raise _fail(path, f"{where} ({region.name}): coordinates outside lon [-180, 180] / lat [-90, 90]; "
                              "split antimeridian-crossing polygons at 180", "geometry")
        regions.append(region)
        geometries.append(geom)
    if not regions:
        raise _fail(path, "no region features", "features")
    return RegionSet(regions, geometries, path=path, sha256=hashlib.sha256(raw).hexdigest())


@lru_cache(maxsize=8)
def _load_cached(path: Path, mtime_ns: int) -> RegionSet:
    return _load(path)


def load_regions(path: Path | str | None = None) -> RegionSet:
    """Load (and cache per file version) the region GeoJSON; bad files raise :class:`InputError`."""
    p = Path(path) if path is not None else DEFAULT_REGIONS_PATH
    try:
        mtime = p.stat().st_mtime_ns
    except OSError as exc:
        raise _fail(p, "region file not found") from exc
    return _load_cached(p.resolve(), mtime)
