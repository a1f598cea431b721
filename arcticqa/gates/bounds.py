"""Bounds and ranges evaluated against a stated value, without a model.

An option that states a bound or a range ("less than 18 days", "more than 14%", "between 5 and
12 days", "не более 10 дней", "от 5 до 12 дней", "< 0.5%") is a claim about the answer's value
that arithmetic can settle: true when every value the answer allows lies inside it (a second
correct option), false when none does. Both sides are read as intervals in one unit (pint, via
:func:`arcticqa.gates.numbers.comparable`) and compared with a margin of the coarsest stated
tolerance (half a digit, ``±``, approximation), so a borderline option ("less than 9 days" for
9 days) is left undecided, never decided either way.

Only an option whose words, outside its numbers and bound words, are the answer's words is
compared: "more than 14% decrease" against "27% increase" is a direction question, not a bound.
"~"/"about" is an approximation, not a bound: such an option is not read here. An answer that is
itself a bound or a range is compared only when containment or disjointness holds with margin.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

from arcticqa.gates.numbers import Number, comparable, parse_numbers, prepare_text, same_value
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.gates.text import content_words

__all__ = ["Interval", "read_interval", "point", "interval_verdict", "bound_verdict", "same_quantity"]

# words (and symbols) before a number that bound it; the leftmost match wins, so "no more than"
# is read before "more than" and "не более" before "более"
_BOUND_WORDS: dict[str, str] = {
    "no more than": "≤", "not more than": "≤", "no greater than": "≤", "not exceeding": "≤",
    "no less than": "≥", "not less than": "≥", "no fewer than": "≥",
    "up to": "≤", "at most": "≤", "a maximum of": "≤", "as many as": "≤", "as much as": "≤",
    "at least": "≥", "a minimum of": "≥",
    "less than": "<", "fewer than": "<", "lower than": "<", "smaller than": "<", "under": "<",
    "below": "<",
    "more than": ">", "greater than": ">", "higher than": ">", "larger than": ">", "over": ">",
    "above": ">", "exceeding": ">", "in excess of": ">",
    "не более": "≤", "не больше": "≤", "не выше": "≤", "не свыше": "≤", "не менее": "≥",
    "не меньше": "≥", "не ниже": "≥", "до": "≤", "менее": "<", "меньше": "<", "ниже": "<",
    "более": ">", "больше": ">", "свыше": ">", "выше": ">",
    "<": "<", ">": ">", "≤": "≤", "≥": "≥", "⩽": "≤", "⩾": "≥", "<=": "≤", ">=": "≥",
}
_WORDS = "|".join(sorted((re.escape(w) for w in _BOUND_WORDS if w[0].isalpha()), key=len, reverse=True))
_SYMBOLS = "|".join(sorted((re.escape(w) for w in _BOUND_WORDS if not w[0].isalpha()), key=len, reverse=True))
_LEAD = re.compile(rf"(?:(?<![^\W\d_])(?P<word>{_WORDS})|(?P<sym>{_SYMBOLS}))\s*$", re.I)
# a bound written after its number: "18 days or less", "14% или более"
_TRAIL = re.compile(r"\s*(?:or|или) (?P<word>more|less|fewer|greater|higher|lower|above|below|over|under"
                    r"|более|менее|больше|меньше)(?![^\W\d_])", re.I)
_TRAIL_SYMBOL = {"more": "≥", "greater": "≥", "higher": "≥", "above": "≥", "over": "≥", "более": "≥",
                 "больше": "≥", "less": "≤", "fewer": "≤", "lower": "≤", "below": "≤", "under": "≤",
                 "менее": "≤", "меньше": "≤"}
# the words joining the two ends of a range, and the words that may open it
_JOIN = re.compile(r"^\s*(?P<join>-|–|—|to|and|до|и|по)\s*$", re.I)
_OPEN = re.compile(r"(?<![^\W\d_])(?P<open>between|from|ranging from|range of|от|между|в пределах от)\s*$", re.I)


@dataclass(frozen=True)
class Interval:
    """What a text states about one quantity: a value (``low is high``), a bound or a range.

    ``low``/``high`` are None for an open end; ``words`` are the content words outside the
    numbers and the bound words (they must match for two texts to speak of the same thing).
    """

    low: Number | None
    high: Number | None
    low_inclusive: bool = True
    high_inclusive: bool = True
    words: tuple[str, ...] = ()

    @property
    def is_point(self) -> bool:
        return self.low is not None and self.low is self.high


def point(number: Number, words: tuple[str, ...] = ()) -> Interval:
    """A stated value as an interval of one value (its tolerance is applied when compared)."""
    return Interval(low=number, high=number, words=words)


def _words(prepared: str, cuts: list[tuple[int, int]]) -> tuple[str, ...]:
    text = prepared
    for a, b in sorted(cuts, reverse=True):
        text = text[:a] + " " + text[b:]
    return tuple(sorted(content_words(text)))


def read_interval(text: str) -> Interval | None:
    """``text`` as one value, bound or range of one quantity, or None when it is none of these
    (no number, more than two, two that do not form a range, or an approximate bound/range)."""
    text = spelled_as_digits(text)
    prepared = prepare_text(text)
    numbers = parse_numbers(text)
    if len(numbers) == 1:
        (n,) = numbers
        lead = _LEAD.search(prepared, 0, n.start)
        trail = _TRAIL.match(prepared, n.end)
        if (lead and trail) or (n.bound and not lead):
            return None
        if lead or trail:
            if n.approx:
                return None  # "about 10 days or more": neither a value nor a clean bound
            if lead:
                key = (lead.group("word") or lead.group("sym")).lower()
                symbol, cut = _BOUND_WORDS[key], (lead.start(), n.end)
            else:
                assert trail is not None
                symbol, cut = _TRAIL_SYMBOL[trail.group("word").lower()], (n.start, trail.end())
            words = _words(prepared, [cut])
            if symbol in "<≤":
                return Interval(low=None, high=n, high_inclusive=symbol == "≤", words=words)
            return Interval(low=n, high=None, low_inclusive=symbol == "≥", words=words)
        return point(n, _words(prepared, [(n.start, n.end)]))
    if len(numbers) != 2:
        return None
    a, b = numbers
    join = _JOIN.match(prepared[a.end:b.start])
    if not join or a.approx or b.approx or a.bound or b.bound:
        return None
    opened = _OPEN.search(prepared, 0, a.start)
    word = join.group("join").lower()
    if word in ("and", "и") and not (opened and opened.group("open").lower() in ("between", "между")):
        return None  # "5 and 12 days" lists two values
    if word in ("до", "по") and not opened:
        return None
    if _LEAD.search(prepared, 0, a.start):
        return None  # "more than 5–10 days"
    if a.unit is None and b.unit is not None:
        a = replace(a, unit=b.unit, unread_unit=None)  # "от 5 до 12 дней": one unit for both ends
    elif b.unit is None and a.unit is not None:
        b = replace(b, unit=a.unit, unread_unit=None)
    cmp = comparable(a, b)
    if cmp is None:
        return None
    if cmp[0] > cmp[1]:
        a, b = b, a  # "from 12 to 5 days"
    start = opened.start() if opened else a.start
    return Interval(low=a, high=b, words=_words(prepared, [(start, b.end)]))


@dataclass(frozen=True)
class _Ends:
    """An interval's ends in one unit, each with its tolerance (0 for an open end)."""

    low: float
    high: float
    low_tolerance: float
    high_tolerance: float
    low_inclusive: bool
    high_inclusive: bool


