"""A seeded red team for the offline roles served over the wire: one planted defect per item.

:class:`RedTeam` is a *tamper* for :class:`arcticqa.standins.passthrough.OfflineOverWire`: the
stand-in computes each role's honest (offline) answer, and the red team may send something else.
For every candidate finding (an *item*: keyed by its claim and answer) it picks one defect class
from :data:`CATALOGUE`, seeded and independent of call order, and corrupts the answers of the
roles that class concerns; the other roles *cooperate* with the defect the way a model misled by
it would (a reconstructor that reads a leaked answer, a verifier or option verifier that calls the
planted thing fine), so only the deterministic gates stand between the defect and the release.
A judge's lie is never planted alone: it rides on a real defect of the same item.

Every plant is logged (:attr:`RedTeam.plants`, :meth:`RedTeam.write_log`), and :func:`score`
decides after the build, from the store and the exported release, whether each planted defect
*reached* an accepted item and which rule ids *caught* it. ``bench/bench_gates.py`` runs it;
``docs/red-team.md`` lists the classes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from arcticqa.gates.contradiction import set_members
from arcticqa.gates.direction import DIRECTION_AXES, antonyms, direction_terms
from arcticqa.gates.evidence import answer_in_evidence
from arcticqa.gates.numbers import Number, parse_numbers, prepare_text
from arcticqa.standins.offline.text import answer_hedge, is_cyrillic
from arcticqa.standins.passthrough import Call
from arcticqa.standins.passthrough import answer as _reply
from arcticqa.standins.replies import Reply, Response

__all__ = ["CATALOGUE", "DefectClass", "Plant", "Touch", "RedTeam", "Outcome", "score", "number_words"]

# ---- the catalogue ----------------------------------------------------------------------------

#: what a defect class corrupts: the finding, the question, the blind reconstruction, the options,
#: the verifier's entailment verdict, or the reply itself (transport)
TARGETS = ("finding", "question", "reconstruction", "options", "entailment", "transport")


@dataclass(frozen=True)
class Facts:
    """What the red team knows of an item when it decides: the finding as the extractor sent it."""

    paper_id: str
    claim: str
    answer: str
    answer_type: str
    claim_type: str
    span_ids: tuple[str, ...]
    scope_span_ids: tuple[str, ...]
    scope: tuple[tuple[str, str], ...]
    #: every span the extractor was shown: (id, section, text)
    paper_spans: tuple[tuple[str, str, str], ...]

    @property
    def number(self) -> Number | None:
        numbers = parse_numbers(self.answer)
        return numbers[0] if len(numbers) == 1 else None

    @property
    def cyrillic(self) -> bool:
        return is_cyrillic(self.answer + " " + self.claim)

    def support_text(self) -> str:
        wanted = set(self.span_ids)
        return "\n".join(t for i, _, t in self.paper_spans if i in wanted)


@dataclass(frozen=True)
class DefectClass:
    """One entry of the catalogue: a named defect, where it is planted, and when it applies."""

    name: str
    doc: str
    target: str
    applies: Callable[[Facts], bool] = lambda f: True


def _numeric(f: Facts) -> bool:
    return f.number is not None and f.number.unit not in (None, "date", "day of year")


def _convertible(f: Facts) -> bool:
    n = f.number
    return n is not None and bool(_conversions(n, f.cyrillic))


def _has_period(f: Facts) -> bool:
    return bool(dict(f.scope).get("period"))


def _derivable(f: Facts) -> bool:
    n = f.number
    return n is not None and n.unit is not None and n.value > 0 and n.unit not in ("date", "day of year", "pp")


_CAUSE = re.compile(r"\b(?:because|due to|caused|driven by|as a result of|owing to|result(?:ed)? (?:in|from)|led to)\b"
                    r"|(?<!\w)(?:из-за|вследствие|благодаря|в результате|вызван\w*)(?!\w)", re.IGNORECASE)


def _hedged(f: Facts) -> bool:
    return answer_hedge(f.claim, f.answer) is not None


CATALOGUE: tuple[DefectClass, ...] = (
    DefectClass("wrong_span_ids", "the finding cites a span id the paper does not have", "finding"),
    DefectClass("misattributed_span", "the finding cites a real span of the paper that does not state the answer",
                "finding", lambda f: len(f.paper_spans) > 1),
    DefectClass("fabricated_finding", "the finding's answer (and claim) carry a value the cited span does not state",
                "finding", _numeric),
    DefectClass("fabricated_scope", "the finding's scope names a period the evidence does not state", "finding"),
    DefectClass("leak_verbatim", "the question or its context states the answer as written", "question"),
    DefectClass("leak_words", "the context states the answer's number in words ('eighteen percent', "
                "'zero point eight degrees Celsius')", "question", _numeric),
    DefectClass("leak_converted_unit", "the context states the answer's value in another unit "
                "('0.8 K' for 0.8 °C, '90 mm' for 9 cm, '216 hours' for 9 days)", "question", _convertible),
    DefectClass("relative_period", "the question dates itself from the day of writing "
                "('compared with last year', 'over the past decade')", "question"),
    DefectClass("not_standalone", "the question points into the paper ('in this study', 'Figure 3', 'the site')",
                "question"),
    DefectClass("dropped_scope", "the question and context lose the finding's period", "question", _has_period),
    DefectClass("leak_derivable", "the context gives two values the answer follows from by arithmetic "
                "('from 1.52 m to 1.79 m' for an 18% increase, '36 of 200 plots' for 18%, a difference, a ratio)",
                "question", _derivable),
    DefectClass("causal_question", "the question asserts a cause the finding does not state ('Because of warmer "
                "summers, by what percentage …'), and the reconstructor and verifier call it an observation",
                "question", lambda f: f.claim_type != "causal" and not _CAUSE.search(f.support_text() + f.claim)),
    DefectClass("answer_restated_as_distractor", "an option restates the answer (another spelling, unit, precision "
                "or words) and the option verifier calls it contradicted", "options"),
    DefectClass("true_bound_distractor", "an option is a bound or range the answer satisfies ('less than 18 days' "
                "for 9 days) and the option verifier calls it contradicted", "options", _numeric),
    DefectClass("duplicate_options", "two options say the same value ('9 days' and '9.0 days') and the option "
                "verifier calls the copy contradicted", "options"),
    DefectClass("garbage_option", "an option is empty, 'None of the above', 'All of the above' or filler, and the "
                "option verifier calls it contradicted", "options"),
    DefectClass("evidence_value_distractor", "an option is another value the cited evidence states (it may be "
                "true) and the option verifier calls it contradicted", "options", _numeric),
    DefectClass("wrong_reconstruction", "the blind reconstruction gives another value (in digits, words or another "
                "unit) and the verifier calls it equivalent", "reconstruction"),
    DefectClass("non_answer_reconstruction", "the blind reconstruction gives no answer ('not stated in the "
                "evidence', 'N/A', '') and the verifier calls it equivalent", "reconstruction"),
    DefectClass("reconstruction_wrong_span", "the blind reconstruction cites a span id it was not given",
                "reconstruction"),
    DefectClass("entailment_lie", "the answer is hedged where the paper states it and the verifier calls it "
                "entailed", "entailment", _hedged),
    DefectClass("malformed_json", "a role's reply is not valid JSON (once; a re-ask gets the honest answer)",
                "transport"),
    DefectClass("schema_violation", "a role's reply is JSON of the wrong shape (once)", "transport"),
    DefectClass("refusal", "a role refuses (once): refusal field set, no content", "transport"),
    DefectClass("truncated", "a role's reply is cut off with finish_reason=length (once), as broken JSON or as "
                "valid JSON whose text stops mid-sentence", "transport"),
)

BY_NAME: dict[str, DefectClass] = {c.name: c for c in CATALOGUE}

#: the roles a transport fault may hit, for one item
_TRANSPORT_ROLES = ("question_writer", "reconstructor", "verifier", "distractor_writer")


# ---- the log ----------------------------------------------------------------------------------

@dataclass
class Touch:
    """One corrupted (or cooperating) reply."""

    role: str
    prompt: str
    change: str
    planted: str


@dataclass
class Plant:
    """One planted defect: the item it is in and every reply the red team changed for it."""

    seed: int
    defect: str
    target: str
    item: str  # the item key: sha256 of (paper, claim, answer) as the extractor first sent it
    paper_id: str
    claim: str  # the finding as the extractor sent it (the planted one for finding classes)
    answer: str
    role: str  # the role whose reply carries the defect
    change: str  # what was changed, in words
    planted: str  # the planted text (an option, a leaked phrase, a span id, a reconstruction ...)
    variant: str = ""
    #: texts whose presence in an accepted item means the defect reached it (question classes: the
    #: questions and contexts sent; option classes: the planted options)
    marks: list[str] = field(default_factory=list)
    touches: list[Touch] = field(default_factory=list)
    faults: int = 0  # transport: faulty replies sent
    reasked: int = 0  # transport: the same request asked again after the fault


# ---- number words and unit conversions ----------------------------------------------------------

_EN_SMALL = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
             "sixteen seventeen eighteen nineteen").split()
_EN_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_RU_SMALL = ("ноль один два три четыре пять шесть семь восемь девять десять одиннадцать двенадцать тринадцать "
             "четырнадцать пятнадцать шестнадцать семнадцать восемнадцать девятнадцать").split()
_RU_TENS = "_ _ двадцать тридцать сорок пятьдесят шестьдесят семьдесят восемьдесят девяносто".split()
_RU_HUNDREDS = "_ сто двести триста четыреста пятьсот шестьсот семьсот восемьсот девятьсот".split()


def _int_words(n: int, ru: bool = False, hyphen: bool = True) -> str:
    if n < 0:
        return ("минус " if ru else "minus ") + _int_words(-n, ru, hyphen)
    small, tens = (_RU_SMALL, _RU_TENS) if ru else (_EN_SMALL, _EN_TENS)
    if n < 20:
        return small[n]
    if n < 100:
        t, u = divmod(n, 10)
        if not u:
            return tens[t]
        return f"{tens[t]} {small[u]}" if ru or not hyphen else f"{tens[t]}-{small[u]}"
    if n < 1000:
        h, rest = divmod(n, 100)
        head = _RU_HUNDREDS[h] if ru else f"{small[h]} hundred"
        return head if not rest else f"{head} {_int_words(rest, ru, hyphen)}"
    th, rest = divmod(n, 1000)
    head = f"{_int_words(th, ru, hyphen)} {'тысяч' if ru else 'thousand'}"
    return head if not rest else f"{head} {_int_words(rest, ru, hyphen)}"


def number_words(digits: str, *, ru: bool = False, hyphen: bool = True) -> str:
    """A number as written in words: ``18`` → "eighteen", ``0.8`` → "zero point eight", ``2,6`` →
    "two point six"; in Russian ``12`` → "двенадцать", ``0,6`` → "ноль целых шесть десятых"."""
    text = digits.replace(",", ".").replace("−", "-")
    whole, _, frac = text.partition(".")
    words = _int_words(int(whole or "0"), ru, hyphen)
    if not frac:
        return words
    if ru:
        denominators = {1: "десятых", 2: "сотых", 3: "тысячных"}
        return f"{words} целых {_int_words(int(frac), True)} {denominators.get(len(frac), 'тысячных')}"
    return f"{words} point {' '.join(_EN_SMALL[int(d)] for d in frac)}"


_UNIT_NAMES_EN = {"%": "percent", "°C": "degrees Celsius", "km": "kilometres", "m": "metres", "cm": "centimetres",
                  "mm": "millimetres", "d": "days", "pp": "percentage points", "fold": "times", "h": "hours",
                  "yr": "years", "K": "kelvin", "t": "tonnes", "kg": "kilograms", "week": "weeks"}
_UNIT_NAMES_RU = {"%": "процентов", "°C": "градуса Цельсия", "km": "километров", "m": "метров", "cm": "сантиметров",
                  "mm": "миллиметров", "d": "дней", "yr": "лет", "t": "тонн"}

#: unit → [(unit text to write, factor, decimals to add, exact)]; °C only as a difference
_CONVERSIONS: dict[str, list[tuple[str, str, float, bool]]] = {
    # (English unit, Russian unit, factor, exact)
    "°C": [("K", "K", 1.0, True), ("°F", "°F", 1.8, True)],
    "km": [("m", "м", 1000.0, True), ("miles", "миль", 0.621371, False)],
    "m": [("cm", "см", 100.0, True), ("km", "км", 0.001, True)],
    "cm": [("mm", "мм", 10.0, True), ("m", "м", 0.01, True), ("inches", "дюймов", 0.393701, False)],
    "mm": [("cm", "см", 0.1, True), ("µm", "мкм", 1000.0, True)],
    "d": [("hours", "ч", 24.0, True), ("weeks", "недели", 1 / 7, False)],
    "h": [("minutes", "мин", 60.0, True)],
    "t": [("kg", "кг", 1000.0, True)],
    "Gg": [("t", "т", 1000.0, True)],
}


def _conversions(n: Number, ru: bool) -> list[tuple[str, float, bool]]:
    if n.unit == "°C" and abs(n.value) >= 50:
        return []  # an absolute temperature: K is not the same number
    return [(ru_unit if ru else en, factor, exact) for en, ru_unit, factor, exact in _CONVERSIONS.get(n.unit or "", [])]


def _fmt(value: float, decimals: int, comma: bool) -> str:
    text = f"{value:.{max(decimals, 0)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".") if decimals > 0 else text
    return text.replace(".", ",") if comma else text


def _answer_number(answer: str) -> tuple[str, Number, str] | None:
    """(prepared answer, its one number, the digits as written) or None."""
    prep = prepare_text(answer)
    numbers = parse_numbers(prep)
    if len(numbers) != 1:
        return None
    n = numbers[0]
    m = re.search(r"[-−]?\d+(?:[.,]\d+)?", prep[n.start:n.end])
    if m is None:
        return None
    return prep, n, m.group(0).replace("−", "-")


def _with_value(answer: str, make: Callable[[Number, str], str]) -> str | None:
    """The answer with its number (and unit) replaced by ``make(number, digits)``."""
    found = _answer_number(answer)
    if found is None:
        return None
    prep, n, digits = found
    return prep[:n.start] + make(n, digits) + prep[n.end:]


def _scaled(answer: str, factor: float) -> str | None:
    """The answer with its value multiplied by ``factor``, same unit, wording and precision."""
    found = _answer_number(answer)
    if found is None:
        return None
    prep, n, digits = found
    step = 10.0 ** (-n.decimals)
    value = round(n.value * factor / step) * step
    text = f"{value:.{n.decimals}f}"
    if "," in digits:
        text = text.replace(".", ",")
    at = prep.find(digits, n.start)
    if at < 0:
        return None
    return prep[:at] + text + prep[at + len(digits):]


def _converted(n: Number, digits: str, factor: float, exact: bool) -> str:
    """``n``'s value times ``factor``: every digit an exact conversion needs, one more than the
    answer's precision for a rounded one."""
    value = n.value * factor
    return _fmt(value, n.decimals + (4 if exact else 1), "," in digits) if exact else \
        f"{value:.{n.decimals + 1}f}".replace(".", "," if "," in digits else ".")


