"""Question gates: answer leak, standalone phrasing, dropped scope and length bounds.

These run on the question writer's validated output before any other model sees it, and again
in ``validate-release --recheck`` on published items (no source text needed).
"""

from __future__ import annotations

import re

from arcticqa.gates.direction import direction_terms
from arcticqa.gates.numbers import Number, parse_numbers, prepare_text, restates, same_value
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.gates.text import (
    contains_phrase,
    content_words,
    normalize,
    normalize_loose,
    parenthetical_parts,
    split_sentences,
    strip_parenthetical,
    words,
)
from arcticqa.rules import Rejection, rule

__all__ = [
    "ANSWER_LEAK",
    "ANSWER_DERIVABLE",
    "UNSUPPORTED_CAUSE",
    "unsupported_cause",
    "NOT_STANDALONE",
    "RELATIVE_PERIOD",
    "DEMONSTRATIVE",
    "UNNUMBERED_POINTER",
    "UNDEFINED_REFERENT",
    "PAPER_LABEL",
    "STANDARD_ACRONYMS",
    "answer_derivable",
    "SCOPE_DROPPED",
    "LENGTH",
    "answer_leak",
    "not_standalone",
    "scope_dropped",
    "length_bounds",
    "phrase_covered",
    "answer_variants",
]

ANSWER_LEAK = rule("question.answer_leak",
                   "the answer, one of its numbers or a variant appears in the question or context")
NOT_STANDALONE = rule("question.not_standalone",
                      "the question refers to the source document or to an undefined referent")
SCOPE_DROPPED = rule("question.scope_dropped",
                     "a scope value the finding needs is missing from the question and context")
LENGTH = rule("question.length", "the question or its context is outside the length bounds")
RELATIVE_PERIOD = rule("question.relative_period",
                       "the question dates itself relative to the paper ('over the past 20 years') "
                       "without stating the years, or to the day of writing ('compared with last year')")
DEMONSTRATIVE = rule("question.demonstrative",
                     "'this'/'these' points at a place or study object nothing in the question or "
                     "context names")
UNNUMBERED_POINTER = rule("question.unnumbered_pointer",
                          "the question points into the paper without a number ('the fourth column', "
                          "'the supplementary material')")
UNDEFINED_REFERENT = rule("question.undefined_referent",
                          "a definite description ('the combined expeditions') that nothing in the "
                          "question or context introduces")
PAPER_LABEL = rule("question.paper_label",
                   "a label that exists only inside the paper (a run name, an undefined acronym)")
ANSWER_DERIVABLE = rule("question.answer_derivable",
                        "the answer follows by arithmetic from numbers the question or context gives")
UNSUPPORTED_CAUSE = rule("question.unsupported_cause",
                         "the question asserts or asks for a cause that neither the finding nor its cited "
                         "evidence states")


def answer_variants(answer: str) -> list[str]:
    """Textual forms of the answer a reader would recognise: whole, without and inside brackets."""
    variants = [answer, strip_parenthetical(answer), *parenthetical_parts(answer)]
    out: list[str] = []
    for v in variants:
        v = v.strip(" .;,")
        # short fragments ("C", "N", "2") match everywhere; numbers are checked separately
        if len(normalize_loose(v)) >= 3 and not re.fullmatch(r"[\d\s.,%‰°+\-~]+", v) and v not in out:
            out.append(v)
    return out


