"""Free distractor gates: everything that can reject a candidate option without a model.

Run on the distractor writer's validated candidates, in rank order, before any option verifier
call; each rejected candidate gets exactly one rejection (the first gate it fails).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from arcticqa.gates.abstain import abstention_rule
from arcticqa.gates.bounds import bound_verdict
from arcticqa.gates.contradiction import set_counts, set_members
from arcticqa.gates.direction import direction_terms, is_direction_reversal
from arcticqa.gates.numbers import comparable, numeric_within_tolerance, parse_numbers, values_agree
from arcticqa.gates.text import (
    STOPWORDS,
    content_words,
    normalize_loose,
    parenthetical_parts,
    strip_parenthetical,
    words,
)
from arcticqa.rules import Rejection, rule

__all__ = [
    "DUPLICATE",
    "EQUALS_ANSWER",
    "WITHIN_TOLERANCE",
    "TRUE_FOR_ANSWER",
    "ALL_NONE_OF_ABOVE",
    "NON_ANSWER",
    "NEGATION_ONLY",
    "COMPOUND",
    "FORMAT_MISMATCH",
    "options_equivalent",
    "taxon_key",
    "format_signature",
    "balance_answer_rank",
    "check_distractor",
    "prefilter_distractors",
]

DUPLICATE = rule("distractor.duplicate", "the option duplicates an earlier option")
EQUALS_ANSWER = rule("distractor.equals_answer", "the option is the answer or a variant of it")
WITHIN_TOLERANCE = rule("distractor.within_tolerance",
                        "the option's value is within the stated precision of the answer")
TRUE_FOR_ANSWER = rule("distractor.true_for_answer",
                       "the option is a bound or range the answer satisfies: a second correct option")
ALL_NONE_OF_ABOVE = rule("distractor.all_none_of_above", "the option is 'all/none of the above'")
NON_ANSWER = rule("distractor.non_answer",
                  "the option gives no answer: no word or number ('—', '?'), or an abstention ('N/A', 'unknown')")
NEGATION_ONLY = rule("distractor.negation_only", "the option only negates the answer")
COMPOUND = rule("distractor.compound", "the option joins several claims (and/or/but/;)")
FORMAT_MISMATCH = rule("distractor.format_mismatch",
                       "the option differs from the answer in unit, number format or length")

_NEGATIONS = {"not", "no", "non", "never", "none", "without", "absent", "neither", "nor", "un"}
_FILLER = STOPWORDS | {"approximately", "about", "around", "roughly", "nearly", "ca", "c", "some"}


def _numberless_words(text: str) -> list[str]:
    """Content words outside the numbers and units of ``text`` (for "same wording" checks)."""
    cut = text
    for n in sorted(parse_numbers(text), key=lambda n: -n.start):
        cut = cut[:n.start] + " " + cut[n.end:]
    return [w for w in content_words(cut) if w not in _FILLER and not w.isdigit()]


def options_equivalent(a: str, b: str) -> bool:
    """Whether two options say the same thing: same words (case, punctuation, plural, articles
    ignored), one is the other's bracketed alias, the same set members in any order (a genus
    written out or abbreviated: "B8 and B7" = "B7 and B8", "S. arctica" = "Salix arctica"), one
    direction word for another of the same axis and polarity ("decreased" = "declined"), or same
    numbers (unit-converted, within precision) with the same remaining words ("2.3 mm/yr" =
    "2.30 mm yr⁻¹", "0.5 m" = "50 cm")."""
    ca, cb = [w for w in content_words(a) if w not in _FILLER], [w for w in content_words(b) if w not in _FILLER]
    na, nb = parse_numbers(a), parse_numbers(b)
    if not na and not nb:
        if normalize_loose(a) == normalize_loose(b):
            return True
        if ca and ca == cb:
            return True
        forms_a = {normalize_loose(x) for x in [strip_parenthetical(a), *parenthetical_parts(a)] if x}
        forms_b = {normalize_loose(x) for x in [strip_parenthetical(b), *parenthetical_parts(b)] if x}
        return bool(forms_a & forms_b - {""}) or _same_members(a, b) or _same_direction(a, b)
    if len(na) != len(nb) or not na:
        return False
    if not all(values_agree(x, y) for x, y in zip(na, nb, strict=True)):
        return False
    return _numberless_words(a) == _numberless_words(b)


_BINOMIAL = re.compile(r"([A-Z])(?:[a-z]+|\.)\s+([a-z]{3,})")


def taxon_key(member: str) -> str | None:
    """A Latin binomial by genus initial and epithet ("Salix arctica" and "S. arctica" → "s.
    arctica"); None for anything else."""
    m = _BINOMIAL.fullmatch(member.strip())
    return f"{m.group(1).lower()}. {m.group(2)}" if m else None


def _member_key(member: str) -> str:
    """A set member as compared: a binomial by :func:`taxon_key`, anything else by its loose
    normal form."""
    return taxon_key(member) or normalize_loose(member)


def _same_members(a: str, b: str) -> bool:
    """The same members in any order, genus names written out or abbreviated: "Salix arctica and
    Dryas octopetala" = "D. octopetala and S. arctica", "B7 and B8" = "B8, B7"."""
    ma, mb = set_members(a), set_members(b)
    if not ma or not mb or len(ma) != len(mb):
        return False
    return sorted(_member_key(m) for m in ma) == sorted(_member_key(m) for m in mb)


def _same_direction(a: str, b: str) -> bool:
    """Two bare direction words of one axis and polarity ("declined" = "decreased"): the same
    answer, written with another verb."""
    ta, tb = direction_terms(a), direction_terms(b)
    if len(ta) != 1 or len(tb) != 1 or len(words(a)) > 2 or len(words(b)) > 2:
        return False
    rest_a = [w for w in content_words(a) if w not in _FILLER and w != ta[0].word]
    rest_b = [w for w in content_words(b) if w not in _FILLER and w != tb[0].word]
    return (ta[0].axis, ta[0].polarity) == (tb[0].axis, tb[0].polarity) and not rest_a and not rest_b


_ALL_NONE = re.compile(r"\b(?:all|none|both|neither) of (?:the )?(?:above|these|those|the options|the other)\b"
                       r"|\b(?:cannot|can't|could not) be determined\b|\bnot (?:stated|reported|mentioned)\b")
_COMPOUND = re.compile(r";|\b(?:and/or|or|but|if|while|whereas|although|though|unless)\b|\band\b")


def _negation_only(answer: str, option: str) -> bool:
    wa, wo = words(answer), words(option)
    strip_a = [w for w in wa if w not in _NEGATIONS]
    strip_o = [w for w in wo if w not in _NEGATIONS]
    neg_a = sum(w in _NEGATIONS for w in wa)
    neg_o = sum(w in _NEGATIONS for w in wo)
    if strip_a == strip_o and neg_a != neg_o:
        return True
    # "un-"/"in-" prefix flips: "affected" vs "unaffected"
    return (len(wa) == len(wo) and sum(x != y for x, y in zip(wa, wo, strict=True)) == 1
            and any(y in (f"un{x}", f"non{x}", f"in{x}") or x in (f"un{y}", f"non{y}", f"in{y}")
                    for x, y in zip(wa, wo, strict=True)))


def _compound_count(text: str) -> int:
    return len(_COMPOUND.findall(re.sub(r"\([^()]*\)", " ", text.casefold())))


def format_signature(text: str) -> tuple[tuple[str, int], ...]:
    """What a reader sees of an option's number format: each number's unit and decimals."""
    return tuple((n.unit or "", n.decimals) for n in parse_numbers(text))


def _format_problem(answer: str, option: str) -> str | None:
    na, no = parse_numbers(answer), parse_numbers(option)
    if na and len(no) != len(na):
        return f"the answer has {len(na)} number(s), the option {len(no)}"
    if not na and no and not re.search(r"\d", answer):
        return "the option has a number and the answer has none"
    for x, y in zip(na, no, strict=False):
        if (x.unit or "") != (y.unit or ""):
            return f"unit {y.unit!r} differs from the answer's {x.unit!r}"
        if x.decimals != y.decimals:
            return f"the option has {y.decimals} decimals, the answer {x.decimals}"
        if comparable(x, y) is None:
            return "the option's unit cannot be compared with the answer's"
    la, lo = len(answer.strip()), len(option.strip())
    if lo > 2.5 * la + 15 or la > 2.5 * lo + 15:
        return f"the option has {lo} characters against the answer's {la}"
    return None


def _other_members(answer: str, option: str) -> bool:
    """Both are lists of (entity, count) and the option names other entities."""
    sa, so = set_counts(answer), set_counts(option)
    return sa is not None and so is not None and set(sa) != set(so)


def check_distractor(answer: str, option: str, earlier: Sequence[str] = (), *,
                     question: str = "") -> Rejection | None:
    """The first free gate ``option`` fails, given the answer and the options kept before it.

    ``question`` lends its direction word to an answer that has none ("what percentage
    increase …" / "60%"), so "a decrease of 60%" is judged as a direction distractor.
    """
    if not re.search(r"[^\W_]", option):
        return NON_ANSWER.reject("the option has no word or number", option=option)
    if _ALL_NONE.search(option.casefold()):
        return ALL_NONE_OF_ABOVE.reject(option=option)
    if abstention_rule(option) is not None and abstention_rule(answer) is None:
        return NON_ANSWER.reject(f"the option {option!r} gives no answer", option=option,
                                 abstention=abstention_rule(option))
    if options_equivalent(answer, option):
        return EQUALS_ANSWER.reject(option=option, answer=answer)
    if bound_verdict(answer, option) is True:
        return TRUE_FOR_ANSWER.reject(option=option, answer=answer)
    reversed_direction = is_direction_reversal(answer, option) is True or bool(
        question and not direction_terms(answer) and is_direction_reversal(question, option) is True)
    if (not reversed_direction and numeric_within_tolerance(answer, option) is True
            and not _other_members(answer, option)):
        return WITHIN_TOLERANCE.reject(option=option, answer=answer)
    for prior in earlier:
        if options_equivalent(prior, option):
            return DUPLICATE.reject(option=option, duplicate_of=prior)
    if _negation_only(answer, option):
        return NEGATION_ONLY.reject(option=option, answer=answer)
    if _compound_count(option) > _compound_count(answer):
        return COMPOUND.reject(option=option)
    problem = _format_problem(answer, option)
    if problem:
        return FORMAT_MISMATCH.reject(problem, option=option, answer=answer)
    return None


def balance_answer_rank(answer: str, options: Sequence[str], key: str, need: int = 4) -> list[int]:
    """An order of ``options`` (indices) whose first ``need`` numeric options put the answer at a
    seeded, uniformly drawn rank among them.

    Writers (models and the offline provider alike) like to bracket the answer — half and double,
    ×0.75 and ×1.5 — which makes "pick the middle value" a winning strategy without reading the
    question. The number of options below the answer is drawn uniformly from 0..need (seeded by
    ``key``, so a rerun picks the same), clamped to what the candidates allow; candidates keep
    their relative (writer) order on each side. Options not comparable with the answer follow.
    Since the answer-present condition then drops one of the ``need`` at random, the answer's rank
    there is uniform too.
    """
    import hashlib
    import random

    order = list(range(len(options)))
    numbers = parse_numbers(answer)
    if not numbers:
        return order
    below: list[int] = []
    above: list[int] = []
    for i, option in enumerate(options):
        found = parse_numbers(option)
        cmp = comparable(numbers[0], found[0]) if found else None
        if cmp is None or cmp[0] == cmp[1]:
            continue
        (below if cmp[1] < cmp[0] else above).append(i)
    if len(below) + len(above) < need:
        return order  # too few numeric candidates to choose from: the writer's order stands
    rng = random.Random(int(hashlib.sha256(f"answer-rank:{key}".encode()).hexdigest()[:16], 16))
    k = rng.randint(0, need)
    k = max(min(k, len(below)), need - len(above))
    head = sorted(below[:k] + above[:need - k])
    return head + [i for i in order if i not in head]


def prefilter_distractors(answer: str, candidates: Sequence[str]) -> tuple[list[str], list[Rejection]]:
    """Run the free gates over ``candidates`` in rank order.

    Returns the kept options (in order) and one rejection per dropped candidate; each rejection's
    evidence has ``index`` (position in ``candidates``) and ``option``.
    """
    kept: list[str] = []
    rejections: list[Rejection] = []
    for index, option in enumerate(candidates):
        rejection = check_distractor(answer, option, kept)
        if rejection is None:
            kept.append(option)
        else:
            rejection.evidence["index"] = index
            rejections.append(rejection)
    return kept, rejections