def _raw(call: Call, content: str | None, **kwargs: Any) -> Reply:
    """A reply in the request's mode (a tool call's arguments or message text)."""
    tools = call.body.get("tools") or []
    name = tools[0].get("function", {}).get("name") if tools and content is not None else None
    return Reply(content=content, tool_call=name, **kwargs)


# ---- the red team -----------------------------------------------------------------------------

def _digest(*parts: object) -> int:
    return int(hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:16], 16)


def _norm(text: str) -> str:
    return " ".join(str(text).split())


def item_key(paper_id: str, claim: str, answer: str) -> str:
    return hashlib.sha256(f"{paper_id}\x1f{_norm(claim)}\x1f{_norm(answer)}".encode()).hexdigest()[:16]


@dataclass
class _Item:
    key: str
    facts: Facts  # as the extractor sent it (the planted finding for finding classes)
    defect: DefectClass
    rng: random.Random
    plant: Plant | None = None
    transport_role: str = ""
    faulted: set[str] = field(default_factory=set)
    #: option texts the option verifier is to call contradicted
    lie_options: set[str] = field(default_factory=set)


class RedTeam:
    """``OfflineOverWire(tamper=RedTeam(seed))``: plants one defect per item, seeded.

    ``classes`` limits the catalogue (names of :data:`CATALOGUE`); an item is given the first
    applicable class at a seeded offset, so a seed picks the same class for the same item in any
    call order, and consecutive seeds walk each item through the catalogue.
    """

    def __init__(self, seed: int, classes: Sequence[str] | None = None) -> None:
        unknown = [c for c in classes or () if c not in BY_NAME]
        if unknown:
            raise ValueError(f"unknown defect classes {unknown}; known: {sorted(BY_NAME)}")
        self.seed = seed
        self.classes: tuple[DefectClass, ...] = tuple(BY_NAME[c] for c in classes) if classes else CATALOGUE
        self.plants: list[Plant] = []
        self._items: dict[str, _Item] = {}
        self._by_finding: dict[tuple[str, str], str] = {}  # (claim, answer) → key
        self._by_question: dict[str, str] = {}  # question text → key
        self._lock = threading.RLock()

    # -- deciding ---------------------------------------------------------------------------------
    def choose(self, facts: Facts) -> DefectClass | None:
        """The defect class for an item (None: no class of this red team applies)."""
        usable = [c for c in self.classes if c.applies(facts)]
        if not usable:
            return None
        return usable[(_digest("class", facts.paper_id, facts.claim, facts.answer) + self.seed) % len(usable)]

    def _register(self, facts: Facts, key: str) -> _Item | None:
        item = self._items.get(key)
        if item is not None:
            return item
        defect = self.choose(facts)
        if defect is None:
            return None
        rng = random.Random(_digest("variant", self.seed, key))
        item = _Item(key=key, facts=facts, defect=defect, rng=rng,
                     transport_role=rng.choice(_TRANSPORT_ROLES))
        self._items[key] = item
        self._by_finding[(_norm(facts.claim), _norm(facts.answer))] = key
        return item

    def _plant(self, item: _Item, role: str, change: str, planted: str, variant: str = "",
               marks: Iterable[str] = ()) -> Plant:
        if item.plant is None:
            f = item.facts
            item.plant = Plant(seed=self.seed, defect=item.defect.name, target=item.defect.target, item=item.key,
                               paper_id=f.paper_id, claim=f.claim, answer=f.answer, role=role, change=change,
                               planted=planted, variant=variant)
            self.plants.append(item.plant)
        for mark in marks:
            if mark not in item.plant.marks:
                item.plant.marks.append(mark)
        return item.plant

    def _touch(self, item: _Item, call: Call, change: str, planted: str) -> None:
        if item.plant is not None:
            item.plant.touches.append(Touch(role=call.role, prompt=call.prompt, change=change, planted=planted))

    # -- the tamper -------------------------------------------------------------------------------
    def __call__(self, call: Call) -> Response | None:
        with self._lock:
            if call.role == "finding_extractor":
                return self._findings(call)
            item = self._item_of(call)
            if item is None:
                return None
            if item.defect.target == "transport":
                return self._transport(item, call)
            handler = getattr(self, f"_{call.role}", None)
            return handler(item, call) if handler is not None else None

    def _item_of(self, call: Call) -> _Item | None:
        v = call.variables
        finding = v.get("finding")
        key: str | None = None
        if isinstance(finding, Mapping) and "claim" in finding:
            key = self._by_finding.get((_norm(str(finding.get("claim", ""))), _norm(str(v.get("answer", "")))))
        if key is None and "question" in v:
            key = self._by_question.get(_norm(str(v.get("question", ""))))
        return self._items.get(key) if key else None

    # finding_extractor: decide every finding's class; corrupt the finding-level ones
    def _findings(self, call: Call) -> Response | None:
        v = call.variables
        paper_id = str(v.get("paper_id", ""))
        spans = tuple((str(s.get("id", "")), str(s.get("section", "")), str(s.get("text", "")))
                      for s in v.get("spans") or [])
        honest = json.loads(json.dumps(call.honest))
        changed = False
        k = int(v.get("k") or 3)
        for i, finding in enumerate(honest.get("findings") or []):
            if i >= k:
                break
            facts = _facts(paper_id, finding, spans)
            key = item_key(paper_id, facts.claim, facts.answer)
            item = self._register(facts, key)
            if item is None or item.defect.target != "finding":
                continue
            planted = self._corrupt_finding(item, finding, call)
            if planted is not None:
                honest["findings"][i] = planted
                changed = True
        return _reply(call.body, honest) if changed else None

    def _corrupt_finding(self, item: _Item, finding: dict[str, Any], call: Call) -> dict[str, Any] | None:
        f, rng, name = item.facts, item.rng, item.defect.name
        out = dict(finding)
        if name == "wrong_span_ids":
            fake = f"sp-{rng.getrandbits(64):016x}"
            variant = rng.choice(["replace", "add"])
            out["span_ids"] = [fake] if variant == "replace" else [*finding.get("span_ids", []), fake]
            change, planted = f"span_ids {finding.get('span_ids')} -> {out['span_ids']}", fake
        elif name == "misattributed_span":
            others = [(i, sec, t) for i, sec, t in f.paper_spans
                      if i not in f.span_ids and not answer_in_evidence(f.answer, t)]
            if not others:
                return None
            ranked = sorted(others, key=lambda s: (s[1] not in ("results", "abstract", "discussion"), s[0]))
            sid = rng.choice(ranked[:4])[0]
            out["span_ids"] = [sid]
            variant, change, planted = "other_span", f"span_ids {finding.get('span_ids')} -> [{sid}]", sid
        elif name == "fabricated_finding":
            support = f.support_text()
            new = None
            for factor in rng.sample([1.7, 0.6, 1.3, 2.5, 0.45, 3.1], 6):
                candidate = _scaled(f.answer, factor)
                if candidate and candidate != f.answer and not answer_in_evidence(candidate, support):
                    new = candidate
                    break
            if new is None:
                return None
            out["answer"] = new
            old = prepare_text(f.claim)
            prep_answer = prepare_text(f.answer)
            out["claim"] = old.replace(prep_answer, new, 1) if prep_answer in old else f"{old} ({new})"
            variant, change, planted = "scaled", f"answer {f.answer!r} -> {new!r}", new
        elif name == "fabricated_scope":
            scope = dict(finding.get("scope") or {})
            period = "1987–1993" if not f.cyrillic else "1987–1993 гг."
            scope["period"] = period
            out["scope"] = scope
            variant, change, planted = "period", f"scope.period {dict(f.scope).get('period')!r} -> {period!r}", period
        else:
            return None
        # the downstream roles see the planted finding: follow it under its new key
        new_facts = _facts(f.paper_id, out, f.paper_spans)
        self._by_finding[(_norm(new_facts.claim), _norm(new_facts.answer))] = item.key
        item.facts = new_facts
        plant = self._plant(item, call.role, change, planted, variant)
        plant.claim, plant.answer = new_facts.claim, new_facts.answer
        self._touch(item, call, change, planted)
        return out

    # question_writer
    def _question_writer(self, item: _Item, call: Call) -> Response | None:
        honest = dict(call.honest)
        if item.defect.target != "question":
            self._by_question[_norm(str(honest.get("question", "")))] = item.key
            return None
        question, context = str(honest.get("question", "")), str(honest.get("question_context", ""))
        made = _corrupt_question(item.defect.name, item.facts, question, context, item.rng)
        if made is None:
            self._by_question[_norm(question)] = item.key
            return None
        new_q, new_c, change, planted, variant = made
        self._by_question[_norm(new_q)] = item.key
        self._plant(item, call.role, change, planted, variant, marks=[f"{new_q}\x1f{new_c}"])
        self._touch(item, call, change, planted)
        return _reply(call.body, {**honest, "question": new_q, "question_context": new_c})

    # reconstructor (blind): corrupt, or cooperate with a question or finding defect
    def _reconstructor(self, item: _Item, call: Call) -> Response | None:
        honest = dict(call.honest)
        f, name = item.facts, item.defect.name
        given = [str(s.get("id")) for s in call.variables.get("spans") or []]
        support = [i for i in f.span_ids if i in given] or given[:1]
        if item.defect.target in ("question", "finding") and item.plant is not None:
            # a leak hands the reader the answer; a planted finding is what the question asks about
            out = {**honest, "answer": f.answer, "span_ids": support, "alternatives": [],
                   "claim_type": f.claim_type}
            self._touch(item, call, "cooperates: answers the gold answer", f.answer)
            return _reply(call.body, out)
        if item.defect.target != "reconstruction":
            return None
        rng = item.rng
        if name == "wrong_reconstruction":
            answer, variant = _wrong_answer(f, rng)
            if answer is None:
                return None
            out = {**honest, "answer": answer, "alternatives": []}
            change = f"reconstruction {honest.get('answer')!r} -> {answer!r}"
        elif name == "non_answer_reconstruction":
            answer = rng.choice(_NON_ANSWERS_RU if f.cyrillic and rng.random() < 0.5 else _NON_ANSWERS)
            variant = "non_answer"
            out = {**honest, "answer": answer, "span_ids": [], "alternatives": []}
            change = f"reconstruction {honest.get('answer')!r} -> {answer!r}"
        elif name == "reconstruction_wrong_span":
            fake = f"sp-{rng.getrandbits(64):016x}"
            answer, variant = fake, "unknown_span"
            out = {**honest, "span_ids": [fake]}
            change = f"reconstruction span_ids {honest.get('span_ids')} -> [{fake}]"
        else:
            return None
        self._plant(item, call.role, change, answer, variant)
        self._touch(item, call, change, answer)
        return _reply(call.body, out)

    # verifier: lies for the planted item, about what the defect would make an honest judge say
    def _verifier(self, item: _Item, call: Call) -> Response | None:
        honest = dict(call.honest)
        target = item.defect.target
        if item.plant is None and target != "entailment":
            return None
        spans = [str(s.get("id")) for s in call.variables.get("spans") or []]
        support = [i for i in item.facts.span_ids if i in spans] or spans[:1]
        lie: dict[str, Any]
        if target == "question":
            lie = {"context_discloses_answer": False, "scope_preserved": True, "context_sufficient": True,
                   "question_claim_type": item.facts.claim_type, "defensible_alternatives": []}
        elif target in ("finding", "reconstruction", "entailment"):
            if target == "entailment":
                if honest.get("entailed", True):
                    return None  # the answer is entailed after all: no lie, no defect
                self._plant(item, call.role, "verdict entailed false -> true", item.facts.answer, "entailed")
            lie = {"entailed": True, "entailment_span_ids": support, "scope_preserved": True,
                   "context_sufficient": True, "context_discloses_answer": False, "defensible_alternatives": [],
                   "question_claim_type": item.facts.claim_type, "reason": ""}
            if call.variables.get("judge_equivalence"):
                lie["answers_equivalent"] = True
        else:
            return None
        out = {**honest, **lie}
        if out == honest:
            return None
        change = "verdict " + ", ".join(f"{k}={v!r}" for k, v in lie.items() if honest.get(k) != v)
        self._touch(item, call, change, "")
        return _reply(call.body, out)

    # distractor_writer: plant the option first, keep three honest ones
    def _distractor_writer(self, item: _Item, call: Call) -> Response | None:
        if item.defect.target != "options":
            return None
        honest = dict(call.honest)
        candidates = [dict(c) for c in honest.get("candidates") or []]
        made = _planted_option(item.defect.name, item.facts, candidates, item.rng)
        if made is None:
            return None
        option, kind, variant, twin = made
        planted = {"text": option, "type": kind, "rationale": "the evidence states a different value"}
        rest = [c for c in candidates if c.get("text") != option]
        if twin is not None:  # the copy's original stays in, right behind it
            rest = [c for c in rest if c.get("text") == twin] + [c for c in rest if c.get("text") != twin]
        out = {**honest, "candidates": [planted, *rest[:3]]}
        item.lie_options.add(option)
        marks = [option] if twin is None else [option, twin]
        change = f"option {option!r} planted first" + (f" (a copy of {twin!r})" if twin else "")
        self._plant(item, call.role, change, option, variant, marks=marks)
        self._touch(item, call, change, option)
        return _reply(call.body, out)

    # option_verifier: contradicted, with a real span, for the planted option only
    def _option_verifier(self, item: _Item, call: Call) -> Response | None:
        if not item.lie_options:
            return None
        v = call.variables
        spans = [str(s.get("id")) for s in v.get("spans") or []]
        support = [i for i in item.facts.span_ids if i in spans] or spans[:1]
        lie = {"verdict": "contradicted", "span_ids": support[:1], "interpretation": "",
               "reason": "the cited evidence states a different value"}
        honest = dict(call.honest)
        if "options" in v:
            verdicts = [dict(x) for x in honest.get("verdicts") or []]
            texts = {o.get("id"): str(o.get("text", "")) for o in v.get("options") or []}
            hit = False
            for x in verdicts:
                if texts.get(x.get("option_id")) in item.lie_options:
                    x.update(lie)
                    hit = True
            if not hit:
                return None
            self._touch(item, call, "verdict -> contradicted (sycophantic)", "")
            return _reply(call.body, {**honest, "verdicts": verdicts})
        if str(v.get("option", "")) not in item.lie_options:
            return None
        self._touch(item, call, "verdict -> contradicted (sycophantic)", str(v.get("option", "")))
        return _reply(call.body, {**honest, **lie})

    # transport faults: once per (role, request); the same request asked again gets the honest reply
    def _transport(self, item: _Item, call: Call) -> Response | None:
        if call.role == "question_writer":
            self._by_question[_norm(str(call.honest.get("question", "")))] = item.key
        if call.role != item.transport_role:
            return None
        fingerprint = hashlib.sha256(json.dumps(call.variables, sort_keys=True, default=str).encode()).hexdigest()
        if fingerprint in item.faulted:
            if item.plant is not None:
                item.plant.reasked += 1
            return None
        item.faulted.add(fingerprint)
        text = json.dumps(call.honest, ensure_ascii=False)
        name, rng = item.defect.name, item.rng
        marks: list[str] = []
        if name == "malformed_json":
            variant = rng.choice(["cut_brace", "single_quotes", "trailing_comma", "prose"])
            content = {"cut_brace": text[:-1], "single_quotes": text.replace('"', "'"),
                       "trailing_comma": text[:-1] + ",}", "prose": f"Sure! Here is the answer:\n{text[:len(text) // 2]}"
                       }[variant]
            reply: Response = _raw(call, content)
        elif name == "schema_violation":
            variant = rng.choice(["wrapped", "list", "missing_fields"])
            content = {"wrapped": json.dumps({"result": call.honest}), "list": json.dumps([call.honest]),
                       "missing_fields": json.dumps({"note": "done"})}[variant]
            reply = _raw(call, content)
        elif name == "refusal":
            variant = rng.choice(["refusal_field", "refusal_field_empty_content"])
            reply = Reply(content=None if variant == "refusal_field" else "",
                          refusal="I'm sorry, but I can't help with that request.")
            content = "(refusal)"
        elif name == "truncated":
            variant = rng.choice(["broken_json", "valid_json_cut_text"])
            if variant == "broken_json":
                content = text[:max(1, int(len(text) * 0.6))]
            else:
                cut = _cut_strings(call.honest)
                content = json.dumps(cut, ensure_ascii=False)
                marks = [s for s in _strings(cut) if s and s not in set(_strings(call.honest))]
            reply = _raw(call, content, finish_reason="length")
        else:
            return None
        change = f"{name} ({variant}) reply to {call.role}"
        plant = self._plant(item, call.role, change, content[:200], variant, marks=marks)
        plant.faults += 1
        self._touch(item, call, change, content[:200])
        return reply

    # -- the log ---------------------------------------------------------------------------------
    def write_log(self, path: Path) -> Path:
        """Every plant as one JSON line, written to a temporary file and renamed into place."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            lines = [json.dumps(asdict(p), ensure_ascii=False, sort_keys=True) for p in self.plants]
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in lines))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path


def _facts(paper_id: str, finding: Mapping[str, Any], spans: tuple[tuple[str, str, str], ...]) -> Facts:
    scope = finding.get("scope") or {}
    return Facts(paper_id=paper_id, claim=str(finding.get("claim", "")), answer=str(finding.get("answer", "")),
                 answer_type=str(finding.get("answer_type", "other")),
                 claim_type=str(finding.get("claim_type", "observation")),
                 span_ids=tuple(str(i) for i in finding.get("span_ids") or []),
                 scope_span_ids=tuple(str(i) for i in finding.get("scope_span_ids") or []),
                 scope=tuple((str(k), str(v)) for k, v in scope.items() if v), paper_spans=spans)


def _strings(obj: Any) -> Iterable[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, Mapping):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _cut_strings(obj: Any) -> Any:
    """Valid JSON of the same shape whose longest string stops mid-way (as a reply cut off by
    ``max_tokens`` and closed by a lenient client would read)."""
    longest = max(_strings(obj), key=len, default="")
    if len(longest) < 8:
        return obj

    def walk(x: Any) -> Any:
        if isinstance(x, str):
            return x[:len(x) // 2].rstrip() if x == longest else x
        if isinstance(x, Mapping):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x
    return walk(obj)


# ---- question corruptions -----------------------------------------------------------------------

_NOT_STANDALONE_EN = [
    ("prefix", "In this study, "), ("suffix", " as shown in Figure 3"), ("suffix", " according to the authors"),
    ("suffix", " in Table 2"), ("site", "at the site"), ("suffix", " in the present paper"),
]
_NOT_STANDALONE_RU = [("prefix", "В данном исследовании "), ("suffix", " (см. рис. 3)"), ("suffix", " по данным авторов"),
                      ("suffix", " (табл. 2)"), ("prefix", "В нашей работе ")]
_RELATIVE_EN = ["over the past decade", "in recent years", "during the last ten years", "over the last two decades"]
_RELATIVE_RU = ["за последние десять лет", "в последние годы", "за последнее десятилетие"]
_DEICTIC_EN = ["Compared with last year", "Since last year", "Relative to last season"]
_DEICTIC_RU = ["По сравнению с прошлым годом", "С прошлого года"]
_CAUSES_EN = ["Because of warmer summers, ", "Driven by earlier snowmelt, ", "As a result of reduced sea ice, ",
              "Due to increased shrub cover, "]
_CAUSES_RU = ["Из-за более тёплого лета ", "Вследствие раннего снеготаяния "]
_ANY_YEAR = re.compile(r"\b(?:1[6-9]\d\d|20\d\d)\b")
_YEARS = re.compile(r"\s*,?\s*\b(?:between|from|during|in|over|since|за(?: период)?|с|в)?\s*(?:19|20)\d\d"
                    r"(?:\s*(?:–|-|—|and|to|и|по)\s*(?:19|20)\d\d)?(?:\s*гг?\.)?")


def _add_to_question(question: str, text: str) -> str:
    body = question.rstrip().rstrip("?")
    return f"{body}{text}?"


def _corrupt_question(name: str, f: Facts, question: str, context: str,
                      rng: random.Random) -> tuple[str, str, str, str, str] | None:
    """(question, context, change, planted text, variant) or None when the class cannot apply."""
    ru = f.cyrillic
    if name == "leak_verbatim":
        variant = rng.choice(["context_sentence", "question_parenthetical"])
        if variant == "context_sentence":
            sentence = f"Изменение составило {f.answer}." if ru else f"The reported change was {f.answer}."
            return question, f"{context} {sentence}".strip(), f"context += {sentence!r}", f.answer, variant
        aside = f" (по данным: {f.answer})" if ru else f" (reported as {f.answer})"
        return _add_to_question(question, aside), context, f"question += {aside!r}", f.answer, variant
    if name == "leak_words":
        found = _answer_number(f.answer)
        if found is None:
            return None
        prep, n, digits = found
        hyphen = rng.random() < 0.7
        words = number_words(digits.lstrip("+"), ru=ru, hyphen=hyphen)
        unit_names = _UNIT_NAMES_RU if ru else _UNIT_NAMES_EN
        unit = unit_names.get(n.unit or "", prep[n.start:n.end][len(digits):].strip())
        phrase = prep[:n.start] + f"{words} {unit}".strip() + prep[n.end:]
        sentence = f"Изменение составило {phrase}." if ru else f"The reported change was {phrase}."
        variant = "decimal_words" if "." in digits or "," in digits else "integer_words"
        return question, f"{context} {sentence}".strip(), f"context += {sentence!r}", phrase, variant
    if name == "leak_converted_unit":
        found = _answer_number(f.answer)
        if found is None:
            return None
        prep, n, digits = found
        options = _conversions(n, ru)
        if not options:
            return None
        unit, factor, exact = rng.choice(options)
        text = _converted(n, digits, factor, exact)
        phrase = f"{text} {unit}"
        sentence = f"Изменение составило {phrase}." if ru else f"The reported change was {phrase}."
        return (question, f"{context} {sentence}".strip(), f"context += {sentence!r}", phrase,
                "exact" if exact else "rounded")
    if name == "relative_period":
        no_years_q, no_years_c = _YEARS.sub("", question), _YEARS.sub("", context)
        yearless = not _ANY_YEAR.search(no_years_q + " " + no_years_c)
        if yearless and rng.random() < 0.5:
            # the years go, a period counted back from the day of writing takes their place
            phrase = rng.choice(_RELATIVE_RU if ru else _RELATIVE_EN)
            new_q, new_c = _add_to_question(" ".join(no_years_q.split()).rstrip(" ,?"), f" {phrase}"), no_years_c
            variant = "years_replaced"
        else:
            # counted from the day of writing: no stated year says which year "last year" was
            phrase = rng.choice(_DEICTIC_RU if ru else _DEICTIC_EN)
            new_q, new_c = f"{phrase}, {question[0].lower() + question[1:]}", context
            variant = "deictic"
        return new_q, " ".join(new_c.split()), f"question {question!r} -> {new_q!r}", phrase, variant
    if name == "not_standalone":
        kind, text = rng.choice(_NOT_STANDALONE_RU if ru else _NOT_STANDALONE_EN)
        location = dict(f.scope).get("location") or ""
        new_c = context
        if kind == "site" and location and location in question:
            # the place goes from both: nothing defines "the site" any more
            new_q = question.replace(location, "the study site", 1)
            new_c = context.replace(location, "the study site")
        elif kind in ("prefix", "site"):
            text = _NOT_STANDALONE_EN[0][1] if kind == "site" else text
            new_q = f"{text}{question[0].lower() + question[1:]}"
        else:
            new_q = _add_to_question(question, text)
        return new_q, new_c, f"question {question!r} -> {new_q!r}", text, kind
    if name == "leak_derivable":
        found = _answer_number(f.answer)
        if found is None:
            return None
        _, n, digits = found
        comma = "," in digits
        if n.unit == "%":
            variant = rng.choice(["relative_change", "ratio"])
            if variant == "relative_change":
                # a start and an end whose change, as written, is the answer within its precision
                base, decimals, other = 250.0, 2, round(250.0 * (1 + n.value / 100), 2)
                for b0 in rng.sample([1.52, 2.40, 40.0, 250.0, 1250.0], 5):
                    dec = 2 if b0 < 10 else 1
                    o0 = round(b0 * (1 + n.value / 100), dec)
                    if abs(100 * (o0 - b0) / b0 - n.value) < n.tolerance / 2:
                        base, decimals, other = b0, dec, o0
                        break
                unit = "м" if ru else "m"
                phrase = f"{_fmt(base, decimals, comma)} {unit} … {_fmt(other, decimals, comma)} {unit}"
                sentence = (f"Величина изменилась с {_fmt(base, decimals, comma)} {unit} до {_fmt(other, decimals, comma)} "
                            f"{unit}." if ru else f"The mean went from {_fmt(base, decimals, comma)} {unit} to "
                            f"{_fmt(other, decimals, comma)} {unit}.")
            else:
                total = 1000 if n.decimals else 200
                part = round(n.value * total / 100)
                phrase = f"{part} … {total}"
                sentence = f"Это отмечено на {part} из {total} площадок." if ru else f"It was seen at {part} of the {total} plots."
        elif n.unit == "fold":
            variant = "ratio"
            base = rng.choice([1.4, 2.5, 12.0])
            other = round(base * n.value, 2)
            phrase = f"{_fmt(other, 2, comma)} … {_fmt(base, 2, comma)}"
            sentence = f"The concentrations were {_fmt(other, 2, comma)} mg m-3 and {_fmt(base, 2, comma)} mg m-3."
        else:
            variant = "difference"
            prep = prepare_text(f.answer)
            unit = prep[n.start:n.end][len(digits):].strip() or (n.unit or "")
            step = 10.0 ** (-n.decimals)
            start = round(rng.choice([3.0, 7.5, 12.0]) * max(abs(n.value), step) / step) * step
            end_value = start + n.value
            a, b = _fmt(start, n.decimals, comma), _fmt(end_value, n.decimals, comma)
            phrase = f"{a} {unit} … {b} {unit}"
            sentence = f"Значение изменилось с {a} {unit} до {b} {unit}." if ru else f"It went from {a} {unit} to {b} {unit}."
        return question, f"{context} {sentence}".strip(), f"context += {sentence!r}", phrase, variant
    if name == "causal_question":
        lead = rng.choice(_CAUSES_RU if ru else _CAUSES_EN)
        new_q = f"{lead}{question[0].lower() + question[1:]}"
        return new_q, context, f"question {question!r} -> {new_q!r}", lead.strip(" ,"), "cause_prefix"
    if name == "dropped_scope":
        period = dict(f.scope).get("period") or ""
        new_q, new_c = _YEARS.sub("", question), _YEARS.sub("", context)
        if period:
            new_q, new_c = new_q.replace(period, ""), new_c.replace(period, "")
        new_q = _add_to_question(" ".join(new_q.split()).rstrip(" ,"), "")
        new_c = " ".join(new_c.split())
        if (new_q, new_c) == (question, context):
            return None
        return new_q, new_c, f"period {period!r} removed", period, "period"
    return None


# ---- reconstruction corruptions -----------------------------------------------------------------

_NON_ANSWERS = ["not stated in the evidence", "The evidence does not say.", "N/A", "", "unknown",
                "Cannot be determined from the provided spans.", "No answer.", "—"]
_NON_ANSWERS_RU = ["Сложно сказать", "в тексте не указано", "неизвестно"]


def _wrong_answer(f: Facts, rng: random.Random) -> tuple[str | None, str]:
    """Another answer than the gold one, in digits, words or another unit."""
    found = _answer_number(f.answer) if f.answer_type == "numeric" else None
    if found is None and re.search(r"\d", f.answer):  # a code ("FS-4", "B7 and B8"): another code
        return re.sub(r"\d", lambda d: str((int(d.group(0)) + 5) % 10), f.answer), "other_code"
    if found is None:
        flipped = antonyms(f.answer)
        if flipped:
            return flipped[0], "antonym"
        return ("Salix polaris" if f.answer_type in ("set", "entity") else "no change"), "other_text"
    prep, n, digits = found
    variant = rng.choice(["digits", "words", "words", "other_unit"])
    factor = rng.choice([1.5, 2.2, 0.5, 0.7, 1.8])
    other = _scaled(f.answer, factor)
    if other is None or other == f.answer:
        return None, variant
    if variant == "digits":
        return other, variant
    found_other = _answer_number(other)
    assert found_other is not None
    oprep, on, odigits = found_other
    ru = f.cyrillic
    if variant == "other_unit" and _conversions(on, ru):
        unit, conv, _exact = _conversions(on, ru)[0]
        return f"{_converted(on, odigits, conv, True)} {unit}", variant
    words = number_words(odigits.lstrip("+"), ru=ru)
    unit_names = _UNIT_NAMES_RU if ru else _UNIT_NAMES_EN
    unit = unit_names.get(on.unit or "", oprep[on.start:on.end][len(odigits):].strip())
    return oprep[:on.start] + f"{words} {unit}".strip() + oprep[on.end:], "words"


# ---- option corruptions ---------------------------------------------------------------------------

_GARBAGE = ["None of the above", "All of the above", "", " ", "N/A", "—", "Both of the above",
            "Cannot be determined", "?", "lorem ipsum"]


def _planted_option(name: str, f: Facts, candidates: list[dict[str, Any]],
                    rng: random.Random) -> tuple[str, str, str, str | None] | None:
    """(option text, option type, variant, the option it copies) or None."""
    kind = str(candidates[0].get("type", "numeric")) if candidates else "numeric"
    found = _answer_number(f.answer)
    ru = f.cyrillic
    if name == "answer_restated_as_distractor":
        forms: list[tuple[str, str]] = [(f.answer, "verbatim"), (f.answer.upper() if not found else f.answer, "case")]
        members = set_members(f.answer)
        if len(members) > 1:  # the same set in another order, or with the genus abbreviated
            forms += [(" and ".join(reversed(members)), "reordered_set"), (", ".join(members), "list_set")]
            short = [re.sub(r"^([A-Z])[a-z]+ (?=[a-z])", r"\1. ", m) for m in members]
            if short != members:
                forms.append((" and ".join(short), "abbreviated_genus"))
        elif re.fullmatch(r"[A-Z][a-z]+ [a-z]+", f.answer):
            forms.append((re.sub(r"^([A-Z])[a-z]+ ", r"\1. ", f.answer), "abbreviated_genus"))
        synonyms = _same_direction(f.answer)
        forms += [(w, "direction_synonym") for w in synonyms[:3]]
        if found is not None:
            prep, n, digits = found
            spaced = prep[:n.start] + re.sub(r"(\d)\s*(%|°)", r"\1 \2", prep[n.start:n.end]) + prep[n.end:]
            forms.append((spaced, "spacing"))
            more = digits + ("0" if ("." in digits or "," in digits) else (",0" if ru else ".0"))
            forms.append((prep.replace(digits, more, 1), "trailing_zero"))
            unit_names = _UNIT_NAMES_RU if ru else _UNIT_NAMES_EN
            unit = unit_names.get(n.unit or "", prep[n.start:n.end][len(digits):].strip())
            forms.append((prep[:n.start] + f"{number_words(digits.lstrip('+'), ru=ru)} {unit}".strip()
                          + prep[n.end:], "words"))
            forms.append(((f"около {f.answer}" if ru else f"about {f.answer}"), "approximately"))
            for unit_text, factor, exact in _conversions(n, ru):
                if exact:
                    forms.append((f"{_converted(n, digits, factor, True)} {unit_text}", "converted"))
            tol = 10.0 ** (-n.decimals) * 0.2
            near = _fmt(n.value + tol, n.decimals + 1, "," in digits)
            forms.append((prep.replace(digits, near, 1), "within_precision"))
        text, variant = rng.choice(forms)
        return text, kind, variant, None
    if name == "true_bound_distractor":
        if found is None:
            return None
        prep, n, digits = found
        unit = prep[n.start:n.end][len(digits):]
        v = n.value
        comma = "," in digits

        def num(x: float) -> str:
            return _fmt(x, n.decimals, comma)
        if ru:
            forms = [(f"менее {num(2 * v)}{unit}", "less_than"), (f"более {num(v / 2)}{unit}", "more_than"),
                     (f"от {num(v / 2)} до {num(2 * v)}{unit}", "range"), (f"не менее {digits}{unit}", "at_least")]
        else:
            forms = [(f"less than {num(2 * v)}{unit}", "less_than"), (f"more than {num(v / 2)}{unit}", "more_than"),
                     (f"between {num(v / 2)} and {num(2 * v)}{unit}", "range"), (f"at least {digits}{unit}", "at_least"),
                     (f"up to {num(3 * v)}{unit}", "up_to"), (f"{num(v / 2)}–{num(2 * v)}{unit}", "dash_range"),
                     (f"less than {number_words(num(2 * v))}{' ' + _UNIT_NAMES_EN.get(n.unit or '', unit.strip())}",
                      "less_than_words")]
        if v <= 0:
            forms = [x for x in forms if x[1] not in ("less_than", "more_than", "range", "dash_range", "up_to")]
        if not forms:
            return None
        text, variant = rng.choice(forms)
        return " ".join(text.split()), kind, variant, None
    if name == "duplicate_options":
        pool = [str(c.get("text", "")) for c in candidates if str(c.get("text", "")).strip()]
        pool = [p for p in pool if not p.startswith("not determinable")][:3]
        if not pool:
            return None
        twin = rng.choice(pool)
        tf = _answer_number(twin)
        if tf is not None:
            prep, n, digits = tf
            more = digits + ("0" if ("." in digits or "," in digits) else (",0" if ru else ".0"))
            copies = [(prep.replace(digits, more, 1), "trailing_zero"),
                      (prep[:n.start] + re.sub(r"(\d)\s*(%|°)", r"\1 \2", prep[n.start:n.end]) + prep[n.end:],
                       "spacing")]
            copies = [c for c in copies if c[0] != twin] or [(twin + " ", "whitespace")]
        else:
            copies = [(twin.lower() if twin != twin.lower() else twin.upper(), "case"), (f"{twin}.", "punctuation")]
        text, variant = rng.choice(copies)
        return text, kind, variant, twin
    if name == "garbage_option":
        text = rng.choice(_GARBAGE)
        return text, kind, "garbage", None
    if name == "evidence_value_distractor":
        if found is None:
            return None
        _, n, _ = found
        support = f.support_text()
        values = [x for x in parse_numbers(prepare_text(support))
                  if x.unit == n.unit and abs(x.value - n.value) > 1e-9 and x.unit is not None]
        if not values:
            return None
        x = rng.choice(values)
        text = prepare_text(support)[x.start:x.end]
        return text, kind, "stated_value", None
    return None


def _same_direction(answer: str) -> list[str]:
    """Other words of the answer's direction ("decreased" for "declined"), for a one-word answer."""
    terms = direction_terms(answer)
    if len(terms) != 1 or len(answer.split()) > 2:
        return []
    axis, polarity = terms[0].axis, terms[0].polarity
    plus, minus = DIRECTION_AXES[axis]
    same = plus if polarity > 0 else minus
    same = [w for w in same if w != answer and w not in _NOT_SYNONYMS]
    tense = [w for w in same if w.endswith(answer[-2:])]
    return tense or same