def answer_leak(question: str, context: str, answer: str) -> Rejection | None:
    """``question.answer_leak`` when the answer shows through the question or its context.

    Checked: the answer text and its bracket variants as whole words (a direction answer named
    alongside its antonym, "increase or decrease", is a choice, not a leak), and every number of
    the answer, compared by value after unit conversion ("0.5 m" leaks through "50 cm", "8.4 Gg"
    through "8400 tonnes", a "0,6 °C" rise through "0.6 K") and with numbers written in words
    read as digits ("eight percentage points", "восемь процентов"); a value in another unit
    counts when it is given at least as finely as the answer and rounds to it ("1.6 weeks" for 11
    days, "37.3 miles" for 60 km, "1.98 °F" for a 1.1 °C rise: :func:`~arcticqa.gates.numbers.restates`).
    """
    for where, text in (("question", question), ("question_context", context)):
        if not text:
            continue
        for variant in answer_variants(answer):
            if not contains_phrase(text, variant):
                continue
            terms = direction_terms(variant)
            if terms and len(words(variant)) <= 2:
                opposite = {(t.axis, -t.polarity) for t in terms}
                if any((t.axis, t.polarity) in opposite for t in direction_terms(text)):
                    continue
            return ANSWER_LEAK.reject(f"the answer {variant!r} appears in the {where}",
                                      field=where, variant=variant)
        answer_numbers = parse_numbers(spelled_as_digits(answer))
        # the text as written, then with its number words read as digits ("eight percentage points")
        for form in dict.fromkeys((text, spelled_as_digits(text))):
            for number in answer_numbers:
                if len(answer_numbers) > 1 and _is_year(number):
                    continue  # "1 September 2020" asked "in 2020": the year frames, the date answers
                for other in parse_numbers(form):
                    if restates(number, other):
                        return ANSWER_LEAK.reject(
                            f"the answer's number {number.value:g} appears in the {where}",
                            field=where, number=number.value, found=prepare_text(form)[other.start:other.end])
    return answer_derivable(question, context, answer)


def _quantities(text: str) -> list[Number]:
    """The numbers of ``text`` that are quantities (not years, dates or coordinates)."""
    return [n for n in parse_numbers(text)
            if not _is_year(n) and n.unit not in ("date", "day of year", "°N", "°S", "°E", "°W")]


def answer_derivable(question: str, context: str, answer: str) -> Rejection | None:
    """``question.answer_derivable`` when a ratio, difference or sum of two numbers the question
    and context give equals the answer within the answer's own precision ("2 out of 72" for
    2.8%). Only a single-number answer is tried: a percentage against ratios and relative changes
    ("from 1.52 m to 1.79 m" for an 18% increase), a fold change against ratios ("6.5 and 2.5
    mg m-3" for 2.6 times), a value with a unit against differences and sums in its unit. Pairs are
    sought among all the numbers of a question and context of at most 12, else within each of their
    sentences (a context listing coordinates still leaks "36 of the 200 plots")."""
    numbers = parse_numbers(answer)
    if len(numbers) != 1 or _is_year(numbers[0]) or numbers[0].unit in ("date", "day of year"):
        return None
    target = numbers[0]
    text = f"{question}\n{context}"
    given = _quantities(text)
    if len(given) < 2:
        return None
    # a paragraph of numbers makes some pair match by chance: then only pairs of one sentence
    groups = [given] if len(given) <= 12 else [g for g in (_quantities(s) for s in split_sentences(text))
                                                if 2 <= len(g) <= 6]
    for group in groups:
        found = _derived(group, target)
        if found is not None:
            how, a, b = found
            return ANSWER_DERIVABLE.reject(
                f"the answer {answer!r} is the {how} of {a.value:g} and {b.value:g} given in the "
                "question or context", how=how, numbers=[a.value, b.value])
    return None


def _derived(given: list[Number], target: Number) -> tuple[str, Number, Number] | None:
    """The first pair of ``given`` (in order) whose ratio, relative change, difference or sum is
    ``target`` within its tolerance: (how, first, second)."""
    percent, fold = target.unit == "%", target.unit == "fold"
    for i, a in enumerate(given):
        for b in given[i + 1:]:
            if a.value == 0 or b.value == 0 or a.value == b.value:
                continue  # "200 m … to 200 m": one quantity said twice, not a ratio
            candidates: list[tuple[str, float]]
            if percent or fold:
                if a.unit in ("%", "fold") or b.unit in ("%", "fold"):
                    continue  # a share of shares is not what "2 out of 72" means
                low, high = sorted((abs(a.value), abs(b.value)))
                if fold:
                    candidates = [("ratio", high / low)] if (a.unit or None) == (b.unit or None) else []
                else:
                    candidates = [("ratio", 100 * low / high)]
                    if (a.unit or None) == (b.unit or None):
                        # from the first stated to the second: "went from 1.52 m to 1.79 m"
                        candidates.append(("relative change", 100 * abs(b.value - a.value) / abs(a.value)))
            elif (a.unit or None) == (b.unit or None) == (target.unit or None):
                candidates = [("difference", abs(a.value - b.value)), ("sum", a.value + b.value)]
            else:
                continue
            for how, value in candidates:
                if value != 0 and abs(value - target.value) < target.tolerance:
                    return how, a, b
    return None


