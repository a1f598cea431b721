"""The offline provider's seven roles: deterministic, rule-based stand-ins for the LLM roles.

A baseline for trying the pipeline without an API key and for tests — not a substitute for a
model. Each function receives the JSON-able variables its stage renders the prompt from and
returns the role's output model; the stage's gates then judge it exactly as they judge a model.
The rule checks reuse :mod:`arcticqa.gates` (one place for each rule). See
``docs/offline-provider.md`` for what each role does and where it stops.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from arcticqa.gates.contradiction import contradiction, evidence_supports_value, set_members
from arcticqa.gates.direction import antonyms, direction_terms
from arcticqa.gates.distractors import balance_answer_rank, check_distractor, options_equivalent
from arcticqa.gates.evidence import answer_in_evidence
from arcticqa.gates.numbers import comparable, parse_numbers, prepare_text, same_value
from arcticqa.gates.question import answer_leak, not_standalone, phrase_covered
from arcticqa.gates.text import normalize_loose, words
from arcticqa.llm.providers.offline import OfflineRole
from arcticqa.standins.offline.text import (
    CHANGE_VERBS,
    COMPARATIVES,
    RESULTISH,
    RU_CHANGE_VERB,
    SpanText,
    answer_hedge,
    answer_noun,
    answer_scope,
    best_value,
    citing,
    closed_set_answer,
    code_names,
    entity_names,
    is_cyrillic,
    is_hedged,
    is_negative_result,
    numeric_values,
    overlap,
    period_phrase,
    sentences_in,
    spans_of,
    split_sentences_any,
)

__all__ = [
    "OFFLINE_ROLES",
    "site_extractor",
    "finding_extractor",
    "question_writer",
    "reconstructor",
    "verifier",
    "distractor_writer",
    "option_verifier",
]

_SECTION_BONUS = {"results": 3.0, "abstract": 1.5, "conclusions": 0.5, "discussion": 0.0}
_SETTING_SECTIONS = ("study_area", "methods", "abstract", "introduction")
_FEATURE = re.compile(r"^\s(catchment|valley|fjord|basin|region|area|station|glacier|river|lake|island|bay|delta)\b")
_CAUSAL = re.compile(r"\b(?:why|cause[sd]?|because|due to|drive[ns]?|drove|driver|led to|leads? to|result(?:ed)? in"
                     r"|effect of)\b|(?<![\w])(?:почему|из-за|причин\w*|вследствие)(?![\w])", re.I)
_ASSOCIATION = re.compile(r"\b(?:correlat\w*|associated with|related to|linked to|tracks?)\b", re.I)
_FIRST_PERSON = re.compile(r"\b(?:we|our|us)\b", re.I)


def _load_gazetteer() -> Any:
    # geo is imported where it is used: the package loads shapely and the region polygons
    # (~3 s), which only the site extractor needs, and importing OFFLINE_ROLES must stay cheap
    from arcticqa.geo.gazetteer import load_gazetteer

    return load_gazetteer()


# ---- site_extractor -------------------------------------------------------------------------

def site_extractor(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Gazetteer names plus written coordinates, each cited by the span that contains it.

    A coordinate with no gazetteer name beside it is proposed under its written form, so the
    stage locates it from the span (the model's coordinates are never used anyway). Sentences
    that cite other work name background places, not study sites.
    """
    from arcticqa.geo.coordinates import parse_coordinates  # lazily, as in _load_gazetteer

    gaz = _load_gazetteer()
    sites: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for span in spans_of(variables):
        for sentence in split_sentences_any(span.text):
            role = "background" if citing(sentence) else "study_site"
            places = gaz.find(sentence)
            for pm in places:
                key = (pm.place.name, span.id)
                if key not in seen:
                    seen.add(key)
                    sites.append({"name": pm.text, "span_id": span.id, "kind": pm.place.kind, "role": role})
            for c in parse_coordinates(sentence).coordinates:
                near = any(abs(pm.end - c.start) < 80 or abs(c.end - pm.start) < 80 for pm in places)
                key = (c.text, span.id)
                if not near and key not in seen:
                    seen.add(key)
                    sites.append({"name": c.text, "span_id": span.id, "kind": "unknown", "role": role})
    return response_model.model_validate({"sites": sites})


# ---- finding_extractor ----------------------------------------------------------------------

