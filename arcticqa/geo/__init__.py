"""Geography for the eligibility rule: coordinate parsing, the gazetteer, marine regions, the policy."""

from __future__ import annotations

from arcticqa.geo.coordinates import Coordinate, CoordinateParse, RejectedCoordinate, parse_coordinates
from arcticqa.geo.gazetteer import Gazetteer, Place, PlaceMatch, load_gazetteer
from arcticqa.geo.policy import EligibilityPolicy, load_eligibility_policy
from arcticqa.geo.regions import MarineRegion, RegionSet, load_regions, normalize_lon

__all__ = [
    "Coordinate",
    "CoordinateParse",
    "RejectedCoordinate",
    "parse_coordinates",
    "Gazetteer",
    "Place",
    "PlaceMatch",
    "load_gazetteer",
    "EligibilityPolicy",
    "load_eligibility_policy",
    "MarineRegion",
    "RegionSet",
    "load_regions",
    "normalize_lon",
]
