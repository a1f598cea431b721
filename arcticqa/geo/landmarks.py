"""Places named as a bound or a reference point rather than as a study site.

In "the ice edge lay between Iceland and the southeast coast of Greenland (about 68°N, 25°W)"
neither Iceland nor Greenland is where the study was: they bound it, and the coordinates are the
site. :func:`landmark_phrase` recognises a short list of such phrasings around one place name:

- ``between X and Y`` — both X and Y (unless the clause compares them: "differences between X and Y");
- ``off X``, ``offshore of X`` (not after a verb such as "broke off X");
- ``north of X`` (any compass direction, ``northward of``), unless a short distance ties the site
  to X ("3 km south of X", "just north of X");
- ``as far as X``, ``as far north as X``;
- ``from X to Y`` (also ``towards``, ``through``, ``into``) — only when X and Y are both places or
  coordinates, so "data from X to evaluate …" keeps X, and not in a comparison;
- ``bounded by X``, ``bordered by X`` (and the Y of ``bounded by X and Y``).

Fillers such as "the southeast coast of" may sit between the cue and the name. Anything else —
"at Ny-Ålesund", "in Svalbard", "near Tromsø", "data from Zackenberg" — is not a landmark.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["landmark_phrase"]

_COMPASS = r"(?:(?:north|south)-?(?:east|west)|north|south|east|west)"
_COMPASS_ADJ = rf"(?:{_COMPASS}(?:ern)?)"
_PART = r"(?:coasts?|coastline|shores?|shelf|margins?|tip|edges?|parts?|sides?|end|flanks?|slopes?|borders?)"
# what may stand between a cue and the name: "the", "the southeast coast of", "northern", …
_FILLER = (rf"(?:the\s+)?(?:(?:far\s+)?{_COMPASS_ADJ}\s+)?(?:{_PART}\s+of\s+(?:the\s+)?)?"
           rf"(?:{_COMPASS_ADJ}\s+)?")
_PAREN = r"(?:\s*\([^()]{0,80}\))?"
_CLAUSE_STOP = re.compile(r"[.;:!?]")
_WINDOW = 200

_FLAGS = re.IGNORECASE
_BETWEEN_FIRST = re.compile(rf"\bbetween\s+{_FILLER}$", _FLAGS)
_AND_AFTER = re.compile(rf"{_PAREN}\s*,?\s*and\b", _FLAGS)
# "between X and <filler>": the part between "between" and "and" holds no other "and"
_BETWEEN_SECOND = re.compile(rf"\bbetween\s+(?:(?!\band\b)[^.;:!?]){{1,100}}?\s+and\s+{_FILLER}$", _FLAGS)
# "off X", but not a verb's "off": "the ice shelf broke off Ellesmere Island" is about the island
_OFF = re.compile(rf"\b(?:off|offshore\s+(?:of|from))\s+{_FILLER}$", _FLAGS)
_VERB_BEFORE_OFF = re.compile(
    r"\b(?:break|breaks|broke|broken|breaking|calve[ds]?|calving|cut|cuts|split|splits|shear|sheared)\s+$", _FLAGS)
_DIRECTION = re.compile(rf"\b{_COMPASS}(?:wards?)?\s+of\s+{_FILLER}$", _FLAGS)
_AS_FAR = re.compile(rf"\bas\s+far\s+(?:{_COMPASS}(?:wards?)?\s+)?as\s+{_FILLER}$", _FLAGS)
_BOUNDED_BY = rf"\b(?:bounded|bordered|delimited)\s+(?:to\s+the\s+{_COMPASS}\s+)?by\s+"
_BOUNDED = re.compile(rf"{_BOUNDED_BY}{_FILLER}$", _FLAGS)
_BOUNDED_SECOND = re.compile(rf"{_BOUNDED_BY}(?:(?!\band\b)[^.;:!?]){{1,100}}?\s+and\s+{_FILLER}$", _FLAGS)
_FROM = re.compile(rf"\bfrom\s+{_FILLER}$", _FLAGS)
_TO_GAP = re.compile(rf"{_PAREN}\s*,?\s*(?:to|towards|through|into)\s+{_FILLER}", _FLAGS)
# a distance or an adverb that ties the site to the place: "3 km south of", "just north of"
_NEAR_BEFORE = re.compile(
    r"(?:(?P<num>\d+(?:[.,]\d+)?)\s*(?P<unit>km|kilomet(?:re|er)s?|m|met(?:re|er)s?|nmi|nautical\s+miles?|mi|miles?)"
    r"|\b(?:just|immediately|directly|slightly|a\s+few\s+(?:km|kilomet(?:re|er)s)))\s+$", _FLAGS)
_NEAR_KM = 100.0
# "in the north of Greenland" is a part of Greenland; "to the north of Tromsø" lies beyond it
_INSIDE = re.compile(r"(?<!\bto\s)\bthe\s+(?:far\s+|extreme\s+|very\s+)?$", _FLAGS)
_UNIT_KM = {"km": 1.0, "m": 0.001, "nmi": 1.852, "mi": 1.609}
_COMPARISON = re.compile(
    r"\b(?:differ\w*|compar\w*|contrast\w*|correlat\w*|relationships?|agreements?|similarit\w*|"
    r"distinction|distinguish\w*|discrepanc\w*|versus|vs)\b", _FLAGS)


def _clause_before(text: str, pos: int) -> str:
    """The text of the clause that ends at ``pos`` (back to the last sentence stop, at most 200 chars)."""
    window = text[max(0, pos - _WINDOW):pos]
    stops = list(_CLAUSE_STOP.finditer(window))
    return window[stops[-1].end():] if stops else window


def _compares(clause: str, cue_start: int) -> bool:
    return bool(_COMPARISON.search(clause[:cue_start]))


def _unit_km(unit: str) -> float:
    u = unit.lower()
    if u.startswith("naut") or u == "nmi":
        return _UNIT_KM["nmi"]
    if u.startswith("k"):
        return _UNIT_KM["km"]
    if u.startswith("mi"):
        return _UNIT_KM["mi"]
    return _UNIT_KM["m"]


def _near(prefix: str) -> bool:
    m = _NEAR_BEFORE.search(prefix)
    if m is None:
        return False
    if m.group("num") is None:
        return True
    return float(m.group("num").replace(",", ".")) * _unit_km(m.group("unit")) <= _NEAR_KM


def landmark_phrase(text: str, start: int, end: int, anchors: Sequence[tuple[int, int]] = ()) -> str | None:
    """The phrase that names ``text[start:end]`` as a bound or reference point, or None.

    ``anchors`` are the (start, end) offsets of the other places and coordinates found in
    ``text``; ``from X to Y`` only counts when the other end is one of them.
    """
    clause = _clause_before(text, start)
    base = start - len(clause)
    for pattern in (_BETWEEN_SECOND, _OFF, _AS_FAR, _BOUNDED, _BOUNDED_SECOND):
        m = pattern.search(clause)
        if m is None:
            continue
        if pattern is _BETWEEN_SECOND and _compares(clause, m.start()):
            continue
        if pattern is _OFF and _VERB_BEFORE_OFF.search(clause[:m.start()]):
            continue
        return text[base + m.start():end]
    m = _DIRECTION.search(clause)
    if m is not None and not _near(clause[:m.start()]) and not _INSIDE.search(clause[:m.start()]):
        return text[base + m.start():end]
    m = _BETWEEN_FIRST.search(clause)
    if m is not None and not _compares(clause, m.start()):
        after = _AND_AFTER.match(text, end)
        if after is not None:
            return text[base + m.start():after.end()]
    # "from X to Y": X is a landmark when Y is a place or a coordinate, and Y when X is
    m = _FROM.search(clause)
    if m is not None and not _compares(clause, m.start()):
        for a_start, a_end in anchors:
            gap = _TO_GAP.fullmatch(text, end, a_start) if a_start > end else None
            if gap is not None:
                return text[base + m.start():a_end]
    for a_start, a_end in anchors:
        if a_end > start or start - a_end > _WINDOW:
            continue
        if _TO_GAP.fullmatch(text, a_end, start) is None:
            continue
        before = _clause_before(text, a_start)
        m = _FROM.search(before)
        if m is not None and not _compares(before, m.start()):
            return text[a_start - len(before) + m.start():end]
    return None
