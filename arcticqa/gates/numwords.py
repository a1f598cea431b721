"""Numbers written in words, English and Russian: ``eight percentage points`` is 8 percentage
points, ``twenty-seven percent`` 27 %, ``сорок процентов`` 40 %, ``zero point seven three metres``
0.73 m, ``ноль целых шесть десятых градуса`` 0.6 degrees.

:func:`spelled_as_digits` rewrites the text with each run of number words replaced by its digits,
so the number grammar (:mod:`arcticqa.gates.numbers`) reads it with its unit. It is applied only
where a written-out number must count as the same value — the answer-leak rule, the blinded
reconstruction's matcher and the open-ended grader — and never to evidence, where "one of the
lakes" is not a quantity. A lone "one"/"один" is left as a word unless a unit follows it.
"""

from __future__ import annotations

import re
from functools import lru_cache

from arcticqa.gates.numbers import parse_numbers

__all__ = ["spelled_as_digits"]

_EN_SMALL = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen".split())}
_EN_TENS = {w: 10 * k for k, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_EN_SCALE = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}

_RU: dict[str, int] = {}
for _value, _forms in [
    (0, "ноль нуля"), (1, "один одна одно одного одной одному одним"), (2, "два две двух двум двумя"),
    (3, "три трех трёх трем трём тремя"), (4, "четыре четырех четырёх четырем четырём четырьмя"),
    (5, "пять пяти пятью"), (6, "шесть шести шестью"), (7, "семь семи семью"), (8, "восемь восьми восемью"),
    (9, "девять девяти девятью"), (10, "десять десяти десятью"), (11, "одиннадцать одиннадцати"),
    (12, "двенадцать двенадцати"), (13, "тринадцать тринадцати"), (14, "четырнадцать четырнадцати"),
    (15, "пятнадцать пятнадцати"), (16, "шестнадцать шестнадцати"), (17, "семнадцать семнадцати"),
    (18, "восемнадцать восемнадцати"), (19, "девятнадцать девятнадцати"), (20, "двадцать двадцати"),
    (30, "тридцать тридцати"), (40, "сорок сорока"), (50, "пятьдесят пятидесяти"),
    (60, "шестьдесят шестидесяти"), (70, "семьдесят семидесяти"), (80, "восемьдесят восьмидесяти"),
    (90, "девяносто девяноста"), (100, "сто ста"), (200, "двести двухсот"), (300, "триста трехсот трёхсот"),
    (400, "четыреста четырехсот четырёхсот"), (500, "пятьсот пятисот"), (600, "шестьсот шестисот"),
    (700, "семьсот семисот"), (800, "восемьсот восьмисот"), (900, "девятьсот девятисот"),
]:
    for _form in _forms.split():
        _RU[_form] = _value
_RU_SCALE = {**dict.fromkeys("тысяча тысячи тысяч тысячу".split(), 1000),
             **dict.fromkeys("миллион миллиона миллионов".split(), 10**6),
             **dict.fromkeys("миллиард миллиарда миллиардов".split(), 10**9)}

_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")
_ONE = {"one", "один", "одна", "одно", "одного", "одной", "одному", "одним"}


def _value_of(word: str) -> tuple[str, int] | None:
    """("small" | "scale", value) of one number word (a hyphenated English compound included)."""
    w = word.casefold()
    if "-" in w:
        parts = w.split("-")
        if len(parts) == 2 and parts[0] in _EN_TENS and parts[1] in _EN_SMALL and 0 < _EN_SMALL[parts[1]] < 10:
            return "small", _EN_TENS[parts[0]] + _EN_SMALL[parts[1]]
        return None
    if w in _EN_SMALL:
        return "small", _EN_SMALL[w]
    if w in _EN_TENS:
        return "small", _EN_TENS[w]
    if w in _RU:
        return "small", _RU[w]
    if w in _EN_SCALE:
        return "scale", _EN_SCALE[w]
    if w in _RU_SCALE:
        return "scale", _RU_SCALE[w]
    return None


def _run_value(values: list[tuple[str, int]]) -> int | None:
    """The number a run of number words spells, or None when the run is no single well-formed
    number ("two three" is two numbers; "twenty one hundred" is not read either)."""
    total, current, last = 0, 0, ""
    for kind, value in values:
        if kind == "small":
            cls = "hundreds" if value >= 100 else "tens" if value >= 20 and value % 10 == 0 else "units"
            allowed = {"": {"hundreds", "tens", "units"}, "hundreds": {"tens", "units"},
                       "tens": {"units"}, "units": set()}[last]
            if cls not in allowed or (last == "tens" and not 0 < value < 10):
                return None
            current += value
            last = cls
        elif value == 100:
            if last not in ("", "units") or current >= 10:
                return None
            current = (current or 1) * 100
            last = "hundreds"
        else:
            total += (current or 1) * value
            current, last = 0, ""
    return total + current


