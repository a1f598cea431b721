"""Numbers with units: parsing, unit conversion (pint) and precision-aware comparison.

A stated value carries its own tolerance: half a unit of its last written digit ("2.3" means
2.25–2.35, "2.30" means 2.295–2.305), widened by an explicit ``±`` and by approximation words
("~", "about"). Two values agree when they differ by no more than the coarser of their
tolerances after conversion to a common unit — so ``2.3 mm/yr`` equals ``2.30 mm yr⁻¹``,
``0.5 m`` equals ``50 cm``, and ``18%`` contradicts ``28%``.

Units are read by a curated token grammar, not by handing free text to pint: pint happily
parses "Tg C" as teragram·coulomb and "N" (north) as newton. Tokens pint cannot convert
(``°E``, ``psu``, ``fold``) are *labels* that only match themselves.

The grammar reads what papers and PDF text actually contain: superscript and detached exponents
(``yr⁻¹``, ``yr −1``, ``km 2``), element-qualified masses (``TgC``, ``Tg C``, ``g C m⁻² d⁻¹``),
unknown tokens in a unit position (``CFU/m 3``, ``cm/k.y.``) kept as *opaque* units that only
convert into themselves, Cyrillic units (``км``, ``мг``, ``°С``, ``м в. э.``), the decimal comma
(``1,2 °C``: in Russian text, and wherever a comma cannot group thousands), thin-space
thousands, ``× 10⁻³``/``·10 3`` scientific notation, percentage points (never percent) and
calendar dates (``March 11th`` is a date, not the number 11).
A misread unit must never make two equal values look different: when in doubt a token makes
the numbers *incomparable* (no proof), never different.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from typing import Any

__all__ = [
    "Number",
    "parse_numbers",
    "comparable",
    "values_agree",
    "numeric_within_tolerance",
    "same_value",
    "same_uncertainty",
    "prepare_text",
]

_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_DEGREE_LOOKALIKES = str.maketrans({"\u00ba": "°", "\u02da": "°", "\u030a": "°", "\u2218": "°",
                                    "\u25e6": "°"})


# Russian text, not one Cyrillic look-alike letter in English ("δ 18 О" with a Cyrillic О)
_CYRILLIC = re.compile(r"[\u0400-\u04ff]{2,}|\d ?[мгтлсч](?![\w])")
_FIGURE_DASH = str.maketrans({"\u2012": "\u2013", "\u2010": "-", "\u2011": "-"})


@lru_cache(maxsize=4096)
def prepare_text(text: str) -> str:
    """The form numbers are read from (offsets of :class:`Number` index into it): NFKC (keeps superscripts, which NFKC would flatten into digits), unified degree/minus signs."""
    # thin / no-break spaces group thousands ("12 500"); NFKC would turn them into plain spaces,
    # so outside Cyrillic text (where a plain space groups thousands anyway) they become commas
    if not _CYRILLIC.search(text):
        text = re.sub(r"(?<=\d)[\u00a0\u2009\u202f](?=\d{3}(?!\d))", ",", text)
    # protect superscripts: NFKC turns "yr⁻¹" into "yr-1", which we want, but "10³" into "103"
    text = re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^" + m.group(0).translate(_SUPERSCRIPTS), text)
    text = unicodedata.normalize("NFKC", text).translate(_DEGREE_LOOKALIKES).translate(_FIGURE_DASH)
    text = text.replace("\u00ad", "").replace("\u2212", "-").replace("\ufe63", "-")
    # a Cyrillic "С" after a degree sign is Celsius
    text = re.sub(r"°\s*\u0421", "°C", text)
    text = re.sub(r"°\s+(?=[CFKNSEW]\b)", "°", text)
    # PDF text loses superscripts: "CFU/m 3" is per cubic metre
    text = re.sub(r"/ ?(k?m|cm|mm|dm) ([23])\b(?![.,]\d)", r"/\1^\2", text)
    text = re.sub(r"\s+°", " °", text)
    text = re.sub(r"\bper\s?cent\b", "%", text, flags=re.I)
    text = re.sub(r"\bper\s?mil(?:le)?\b", "‰", text, flags=re.I)
    # PDF text glues the element to the time unit: "Pg Cyear -1"
    text = re.sub(r"\b([PTGMk]?g) ?([CN])(year|yr)\b", r"\1 \2 \3", text)
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
    #: a word in the unit position the grammar does not know ("12 sols"): the number has no unit
    #: it can be read in, so it never takes the other side's unit (see :func:`comparable`)
    unread_unit: str | None = None
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
# unit names written out ("192 metres", "8400 tonnes", "30 kyr"): longest first
_NAMED = (r"(?:(?:square|cubic) )?(?:kilo|centi|milli|micro)?(?:metres?|meters?)|(?:kilo|milli|micro)?grams?|tonnes?|metric tons?"
          r"|(?:milli)?(?:litres?|liters?)|seconds?|secs?|minutes?|mins|kelvins?|degrees? Celsius"
          r"|degrees? Fahrenheit|(?:nautical )?miles?|inch(?:es)?|feet|foot"
          r"|kyrs?|Myrs?|Gyr|ka|Ma|Ga")
_PLAIN = (rf"(?:{_NAMED}|percentage[ -]points?|%[ -]points?|pp|%|‰|ppm|ppb|ppt|ppmv|ppbv|psu|PSU|°[CFNSEW]|°|K"
          r"|yrs?|years?|a|d|days?|h|hrs?|hours?|min|months?|weeks?|decades?|century|centuries|ha"
          r"|fold|times|mol%)")
#: Cyrillic unit abbreviations -> the Latin token they stand for (longest first in the pattern)
_CYRILLIC_UNITS = {"мкм": "µm", "км": "km", "см": "cm", "мм": "mm", "дм": "dm", "нм": "nm", "м": "m",
                   "мкг": "µg", "кг": "kg", "мг": "mg", "нг": "ng", "г": "g", "т": "t", "мл": "mL",
                   "л": "L", "га": "ha", "сут": "d", "ч": "h", "мин": "min", "с": "s", "год": "yr",
                   "лет": "yr", "гПа": "hPa", "кПа": "kPa", "Па": "Pa", "Вт": "W", "ppm": "ppm",
                   # written out ("восемь процентов" read as digits by arcticqa.gates.numwords)
                   **dict.fromkeys(("процент", "процента", "процентов"), "%"),
                   **dict.fromkeys(("метр", "метра", "метров"), "m"),
                   **dict.fromkeys(("километр", "километра", "километров"), "km"),
                   **dict.fromkeys(("сантиметр", "сантиметра", "сантиметров"), "cm"),
                   **dict.fromkeys(("миллиметр", "миллиметра", "миллиметров"), "mm"),
                   **dict.fromkeys(("градус Цельсия", "градуса Цельсия", "градусов Цельсия"), "°C"),
                   **dict.fromkeys(("дюйм", "дюйма", "дюймов"), "inch"),
                   **dict.fromkeys(("миля", "мили", "миль"), "mi"),
                   **dict.fromkeys(("фут", "фута", "футов"), "ft"),
                   **dict.fromkeys(("тонна", "тонны", "тонн"), "t"),
                   **dict.fromkeys(("день", "дня", "дней", "суток"), "d")}
_CYR = "|".join(sorted((re.escape(k) for k in _CYRILLIC_UNITS), key=len, reverse=True))
_EXP = r"(?:\^?[-+]?\d)?"
_TOKEN = re.compile(rf"(?:{_PLAIN}|{_PREFIX}?{_PREFIXABLE}|{_CYR}){_EXP}(?![\w%‰°])")
# a mass qualified by its element ("TgC", "Tg C", "g C"): converts only into the same element
_ELEMENT = re.compile(r" ?(?P<el>CO2|CH4|CO_2|Si|Fe|C|N|P|S)(?![\w%‰°])")
_MASS = re.compile(rf"^{_PREFIX}?g$|^t$")
_GLUED_ELEMENT = re.compile(rf"(?P<mass>{_PREFIX}?g)(?P<el>CO2|CH4|C|N|P)(?![\w%‰°])")
_WATER_EQUIVALENT = re.compile(r" ?(?:w\. ?e\.|в\. ?э\.|WE\b|w\.e\b)")
# an unknown word in a unit position (after "/" or "per", or carrying an exponent): "CFU", "k.y."
_OPAQUE = re.compile(r"[^\W\d_]+(?:\.[^\W\d_]+)*\.?")
_ATTACHED_EXP = re.compile(r"\^?([-+]\d|\d)(?![\w.,])")
# PDF text detaches exponents: "yr −1", "m −2", "km 2" (the last only for lengths)
_DETACHED_EXP = re.compile(r" ([-+]\d)(?!\d|[.,]\d)")
_DETACHED_SQUARE = re.compile(r" ([23])(?!\d|[.,]\d|[%‰°]| ?[-–] ?\d| ?[×x·] ?10)")
_LENGTHS = {"m", "km", "cm", "mm", "dm", "µm", "nm"}
# tokens that are also common words or letters: a unit only in a denominator or with an exponent
_AMBIGUOUS_ALONE = {"a", "l", "d", "h", "t", "L", "M", "da", "min", "s", "pp", "с", "ч", "л"}
# ambiguous tokens read as units when they end the phrase ("1.0 t", "5 L."); never the letters
# that also label figure panels ("Fig. 5 a)", "3 d)")
_UNIT_AT_PHRASE_END = {"t", "L", "min", "s", "т", "л", "ч"}
_LABELS = {"psu", "°N", "°S", "°E", "°W", "fold", "ppt", "eq", "ppmv", "ppbv", "pp"}

# spelling variants of one unit share one canonical token, so "mm/yr" == "mm/year" without pint
_SYNONYMS = {"yrs": "yr", "year": "yr", "years": "yr", "a": "yr", "day": "d", "days": "d",
             "hr": "h", "hrs": "h", "hour": "h", "hours": "h", "months": "month",
             "weeks": "week", "decades": "decade", "centuries": "century", "times": "fold",
             "PSU": "psu", "l": "L", "percentage points": "pp", "percentage point": "pp",
             "percentage-points": "pp", "percentage-point": "pp", "% points": "pp",
             "% point": "pp", "%-points": "pp", "%-point": "pp", "tonne": "t", "tonnes": "t",
             "metric ton": "t", "metric tons": "t", "second": "s", "seconds": "s", "sec": "s", "secs": "s",
             "minute": "min", "minutes": "min", "mins": "min", "kelvin": "K", "kelvins": "K",
             "degree Celsius": "°C", "degrees Celsius": "°C", "degree Fahrenheit": "°F",
             "degrees Fahrenheit": "°F", "mile": "mi", "miles": "mi", "nautical mile": "nmi",
             "nautical miles": "nmi", "inches": "inch", "feet": "ft", "foot": "ft",
             "kyrs": "kyr", "ka": "kyr", "Myrs": "Myr",
             "Ma": "Myr", "Ga": "Gyr", "litre": "L", "litres": "L", "liter": "L", "liters": "L",
             "millilitre": "mL", "millilitres": "mL", "milliliter": "mL", "milliliters": "mL",
             **{f"{prefix}{name}{plural}": f"{symbol}{base}"
                for name, base in (("metre", "m"), ("meter", "m"), ("gram", "g"))
                for prefix, symbol in (("", ""), ("kilo", "k"), ("centi", "c"), ("milli", "m"), ("micro", "µ"))
                for plural in ("", "s")},
             **{f"{power} {prefix}{name}{plural}": f"{symbol}m^{exp}"
                for power, exp in (("square", 2), ("cubic", 3)) for name in ("metre", "meter")
                for prefix, symbol in (("", ""), ("kilo", "k"), ("centi", "c"), ("milli", "m"), ("micro", "µ"))
                for plural in ("", "s")}}
_BASE_NAMES = {
    "yr": "year", "d": "day", "h": "hour", "min": "minute", "month": "month", "week": "week",
    "decade": "(10*year)", "century": "(100*year)", "%": "percent", "‰": "permille",
    "°C": "degC", "°F": "degF", "K": "kelvin", "°": "degree", "ha": "hectare", "Sv": "sverdrup",
    "ppm": "ppm", "ppb": "ppb", "mol%": "percent", "kyr": "(1e3*year)", "Myr": "(1e6*year)",
    "Gyr": "(1e9*year)", "mi": "mile", "nmi": "nautical_mile", "ft": "foot",
}


def _canonical_token(tok: str) -> tuple[str, int]:
    m = re.match(r"^(.*?)(?:\^?([-+]?\d))?$", tok)
    assert m is not None
    base, exp = m.group(1), m.group(2)
    if not base:  # a bare digit is never a unit token
        base, exp = tok, None
    base = _CYRILLIC_UNITS.get(base, base).replace("μ", "µ")
    base = _SYNONYMS.get(base, base)
    return base, int(exp) if exp else 1


def _qualifier(name: str) -> str:
    """A unit factor that only converts into itself (an element, w.e., an unknown token)."""
    return "{" + name + "}"


def _read_token(text: str, j: int, denominator: bool) -> tuple[list[tuple[str, int]], int, bool] | None:
    """One unit factor at ``j``: (parts, end, is_known) or None. Parts carry their exponents."""
    glued = _GLUED_ELEMENT.match(text, j)
    if glued:
        mass, _ = _canonical_token(glued.group("mass"))
        return [(mass, 1), (_qualifier(glued.group("el").replace("_", "")), 1)], glued.end(), True
    m = _TOKEN.match(text, j)
    if m and not denominator and m.group(0) in ("г", "т", "с") and text.startswith(".", m.end()):
        return None  # "2008 г." is the year 2008, "т. е." is "that is"
    if m:
        base, exp = _canonical_token(m.group(0))
        end = m.end()
        if exp == 1 and not re.search(r"\^?[-+]?\d$", m.group(0)):
            detached = _DETACHED_EXP.match(text, end)
            if detached:
                exp, end = int(detached.group(1)), detached.end()
            elif base in _LENGTHS:
                square = _DETACHED_SQUARE.match(text, end)
                if square:
                    exp, end = int(square.group(1)), square.end()
        parts = [(base, exp)]
        if _MASS.match(base):
            element = _ELEMENT.match(text, end)
            if element:
                parts.append((_qualifier(element.group("el").replace("_", "")), 1))
                end = element.end()
        if base in _LENGTHS:
            we = _WATER_EQUIVALENT.match(text, end)
            if we:
                parts.append((_qualifier("w.e."), 1))
                end = we.end()
        return parts, end, True
    o = _OPAQUE.match(text, j)
    if not o:
        return None
    word, end = o.group(0), o.end()
    exp_m = _ATTACHED_EXP.match(text, end) or _DETACHED_EXP.match(text, end)
    # an unknown word takes an exponent only if it looks like a symbol ("TgC", "CFU", "нг"):
    # "from 5 to −3 °C" must stay a range, not 5 per "to" cubed
    if exp_m and (denominator or word != word.lower() or not word.isascii()):
        return [(_qualifier(word), int(exp_m.group(1)))], exp_m.end(), False
    if denominator or re.match(r" ?/ ?[^\W\d_]", text[end:end + 4]):
        return [(_qualifier(word.rstrip(".") if not re.search(r"\.\w", word) else word), 1)], end, False
    return None


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
        read = _read_token(text, j, denominator)
        if read is None:
            break
        found, end, known = read
        base, exp = found[0]
        raw = re.sub(r"\^?[-+]?\d$", "", text[j:end].split(" ")[0])
        ambiguous = known and raw in _AMBIGUOUS_ALONE
        # "1.0 t" at the end of a phrase is a tonne; "5 t of ice" and "5 t or more" too; "2 h after"
        # is left unread
        if ambiguous and not denominator and exp == 1 and not (
                raw in _UNIT_AT_PHRASE_END and re.match(r"\s*(?:$|[.,;:)\]]|of\b|or (?:more|less)\b|или (?:более|менее))",
                                                      text[end:])):
            break
        if not known and not parts and not denominator and exp == 1 and not re.match(r" ?/", text[end:]):
            break
        if base == "fold" and parts:
            break
        parts.extend((b, -e if denominator else e) for b, e in found)
        i = j = end
        denominator = False
        sep = re.match(r"(?: ?/ ?| per | в (?=год|сут)| ?[·⋅*] ?| )", text[j:])
        if not sep:
            break
        if "/" in sep.group(0) or "per" in sep.group(0) or " в " == sep.group(0):
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

# A comma between digits is a decimal comma when it cannot be a thousands separator: after a
# zero ("0,6"), or before a group of other than three digits ("1,2 °C", "12,75"), and only when
# it joins exactly two digit groups: "1,2,3" is a list, "2,4-D" a chemical locant, "1,200" a
# thousand and two hundred, "[1,2]" two citations.
_NUM = re.compile(
    r"(?<![\w.^])(?P<sign>[-+\u2013\u2014]\s?)?(?:(?P<zero>0),(?P<zfrac>\d+)"
    r"|(?<!\d,)(?<!\[)(?P<dint>[1-9]\d{0,2}(?=,\d{4,})|[1-9]\d*(?=,\d{1,2}(?!\d))),(?P<dfrac>\d+)"
    r"(?!,\d|-[^\W\d_])"
    r"|(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?)(?!\d)"
)
# Russian text writes the decimal point as a comma and groups thousands with spaces ("12 500,5")
_NUM_CYRILLIC = re.compile(
    r"(?<![\w.^])(?P<sign>[-+\u2013\u2014]\s?)?(?P<int>\d{1,3}(?: \d{3})+(?!\d)|\d+)(?:[.,](?P<frac>\d+))?(?!\d)"
)
_SCI = re.compile(r"\s?(?:[×xX*·⋅]\s?10\s?(?:\^|\*\*|(?= ?[-+]?\d))\s?(?P<e1>[-+]?\d+)|[eE](?P<e2>[-+]?\d+)(?!\w))")
_PM = re.compile(r"\s?(?:±|\+/-|\+-|\+/−)\s?(?P<int>\d+)(?:\.(?P<frac>\d+))?")
_APPROX = re.compile(r"(?:~|≈|∼|\b(?:about|approximately|approx\.|around|ca\.|c\.|circa|roughly|nearly|almost|some))\s*$",
                     re.I)
_BOUND = re.compile(r"(?P<sym>[<>≤≥]|\b(?:up to|more than|less than|at least|at most|over|under|above|below|"
                    r"exceeding|greater than|fewer than|lower than|higher than)"
                    r"|(?<![^\W\d_])(?:не (?:более|менее|больше|меньше)|более|менее|свыше))\s*$", re.I)
_BOUND_SYMBOL = {"up to": "≤", "at most": "≤", "less than": "<", "under": "<", "below": "<",
                 "fewer than": "<", "lower than": "<", "more than": ">", "over": ">", "above": ">",
                 "exceeding": ">", "greater than": ">", "higher than": ">", "at least": "≥",
                 "не более": "≤", "не больше": "≤", "не менее": "≥", "не меньше": "≥", "более": ">",
                 "менее": "<", "свыше": ">"}
_RANGE_JOIN = re.compile(r"^\s*(?:-|–|—|to|and|or|,)\s*$")


_MONTHS = {name: k + 1 for k, names in enumerate([
    ("january", "jan", "января", "январь"), ("february", "feb", "февраля", "февраль"),
    ("march", "mar", "марта", "март"), ("april", "apr", "апреля", "апрель"), ("may", "мая", "май"),
    ("june", "jun", "июня", "июнь"), ("july", "jul", "июля", "июль"),
    ("august", "aug", "августа", "август"), ("september", "sep", "sept", "сентября", "сентябрь"),
    ("october", "oct", "октября", "октябрь"), ("november", "nov", "ноября", "ноябрь"),
    ("december", "dec", "декабря", "декабрь")]) for name in names}
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_DATE = re.compile(
    rf"(?<!\w)(?:(?P<m1>{_MONTH})\.? (?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:,? (?P<y1>\d{{4}}))?"
    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)? (?:of )?(?P<m2>{_MONTH})\.?(?:,? (?P<y2>\d{{4}}))?)(?![\w-])",
    re.I)
# "δ 13 C" names an isotope ratio; the 13 is not a quantity
_ISOTOPE = re.compile(r"δ ?\d{1,2} ?(?:C|N|O|S|H|Sr|Nd|Pb|Fe|\u041e|\u0421)\b", re.I)
# a signed digit after a unit word is its detached exponent ("m yr -1"), not a number
_EXPONENT_AFTER_UNIT = re.compile(rf"(?<!\w)(?:{_PLAIN}|{_PREFIX}?{_PREFIXABLE}|{_CYR}) $")
_SQUARE_AFTER_LENGTH = re.compile(r"(?<!\w)(?:k?m|cm|mm|dm|км|м|см|мм) $")


#: number words that scale the number before them ("14.73 million km²", "2,5 тыс. т")
_MULTIPLIERS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "тыс": 1e3, "тысяч": 1e3, "тысячи": 1e3,
                "млн": 1e6, "миллиона": 1e6, "миллионов": 1e6, "млрд": 1e9, "миллиарда": 1e9, "миллиардов": 1e9}
_MULTIPLIER = re.compile(r" (thousand|million|billion|тыс\.|тысячи?|млн\.?|миллиона|миллионов|млрд\.?"
                         r"|миллиарда|миллиардов)(?![^\W\d_])", re.I)
_WORD_AFTER = re.compile(r" ?([^\W\d_][^\W\d]*)")
#: words that follow a bare number without being its unit
_NOT_UNITS = frozenset(
    "a an the of in on at to for from by with and or as is are was were be been being that this these those "
    "its it than then which who when where during over under per into onto about across between among within "
    "nor but vs versus respectively each ago old bp cal ad bc ce "
    "и или в во на до от из по с со к при для за между около чем а но".split())


# what follows a unit symbol the grammar left unread when it heads a compound unit ("t year -1", "t/yr")
_PER_FACTOR = re.compile(r" ?(?:/|per\b|[^\W\d_]+ ?\^?-\d)")


def _unread_unit(prepared: str, end: int) -> str | None:
    """The word in the unit position after a number the grammar read without a unit, if it may
    be a unit ("12 sols", "5 furlongs"); function words and a following number are not."""
    m = _WORD_AFTER.match(prepared, end)
    if not m or m.group(1).casefold() in _NOT_UNITS:
        return None
    if _TOKEN.fullmatch(m.group(1)) and not _PER_FACTOR.match(prepared, m.end()):
        return None  # a unit symbol that is also a letter or word ("5 pp", "3 d)"), left unread on purpose
    return m.group(1)


def _dates(prepared: str) -> list[Number]:
    """Calendar dates as numbers: a date with a year is its day ordinal (unit ``date``); a day and
    month alone are a day of the year (unit ``day of year``) — the two never compare."""
    out: list[Number] = []
    for m in _DATE.finditer(prepared):
        month = _MONTHS[(m.group("m1") or m.group("m2")).casefold()]
        day = int(m.group("d1") or m.group("d2"))
        year = m.group("y1") or m.group("y2")
        try:
            if year:
                value, unit = float(date(int(year), month, day).toordinal()), "date"
            else:
                value, unit = float(date(2001, month, day).timetuple().tm_yday), "day of year"
        except ValueError:
            continue  # "February 30" is not a date; its digits stay numbers
        out.append(Number(value=value, decimals=0, scale=1.0, unit=unit, start=m.start(), end=m.end()))
    return out


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> tuple[Number, ...]:
    prepared = prepare_text(text)
    dates = _dates(prepared)
    skipped = [(d.start, d.end) for d in dates] + [(m.start(), m.end()) for m in _ISOTOPE.finditer(prepared)]
    found: list[Number] = list(dates)
    consumed_until = -1
    scanner = _NUM_CYRILLIC if _CYRILLIC.search(prepared) else _NUM
    for m in scanner.finditer(prepared):
        groups = m.groupdict()
        int_text = m.group("int") or groups.get("zero") or groups.get("dint") or ""
        if m.start() < consumed_until or any(a <= m.start() < b for a, b in skipped):
            continue
        if len(int_text) == 1 and not m.group("frac") and (
                (m.group("sign") and _EXPONENT_AFTER_UNIT.search(prepared, 0, m.start()))
                or (int_text in "23" and not m.group("sign")
                    and _SQUARE_AFTER_LENGTH.search(prepared, 0, m.start()))):
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
        digits = re.sub(r"[, ]", "", int_text)
        frac = m.group("frac") or groups.get("zfrac") or groups.get("dfrac") or ""
        value = float(f"{digits}.{frac}" if frac else digits) * sign
        end = m.end()
        scale = 1.0
        sci = _SCI.match(prepared, end)
        if sci:
            exp = int(sci.group("e1") or sci.group("e2"))
            scale = 10.0 ** exp
            value *= scale
            end = sci.end()
        multiplier = _MULTIPLIER.match(prepared, end)
        if multiplier:
            factor = _MULTIPLIERS[multiplier.group(1).casefold().rstrip(".")]
            scale *= factor
            value *= factor
            end = multiplier.end()
        plusminus = None
        unit, unit_end = _read_unit(prepared, end)
        if unit == "s" and prepared[end:unit_end].strip() == "s" and not frac and 1600 <= abs(value) <= 2100 \
                and value % 10 == 0:
            unit, unit_end = None, end  # "the 1990 s" is a decade whose "s" PDF text cut off
        pm = _PM.match(prepared, unit_end if unit else end)
        if pm:
            pm_frac = pm.group("frac") or ""
            plusminus = float(f"{pm.group('int')}.{pm_frac}" if pm_frac else pm.group("int")) * scale
            if unit is None:
                unit, unit_end = _read_unit(prepared, pm.end())
            consumed_until = max(pm.end(), unit_end)
        start = m.start()
        final_end = max(unit_end if unit else end, consumed_until)
        unread = None if unit else _unread_unit(prepared, final_end)
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
                            end=final_end, unread_unit=unread))
    # a range or pair shares its unit: "110–112°E", "between 1.2 and 3.4 m"
    out = sorted(found, key=lambda n: n.start)
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
            if base.startswith("{"):
                factors.append(f"({_qualifier_unit(base)})**{exp * sign}")
                continue
            name = _BASE_NAMES.get(base)
            if name is None:
                name = base.replace("µ", "u")
                if name.startswith("u") and len(name) > 1:
                    name = "u" + name[1:]
            if compound and name in ("degC", "degF"):
                name = "delta_" + name  # °C per decade is a rate of a difference
            factors.append(f"({name})**{exp * sign}")
    return "*".join(factors) if factors else "dimensionless"


@lru_cache(maxsize=256)
def _qualifier_unit(token: str) -> str:
    """A pint unit of its own dimension for a qualifier token, so ``Tg{C}`` converts into
    ``Pg{C}`` but never into ``Tg`` or ``Tg{N}``."""
    import hashlib

    name = "q_" + hashlib.sha1(token.encode()).hexdigest()[:12]
    ureg = _registry()
    if name not in ureg:
        ureg.define(f"{name} = [{name}]")
    return name


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

    A number without a unit is read in the other's unit (a distractor "28" against "18%"), unless
    a word the grammar does not know stands in its unit position ("12 sols" against "9 days"):
    an unknown unit makes the pair incomparable, never different.
    """
    if (a.unit is None and b.unit is not None and a.unread_unit) or (
            b.unit is None and a.unit is not None and b.unread_unit):
        return None
    if a.unit is None or b.unit is None or a.unit == b.unit:
        return a.value, b.value, max(a.tolerance, b.tolerance)
    conv = _temperature_factor(a, b) if {a.unit, b.unit} <= _OFFSET_UNITS else _to_unit_factor(b.unit, a.unit)
    if conv is None:
        return None
    factor, offset = conv
    bv = b.value * factor + offset
    return a.value, bv, max(a.tolerance, b.tolerance * abs(factor))