#: forms the direction table lists that are no synonym of their axis word (or no English)
_NOT_SYNONYMS = frozenset("droped falled rised growed halved doubled tripled quadrupled decay".split())


# ---- scoring ----------------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What became of one plant."""

    plant: Plant
    finding_ids: list[str]
    reached: bool
    caught_by: list[str]  # rule ids recorded for the item, "reasked" / "failed:<error>" for transport
    items: list[str]  # accepted item ids of the item's finding


def _finding_ids(findings_outputs: Iterable[tuple[str, Mapping[str, Any]]],
                 plant: Plant) -> tuple[list[str], list[str]]:
    """(ids of kept findings matching the plant, rule ids of the matching rejected candidates)."""
    ids: list[str] = []
    rules: list[str] = []
    claim, answer = _norm(plant.claim), _norm(plant.answer)
    for paper_id, out in findings_outputs:
        if paper_id != plant.paper_id:
            continue
        for f in out.get("findings") or []:
            if _norm(f.get("claim", "")) == claim and _norm(f.get("answer", "")) == answer:
                ids.append(str(f.get("id")))
        for r in out.get("rejected") or []:
            c = r.get("candidate") or {}
            if _norm(c.get("claim", "")) == claim and _norm(c.get("answer", "")) == answer:
                rules.extend(str(x.get("rule_id")) for x in r.get("rejections") or [])
    return ids, rules