# a cause the question asserts ("Because of warmer summers, …") or asks for ("Why …")
_QUESTION_CAUSE = re.compile(
    r"\b(?:because(?: of)?|due to|owing to|driven by|caused by|as a result of|attribut(?:able|ed) to"
    r"|in response to|thanks to|led to|leading to)\b"
    r"|(?<!\w)(?:из-за|вследствие|благодаря|в результате|обусловлен\w*|вызван\w*|под влиянием|по причине)(?!\w)")
# a question asking for a cause, naming none
_ASKS_CAUSE = re.compile(r"\b(?:why|what (?:caused|drove|drives|causes|explains))\b|(?<!\w)почему(?!\w)")
# causal wording in the finding or its evidence (for a question that asks "why")
_EVIDENCE_CAUSE = re.compile(
    r"\b(?:because|due to|owing to|driven by|drive[sn]?|drove|drivers? of|caused|causes?|causing"
    r"|result(?:ed|s|ing)? (?:in|from)|as a result|led to|leads? to|leading to|attribut\w+ to|in response to"
    r"|respon\w*(?: \w+)? to|explained by|effects? of|influenced by|forced by|triggered by|contribut\w+ to"
    r"|consequences? of|thanks to)\b"
    r"|(?<!\w)(?:из-за|вследстви\w*|благодаря|в результате|обусловл\w*|вызва\w*|под влиянием|причин\w*)(?!\w)")
# where a cause stands beside the phrase that names it as one: after "driven by", "due to", …
_CAUSE_FOLLOWS = re.compile(
    r"\b(?:because of|due to|owing to|driven by|caused by|result(?:ed|s|ing)? from|as a result of|in response to"
    r"|respon\w*(?: \w+)? to|attribut\w+ to|explained by|effects? of|influenced by|forced by|triggered by"
    r"|consequences? of|thanks to)\b"
    r"|(?<!\w)(?:из-за|вследствие|благодаря|в результате|обусловлен\w*|вызван\w*|под влиянием)(?!\w)")
# … and before "caused", "led to", "drove", "resulted in", "contributed to"
_CAUSE_PRECEDES = re.compile(r"\b(?:caused|causes|causing|led to|leads? to|leading to|drove|drives|result(?:ed|s)? in"
                             r"|contribut\w+ to)\b")


def _names_cause(evidence: str, cause: str) -> bool:
    """Whether ``evidence`` names ``cause`` as a cause: its words (as :func:`phrase_covered` reads
    them) within ten words after "driven by" / "due to" / … or before "caused" / "led to" / …"""
    text = normalize(evidence)
    for m in _CAUSE_FOLLOWS.finditer(text):
        if phrase_covered(" ".join(text[m.end():].split()[:10]), cause):
            return True
    return any(phrase_covered(" ".join(text[:m.start()].split()[-10:]), cause)
               for m in _CAUSE_PRECEDES.finditer(text))


_CAUSE_END = re.compile(r"[,;:?]|\s(?:by|how|what|which|when|where|did|does|was|were|на|как|сколько)\s")