#: English decimals: "zero point seven three", "two point six"
_EN_DIGITS = {**{w: str(k) for k, w in enumerate("zero one two three four five six seven eight nine".split())},
              "oh": "0", "nought": "0", "naught": "0"}
#: Russian decimals: "ноль целых шесть десятых", "одна целая двадцать пять сотых", "шесть десятых"
_RU_WHOLE = frozenset("целых целая целое целой".split())
_RU_FRACTION = {**dict.fromkeys("десятых десятая десятые десятой".split(), 1),
                **dict.fromkeys("сотых сотая сотые сотой".split(), 2),
                **dict.fromkeys("тысячных тысячная тысячные тысячной".split(), 3)}


def _read_run(text: str, words: list[re.Match[str]], k: int) -> tuple[list[tuple[str, int]], int] | None:
    """The run of number words starting at word ``k``: (their values, index of its last word)."""
    first = _value_of(words[k].group(0))
    if first is None:
        return None
    run = [first]
    end = k
    j = k + 1
    while j < len(words):
        gap = text[words[j - 1].end():words[j].start()]
        word = words[j].group(0)
        if gap.strip() == "" and _value_of(word) is not None:
            run.append(_value_of(word))  # type: ignore[arg-type]
            end = j
            j += 1
        elif gap.strip() == "" and word.casefold() in ("and", "и") and j + 1 < len(words) \
                and run[-1][0] == "scale" and _value_of(words[j + 1].group(0)) is not None \
                and text[words[j].end():words[j + 1].start()].strip() == "":
            j += 1  # "one hundred and twenty"
        else:
            break
    return run, end


def _decimal_tail(text: str, words: list[re.Match[str]], end: int, whole: int) -> tuple[str, int] | None:
    """The decimal a whole number in words ending at word ``end`` goes on into, as digits, and the
    index of its last word: "zero point seven three" → "0.73", "ноль целых шесть десятых" → "0.6",
    "шесть десятых" → "0.6"."""
    def next_word(i: int) -> str | None:
        if i >= len(words) or text[words[i - 1].end():words[i].start()].strip():
            return None
        return words[i].group(0).casefold()

    word = next_word(end + 1)
    if word == "point":
        digits = []
        i = end + 2
        while (w := next_word(i)) is not None and w in _EN_DIGITS:
            digits.append(_EN_DIGITS[w])
            i += 1
        return (f"{whole}.{''.join(digits)}", i - 1) if digits else None
    if word in _RU_FRACTION:  # "шесть десятых": the run was the fraction itself
        places = _RU_FRACTION[word]
        return (f"0.{whole:0{places}d}", end + 1) if whole < 10 ** places else None
    if word in _RU_WHOLE and end + 2 < len(words) and next_word(end + 2) is not None:
        got = _read_run(text, words, end + 2)
        if got is None:
            return None
        run, last = got
        fraction = _run_value(run)
        unit = next_word(last + 1)
        if fraction is None or unit not in _RU_FRACTION or fraction >= 10 ** _RU_FRACTION[unit]:
            return None
        return f"{whole}.{fraction:0{_RU_FRACTION[unit]}d}", last + 1
    return None


@lru_cache(maxsize=4096)
def spelled_as_digits(text: str) -> str:
    """``text`` with every run of number words replaced by its digits ("twenty-seven percent" →
    "27 percent", "one hundred and twenty days" → "120 days", "восемь процентов" → "8
    процентов", "zero point seven three metres" → "0.73 metres", "ноль целых шесть десятых
    градуса" → "0.6 градуса"). Text without number words comes back unchanged."""
    words = list(_WORD.finditer(text))
    out: list[str] = []
    at = 0
    k = 0
    while k < len(words):
        got = _read_run(text, words, k)
        if got is None:
            k += 1
            continue
        run, end = got
        first = run[0]
        value = _run_value(run)
        digits = str(value)
        tail = _decimal_tail(text, words, end, value) if value is not None else None
        if tail is not None:
            digits, end = tail
        start, stop = words[k].start(), words[end].end()
        lone_one = end == k and words[k].group(0).casefold() in _ONE
        if value is None or (lone_one and not _unit_follows(text, stop)) or (end == k and first[0] == "scale"):
            k = end + 1
            continue
        out.append(text[at:start])
        out.append(digits)
        at = stop
        k = end + 1
    if not out:
        return text
    out.append(text[at:])
    return "".join(out)


def _unit_follows(text: str, end: int) -> bool:
    numbers = parse_numbers("1" + text[end:end + 30])
    return bool(numbers) and numbers[0].start == 0 and numbers[0].unit is not None