def _sentence_score(section: str, sentence: str) -> float:
    score = _SECTION_BONUS.get(section, -5.0)
    if is_hedged(sentence):
        score -= 6.0  # still proposed when nothing better exists: verification rejects it
    if re.search(r"\b(?:significant(?:ly)?|p\s*[<=]\s*0?\.\d+|we (?:found|observed))\b", sentence, re.I):
        score += 0.5
    return score


def _location(spans: Sequence[SpanText], sentence: str, support: SpanText) -> tuple[str | None, SpanText | None]:
    """A gazetteer place for the finding: in its sentence, else in the paper's setting spans."""
    gaz = _load_gazetteer()
    for pm in gaz.find(sentence):
        return _with_feature(sentence, pm.end, pm.text), None
    order = sorted(spans, key=lambda s: _SETTING_SECTIONS.index(s.section) if s.section in _SETTING_SECTIONS else 99)
    for span in order:
        if span.section not in _SETTING_SECTIONS:
            continue
        found = gaz.find(span.text)
        if found:
            pm = found[0]
            return _with_feature(span.text, pm.end, pm.text), span
    return None, None


def _with_feature(text: str, end: int, name: str) -> str:
    m = _FEATURE.match(text[end:])
    return f"{name}{m.group(0)}" if m else name


def _claim_type(sentence: str) -> str:
    if _ASSOCIATION.search(sentence):
        return "association"
    return "observation"


def _setting_span(spans: Sequence[SpanText], exclude: str) -> SpanText | None:
    """The first study-area (else methods) span: where a question's context comes from."""
    for section in ("study_area", "methods"):
        for s in spans:
            if s.section == section and s.id != exclude:
                return s
    return None


def _universe_span(spans: Sequence[SpanText], members: list[str], support: SpanText) -> SpanText | None:
    """The span naming the most other entities of the answer's kind (for closed-set distractors)."""
    finder = entity_names if entity_names(" ".join(members)) else code_names
    best, best_n = None, 0
    for s in spans:
        if s.id == support.id:
            continue
        others = [e for e in finder(s.text) if e not in members]
        if len(others) > best_n:
            best, best_n = s, len(others)
    return best