def unsupported_cause(question: str, evidence: str, claim_type: str = "observation") -> Rejection | None:
    """``question.unsupported_cause`` when the question names a cause ("Because of warmer summers,
    by what percentage …", "… due to grazing", "Из-за …") that the finding's claim and cited
    evidence do not name as a cause (its words, as :func:`phrase_covered` reads a scope value,
    within ten words after "driven by" / "due to" / … or before "caused" / "led to" / …: "warmer
    summers" elsewhere in the evidence, or "Betula nana was the largest contributor to the shrub
    expansion" for "Due to increased shrub cover, …", is no such statement), or asks for
    one ("Why did …") of a finding that is not causal and whose evidence has no causal wording.
    The context is not read: a setting remark there ("sampling was delayed due to ice") claims
    nothing about the answer."""
    if claim_type == "causal":
        return None
    qnorm = normalize(question)
    m = _QUESTION_CAUSE.search(qnorm)
    if m is not None:
        rest = qnorm[m.end():]
        end = _CAUSE_END.search(rest)
        cause = " ".join(rest[:end.start() if end else len(rest)].split()[:6])
        if not cause or _names_cause(evidence, cause):
            return None  # the evidence names this cause as a cause
        return UNSUPPORTED_CAUSE.reject(f"the question says {m.group(0)} {cause!r}, a cause the finding and its "
                                        "evidence do not state", field="question", phrase=f"{m.group(0)} {cause}")
    m = _ASKS_CAUSE.search(qnorm)
    if m is None or _EVIDENCE_CAUSE.search(normalize(evidence)):
        return None
    return UNSUPPORTED_CAUSE.reject(f"the question asks {m.group(0)!r} of a finding that states no cause",
                                    field="question", phrase=m.group(0))


def _is_year(number: Number) -> bool:
    return number.decimals == 0 and number.unit is None and 1600 <= number.value <= 2100


# Document-relative wording that no context can repair: the reader has no document.
_ALWAYS = [
    (r"\b(?:this|the present|the current|our) (?:study|paper|article|work|manuscript|analysis|research|survey|investigation|review)\b",
     "refers to the source document"),
    (r"\bthe authors?\b", "refers to the authors"),
    (r"\b(?:we|our|us)\b", "speaks as the authors"),
    (r"\b(?:fig(?:ure)?s?\.?|tables?|eqs?\.?|equations?|appendix|supplementa(?:l|ry)(?: material| information)?)\s*(?:s?\d+|[ivx]+\b|[a-z]\d)",
     "points at a figure, table, equation or appendix"),
    (r"\b(?:in|see|of) sections? \d+(?:\.\d+)*\b", "points at a section of the document"),
    (r"\b(?:as )?(?:shown|described|reported|mentioned|discussed) (?:above|below|earlier|previously)\b",
     "points elsewhere in the document"),
    # Russian: "в данном исследовании", "в нашей работе", "авторы", "мы", "рис. 3", "табл. 2"
    (r"(?<!\w)(?:(?:данн|настоящ|наш)\w*|эт(?:от|а|о|ой|ом|ого|ую)) (?:исследовани|работ|стать|публикаци)\w*",
     "refers to the source document"),
    (r"(?<!\w)автор(?:ы|ов|ами|ам|а)?(?!\w)", "refers to the authors"),
    (r"(?<!\w)(?:мы|нами|наш(?:а|е|и|его|ей|ем|их|ими|ему|у)?)(?!\w)", "speaks as the authors"),
    (r"(?<!\w)(?:рис|табл|прил|ур)\.\s*\d|(?<!\w)(?:рисун|таблиц|приложени|уравнени)\w*\s+\d",
     "points at a figure, table, equation or appendix"),
]
# Referents that need a defining context ("the site" is fine once the context names it).
_NEEDS_CONTEXT = [
    (r"\b(?:this|these|that|those|the) (?:(?:study|sampling|research|field|monitoring) )?(?:site|sites|station|stations|location|locations|plot|plots|transect|transects)\b|\bthe study (?:area|region)\b",
     "names a place only as 'the site'"),
    (r"\b(?:this|these|those) (?:samples?|specimens?|cores?|individuals|populations?|otus?|species|isolates?|strains?|experiments?|models?|simulations?)\b",
     "names a sample only as 'these samples'"),
    (r"\bthe (?:identified|sampled|studied|investigated|examined|surveyed|observed) \w+",
     "names a referent only by the study's action"),
]
_PERIOD = re.compile(r"\b(?:during|over|in|throughout|for) (?:the|this) (?:study|sampling|observation|survey|measurement|monitoring|experimental|field) (?:period|season|year|years|campaign)\b"
                     r"|(?<!\w)(?:за|в течение|в|на протяжении) (?:весь |всего )?период\w* (?:наблюдени|исследовани|измерени|мониторинг)\w*")
_YEAR = re.compile(r"\b(?:1[6-9]\d\d|20\d\d)\b")


