"""Text analysis shared by the offline roles: sentences, cues, typed answer spans, scope phrases.

Everything here reads the evidence the way the deterministic gates do (numbers through
:func:`arcticqa.gates.numbers.parse_numbers` on :func:`~arcticqa.gates.numbers.prepare_text`
forms), so that an answer the offline finding extractor picks is one the gates can find again.
English and Russian cue words are listed explicitly; nothing here is specific to any corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arcticqa.gates.evidence import answer_in_evidence, cites_other_work
from arcticqa.gates.numbers import Number, parse_numbers, prepare_text, same_value
from arcticqa.gates.text import content_words, language_script

__all__ = [
    "SpanText",
    "Value",
    "spans_of",
    "split_sentences_any",
    "is_hedged",
    "answer_hedge",
    "answer_scope",
    "is_negative_result",
    "is_cyrillic",
    "numeric_values",
    "best_value",
    "answer_noun",
    "CHANGE_VERBS",
    "RU_CHANGE_VERB",
    "COMPARATIVES",
    "period_phrase",
    "entity_names",
    "code_names",
    "closed_set_answer",
    "overlap",
    "RESULTISH",
    "citing",
    "sentences_in",
]

#: sections whose sentences can state the paper's own result (as in ``arcticqa.gates.evidence``)
RESULTISH = ("results", "abstract", "discussion", "conclusions")


@dataclass(frozen=True)
class SpanText:
    """A span as the roles receive it."""

    id: str
    section: str
    text: str


def spans_of(variables: Mapping[str, Any]) -> list[SpanText]:
    return [SpanText(str(s.get("id", "")), str(s.get("section", "")), " ".join(str(s.get("text", "")).split()))
            for s in variables.get("spans") or []]


# The gates' splitter only starts a sentence at a Latin capital; Russian sentences start with
# Cyrillic ones, so the offline roles split on both alphabets.
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-ZА-ЯЁ(\[\"'«0-9])")
_ABBREV = ("et al.", "e.g.", "i.e.", "fig.", "figs.", "ca.", "c.", "approx.", "eq.", "no.", "vs.", "sp.",
           "spp.", "cf.", "рис.", "см.", "т.е.", "т. е.")


_ABBREV_END = re.compile(r"(?:^|[\s(])(?:" + "|".join(re.escape(a) for a in _ABBREV) + r")$", re.I)


def split_sentences_any(text: str) -> list[str]:
    out: list[str] = []
    for piece in _SENT.split(" ".join(text.split())):
        # "et al." ends no sentence, but "°C." does: an abbreviation must start a word
        if out and _ABBREV_END.search(out[-1]):
            out[-1] = f"{out[-1]} {piece}"
        else:
            out.append(piece)
    return [p for p in out if p]


def is_cyrillic(text: str) -> bool:
    return language_script(text) in ("cyrillic", "mixed") and bool(re.search(r"[А-Яа-яЁё]{3}", text))


# A hedged statement is not a finding a single answer can be proved from: the rule-based roles
# neither pick such sentences first nor accept them as entailing an answer.
_HEDGE = re.compile(
    r"\b(?:may|might|possibly|perhaps|apparent(?:ly)?|appear(?:s|ed)? to|seem(?:s|ed)? to|could not|cannot"
    r"|uncertain|unclear|no clear|not clear|depending on|likely|probably|suggest(?:s|ed|ing)?|roughly"
    r"|varied considerably|disagree(?:d|ment)?|incomplete|unreliabl[ey]|not (?:be )?(?:estimated|established)"
    r"|either\b.{1,80}\bor)\b"
    r"|(?<![\w])(?:вероятно|возможно|по-видимому|предположительно|не удалось|либо)(?![\w])",
    re.I)
_NEGATIVE = re.compile(
    r"\b(?:no (?:significant |consistent |clear )?(?:trend|change|difference|effect)|not (?:change|differ)\w*"
    r"|did not change|showed no|non-?significant|not significant(?:ly)?)\b"
    r"|(?<![\w])(?:не показал\w*|не изменил\w*|незначим\w*)(?![\w])", re.I)
_DISCLAIMER = re.compile(r"\b(?:fictional|not real data)\b|вымышлен", re.I)


def is_hedged(sentence: str) -> bool:
    return bool(_HEDGE.search(sentence))


# Contrastive joints: what stands before one is a claim of its own, so its hedge does not qualify
# what follows ("X seemed earlier, but 9 of 20 plots lacked images" states the 9 plainly).
# Concessive joints (although, though, while) are not here: "9 plots lacked images, although
# this may be an undercount" hedges the 9, so such a sentence stays one scope.
_CONTRAST = re.compile(r"\s*;\s*|,\s*(?:but|whereas|yet|however),?\s+|\s+but\s+|,\s*(?:но|однако),?\s+", re.I)
# a later clause that points back at the answer ("but this may ...") still qualifies it
_ANAPHORIC = re.compile(r"(?:this|that|these|those|it|which|the (?:estimate|value|number|count|figure|result)s?)\b"
                        r"|(?:это|эт[аио]|эти)(?![\w])", re.I)


def answer_scope(sentence: str, answer: str) -> str:
    """The part of ``sentence`` that states ``answer``: its clause plus later clauses that point
    back at it; a clause before a contrastive joint is left out. When no single clause states
    the answer (or the sentence has no such joint) it is the whole sentence."""
    pieces = _CONTRAST.split(sentence)
    at = next((i for i, piece in enumerate(pieces) if answer_in_evidence(answer, prepare_text(piece))), None)
    if at is None:
        return sentence
    scope = [pieces[at]]
    for later in pieces[at + 1:]:
        if not _ANAPHORIC.match(later.strip()):
            break
        scope.append(later)
    return " ".join(scope)


def answer_hedge(sentence: str, answer: str) -> str | None:
    """The hedge word qualifying the statement of ``answer`` in ``sentence`` (its
    :func:`answer_scope`), or None."""
    found = _HEDGE.search(answer_scope(sentence, answer))
    return found.group(0) if found else None


def is_negative_result(sentence: str) -> bool:
    """A "no trend / no change" statement: a finding, but one without an answer span to ask for."""
    return bool(_NEGATIVE.search(sentence)) or bool(_DISCLAIMER.search(sentence))


# ---- typed answer spans ---------------------------------------------------------------------

#: past-tense change verbs -> base form (listed, not stemmed, so templates stay grammatical)
CHANGE_VERBS: dict[str, str] = {
    "increased": "increase", "decreased": "decrease", "rose": "rise", "fell": "fall",
    "declined": "decline", "dropped": "drop", "advanced": "advance", "expanded": "expand",
    "grew": "grow", "shrank": "shrink", "warmed": "warm", "cooled": "cool", "thickened": "thicken",
    "thinned": "thin", "deepened": "deepen", "shifted": "shift", "moved": "move", "retreated": "retreat",
    "changed": "change", "shortened": "shorten", "lengthened": "lengthen", "accelerated": "accelerate",
    "slowed": "slow", "gained": "gain", "lost": "lose", "reduced": "reduce", "contracted": "contract",
    "doubled": "double", "delayed": "delay", "receded": "recede",
}
_VERB_ALT = "|".join(sorted(CHANGE_VERBS, key=len, reverse=True))
RU_CHANGE_VERB = (r"(?:повысил(?:ся|ась|ось|ись)|увеличил(?:ся|ась|ось|ись)|уменьшил(?:ся|ась|ось|ись)"
                  r"|снизил(?:ся|ась|ось|ись)|понизил(?:ся|ась|ось|ись)|сократил(?:ся|ась|ось|ись)"
                  r"|вырос(?:ла|ло|ли)?|вырос|вырос|возрос(?:ла|ло|ли)?|сместил(?:ся|ась|ось|ись))")
COMPARATIVES = ("higher", "lower", "greater", "smaller", "larger", "shallower", "deeper", "thicker",
                "thinner", "warmer", "colder", "cooler", "earlier", "later", "longer", "shorter", "more",
                "less", "fewer", "faster", "slower", "wetter", "drier", "older", "younger",
                "выше", "ниже", "больше", "меньше", "глубже", "раньше", "позже", "теплее", "холоднее")
_CMP_ALT = "|".join(COMPARATIVES)
_APPROX_WORD = re.compile(r"(?:\b(?:about|approximately|around|nearly|almost|some|около|примерно)\s+|~\s?)$", re.I)
#: nouns a unitless count may carry ("9 days"): the gates read them as no unit, people need them
_COUNT_NOUN = re.compile(r"^\s?(percentage points?|days?|weeks?|months?|years?|decades?|species|plots?|stations?"
                         r"|дн(?:я|ей)|сут(?:ок|ки)|лет|год(?:а)?)\b", re.I)
_COUNT_NOUN_ANY = re.compile(r"\b(percentage points?|days?|weeks?|months?|years?|decades?|species|plots?|stations?)\b",
                            re.I)
#: Russian unit abbreviations the gates' unit grammar does not read: kept in the answer text
_RU_UNIT = re.compile(r"^\s?(?:км|см|мм|м|сут|дн(?:я|ей)?|ч)(?![\w])")
_BY_CHANGE = re.compile(rf"\b(?:{_VERB_ALT})\b[^.;]{{0,40}}?\bby\s+(?:about|approximately|around|nearly|some|~)?\s*$",
                        re.I)
_RU_BY_CHANGE = re.compile(rf"{RU_CHANGE_VERB}[^.;]{{0,30}}?\sна\s+(?:около\s+|примерно\s+)?$", re.I)
_STATE = re.compile(r"\b(?:was|were|averaged|reached|totall?ed|amounted to|made up|comprised|accounted for"
                    r"|(?:estimated|measured|recorded|put) at)"
                    r"\s+(?:on average\s+|an average of\s+)?(?:about\s+|approximately\s+|around\s+|nearly\s+|~\s?)?$"
                    r"|(?<![\w])(?:составил[аио]?|составляет|составляла|достиг(?:ла|ло|ли)?)\s+"
                    r"(?:в среднем\s+)?(?:около\s+|примерно\s+)?$", re.I)
_SCOPE_BEFORE = re.compile(r"(?:\b(?:at|on|in|from|between|within|to|of|and|above|below|per|every|depth of"
                           r"|with|after|before|until|since|than)|(?<![\w])(?:на глубине|глубиной|в|до|от|с|и|по))"
                           r"\s+(?:the\s+)?$", re.I)
_NOT_VALUE_BEFORE = re.compile(r"(?:\b[pn]\s*[=<>≤≥]\s*|\b(?:figure|fig\.|table|section|рис\.|таблица)\s*)$", re.I)
_RANGE_AFTER = re.compile(r"^\s*(?:[-–—]|to|and|или|и)\s*\d")
_RANGE_BEFORE = re.compile(r"\d\s*(?:[-–—]|to|and|и)\s*$")
_OF_TOTAL = re.compile(r"^\s+of\s+(?:the\s+)?\d+\b|^\s+из\s+\d+", re.I)
_COMPARATIVE_AFTER = re.compile(rf"^\s*(?:times\s+)?(?:{_CMP_ALT})\b", re.I)


@dataclass(frozen=True)
class Value:
    """A typed answer span inside a prepared sentence (``prepare_text`` form)."""

    text: str  # as it will be used as the answer (approximation word and count noun included)
    start: int
    end: int
    number: Number
    score: float
    kind: str  # "change", "state", "comparison", "count", "other"


def _is_year(n: Number) -> bool:
    return n.unit is None and n.decimals == 0 and 1800 <= n.value <= 2100


def _numbers(prep: str) -> list[Number]:
    """``parse_numbers`` with decimal commas joined: "0,6 °C" is one number, not 0 and 6.

    The gates read "0,6" as two numbers; the offline roles need the value to pick and perturb
    answers (the answer text stays as written, so the gates still find it in the evidence).
    """
    nums = parse_numbers(prep)
    out: list[Number] = []
    i = 0
    while i < len(nums):
        n = nums[i]
        nxt = nums[i + 1] if i + 1 < len(nums) else None
        if (nxt is not None and n.decimals == 0 and prep[n.end:n.end + 1] == "," and nxt.start == n.end + 1
                and nxt.decimals == 0 and nxt.value >= 0):
            digits = re.match(r"\d+", prep[nxt.start:nxt.end])
            frac = digits.group(0) if digits else ""
            if len(frac) == 3 or not frac:
                out.append(n)  # "1,200" is a thousands separator, not a decimal comma
                i += 1
                continue
            value = float(f"{int(abs(n.value))}.{frac}") * (-1 if n.value < 0 else 1)
            out.append(Number(value=value, decimals=len(frac), scale=1.0, unit=nxt.unit, approx=n.approx,
                              bound=n.bound, plusminus=nxt.plusminus, start=n.start, end=nxt.end))
            i += 2
            continue
        out.append(n)
        i += 1
    return out


def numeric_values(sentence: str) -> tuple[str, list[Value]]:
    """The prepared sentence and every number in it that could be asked for, scored.

    Years, coordinates, p-values, sample sizes, bounds and range ends are never answers; a
    number right after a change verb and "by" (or Russian "на"), after "was"/"averaged", before a
    comparative, or counting part of a total ("117 of the 121") scores high; a number inside a
    scope phrase ("at 2 m depth", "in the bottom 10 cm") scores low.
    """
    prep = prepare_text(sentence)
    out: list[Value] = []
    for n in _numbers(prep):
        if _is_year(n) or n.bound or (n.unit or "") in ("°N", "°S", "°E", "°W", "°"):
            continue
        before, after = prep[:n.start], prep[n.end:]
        if _NOT_VALUE_BEFORE.search(before) or _RANGE_AFTER.match(after) or _RANGE_BEFORE.search(before):
            continue
        if n.value < 0 and n.unit is None:
            continue
        score, kind = 0.0, "other"
        if _BY_CHANGE.search(before) or _RU_BY_CHANGE.search(before):
            score, kind = 7.0, "change"
        elif _COMPARATIVE_AFTER.match(after):
            score, kind = 6.0, "comparison"
        elif _OF_TOTAL.match(after):
            score, kind = 6.0, "count"
        elif _STATE.search(before):
            score, kind = 5.0, "state"
        elif _SCOPE_BEFORE.search(before):
            score = -4.0
        start = n.start
        approx = _APPROX_WORD.search(before)
        if approx and n.approx:
            start = approx.start()
        end = n.end
        if n.unit is None:
            noun = _COUNT_NOUN.match(after) or _RU_UNIT.match(after)
            if noun:
                end += noun.end()
            elif kind != "count":
                score -= 3.0
        else:
            score += 1.0
        text = prep[start:end].strip()
        out.append(Value(text=text, start=start, end=end, number=n, score=score, kind=kind))
    return prep, out


def best_value(sentence: str, exclude: Sequence[Number] = ()) -> tuple[str, Value] | None:
    """The highest-scoring askable number of ``sentence`` (None below the threshold)."""
    prep, values = numeric_values(sentence)
    values = [v for v in values if not any(same_value(v.number, x) for x in exclude)]
    if not values:
        return None
    best = max(values, key=lambda v: (v.score, -v.start))
    return (prep, best) if best.score >= 4.0 else None


_UNIT_WORDS = {
    "%": ("percentage", "percent"), "km": ("kilometres", None), "m": ("metres", None), "cm": ("centimetres", None),
    "mm": ("millimetres", None), "°C": ("degrees Celsius", None), "K": ("kelvin", None), "fold": ("times", None),
    "d": ("days", None), "yr": ("years", None),
}


def answer_noun(answer: str) -> tuple[str, str]:
    """``(how-phrase, in-situ phrase)`` for a numeric answer: ("By what percentage", "what percentage")."""
    nums = parse_numbers(answer)
    unit = nums[0].unit if nums else None
    low = answer.casefold()
    if "percentage point" in low:
        return "By how many percentage points", "how many percentage points"
    noun = _COUNT_NOUN_ANY.search(answer)
    if unit is None and noun:
        word = noun.group(1).casefold()
        if word in ("day", "week", "month", "year", "decade", "plot", "station"):
            word += "s"
        return f"By how many {word}", f"how many {word}"
    if unit == "%":
        return "By what percentage", "what percentage"
    if unit == "fold":
        return "By what factor", "how many times"
    if unit in _UNIT_WORDS:
        word = _UNIT_WORDS[unit][0]
        return f"By how many {word}", f"how many {word}"
    return "By how much", "how much"


# ---- scope phrases --------------------------------------------------------------------------

_PERIOD = re.compile(
    r"\b(?:between (?:(?:January|February|March|April|May|June|July|August|September|October|November|December) )?"
    r"\d{4} and (?:(?:January|February|March|April|May|June|July|August|September|October|November|December) )?\d{4}"
    r"|from \d{4} to \d{4}|(?:in|during) (?:both )?(?:(?:January|February|March|April|May|June|July|August|September"
    r"|October|November|December|spring|summer|autumn|winter) )?\d{4}(?: and \d{4})?|\d{4}\s?[–-]\s?\d{4})\b"
    r"|(?<![\w])(?:за (?:период )?)?\d{4}\s?[–-]\s?\d{4}\s?гг\.?|(?<![\w])в \d{4}\s?г\.?")


def period_phrase(text: str) -> str | None:
    m = _PERIOD.search(text)
    return m.group(0).strip() if m else None


# ---- entities -------------------------------------------------------------------------------

_BINOMIAL = re.compile(r"\b([A-Z][a-z]{2,}|[A-Z]\.) ([a-z]{3,}(?:a|us|um|is|ae|ii|i|ia|es|ata|ensis|ina|ella|ica|ida"
                       r"|ans|ens|or|ix|ex|ax|ea|ra|ta|na|la|ma|sa|da|ca)\b)")
_CODE = re.compile(r"\b([A-Z]{1,3})-?(\d{1,2})\b(?![.,]\d|°)")
_NOT_GENUS = {"The", "This", "These", "Mean", "Only", "In", "At", "On", "Each", "All", "Both", "Snow", "Ice",
              "Total", "Late", "Early", "Near", "Across", "Deciduous", "Atlantic", "Arctic", "Polar", "Cover",
              "Lichen", "Flower", "Thaw", "Sea", "Bottom", "Copepodite", "Canopy", "Ground", "Pennate"}


def entity_names(text: str) -> list[str]:
    """Latin binomials (genus + epithet) in order of first mention, genus-abbreviated ones skipped."""
    out: list[str] = []
    for m in _BINOMIAL.finditer(text):
        genus, epithet = m.group(1), m.group(2)
        if genus.endswith(".") or genus in _NOT_GENUS:
            continue
        name = f"{genus} {epithet}"
        if name not in out:
            out.append(name)
    return out


def code_names(text: str) -> list[str]:
    """Site/station codes written like ``FS-4`` or ``B7``, as written, in order of first mention."""
    out: list[str] = []
    for m in _CODE.finditer(text):
        if m.group(0) not in out and m.group(1) not in ("CO", "N", "S", "E", "W", "SSP", "RCP", "CV"):
            out.append(m.group(0))
    return out


_CLOSED = re.compile(r"(?:^|\b)(?:Only|only|solely|exclusively)\s+(?P<noun>(?:the\s+)?(?:[a-z]+\s+){0,2}?)?"
                     r"(?P<list>(?P<first>[A-Z][\w-]*(?: (?!and\b)[a-z]{3,})?)(?:(?:,\s*|\s+and\s+|,\s+and\s+)"
                     r"[A-Z][\w-]*(?: (?!and\b)[a-z]{3,})?)*)")


def closed_set_answer(sentence: str) -> tuple[str, str, list[str]] | None:
    """``(answer, noun, members)`` when the sentence declares a closed set of named members."""
    m = _CLOSED.search(sentence)
    if not m:
        return None
    listed = m.group("list")
    members = entity_names(listed) or code_names(listed)
    if not members:
        return None
    # the answer is the listed members, exactly as written
    first, last = listed.find(members[0]), listed.rfind(members[-1]) + len(members[-1])
    answer = listed[first:last]
    noun = (m.group("noun") or "").strip()
    return answer, noun, members


def overlap(a: str, b: str) -> float:
    """Share of ``a``'s content words that occur in ``b`` (0..1)."""
    wa = [w for w in content_words(a) if not w.isdigit()]
    if not wa:
        return 0.0
    wb = set(content_words(b))
    return sum(w in wb for w in wa) / len(wa)


def citing(sentence: str) -> bool:
    return cites_other_work(sentence)


def sentences_in(spans: Iterable[SpanText]) -> list[tuple[SpanText, str]]:
    return [(s, sent) for s in spans for sent in split_sentences_any(s.text)]