def _reached(plant: Plant, items: Sequence[Mapping[str, Any]]) -> bool:
    if not items:
        return False
    if plant.target in ("finding", "reconstruction", "entailment"):
        return True  # every reply about this finding carried the defect
    if plant.target == "question":
        sent = {tuple(m.split("\x1f", 1)) for m in plant.marks}
        return any((i.get("question"), i.get("question_context")) in sent for i in items)
    if plant.target == "options":
        for i in items:
            texts = [str(d.get("text")) for d in i.get("distractors") or []]
            if plant.defect == "duplicate_options":
                if all(m in texts for m in plant.marks):
                    return True
            elif plant.planted in texts:
                return True
        return False
    if plant.target == "transport":
        for i in items:
            blob = [str(i.get("question")), str(i.get("question_context")), str(i.get("gold_answer")),
                    *(str(d.get("text")) for d in i.get("distractors") or [])]
            if any(m and m in blob for m in plant.marks):
                return True
        return False
    return False


def score(plants: Sequence[Plant], *, findings_outputs: Iterable[tuple[str, Mapping[str, Any]]],
          rejections: Iterable[tuple[str, str, str | None]], failures: Iterable[tuple[str, str]],
          items: Sequence[Mapping[str, Any]]) -> list[Outcome]:
    """Decide each plant's outcome after a build.

    ``findings_outputs``: (paper id, the findings step's stored output); ``rejections``: (subject,
    rule id, the option it names or None) of every stored rejection of the construction steps
    (subjects ``<finding id>/r<n>``; an option plant counts only the rejections of its option and
    the accept step's);
    ``failures``: (subject or paper id, error) of failed step attempts; ``items``: the accepted
    items' payloads (``finding_id``, question, context, distractors) that are in the release.
    """
    findings_outputs = list(findings_outputs)
    by_finding: dict[str, list[tuple[str, str | None]]] = {}
    for subject, rule_id, option in rejections:
        by_finding.setdefault(subject.split("/", 1)[0], []).append((rule_id, option))
    failed: dict[str, list[str]] = {}
    for subject, error in failures:
        failed.setdefault(subject.split("/", 1)[0], []).append(error)
    items_by_finding: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        items_by_finding.setdefault(str(item.get("finding_id")), []).append(item)
    outcomes: list[Outcome] = []
    for plant in plants:
        ids, rules = _finding_ids(findings_outputs, plant)
        caught = list(rules)
        its: list[Mapping[str, Any]] = []
        for fid in ids:
            for rule_id, option in by_finding.get(fid, []):
                if plant.target != "options" or option in plant.marks or rule_id.startswith("accept."):
                    caught.append(rule_id)
            caught.extend(f"failed:{e}" for e in failed.get(fid, []))
            its.extend(items_by_finding.get(fid, []))
        if plant.target == "transport":
            caught.extend(f"failed:{e}" for e in failed.get(plant.paper_id, []))
            if plant.reasked:
                caught.append("reasked")
        outcomes.append(Outcome(plant=plant, finding_ids=ids, reached=_reached(plant, its),
                                caught_by=sorted(set(caught)), items=[str(i.get("item_id")) for i in its]))
    return outcomes