_RELATIVE_PERIOD = re.compile(
    r"\b(?:over|during|in|within|for|throughout) (?:the )?(?:past|last|previous|preceding|recent)"
    r"(?: (?:few|several|\d+|two|three|four|five|six|seven|eight|nine|ten|twenty|thirty|forty|fifty|hundred))?"
    r" (?:years?|decades?|centur(?:y|ies)|millennia|millennium)\b"
    r"|\b(?:in|during|over) recent (?:years|decades|times|centuries)\b"
    # Russian: "за последние десять лет", "в последние годы", "за последнее десятилетие"
    r"|(?<!\w)(?:за|в|в течение|на протяжении) (?:последн|прошедш)\w*(?: \w+)? (?:год|лет|десятилети|век|столети)\w*")
# a period counted back from the day of writing ("compared with last year", "next winter", "в
# прошлом году"): no year stated beside it says which year that was, so years do not excuse it;
# "the last year of the record" and "the previous year" count from a stated time and pass
_DEICTIC_PERIOD = re.compile(
    r"(?<!\bthe )(?<!\bthat )\b(?:last|next) (?:year|winter|summer|spring|autumn|fall|season|month|decade|century)"
    r"\b(?! of\b)|\bcompared (?:with|to) (?:this|the current) (?:year|season|decade)\b"
    r"|\b(?:прошл|следующ|нынешн|текущ)\w* (?:год|сезон|зим|лет|десятилети)\w*")
#: places and study objects a demonstrative may point at (plural forms are derived)
_STUDY_NOUNS = ("archipelago", "island", "lake", "region", "fjord", "glacier", "basin", "catchment",
                "river", "bay", "valley", "peninsula", "coast", "ice shelf", "ice cap", "watershed",
                "wetland", "pond", "stream", "village", "settlement", "expedition", "cruise",
                "campaign", "dataset", "cohort", "community", "treatment", "estuary", "lagoon",
                "mountain", "plateau", "strait", "inlet", "outlet")


def _plural(noun: str) -> str:
    if noun.endswith("y"):
        return noun[:-1] + "ies"
    return noun + ("es" if noun.endswith(("s", "sh", "ch", "x")) else "s")


_NOUN_FORMS = {form: noun for noun in _STUDY_NOUNS for form in (noun, _plural(noun))}
_NOUN_ALT = "|".join(sorted((re.escape(f) for f in _NOUN_FORMS), key=len, reverse=True))
_DEMONSTRATIVE = re.compile(rf"\b(?:this|these|those) (?:[a-z-]+ )?(?P<noun>{_NOUN_ALT})\b")
_UNNUMBERED_POINTER = re.compile(
    r"\b(?:reported|presented|provided|given|listed) tabular data\b|\btabulated (?:data|values)\b"
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|last|final|rightmost|leftmost) "
    r"(?:column|row|panel)\b"
    r"|\bthe supplement(?:ary|al)? (?:material|information|data|tables?|figures?|files?)\b"
    r"|\b(?:in|from|of|see) the (?:table|figure|map|graph|panel|appendix)\b(?! \d)")
_UNDEFINED_DEFINITE = re.compile(
    rf"\bthe (?:combined|aforementioned|above-mentioned|latter|former|respective|two|three|both) "
    rf"(?P<noun>{_NOUN_ALT})\b"
    rf"|\bbetween the (?P<first>{_NOUN_ALT}) and (?:the )?(?P<second>{_NOUN_ALT})\b")
_LABEL = re.compile(r"(?<![\w-])(?:[a-z]+[A-Z][\w]*|[A-Z][a-z]+[A-Z][\w]*|[A-Z]{2,}[A-Z0-9]*s?)(?![\w])")
_DEFINING = r"(?:refers? to|denotes?|represents?|stands? for|designates?|is|are|means?)"
_ELEMENTS = {"H", "He", "Li", "Be", "B", "C", "N", "O", "F", "Ne", "Na", "Mg", "Al", "Si", "P", "S", "Cl",
             "Ar", "K", "Ca", "Ti", "Cr", "Mn", "Fe", "Co", "Ni", "Cu", "Zn", "As", "Se", "Br", "Sr", "Cd",
             "Sn", "I", "Ba", "Hg", "Pb", "U", "Th", "Ra", "Rn", "Nd", "Mo", "V"}