#: (factor, offset) from the first unit to the second when both temperatures are differences
_DIFFERENCE = {("K", "°C"): 1.0, ("°C", "K"): 1.0, ("°F", "°C"): 5 / 9, ("°C", "°F"): 1.8,
               ("K", "°F"): 1.8, ("°F", "K"): 5 / 9}


def _temperature_factor(a: Number, b: Number) -> tuple[float, float] | None:
    """b's temperature in a's unit: an absolute temperature or a difference ("0.6 K" warmer is
    "0,6 °C" warmer). A kelvin value of 150 or more is read as absolute and one below as a
    difference (no air or sea temperature is below 150 K); °C against °F says neither, so it is
    compared only when both readings give the same verdict, else not at all."""
    assert a.unit is not None and b.unit is not None
    absolute = _to_unit_factor(b.unit, a.unit)
    difference = (_DIFFERENCE[(b.unit, a.unit)], 0.0)
    kelvin = a if a.unit == "K" else b if b.unit == "K" else None
    if kelvin is not None:
        return absolute if abs(kelvin.value) >= 150 else difference
    if absolute is None:
        return None
    readings = {_agrees_with(a, b, conv) for conv in (absolute, difference)}
    return absolute if len(readings) == 1 else None


def _agrees_with(a: Number, b: Number, conv: tuple[float, float]) -> bool:
    bv = b.value * conv[0] + conv[1]
    return abs(a.value - bv) < max(a.tolerance, b.tolerance * abs(conv[0]))


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