def _ends(interval: Interval, ref: Number) -> _Ends | None:
    """The interval's ends in ``ref``'s unit, each with the coarser of its own tolerance and
    ``ref``'s, or None when a unit does not convert."""
    values: list[tuple[float, float]] = []
    for end, missing in ((interval.low, -math.inf), (interval.high, math.inf)):
        if end is None:
            values.append((missing, 0.0))
            continue
        cmp = comparable(ref, end)
        if cmp is None:
            return None
        values.append((cmp[1], max(ref.tolerance, cmp[2])))
    (low, low_tol), (high, high_tol) = values
    return _Ends(low, high, low_tol, high_tol, interval.low_inclusive, interval.high_inclusive)


def interval_verdict(answer: Interval, option: Interval) -> bool | None:
    """Whether ``option`` (a bound or a range) holds for every value ``answer`` allows (True),
    for none of them (False), or cannot be said (None). Words are not compared here.

    Each comparison of two ends is made with the coarser of their tolerances (half a digit,
    ``±``, approximation) as margin, so only a clear inside or a clear gap decides."""
    if option.is_point:
        return None
    ref = answer.low or answer.high
    if ref is None:
        return None
    g, o = _ends(answer, ref), _ends(option, ref)
    if g is None or o is None:
        return None
    finite = [abs(v) for v in (g.low, g.high, o.low, o.high) if math.isfinite(v)]
    eps = 1e-9 * max(1.0, *finite)
    # true: the answer, widened by the margin, lies inside the option
    low_ok = o.low == -math.inf or (
        g.low - max(g.low_tolerance, o.low_tolerance) - o.low > (-eps if o.low_inclusive else eps))
    high_ok = o.high == math.inf or (
        o.high - (g.high + max(g.high_tolerance, o.high_tolerance)) > (-eps if o.high_inclusive else eps))
    if low_ok and high_ok:
        return True
    if answer.is_point and answer.low is not None:
        # "up to 9 days" and "at least 9 days" hold for exactly 9 days
        bound = option.high if option.low is None else option.low if option.high is None else None
        inclusive = option.high_inclusive if option.low is None else option.low_inclusive
        if bound is not None and inclusive and same_value(answer.low, bound):
            return True
    # false: a gap wider than the margin between the answer and the option
    above = o.low - g.high > max(g.high_tolerance, o.low_tolerance) + eps
    below = g.low - o.high > max(g.low_tolerance, o.high_tolerance) + eps
    if above or below:
        return False
    return None


def bound_verdict(answer: str, option: str) -> bool | None:
    """Whether the bound or range ``option`` is true (True) or false (False) for ``answer``;
    None when ``option`` is no bound or range, the two speak of other things (other words, units
    that do not convert), or the comparison is within the margin."""
    a, o = read_interval(answer), read_interval(option)
    if a is None or o is None or o.is_point or a.words != o.words:
        return None
    return interval_verdict(a, o)


def same_quantity(answer: str, option: str) -> bool:
    """Whether ``option`` is a bound or range about what ``answer`` states (the same words
    outside numbers and bound words), so that :func:`bound_verdict` is the one to decide it."""
    a, o = read_interval(answer), read_interval(option)
    return a is not None and o is not None and not o.is_point and a.words == o.words