def _standard_acronyms() -> frozenset[str]:
    from importlib import resources

    text = resources.files("arcticqa.gates").joinpath("standard_acronyms.txt").read_text("utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


#: acronyms a reader resolves without the paper (``arcticqa/gates/standard_acronyms.txt``)
STANDARD_ACRONYMS = _standard_acronyms()


def _is_formula(token: str) -> bool:
    """A chemical formula ("NO3", "SiO2", "THg" reads as T+Hg is not, "CO2" is)."""
    parts = re.findall(r"[A-Z][a-z]?\d*", token)
    return "".join(parts) == token and all(re.sub(r"\d", "", p) in _ELEMENTS for p in parts)


def _initials_of(label: str, text: str) -> bool:
    """Whether consecutive words of ``text`` start with the label's letters ("under-ice" → UI)."""
    letters = re.sub(r"[^A-Za-z]", "", label.rstrip("s") if label.endswith("s") and len(label) > 2 else label)
    if len(letters) < 2:
        return False
    tokens = [t for t in re.split(r"[\s\-/]+", text) if t]
    initials = "".join(t[0].lower() for t in tokens if t[0].isalpha())
    return letters.lower() in initials


def _label_resolved(label: str, question: str, context: str) -> bool:
    bare = label[:-1] if label.endswith("s") and label[:-1] in STANDARD_ACRONYMS | {label[:-1]} and len(label) > 2 else label
    core = re.sub(r"^[a-z]+(?=[A-Z])", "", bare)  # tDOM, iPOC: a prefix on a standard term
    if {label, bare, core} & STANDARD_ACRONYMS or _is_formula(bare):
        return True
    if parse_numbers(f"1 {label}") and parse_numbers(f"1 {label}")[0].unit:
        return True  # a unit (mL, kHz)
    if re.fullmatch(r"[IVXL]+", label):
        return True  # a Roman numeral
    if contains_phrase(context, label) or re.search(rf"\(\s*{re.escape(label)}\b|\b{re.escape(label)}\s*\(",
                                                    question):
        return True  # the context uses it (contexts define their labels) or the question glosses it
    if re.search(rf"\b{re.escape(label)}\s+{_DEFINING}\b", question):
        return True
    return _initials_of(label, f"{question} {context}")


def not_standalone(question: str, context: str) -> Rejection | None:
    """``question.not_standalone`` for document-relative or undefined references.

    Figure/table pointers, "this study", "the authors" and first-person wording fail anywhere;
    "the site", "these samples" fail when there is no context to define them; "during the study
    period" fails unless a year is given in the question or context. The finer rules of the
    standalone screen have their own ids: :data:`RELATIVE_PERIOD`, :data:`DEMONSTRATIVE`,
    :data:`UNNUMBERED_POINTER`, :data:`UNDEFINED_REFERENT` and :data:`PAPER_LABEL`.
    """
    for where, text in (("question", question), ("question_context", context)):
        norm = normalize(text)
        for pattern, why in _ALWAYS:
            m = re.search(pattern, norm)
            if m:
                return NOT_STANDALONE.reject(f"the {where} {why}: {m.group(0)!r}", field=where,
                                             phrase=m.group(0))
    qnorm = normalize(question)
    if not context.strip():
        for pattern, why in _NEEDS_CONTEXT:
            m = re.search(pattern, qnorm)
            if m:
                return NOT_STANDALONE.reject(f"the question {why} ({m.group(0)!r}) and has no context",
                                             field="question", phrase=m.group(0))
    for where, text in (("question", question), ("question_context", context)):
        m = _PERIOD.search(normalize(text))
        if m and not _YEAR.search(question) and not _YEAR.search(context):
            return NOT_STANDALONE.reject(f"the {where} uses a document-relative period {m.group(0)!r} "
                                         "without stating the years", field=where, phrase=m.group(0))
    return _standalone_screen(question, context)


def _mentions(text: str, noun: str) -> bool:
    base = _NOUN_FORMS.get(noun, noun)
    return contains_phrase(text, base) or contains_phrase(text, _plural(base))


def _standalone_screen(question: str, context: str) -> Rejection | None:
    """The rules for what a reader without the paper cannot resolve, each with its own id."""
    qnorm, cnorm = normalize(question), normalize(context)
    has_years = bool(_YEAR.search(question) or _YEAR.search(context))
    for where, norm in (("question", qnorm), ("question_context", cnorm)):
        m = _DEICTIC_PERIOD.search(norm)
        if m:
            return RELATIVE_PERIOD.reject(f"the {where} says {m.group(0)!r}, a period counted from the day of "
                                          "writing that no stated year fixes", field=where, phrase=m.group(0))
        m = _RELATIVE_PERIOD.search(norm)
        if m and not has_years:
            return RELATIVE_PERIOD.reject(f"the {where} says {m.group(0)!r} without stating the years",
                                          field=where, phrase=m.group(0))
        m = _UNNUMBERED_POINTER.search(norm)
        if m:
            return UNNUMBERED_POINTER.reject(f"the {where} points into the paper: {m.group(0)!r}",
                                             field=where, phrase=m.group(0))
    m = _DEMONSTRATIVE.search(qnorm)
    if m and not _mentions(context, m.group("noun")) and not _mentions(qnorm[:m.start()], m.group("noun")):
        return DEMONSTRATIVE.reject(f"the question says {m.group(0)!r} and nothing names the {m.group('noun')}",
                                    field="question", phrase=m.group(0))
    m = _UNDEFINED_DEFINITE.search(qnorm)
    if m:
        nouns = [n for n in (m.group("noun"), m.group("first"), m.group("second")) if n]
        missing = [n for n in nouns if not _mentions(context, n) and not _mentions(qnorm[:m.start()], n)]
        if missing:
            return UNDEFINED_REFERENT.reject(f"the question says {m.group(0)!r} and nothing introduces "
                                             f"{', '.join(repr(n) for n in missing)}", field="question",
                                             phrase=m.group(0))
    for label in dict.fromkeys(_LABEL.findall(question)):
        if not _label_resolved(label, question, context):
            return PAPER_LABEL.reject(f"the question uses {label!r}, which neither the question nor its "
                                      "context defines", field="question", label=label)
    return None


def phrase_covered(text: str, value: str, *, min_share: float = 0.6) -> bool:
    """Whether a scope value is stated in ``text``: verbatim, or by its key words.

    Key words are the value's numbers (by value) and capitalised names, which must all appear;
    at least ``min_share`` of its remaining content words must appear too. This accepts the
    rewording a question needs ("in the eastern East Siberian Sea" for "eastern part of the East
    Siberian Sea") and rejects losing the place, the years or the sample.
    """
    if not value.strip():
        return True
    if contains_phrase(text, value):
        return True
    text_numbers = parse_numbers(text)
    for number in parse_numbers(value):
        if not any(same_value(number, other) for other in text_numbers):
            return False
    text_words = set(content_words(text))
    names = {w for w in content_words(" ".join(re.findall(r"\b[A-Z][\w-]*", value)))}
    names -= {"the", "in", "of"}
    if not names <= text_words:
        return False
    value_words = [w for w in content_words(value) if not w.isdigit()]
    if not value_words:
        return True
    share = sum(w in text_words for w in value_words) / len(value_words)
    return share >= min_share


def scope_dropped(question: str, context: str, scope: dict[str, str | None]) -> Rejection | None:
    """``question.scope_dropped`` when a non-empty scope value is not stated in question or context."""
    both = f"{question}\n{context}"
    for dimension, value in scope.items():
        if value and not phrase_covered(both, value):
            return SCOPE_DROPPED.reject(f"the scope {dimension} {value!r} is not stated in the question "
                                        "or its context", dimension=dimension, value=value)
    return None


def length_bounds(question: str, context: str, *, question_min: int = 20, question_max: int = 400,
                  context_max: int = 700) -> Rejection | None:
    """``question.length``: a question of 20–400 characters with a context of at most 700."""
    q = len(question.strip())
    if q < question_min or q > question_max:
        return LENGTH.reject(f"the question has {q} characters (bounds {question_min}–{question_max})",
                             field="question", length=q)
    c = len(context.strip())
    if c > context_max:
        return LENGTH.reject(f"the context has {c} characters (at most {context_max})",
                             field="question_context", length=c)
    return None
