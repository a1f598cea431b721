"""Numbers with units: parsing, unit conversion (pint) and precision-aware comparison.

A stated value carries its own tolerance: half a unit of its last written digit ("2.3" means
2.25–2.35, "2.30" means 2.295–2.305), widened by an explicit ``±`` and by approximation words
("~", "about"). Two values agree when they differ by no more than the coarser of their
tolerances after conversion to a common unit — so ``2.3 mm/yr`` equals ``2.30 mm yr⁻¹``,
``0.5 m`` equals ``50 cm``, and ``18%`` contradicts ``28%``.

Units are read by a curated token grammar, not by handing free text to pint: pint happily
parses "Tg C" as teragram·coulomb and "N" (north) as newton. Tokens pint cannot convert
(``°E``, ``psu``, ``fold``) are *labels* that only match themselves.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = [
    "Number",
    "parse_numbers",
    "comparable",
    "values_agree",
    "numeric_within_tolerance",
    "same_value",
    "unit_of",
    "prepare_text",
]

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_DEGREE_LOOKALIKES = str.maketrans({"\u00ba": "°", "\u02da": "°", "\u030a": "°", "\u2218": "°"})


def prepare_text(text: str) -> str:
    """The form numbers are read from (offsets of :class:`Number` index into it): NFKC (keeps superscripts, which NFKC would flatten into digits), unified degree/minus signs."""
    # protect superscripts: NFKC turns "yr⁻¹" into "yr-1", which we want, but "10³" into "103"
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^" + m.group(0).translate(_SUPERSCRIPTS), text)
    text = unicodedata.normalize("NFKC", text).translate(_DEGREE_LOOKALIKES)
    text = text.replace("\u00ad", "").replace("\u2212", "-").replace("\ufe63", "-")
    text = re.sub(r"°\s+(?=[CFKNSEW]\b)", "°", text)
    # PDF text loses superscripts: "CFU/m 3" is per cubic metre
    text = re.sub(r"/ ?(k?m|cm|mm|dm) ([23])\b(?![.,]\d)", r"/\1^\2", text)
    text = re.sub(r"\s+°", " °", text)
    text = re.sub(r"\bper\s?cent\b", "%", text, flags=re.I)
    text = re.sub(r"\bper\s?mil(?:le)?\b", "‰", text, flags=re.I)
    return text


@dataclass(frozen=True)
class Number:
    """One number found in text, with what is needed to compare it honestly."""

    value: float
    decimals: int  # digits written after the decimal point (precision)
    scale: float  # 10**exponent for scientific notation, else 1
    unit: str | None  # canonical unit text, e.g. "mm/year", "%", "°E"
    approx: bool = False  # "~", "about", "approximately", ...
    bound: str | None = None  # "<", ">", "≤", "≥" (or words meaning them)
    plusminus: float | None = None  # stated ± in the same unit
    start: int = 0  # offsets into prepare_text(text), not into the raw text
    end: int = 0

    @property
    def precision(self) -> float:
        """Half a unit of the last written digit."""
        return 0.5 * 10.0 ** (-self.decimals) * self.scale

    @property
    def tolerance(self) -> float:
        tol = self.precision
        if self.plusminus is not None:
            tol = max(tol, self.plusminus)
        if self.approx:
            tol = max(tol, 0.05 * abs(self.value))
        return tol


# ---- unit grammar ---------------------------------------------------------------------------

_PREFIX = r"(?:da|[YZEPTGMkhdcmµμunpf])"
_PREFIXABLE = r"(?:mol|Pa|Hz|Sv|Bq|eq|bar|g|m|s|L|l|W|J|V|t|M)"
_PLAIN = (r"(?:%|‰|ppm|ppb|ppt|ppmv|ppbv|psu|PSU|°[CFNSEW]|°|K|yrs?|years?|a|d|days?|h|hrs?|hours?"
          r"|min|months?|weeks?|decades?|century|centuries|ha|fold|times|mol%)")
_EXP = r"(?:\^?[-+]?\d)?"
_TOKEN = re.compile(rf"(?:{_PLAIN}|{_PREFIX}?{_PREFIXABLE}){_EXP}(?![\w%‰°])")
# tokens that are also common words or letters: a unit only in a denominator or with an exponent
_AMBIGUOUS_ALONE = {"yr_a", "d", "h", "t", "L", "M", "da", "min"}
_LABELS = {"psu", "°N", "°S", "°E", "°W", "fold", "ppt", "eq", "ppmv", "ppbv"}

# spelling variants of one unit share one canonical token, so "mm/yr" == "mm/year" without pint
_SYNONYMS = {"yrs": "yr", "year": "yr", "years": "yr", "a": "yr", "day": "d", "days": "d",
             "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "months": "month",
             "weeks": "week", "decades": "decade", "centuries": "century", "times": "fold",
             "PSU": "psu", "l": "L"}
_BASE_NAMES = {
    "yr": "year", "d": "day", "h": "hour", "min": "minute", "month": "month", "week": "week",
    "decade": "(10*year)", "century": "(100*year)", "%": "percent", "‰": "permille",
    "°C": "degC", "°F": "degF", "K": "kelvin", "°": "degree", "ha": "hectare", "Sv": "sverdrup",
    "ppm": "ppm", "ppb": "ppb", "mol%": "percent",
}


def _canonical_token(tok: str) -> tuple[str, int]:
    m = re.match(r"^(.*?)(?:\^?([-+]?\d))?$", tok)
    assert m is not None
    base, exp = m.group(1), m.group(2)
    if not base:  # a bare digit is never a unit token
        base, exp = tok, None
    base = _SYNONYMS.get(base.replace("μ", "µ"), base.replace("μ", "µ"))
    return base, int(exp) if exp else 1


def _read_unit(text: str, pos: int) -> tuple[str | None, int]:
    """Read a unit expression starting at ``pos``; returns (canonical unit or None, end)."""
    parts: list[tuple[str, int]] = []
    i = pos
    # at most one space between the number and its unit ("5 m", "5m", "5 %")
    m_sp = re.match(r" ?", text[i:])
    j = i + (m_sp.end() if m_sp else 0)
    if text.startswith("-fold", j) or text.startswith("-times", j):
        return "fold", j + (5 if text.startswith("-fold", j) else 6)
    denominator = False
    while True:
        m = _TOKEN.match(text, j)
        if not m:
            break
        tok = m.group(0)
        base, exp = _canonical_token(tok)
        ambiguous = base in _AMBIGUOUS_ALONE or tok in ("a", "l")
        if ambiguous and not denominator and exp == 1 and not parts:
            break
        if base == "fold" and parts:
            break
        parts.append((base, -exp if denominator else exp))
        i = j = m.end()
        denominator = False
        sep = re.match(r"(?: ?/ ?| per | ?[·⋅*] ?| )", text[j:])
        if not sep:
            break
        if "/" in sep.group(0) or "per" in sep.group(0):
            denominator = True
        j += sep.end()
    if not parts:
        return None, pos
    num = [f"{b}^{e}" if e != 1 else b for b, e in parts if e > 0]
    den = [f"{b}^{-e}" if e != -1 else b for b, e in parts if e < 0]
    unit = "*".join(num) or "1"
    if den:
        unit += "/" + "/".join(den)
    return unit, i


# ---- number scanner -------------------------------------------------------------------------

_NUM = re.compile(
    r"(?<![\w.^])(?P<sign>[-+\u2013\u2014]\s?)?(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?(?!\d)"
)
_SCI = re.compile(r"\s?(?:[×xX*]\s?10\s?(?:\^|\*\*)\s?(?P<e1>[-+]?\d+)|[eE](?P<e2>[-+]?\d+)(?!\w))")
_PM = re.compile(r"\s?(?:±|\+/-|\+-|\+/−)\s?(?P<int>\d+)(?:\.(?P<frac>\d+))?")
_APPROX = re.compile(r"(?:~|≈|∼|\b(?:about|approximately|approx\.|around|ca\.|c\.|circa|roughly|nearly|almost|some))\s*$",
                     re.I)
_BOUND = re.compile(r"(?P<sym>[<>≤≥]|\b(?:up to|more than|less than|at least|at most|over|under|above|below|"
                    r"exceeding|greater than|fewer than|lower than|higher than))\s*$", re.I)
_BOUND_SYMBOL = {"up to": "≤", "at most": "≤", "less than": "<", "under": "<", "below": "<",
                 "fewer than": "<", "lower than": "<", "more than": ">", "over": ">", "above": ">",
                 "exceeding": ">", "greater than": ">", "higher than": ">", "at least": "≥"}
_RANGE_JOIN = re.compile(r"^\s*(?:-|–|—|to|and|or|,)\s*$")


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> tuple[Number, ...]:
    prepared = prepare_text(text)
    found: list[Number] = []
    consumed_until = -1
    for m in _NUM.finditer(prepared):
        if m.start() < consumed_until:
            continue
        sign = 1.0
        sign_text = m.group("sign")
        if sign_text:
            before = prepared[:m.start()].rstrip()
            # "1.7 – 2.4" and "1979–2021" are ranges, not negative numbers
            if before and (before[-1].isdigit() or before[-1] in "%‰°)"):
                sign_text = None
            elif sign_text.strip() in "-\u2013\u2014":
                sign = -1.0
        digits = m.group("int").replace(",", "")
        frac = m.group("frac") or ""
        value = float(f"{digits}.{frac}" if frac else digits) * sign
        end = m.end()
        scale = 1.0
        sci = _SCI.match(prepared, end)
        if sci:
            exp = int(sci.group("e1") or sci.group("e2"))
            scale = 10.0 ** exp
            value *= scale
            end = sci.end()
        plusminus = None
        unit, unit_end = _read_unit(prepared, end)
        pm = _PM.match(prepared, unit_end if unit else end)
        if pm:
            pm_frac = pm.group("frac") or ""
            plusminus = float(f"{pm.group('int')}.{pm_frac}" if pm_frac else pm.group("int")) * scale
            if unit is None:
                unit, unit_end = _read_unit(prepared, pm.end())
            consumed_until = max(pm.end(), unit_end)
        start = m.start()
        final_end = max(unit_end if unit else end, consumed_until)
        consumed_until = final_end  # digits inside "yr^-1" or "× 10^3" are not numbers of their own
        lead = prepared[max(0, start - 20):start]
        approx = bool(_APPROX.search(lead))
        bound_m = _BOUND.search(lead)
        bound = None
        if bound_m:
            sym = bound_m.group("sym")
            bound = _BOUND_SYMBOL.get(sym.lower(), sym)
        found.append(Number(value=value, decimals=len(frac), scale=scale, unit=unit, approx=approx,
                            bound=bound, plusminus=plusminus, start=m.start(),
                            end=final_end))
    # a range or pair shares its unit: "110–112°E", "between 1.2 and 3.4 m"
    out = list(found)
    for k in range(len(out) - 2, -1, -1):
        a, b = out[k], out[k + 1]
        if a.unit is None and b.unit is not None and _RANGE_JOIN.match(prepared[a.end:b.start]):
            out[k] = Number(**{**a.__dict__, "unit": b.unit})
    return tuple(out)


def parse_numbers(text: str) -> list[Number]:
    """Every number in ``text`` with its unit, precision, ± and approximation/bound markers.

    Numbers glued to letters ("CO2", "SSP5", "Eur1") are identifiers and are skipped.
    """
    return list(_parse_cached(text))


def unit_of(text: str) -> str | None:
    """The unit of the first number in ``text`` (None if there is no number or no unit)."""
    nums = parse_numbers(text)
    return nums[0].unit if nums else None


# ---- conversion -----------------------------------------------------------------------------

_UREG: Any = None


def _registry() -> Any:
    global _UREG
    if _UREG is None:
        import pint

        _UREG = pint.UnitRegistry()
    return _UREG


def _pint_expr(unit: str) -> str | None:
    """The pint expression of a canonical unit, or None when it contains a label token."""
    num, _, den = unit.partition("/")
    groups = [(num, 1)] + [(d, -1) for d in den.split("/") if d] if den else [(num, 1)]
    compound = len([p for g, _ in groups for p in g.split("*") if p != "1"]) > 1
    factors: list[str] = []
    for group, sign in groups:
        for piece in group.split("*"):
            if piece == "1":
                continue
            base, _, exp_s = piece.partition("^")
            exp = int(exp_s) if exp_s else 1
            if base in _LABELS:
                return None
            name = _BASE_NAMES.get(base)
            if name is None:
                name = base.replace("µ", "u")
                if name.startswith("u") and len(name) > 1:
                    name = "u" + name[1:]
            if compound and name in ("degC", "degF"):
                name = "delta_" + name  # °C per decade is a rate of a difference
            factors.append(f"({name})**{exp * sign}")
    return "*".join(factors) if factors else "dimensionless"


@lru_cache(maxsize=1024)
def _to_unit_factor(src: str, dst: str) -> tuple[float, float] | None:
    """(factor, offset) such that value_in_dst = value_in_src * factor + offset, or None."""
    if src == dst:
        return 1.0, 0.0
    a, b = _pint_expr(src), _pint_expr(dst)
    if a is None or b is None:
        return None
    ureg = _registry()
    try:
        if src in _OFFSET_UNITS or dst in _OFFSET_UNITS:
            # absolute temperatures need pint's offset-aware Quantity path
            names = (_BASE_NAMES.get(src, src), _BASE_NAMES.get(dst, dst))
            q0 = ureg.Quantity(0.0, names[0]).to(names[1]).magnitude
            q1 = ureg.Quantity(1.0, names[0]).to(names[1]).magnitude
            return float(q1 - q0), float(q0)
        qa, qb = ureg.parse_expression(a), ureg.parse_expression(b)
        factor = qa.to(qb.units).magnitude / qb.magnitude
    except Exception:
        # pint raises several unrelated types (undefined unit, dimensionality, offset calculus);
        # any of them means "not convertible", which is an answer, not an error.
        return None
    return float(factor), 0.0


_OFFSET_UNITS = {"°C", "°F", "K"}


def comparable(a: Number, b: Number) -> tuple[float, float, float] | None:
    """``(a_value, b_value, tolerance)`` in a's unit, or None if the units cannot be compared.

    A number without a unit is read in the other's unit (a distractor "28" against "18%").
    """
    if a.unit is None or b.unit is None or a.unit == b.unit:
        return a.value, b.value, max(a.tolerance, b.tolerance)
    conv = _to_unit_factor(b.unit, a.unit)
    if conv is None:
        return None
    factor, offset = conv
    bv = b.value * factor + offset
    return a.value, bv, max(a.tolerance, b.tolerance * abs(factor))


def values_agree(a: Number, b: Number) -> bool | None:
    """True when ``a`` and ``b`` are the same value within the coarser stated tolerance."""
    cmp = comparable(a, b)
    if cmp is None:
        return None
    av, bv, tol = cmp
    diff = abs(av - bv)
    eps = 1e-9 * max(1.0, abs(av))
    stated = max(a.plusminus or 0.0, b.plusminus or 0.0)
    if stated and diff <= stated + eps:
        return True  # inside a stated ± interval, boundary included
    # precision tolerance is half a digit: a value exactly on the rounding boundary is not "the same"
    return diff < tol - eps


def same_value(a: Number, b: Number) -> bool:
    """Exact equality after unit conversion (no tolerance): used for answer-leak checks."""
    cmp = comparable(a, b)
    if cmp is None:
        return False
    av, bv, _ = cmp
    return math.isclose(av, bv, rel_tol=1e-9, abs_tol=1e-12)


def numeric_within_tolerance(answer: str, option: str) -> bool | None:
    """Whether every number of ``option`` is within tolerance of the answer's number in order.

    None when not comparable: either side has no number, they have different counts of numbers,
    or a pair of units cannot be converted into each other.
    """
    na, nb = parse_numbers(answer), parse_numbers(option)
    if not na or len(na) != len(nb):
        return None
    results = [values_agree(a, b) for a, b in zip(na, nb, strict=True)]
    if any(r is None for r in results):
        return None
    return all(results)