def restates(a: Number, b: Number) -> bool:
    """Whether ``b`` writes ``a``'s value, so that a reader of ``b`` knows ``a``: the same value
    (:func:`same_value`), or in another unit, given at least as finely as ``a`` and within ``a``'s
    tolerance after the conversion ("1.6 weeks" for 11 days, "37.3 miles" for 60 km; not "1 week"
    for 9 days, whose half-week precision says little); °C, °F and K in either reading, as an
    absolute temperature or a difference ("1.98 °F" is a 1.1 °C rise). Used by the answer-leak
    rule, where a value a reader can convert back is as good as the answer."""
    if same_value(a, b):
        return True
    if a.unit is None or b.unit is None or a.unit == b.unit:
        return False
    conversions = [_to_unit_factor(b.unit, a.unit)]
    if {a.unit, b.unit} <= _OFFSET_UNITS:
        conversions.append((_DIFFERENCE[(b.unit, a.unit)], 0.0))
    eps = 1e-9 * max(1.0, abs(a.value))
    for conv in conversions:
        if conv is None or not conv[0]:
            continue
        factor, offset = conv
        if b.tolerance * abs(factor) <= a.tolerance + eps and abs(a.value - (b.value * factor + offset)) < a.tolerance:
            return True
    return False


def same_uncertainty(a: Number, b: Number) -> bool:
    """Whether ``a`` and ``b`` state the same ``±`` (or none), after converting b's into a's unit:
    ``20.0 ± 1.9 min`` and ``1200 ± 114 s``."""
    if a.plusminus is None or b.plusminus is None:
        return a.plusminus is None and b.plusminus is None
    factor = 1.0
    if a.unit is not None and b.unit is not None and a.unit != b.unit:
        conv = _to_unit_factor(b.unit, a.unit)
        if conv is None:
            return False
        factor = abs(conv[0])
    return math.isclose(a.plusminus, b.plusminus * factor, rel_tol=1e-9, abs_tol=1e-12)


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
