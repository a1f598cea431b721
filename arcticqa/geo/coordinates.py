"""A deterministic parser for geographic coordinates written in scientific prose.

It finds latitudes and longitudes in decimal degrees or degrees–minutes–seconds (``°′″``, ASCII
quotes, or ``d m s``), with hemisphere letters before or after the number (or, after it, the
Russian abbreviations ``с. ш.``, ``ю. ш.``, ``в. д.``, ``з. д.`` and their long forms), signed
values after a ``lat``/``lon`` label, comma decimals, and latitude ranges such as ``78–80°N``.
A latitude next to a longitude becomes one point; a latitude alone is kept (longitude alone
proves nothing about study geography and is ignored). Values that look like coordinates but are
impossible (latitude above 90°, minutes ≥ 60, a minus sign with a hemisphere letter, …) are
returned as rejections with a reason, so a reader can see what was not trusted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

__all__ = ["Coordinate", "RejectedCoordinate", "CoordinateParse", "parse_coordinates"]

Axis = Literal["lat", "lon"]


class Coordinate(BaseModel):
    """A point (lat + lon), a latitude alone, or a latitude band, with where it was written."""

    start: int
    end: int
    text: str
    lat: float
    lon: float | None = None
    lat_min: float | None = None  # set for ranges such as "78–80°N"
    lat_max: float | None = None


class RejectedCoordinate(BaseModel):
    """Text that looked like a coordinate but cannot be one."""

    start: int
    end: int
    text: str
    reason: str


class CoordinateParse(BaseModel):
    coordinates: list[Coordinate]
    rejected: list[RejectedCoordinate]


# Degree marks seen in PDFs: the degree sign and its look-alikes — masculine ordinal and ring
# above (OCR/font swaps), LaTeX's $^\circ$ (white bullet ◦ or ring operator ∘), superscript zero
# and the modifier letter small o (word processors' raised "o").
_DEGREE_MARKS = "°º˚◦∘⁰ᵒ"
_DEG = rf"(?:\s?[{_DEGREE_MARKS}]|\s?deg(?:rees?|s)?\.?(?![A-Za-z])|d(?=\s*\d))"
_MIN = r"(?:[′'’´ʹ]|\s?min\.?(?![A-Za-z])|m(?![A-Za-z]))"
_SEC = r"(?:[″\"”ʺ]|''|’’|′′|\s?sec\.?(?![A-Za-z])|s(?![A-Za-z]))"
_NUM = r"\d{1,3}(?:[.,]\d+)?"
_SMALL = r"\d{1,2}(?:[.,]\d+)?"
_SIGN = r"[-−+]"


def _angle(p: str) -> str:
    """One angle (no hemisphere), with group names prefixed by ``p``."""
    return (rf"(?P<{p}deg>{_NUM})(?P<{p}dmark>{_DEG})?"
            rf"(?:\s*(?P<{p}min>{_SMALL})\s*(?P<{p}mmark>{_MIN})"
            rf"(?:\s*(?P<{p}sec>{_SMALL})\s*{_SEC})?)?")


# Hemisphere words written after a number: a Latin letter, or Russian "с. ш." (северной широты,
# north), "ю. ш." (южной широты, south), "в. д." (восточной долготы, east), "з. д." (западной
# долготы, west) — with or without the dots and the space between them, shortened "сев. шир.",
# "вост. долг.", or written out. The initial must carry a dot or touch the second letter, so the
# prepositions "с" and "в" followed by a word cannot read as a hemisphere.
_CYR = "А-Яа-яЁё"
_RU_HEM = {
    "N": r"с(?:ев)?(?:\.\s?)?ш(?:ир)?\.?|северн(?:ой|ая)\s+широты",
    "S": r"ю(?:ж)?(?:\.\s?)?ш(?:ир)?\.?|южн(?:ой|ая)\s+широты",
    "E": r"в(?:ост)?(?:\.\s?)?д(?:олг)?\.?|восточн(?:ой|ая)\s+долготы",
    "W": r"з(?:ап)?(?:\.\s?)?д(?:олг)?\.?|западн(?:ой|ая)\s+долготы",
}
_HEM = "(?:[NSEW](?![A-Za-z])|(?i:" + "|".join(_RU_HEM.values()) + rf")(?![{_CYR}A-Za-z]))"
_RU_HEM_RE = {hem: re.compile(rf"(?:{pattern})\Z") for hem, pattern in _RU_HEM.items()}
_HEM_AFTER = rf"\s*(?P<hem>{_HEM})"
_LEFT = rf"(?<![\w.{_DEGREE_MARKS}'’′\-−])(?<!\d[.,])"

# "78–80°N", "78°–80°N", "78°N–80°N", "66°33′–67°N", "from 78 to 80° N", "от 70° до 75° с. ш."
_RANGE_RE = re.compile(
    _LEFT + _angle("a") + rf"\s*(?P<hema>{_HEM})?\s*(?:[–—\-−]|\bto\b|\bдо\b)\s*"
    + _angle("b") + _HEM_AFTER
)
# One alternation, so the leftmost reading wins: in "N 78°55′ E 11°56′" the letters lead, in
# "78°N 12°E" they follow, and neither reading can steal the other's letter.
_SINGLE_RE = re.compile(
    r"(?<![A-Za-z])(?P<bhem>[NSEW])\s?" + rf"(?P<bsign>{_SIGN})?" + _angle("b")
    + "|" + _LEFT + rf"(?P<sign>{_SIGN})?" + _angle("") + _HEM_AFTER
)
_LABEL_RE = re.compile(
    r"(?<![A-Za-z])(?P<label>lat(?:itude)?|lon(?:g(?:itude)?)?)\.?\s*(?:[:=]|of|is)?\s*"
    rf"(?P<sign>{_SIGN})?" + _angle("") + rf"(?:\s*(?P<hem>{_HEM}))?",
    re.IGNORECASE,
)
# What may sit between a latitude and its longitude: "78°N, 12°E", "78°N and 12°E", "78°N / 12°E",
# "72° с. ш. и 126° в. д.", "72° с. ш., долгота 126° в. д."
_PAIR_GAP_RE = re.compile(r"^[\s,;/]*(?:and\s+|и\s+|&\s*)?(?:(?:lon(?:g(?:itude)?)?|долгота)\.?\s*[:=]?\s*)?$",
                          re.IGNORECASE)


@dataclass
class _Token:
    start: int
    end: int
    axis: Axis
    value: float
    marked: bool  # a degree/minute mark or a label: cannot be a force in newtons or a page ref
    decimal: bool


class _Reject(Exception):
    pass


def _num(s: str) -> float:
    return float(s.replace(",", "."))


def _value(m: re.Match[str], p: str) -> float:
    deg_s, min_s, sec_s = m.group(f"{p}deg"), m.group(f"{p}min"), m.group(f"{p}sec")
    deg = _num(deg_s)
    if min_s is not None:
        if not deg_s.isdigit():
            raise _Reject("decimal degrees followed by minutes")
        minutes = _num(min_s)
        if minutes >= 60:
            raise _Reject(f"minutes {min_s} not below 60")
        if sec_s is not None:
            if not min_s.isdigit():
                raise _Reject("decimal minutes followed by seconds")
            seconds = _num(sec_s)
            if seconds >= 60:
                raise _Reject(f"seconds {sec_s} not below 60")
            minutes += seconds / 60.0
        deg += minutes / 60.0
    return deg


def _check(axis: Axis, value: float) -> None:
    limit = 90.0 if axis == "lat" else 180.0
    if abs(value) > limit:
        raise _Reject(f"{'latitude' if axis == 'lat' else 'longitude'} {abs(value):g}° is beyond ±{limit:g}°")


def _hem_letter(written: str | None) -> str | None:
    """N, S, E or W for a hemisphere as written (a Latin letter or a Russian abbreviation)."""
    if written is None or len(written) == 1 and written.isascii():
        return written
    norm = re.sub(r"\s+", " ", written.lower())
    for hem, pattern in _RU_HEM_RE.items():
        if pattern.match(norm):
            return hem
    raise AssertionError(f"unknown hemisphere {written!r}")  # the regexes only match the forms above


def _hem_axis(hem: str) -> tuple[Axis, int]:
    return ("lat", 1 if hem == "N" else -1) if hem in "NS" else ("lon", 1 if hem == "E" else -1)


def _signed(m: re.Match[str], group: str) -> int:
    sign = m.group(group)
    return -1 if sign in ("-", "−") else 1


def _is_marked(m: re.Match[str], p: str = "") -> bool:
    return bool(m.group(f"{p}dmark") or m.group(f"{p}mmark"))


def _rejected_partner(text: str, tok: _Token, rejected: list[RejectedCoordinate]) -> RejectedCoordinate | None:
    for r in rejected:
        gap = text[tok.end:r.start] if r.start >= tok.end else text[r.end:tok.start] if r.end <= tok.start else None
        if gap is not None and _PAIR_GAP_RE.match(gap):
            return r
    return None


def parse_coordinates(text: str) -> CoordinateParse:
    """Find every coordinate in ``text`` (offsets are character offsets into ``text``)."""
    taken = bytearray(len(text) + 1)
    coords: list[Coordinate] = []
    rejected: list[RejectedCoordinate] = []
    tokens: list[_Token] = []

    def free(a: int, b: int) -> bool:
        return not any(taken[a:b])

    def take(a: int, b: int) -> None:
        taken[a:b] = b"\x01" * (b - a)

    def reject(m: re.Match[str], reason: str) -> None:
        rejected.append(RejectedCoordinate(start=m.start(), end=m.end(), text=m.group(0), reason=reason))
        take(m.start(), m.end())

    for m in _RANGE_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        hem, hem_a = _hem_letter(m.group("hem")), _hem_letter(m.group("hema"))
        assert hem is not None
        if hem not in "NS":
            continue  # longitude bands say nothing about study latitude
        if hem_a is not None and hem_a != hem:
            reject(m, f"range mixes hemispheres {hem_a} and {hem}")
            continue
        if not (_is_marked(m, "a") or _is_marked(m, "b") or hem_a):
            # "78-80 N" without any degree mark is too weak (e.g. sample numbers and forces)
            if not (m.group("adeg").isdigit() and m.group("bdeg").isdigit()):
                continue
        try:
            a, b = _value(m, "a"), _value(m, "b")
            _check("lat", a)
            _check("lat", b)
        except _Reject as exc:
            reject(m, str(exc))
            continue
        sign = 1 if hem == "N" else -1
        lo, hi = sorted((sign * a, sign * b))
        take(m.start(), m.end())
        coords.append(Coordinate(start=m.start(), end=m.end(), text=m.group(0), lat=(lo + hi) / 2,
                                 lat_min=lo, lat_max=hi))

    def add_token(m: re.Match[str], p: str, axis: Axis, sign: int, marked: bool, conflict: bool) -> None:
        if conflict:
            reject(m, "a minus sign together with a hemisphere letter")
            return
        try:
            value = _value(m, p)
            _check(axis, value)
        except _Reject as exc:
            reject(m, str(exc))
            return
        take(m.start(), m.end())
        deg = m.group(f"{p}deg")
        tokens.append(_Token(m.start(), m.end(), axis, sign * value, marked, "." in deg or "," in deg))

    for m in _LABEL_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        axis: Axis = "lat" if m.group("label").lower().startswith("lat") else "lon"
        hem = _hem_letter(m.group("hem"))
        if hem is not None:
            hem_axis, hem_sign = _hem_axis(hem)
            if hem_axis != axis:
                reject(m, f"{axis} label with hemisphere letter {hem}")
                continue
            add_token(m, "", axis, hem_sign, True, m.group("sign") in ("-", "−"))
        else:
            add_token(m, "", axis, _signed(m, "sign"), True, False)

    for m in _SINGLE_RE.finditer(text):
        if not free(m.start(), m.end()):
            continue
        p = "b" if m.group("bhem") else ""
        written = _hem_letter(m.group(f"{p}hem"))
        assert written is not None
        axis, hem_sign = _hem_axis(written)
        marked = _is_marked(m, p)
        if not marked and "." not in m.group(f"{p}deg").replace(",", "."):
            continue  # "78 N", "Table S2": too weak without a degree mark or a decimal
        add_token(m, p, axis, hem_sign, marked, m.group(f"{p}sign") in ("-", "−"))

    tokens.sort(key=lambda t: t.start)
    used: set[int] = set()
    for i, tok in enumerate(tokens):
        if i in used:
            continue
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        if (nxt is not None and nxt.axis != tok.axis and (i + 1) not in used
                and _PAIR_GAP_RE.match(text[tok.end:nxt.start])):
            lat_tok, lon_tok = (tok, nxt) if tok.axis == "lat" else (nxt, tok)
            if not (lat_tok.marked or lon_tok.marked) and not (lat_tok.decimal and lon_tok.decimal):
                continue
            used.update((i, i + 1))
            coords.append(Coordinate(start=tok.start, end=nxt.end, text=text[tok.start:nxt.end],
                                     lat=lat_tok.value, lon=lon_tok.value))
            continue
        if tok.axis == "lat" and tok.marked:
            used.add(i)
            partner = _rejected_partner(text, tok, rejected)
            if partner is not None:
                # half of an impossible pair is not a trustworthy latitude either
                a, b = min(tok.start, partner.start), max(tok.end, partner.end)
                rejected[rejected.index(partner)] = RejectedCoordinate(
                    start=a, end=b, text=text[a:b], reason=partner.reason)
                continue
            coords.append(Coordinate(start=tok.start, end=tok.end, text=text[tok.start:tok.end], lat=tok.value))
    coords.sort(key=lambda c: c.start)
    rejected.sort(key=lambda r: r.start)
    return CoordinateParse(coordinates=coords, rejected=rejected)