def finding_extractor(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Rank result sentences by finding cues and pick a typed answer span from each.

    Answers are a number with its unit (after "increased by", "was", before "times higher", …),
    the members of a closed set ("Only A and B …") or a direction word. Hedged sentences rank
    last; "no trend" statements, cited work and sentences outside results/abstract/discussion/
    conclusions are never proposed. The same value stated twice (abstract and results) is
    proposed once, from the higher-ranked section.
    """
    spans = spans_of(variables)
    k = int(variables.get("k") or 3)
    candidates: list[tuple[float, int, dict[str, Any]]] = []
    for order, (span, sentence) in enumerate(sentences_in(spans)):
        if span.section not in RESULTISH or citing(sentence) or is_negative_result(sentence):
            continue
        base = _sentence_score(span.section, sentence)
        found = _finding_from(sentence, span, spans)
        if found is None:
            continue
        strength, finding = found
        candidates.append((base + strength, order, finding))
    candidates.sort(key=lambda c: (-c[0], c[1]))
    findings: list[dict[str, Any]] = []
    for _, _, f in candidates:
        if any(options_equivalent(f["answer"], g["answer"]) and f["answer_type"] == g["answer_type"]
               and overlap(f["claim"], g["claim"]) > 0.6 for g in findings):
            continue
        findings.append(f)
        if len(findings) >= k:
            break
    return response_model.model_validate({"findings": findings})


def _finding_from(sentence: str, span: SpanText, spans: Sequence[SpanText]) -> tuple[float, dict[str, Any]] | None:
    location, loc_span = _location(spans, sentence, span)
    setting = _setting_span(spans, span.id)
    scope_ids = list(dict.fromkeys(s.id for s in (loc_span, setting) if s is not None and s.id != span.id))
    period = period_phrase(sentence)
    if period is None and re.search(r"\bsame (?:period|decade|years|seasons|\w+ seasons)\b|\bboth surveys\b|"
                                    r"за период наблюдений", sentence):
        period = period_phrase(span.text)  # "over the same decade": the years are in the span
    scope = {"location": location, "period": period}
    closed = closed_set_answer(sentence)
    if closed is not None:
        answer, _noun, members = closed
        universe = _universe_span(spans, members, span)
        ids = list(dict.fromkeys([*scope_ids, *([universe.id] if universe else [])]))
        return 6.0, {"claim": sentence, "answer": answer, "answer_type": "set" if len(members) > 1 else "entity",
                     "unit": None, "claim_type": _claim_type(sentence), "scope": scope,
                     "span_ids": [span.id], "scope_span_ids": ids}
    picked = best_value(sentence)
    if picked is not None:
        _, value = picked
        return value.score, {"claim": sentence, "answer": value.text, "answer_type": "numeric",
                             "unit": value.number.unit, "claim_type": _claim_type(sentence), "scope": scope,
                             "span_ids": [span.id], "scope_span_ids": scope_ids}
    for term in direction_terms(sentence):
        if term.word in CHANGE_VERBS and antonyms(term.word):
            return 1.0, {"claim": sentence, "answer": term.word, "answer_type": "direction", "unit": None,
                         "claim_type": _claim_type(sentence), "scope": scope, "span_ids": [span.id],
                         "scope_span_ids": scope_ids}
    return None


# ---- question_writer ------------------------------------------------------------------------

_CUT_CLAUSE = re.compile(r"(?:,\s+(?:and|while|whereas|but|which|making|although)\b|;|\s+\(|\s+и не\s|,\s+где\s).*$")
_LEAD_PP = re.compile(r"^(?P<pp>(?:On|In|At|Across|Near|Along|Over|During|Beneath|Under)\b[^,]{2,60}),\s+(?P<rest>.+)$")
_SAME_PERIOD = re.compile(r"\s*\b(?:over|during|in) the same (?:period|decade|years|\w+ seasons|seasons)\b"
                          r"|\s*за период наблюдений")


def _lower_first(text: str) -> str:
    """Lower-case a sentence-initial common word; keep names, binomials and acronyms."""
    if not text or entity_names(" ".join(text.split()[:2])) or re.match(r"^[A-ZА-Я]{2}|^[A-Z][a-z]*[A-Z]", text):
        return text
    first = text.split(" ", 1)[0]
    if _load_gazetteer().lookup(first) is not None:
        return text
    return text[0].lower() + text[1:]


def _finish(question: str) -> str:
    question = " ".join(question.split()).strip(" ,;")
    question = re.sub(r"\s+([,?])", r"\1", question)
    if not re.search(r"\bгг?\.$", question):
        question = question.rstrip(".")
    question = question[0].upper() + question[1:] if question else question
    return question + "?"


def _subject(subj: str) -> tuple[str, str]:
    """Split a leading prepositional phrase off the subject: (subject, moved phrase)."""
    m = _LEAD_PP.match(subj.strip())
    if m:
        return m.group("rest"), m.group("pp")[0].lower() + m.group("pp")[1:]
    return subj.strip(), ""


def _the(subj: str) -> str:
    return f"the {subj}" if re.match(r"^(?:mean|average|median|total|maximum|minimum|annual)\b", subj) else subj


def _question_en(prep: str, start: int, end: int, answer: str, answer_type: str) -> str:
    before, after = prep[:start].rstrip(), prep[end:]
    after = _CUT_CLAUSE.sub("", after).rstrip(" .")
    how, in_situ = answer_noun(answer)
    m = re.match(rf"^(?P<subj>.+?)\s+(?P<verb>{'|'.join(CHANGE_VERBS)})(?P<mid>[^.;]{{0,40}}?)\s+by"
                 r"(?:\s+(?:about|approximately|around|nearly|some))?$", before)
    if m and CHANGE_VERBS.get(m.group("verb")):
        subj, moved = _subject(m.group("subj"))
        return f"{how} did {_the(_lower_first(subj))} {CHANGE_VERBS[m.group('verb')]}{m.group('mid')}{after} {moved}"
    m = re.match(rf"^(?P<subj>.+?)\s+(?P<verb>{'|'.join(CHANGE_VERBS)})\s+(?P<prep>at|in|on)$", before)
    count = re.match(r"^\s*of\s+(?:the\s+)?(?P<rest>\d+.*)$", after)
    if m and count:
        subj, moved = _subject(m.group("subj"))
        return (f"{m.group('prep').capitalize()} how many of the {count.group('rest')} did "
                f"{_the(_lower_first(subj))} {CHANGE_VERBS[m.group('verb')]} {moved}")
    cmp_m = re.match(rf"^\s*(?P<cmp>{'|'.join(COMPARATIVES)})\b(?P<rest>.*)$", after)
    m = re.match(r"^(?P<subj>.+?)\s+(?P<aux>was|were)(?P<avg>\s+on average)?$", before)
    if m and cmp_m:
        subj, moved = _subject(m.group("subj"))
        lead = "How many times" if parse_numbers(answer) and parse_numbers(answer)[0].unit == "fold" else how
        avg = " on average" if m.group("avg") else ""
        return (f"{lead} {cmp_m.group('cmp')} {m.group('aux')} {_the(_lower_first(subj))}{avg}"
                f"{cmp_m.group('rest')} {moved}") if lead == "How many times" else (
                f"{lead} {m.group('aux')} {_the(_lower_first(subj))}{avg} {cmp_m.group('cmp')}{cmp_m.group('rest')} "
                f"{moved}")
    if m:
        subj, moved = _subject(m.group("subj"))
        avg = "the average " if m.group("avg") else ""
        subj_text = _lower_first(subj)
        return f"What {m.group('aux')} {avg or ''}{_the(subj_text) if not avg else subj_text}{after} {moved}"
    m = re.match(r"^(?P<subj>.+?)\s+averaged$", before)
    if m:
        subj, moved = _subject(m.group("subj"))
        return f"What was the average {_lower_first(subj)}{after} {moved}"
    # in situ: "Pennate diatoms made up what percentage of algal cells ...?"
    return f"{before} {in_situ}{after}"


def _question_ru(prep: str, start: int, end: int, answer: str) -> str:
    before, after = prep[:start].rstrip(), prep[end:]
    after = _CUT_CLAUSE.sub("", after).rstrip()
    m = re.match(rf"^(?P<subj>.+?)\s+(?P<verb>{RU_CHANGE_VERB})\s+на(?:\s+(?:около|примерно))?$", before)
    if m:
        return f"На сколько {m.group('verb')} {_lower_first(m.group('subj'))}{after}"
    m = re.match(r"^(?P<subj>.+?)\s+(?:составил[аио]?|составляла|составляет)(?P<avg>\s+в среднем)?$", before)
    if m:
        avg = " в среднем" if m.group("avg") else ""
        return f"Какое значение{avg} имел показатель «{_lower_first(m.group('subj'))}»{after}"
    return f"{before} сколько{after}"


def _set_question(sentence: str, answer: str, members: list[str], noun: str) -> str:
    idx = sentence.find(answer)
    after = sentence[idx + len(answer):] if idx >= 0 else ""
    after = re.sub(r"^,[^,]{1,60},", "", after).strip().rstrip(".")
    plural = len(members) > 1
    noun = noun.strip() or ("species" if entity_names(answer) else ("sites" if plural else "site"))
    noun = re.sub(r"^the\s+", "", noun)
    if plural and not noun.endswith("s"):
        noun += "s"
    verb, ones = ("were", "ones") if plural else ("was", "one")
    return f"Which {noun} {verb} the only {ones} that {after}"


def _direction_question(sentence: str, word: str) -> str | None:
    idx = sentence.find(word)
    opposite = [a for a in antonyms(word) if a in CHANGE_VERBS]
    if idx < 0 or not opposite:
        return None
    subj, after = sentence[:idx].strip(), sentence[idx + len(word):].strip().rstrip(".")
    subj, moved = _subject(subj)
    return (f"Did {_the(_lower_first(subj))} {CHANGE_VERBS[word]} or {CHANGE_VERBS[opposite[0]]} "
            f"{_CUT_CLAUSE.sub('', after)} {moved}")


def _context(spans: Sequence[SpanText], answer: str, scope: Mapping[str, str], question: str,
             plain: bool) -> str:
    """Setting sentences (place, sample) from non-result spans; never a result or the answer."""
    parts: list[str] = []
    if not plain:
        for span in spans:
            if span.section in RESULTISH and span.section != "abstract":
                continue
            for sentence in split_sentences_any(span.text):
                # no cited-work filter here: setting sentences ("in May 2019") trip its author-year pattern
                if (len(" ".join(parts)) + len(sentence) > 600 or _FIRST_PERSON.search(sentence)
                        or is_negative_result(sentence)
                        or answer_leak("", sentence, answer) is not None
                        or not_standalone("", sentence) is not None or span.section == "abstract"):
                    continue
                loc = scope.get("location")
                names = bool(loc and phrase_covered(sentence, loc)) or bool(entity_names(sentence))
                if (names or re.search(r"\d+(?:[.,]\d+)?\s?°\s?[NSEW]", sentence)) and sentence not in parts:
                    parts.append(sentence)
                    break
            if len(parts) >= 2:
                break
    both = f"{question}\n{' '.join(parts)}"
    for dimension, value in scope.items():
        if value and not phrase_covered(both, value):
            label = {"location": "Location", "period": "Period", "population": "Sample",
                     "method": "Method", "comparison": "Comparison"}.get(dimension, dimension)
            parts.append(f"{label}: {value}.")
    return " ".join(parts)[:700]


def question_writer(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Turn the evidence sentence into a question by replacing the answer span with an interrogative.

    "X increased by 18% between 2012 and 2021" becomes "By what percentage did X increase between
    2012 and 2021 …?"; comparisons, counts ("at 117 of the 121 nodes"), stated values, closed sets
    and directions have their own templates, Russian sentences simple ones ("На сколько …?").
    A leading place phrase moves behind the question; the context is a setting sentence from the
    study-area or methods spans, plus any scope value the question still lacks. A revision drops
    the setting sentence and states the scope values plainly.
    """
    finding = variables.get("finding") or {}
    answer = str(variables.get("answer") or "")
    claim = " ".join(str(finding.get("claim") or "").split())
    answer_type = str(finding.get("answer_type") or "other")
    scope = {k: str(v) for k, v in (finding.get("scope") or {}).items() if v}
    spans = spans_of(variables)
    question = _draft_question(claim, answer, answer_type)
    period = scope.get("period")
    if period:
        question = _SAME_PERIOD.sub(f" {period}", question) if _SAME_PERIOD.search(question) else question
    location = scope.get("location")
    if location and not phrase_covered(question, location) and not is_cyrillic(question):
        question = f"{question.rstrip(' ?')} {_place_phrase(spans, location)}"
    question = _finish(question)
    plain = int(variables.get("revision") or 0) > 0
    context = _context(spans, answer, scope, question, plain)
    return response_model.model_validate({"question": question, "question_context": context})


def _draft_question(claim: str, answer: str, answer_type: str) -> str:
    if answer_type in ("set", "entity"):
        closed = closed_set_answer(claim)
        if closed is not None:
            return _set_question(claim, closed[0], closed[2], closed[1])
    if answer_type == "direction":
        q = _direction_question(claim, answer)
        if q:
            return q
    prep = prepare_text(claim)
    # whole-number match: the answer "9" must not be found inside "2019"
    hit = re.search(rf"(?<![\w.,]){re.escape(answer)}(?![\d])", prep)
    idx = hit.start() if hit else -1
    if idx < 0:
        _, values = numeric_values(claim)
        match = [v for v in values if options_equivalent(v.text, answer) or answer_in_evidence(answer, v.text)]
        if not match:
            return f"What value does the following statement report: {claim.rstrip('.')}"
        idx, end = match[0].start, match[0].end
    else:
        end = idx + len(answer)
    if is_cyrillic(claim):
        return _question_ru(prep, idx, end, answer)
    return _question_en(prep, idx, end, answer, answer_type)


_PLACE_PREP = re.compile(r"\b(in|near|at|off|along|on|from)\s+(the\s+)?((?:central|northern|southern|eastern|western"
                         r"|inner|outer|upper|lower)\s+)?$")
_PREP_ORDER = ("in", "near", "at", "off", "along", "on", "from")


def _place_phrase(spans: Sequence[SpanText], location: str) -> str:
    """The location with the preposition (and article, position word) the paper uses for it."""
    found: list[tuple[int, str]] = []
    for span in spans:
        for m in re.finditer(re.escape(location), span.text):
            p = _PLACE_PREP.search(span.text[:m.start()])
            if p:
                # "from the southern Barents Sea" names a transect's end; "in" reads as the setting
                prep = "in" if p.group(1) in ("from", "along") else p.group(1)
                found.append((_PREP_ORDER.index(p.group(1)),
                              f"{prep} {p.group(2) or ''}{p.group(3) or ''}{location}"))
    return min(found)[1] if found else f"at {location}"


# ---- reconstructor --------------------------------------------------------------------------

def _question_numbers(question: str, context: str) -> list[Any]:
    return [v.number for v in numeric_values(f"{question} {context}")[1]] + parse_numbers(question)


def _expected(question: str) -> str:
    q = question.casefold()
    if re.match(r"^(?:which|какие|какой|какая)\b", q):
        return "entity"
    if re.match(r"^did\b", q) and re.search(r"\bor\b", q):
        return "direction"
    return "numeric"


def reconstructor(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Answer blind from the spans by typed span extraction.

    The question's interrogative fixes the answer type; the sentence sharing most content words
    with the question is read; its best-scoring number not already named in the question (or
    the closed-set members, or the direction word) is the answer. Other numbers of the same
    unit in that sentence are listed as alternatives a careful reader could defend.
    """
    question = str(variables.get("question") or "")
    context = str(variables.get("question_context") or "")
    spans = spans_of(variables)
    expected = _expected(question)
    ranked = sorted(sentences_in(spans), key=lambda p: -overlap(question, p[1]))
    claim_type = "causal" if _CAUSAL.search(question) else "observation"
    for span, sentence in ranked[:5]:
        answer, alternatives = _read_answer(expected, sentence, question, context)
        if answer:
            return response_model.model_validate({"answer": answer, "span_ids": [span.id], "claim_type": claim_type,
                                                  "alternatives": alternatives})
    return response_model.model_validate({"answer": "", "span_ids": [], "claim_type": claim_type,
                                          "alternatives": []})


def _read_answer(expected: str, sentence: str, question: str, context: str) -> tuple[str, list[str]]:
    if expected == "entity":
        closed = closed_set_answer(sentence)
        if closed is None:
            return "", []
        return closed[0], []
    if expected == "direction":
        asked = {t.axis for t in direction_terms(question)}
        for term in direction_terms(sentence):
            if term.axis in asked and term.word in CHANGE_VERBS:
                return term.word, []
        return "", []
    exclude = _question_numbers(question, context)
    picked = best_value(sentence, exclude)
    if picked is None:
        return "", []
    _, value = picked
    _, values = numeric_values(sentence)
    alternatives = [v.text for v in values
                    if v.start != value.start and v.score > -4.0 and not any(same_value(v.number, x) for x in exclude)
                    and (v.number.unit or "") == (value.number.unit or "") and comparable(v.number, value.number)]
    return value.text, alternatives


# ---- verifier -------------------------------------------------------------------------------

def _same_set(a: str, b: str) -> bool:
    sa, sb = {normalize_loose(x) for x in set_members(a)}, {normalize_loose(x) for x in set_members(b)}
    return bool(sa) and sa == sb


def _answer_sentences(spans: Sequence[SpanText], answer: str) -> list[tuple[SpanText, str]]:
    return [(s, sent) for s, sent in sentences_in(spans) if answer_in_evidence(answer, prepare_text(sent))]


def _doubted(span: SpanText, sentence: str, answer: str) -> bool:
    """A sentence in the same span that hedges about the same quantity (shares the subject words
    of the clause stating the answer)."""
    subject = " ".join(w for w in words(answer_scope(sentence, answer))[:8])
    return any(is_hedged(other) and overlap(subject, other) >= 0.3
               for other in split_sentences_any(span.text) if other != sentence)


def verifier(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Rule checks on the question, the gold answer and the blind reconstruction.

    Entailed only when a cited sentence states the answer without hedging (and no sentence of
    the same span doubts the same quantity); equivalence of an undecided pair only when both are
    the same closed set; causal only when the question asks for a cause; scope preserved when
    every scope value is in the question or context; alternatives are the reconstruction's
    other same-unit values and any other value of the answer's unit in the answer sentence.
    """
    question = str(variables.get("question") or "")
    context = str(variables.get("question_context") or "")
    answer = str(variables.get("answer") or "")
    finding = variables.get("finding") or {}
    recon = variables.get("reconstruction") or {}
    spans = spans_of(variables)
    stated = _answer_sentences(spans, answer)
    # the hedge is looked for where the answer is stated, not in a contrasted clause beside it
    clean = [(s, sent) for s, sent in stated
             if not answer_hedge(sent, answer) and not citing(sent) and not _doubted(s, sent, answer)]
    reason = ""
    if not stated:
        reason = "no cited sentence states the answer"
    elif not clean:
        hedges = sorted({h for _, sent in stated if (h := answer_hedge(sent, answer))})
        reason = ("every cited sentence stating the answer hedges or is doubted in the same paragraph"
                  + (f" (hedged by {', '.join(repr(h) for h in hedges)})" if hedges else ""))
    scope = {k: str(v) for k, v in (finding.get("scope") or {}).items() if v}
    scope_ok = all(phrase_covered(f"{question}\n{context}", v) for v in scope.values())
    equivalent: bool | None = None
    if variables.get("judge_equivalence"):
        equivalent = _same_set(answer, str(recon.get("answer") or ""))
    alternatives = [a for a in recon.get("alternatives") or [] if not options_equivalent(a, answer)]
    for _, sent in clean[:1]:
        _, rec_alts = _read_answer(_expected(question), sent, question, context)
        alternatives += [a for a in rec_alts if not options_equivalent(a, answer) and a not in alternatives]
    asked = "causal" if _CAUSAL.search(question) else str(finding.get("claim_type") or "observation")
    if asked == "causal" and finding.get("claim_type") != "causal":
        reason = reason or "the question asks for a cause"
    verdict = {
        "answers_equivalent": equivalent,
        "entailed": bool(clean),
        "entailment_span_ids": list(dict.fromkeys(s.id for s, _ in clean)),
        "scope_preserved": scope_ok,
        "question_claim_type": asked,
        "context_sufficient": bool(str(recon.get("answer") or "").strip()),
        "context_discloses_answer": answer_leak("", context, answer) is not None,
        "defensible_alternatives": alternatives,
        "reason": reason or ("scope value missing from the question" if not scope_ok else ""),
    }
    return response_model.model_validate(verdict)


# ---- distractor_writer ----------------------------------------------------------------------

_FACTORS = (0.5, 1.5, 2.0, 0.75, 1.25, 3.0, 0.25, 0.6, 1.4, 1.75, 2.5, 0.4, 0.33, 4.0)


def _format(value: float, decimals: int, comma: bool) -> str:
    text = f"{value:.{decimals}f}"
    return text.replace(".", ",") if comma else text


def _numeric_candidates(answer: str, evidence: str) -> list[dict[str, str]]:
    prep, values = numeric_values(answer)
    if not values:
        return []
    value = values[0]
    n = value.number
    raw = prep[n.start:n.end]
    num_text = re.match(r"[-+]?\d+(?:[.,]\d+)?", raw)
    if num_text is None:
        return []
    comma = "," in num_text.group(0)
    step = 10.0 ** (-n.decimals)
    out: list[str] = []
    for factor in _FACTORS:
        v = round(n.value * factor / step) * step
        if n.value > 0 and v <= 0:
            continue
        if n.unit == "%" and n.value <= 100 and v > 100:
            continue
        text = _format(v, n.decimals, comma)
        if math.isclose(v, n.value):
            continue
        option = prepare_text(answer).replace(num_text.group(0), text, 1)
        if option not in out:
            out.append(option)
    return [{"text": o, "type": "numeric",
             "rationale": "the cited evidence states a different value at this precision"} for o in out]


def _set_candidates(answer: str, spans: Sequence[SpanText]) -> list[dict[str, str]]:
    members = set_members(answer)
    if not members:
        return []
    codes = bool(code_names(answer)) and not entity_names(answer)
    pool: list[str] = []
    for span in spans:
        for name in (code_names(span.text) if codes else entity_names(span.text)):
            if name not in members and name not in pool:
                pool.append(name)
    if codes:
        pool = _expand_codes(pool + members, members)
    out: list[str] = []
    joiner = " and " if " and " in answer else ", "
    for i, other in enumerate(pool):
        if len(members) == 1:
            out.append(other)
            continue
        swapped = list(members)
        swapped[i % len(members)] = other
        out.append(joiner.join(swapped))
    for i in range(0, len(pool) - 1, 2):
        if len(members) > 1:
            out.append(joiner.join(pool[i:i + len(members)]))
    return [{"text": o, "type": "entity", "rationale": "a named alternative outside the closed set"}
            for o in dict.fromkeys(out)]


def _expand_codes(seen: list[str], members: list[str]) -> list[str]:
    """Other codes of the same series ("B1".."B8" from B1, B4, B8): the paper's own site codes."""
    out: list[str] = []
    series: dict[str, list[int]] = {}
    for code in seen:
        m = re.match(r"^([A-Z]{1,3})(-?)(\d{1,2})$", code)
        if m:
            series.setdefault(f"{m.group(1)}{m.group(2)}", []).append(int(m.group(3)))
    for prefix, nums in series.items():
        for i in range(min(nums), max(nums) + 1):
            code = f"{prefix}{i}"
            if code not in members and code not in out:
                out.append(code)
    return out


def _direction_candidates(answer: str) -> list[dict[str, str]]:
    return [{"text": a, "type": "direction", "rationale": "the reversed direction"}
            for a in antonyms(answer) if a in CHANGE_VERBS]


def _proved(option: str, answer: str, answer_type: str, spans: Sequence[SpanText]) -> bool:
    """Whether a deterministic contradiction rule proves ``option`` false from a span stating the answer."""
    support = [s for s in spans if answer_in_evidence(answer, s.text)] or list(spans)
    text = "\n".join(s.text for s in support)
    if evidence_supports_value(option, text, answer) is not None:
        return False
    return any(contradiction(option, s.text, answer, answer_type) is not None for s in support)


def distractor_writer(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """Typed wrong options the contradiction rules can prove false, best first.

    Numbers: the answer's value scaled (×0.5, ×1.5, ×2, …) and rounded to its precision, same unit
    and wording. Sets: members swapped for other entities of the same kind named in the cited
    spans. Directions: the antonyms of the answer's verb. Options a rule cannot prove wrong, or
    that the free prefilter would drop, are put last (the stage still checks every one).
    """
    answer = str(variables.get("answer") or "")
    finding = variables.get("finding") or {}
    answer_type = str(finding.get("answer_type") or "other")
    spans = spans_of(variables)
    evidence = "\n".join(s.text for s in spans)
    if answer_type in ("set", "entity"):
        pool = _set_candidates(answer, spans)
    elif answer_type == "direction":
        pool = _direction_candidates(answer)
    else:
        pool = _numeric_candidates(answer, evidence)
    good: list[dict[str, str]] = []
    rest: list[dict[str, str]] = []
    for cand in pool:
        kept = [g["text"] for g in good]
        ok = check_distractor(answer, cand["text"], kept) is None and _proved(cand["text"], answer, answer_type, spans)
        (good if ok else rest).append(cand)
    # like a model asked for values on both sides: the best four put the answer at a seeded rank
    good = [good[i] for i in balance_answer_rank(answer, [g["text"] for g in good],
                                                 f"{variables.get('question', '')}|{answer}")]
    chosen = (good + rest)[:8]
    filler = 0
    while len(chosen) < 4:
        # the output model needs four; an unprovable filler is rejected by the option checks
        filler += 1
        chosen.append({"text": f"not determinable {filler}", "type": "closed_set" if answer_type == "set" else "entity",
                       "rationale": "placeholder: the offline writer found no further provable option"})
    return response_model.model_validate({"candidates": chosen})


# ---- option_verifier ------------------------------------------------------------------------

def option_verifier(variables: Mapping[str, Any], response_model: type[BaseModel]) -> BaseModel:
    """The deterministic contradiction rules, per cited span; what they cannot decide is rejected.

    ``contradicted`` (with the span) only when a rule proves the option false; ``supported`` when
    the option matches a value the evidence states; otherwise ``not_addressed`` — the offline
    provider never admits an option it cannot prove wrong.
    """
    if "options" in variables:  # several options in one call: each judged exactly as alone
        return response_model.model_validate({"verdicts": [
            {**_option_verdict({**variables, "option": o.get("text", "")}), "option_id": o.get("id")}
            for o in variables["options"]]})
    return response_model.model_validate(_option_verdict(variables))


def _option_verdict(variables: Mapping[str, Any]) -> dict[str, Any]:
    option = str(variables.get("option") or "")
    answer = str(variables.get("answer") or "")
    answer_type = "numeric" if parse_numbers(answer) else "entity"
    spans = spans_of(variables)
    support = [s for s in spans if answer_in_evidence(answer, s.text)]
    evidence = "\n".join(s.text for s in support or spans)
    supported = evidence_supports_value(option, evidence, answer)
    if supported is not None:
        return {"verdict": "supported", "span_ids": [], "reason": supported}
    for span in support:
        found = contradiction(option, span.text, answer, answer_type)
        if found is not None:
            return {"verdict": "contradicted", "span_ids": [span.id], "interpretation": option,
                    "reason": f"{found.rule}: {found.evidence}"}
    return {"verdict": "not_addressed", "span_ids": [],
            "reason": "no deterministic rule proves the option false (the offline provider admits only proved options)"}


#: every build role's offline implementation, by role name; the interface layer hands this to
#: the gateway (``Gateway(..., offline_roles=OFFLINE_ROLES)``), so ``llm/`` never imports it
OFFLINE_ROLES: dict[str, OfflineRole] = {
    "site_extractor": site_extractor,
    "finding_extractor": finding_extractor,
    "question_writer": question_writer,
    "reconstructor": reconstructor,
    "verifier": verifier,
    "distractor_writer": distractor_writer,
    "option_verifier": option_verifier,
}
