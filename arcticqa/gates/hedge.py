"""Hedged statements: a result the paper does not state firmly cannot be a single gold answer.

The verifier judges entailment, and a verifier that calls a hedged answer entailed puts a guess
in the release (the red team's ``entailment_lie``: "Lichen cover possibly declined in some
plots", "snowmelt was either 4 days earlier or 3 days later, depending on the method"). This
rule decides the lexical part without a model: the answer is hedged when, in every sentence of
the cited support that states it, a hedge word stands *before the answer in the answer's own
clause* ("possibly declined", "may have increased by 18%", "It is likely that … 18%", "either
4 days … or"). A hedge in another clause ("18%, likely due to warming", "Although the record may
be incomplete, …") or after the answer ("18% in plots that may have been disturbed") leaves the
statement firm, so the rule does not fire on a result the paper states plainly. A hedge set off
on its own before the answer ("Температура, вероятно, повысилась на 0,6 °C") qualifies it.
"""

from __future__ import annotations

import re

from arcticqa.gates.evidence import answer_in_evidence
from arcticqa.gates.numbers import parse_numbers, prepare_text, values_agree
from arcticqa.gates.question import answer_variants
from arcticqa.gates.text import split_sentences

__all__ = ["HEDGE_WORDS", "hedged_statement", "answer_hedged"]

#: words that make a statement a possibility or an estimate of belief, not a result
HEDGE_WORDS = re.compile(
    r"\b(?:may|might|possibly|perhaps|probably|presumably|apparently|likely|unlikely|either"
    r"|seem(?:s|ed|ingly)?|appear(?:s|ed)? to|suggest(?:s|ed)? that|tentative(?:ly)?|uncertain|unclear)\b"
    r"|(?<!\w)(?:вероятно|возможно|по-видимому|видимо|предположительно|либо|может быть|не исключено)(?!\w)",
    re.IGNORECASE)
# a clause ends at punctuation and at the conjunctions that start another claim
_CLAUSE = re.compile(r"[;:()\[\]]|(?<!\d),|,(?!\d)|\s(?:and|but|whereas|while|although|though|however|because|since|which"
                     r"|и|но|а|однако|хотя|поскольку|который|которая|которые)\s", re.IGNORECASE)


def _answer_at(piece: str, answer: str) -> int | None:
    """Where ``answer`` starts in ``piece`` (prepared text), or None."""
    numbers = parse_numbers(answer)
    if numbers:
        for n in parse_numbers(piece):
            if values_agree(numbers[0], n) is True:
                return n.start
        return None
    folded = piece.casefold()
    found = [folded.find(v.casefold()) for v in answer_variants(answer) or [answer]]
    hits = [i for i in found if i >= 0]
    return min(hits) if hits else None


def hedged_statement(sentence: str, answer: str) -> str | None:
    """The hedge word standing before ``answer`` in its own clause of ``sentence``, or None."""
    prep = prepare_text(sentence)
    start = 0
    aside: str | None = None  # a hedge set off by commas before the answer ("Температура, вероятно, …")
    before = ""  # the delimiter that opened the current piece
    for cut in [*_CLAUSE.finditer(prep), None]:
        end = cut.start() if cut is not None else len(prep)
        piece = prep[start:end]
        if answer_in_evidence(answer, piece):
            at = _answer_at(piece, answer)
            if at is not None:
                hedge = HEDGE_WORDS.search(piece[:at])
                if hedge is not None:
                    return hedge.group(0)
                return aside  # else the clause states it firmly
        if before == "," and cut is not None and cut.group(0) == "," and HEDGE_WORDS.fullmatch(piece.strip()):
            aside = piece.strip()
        before = cut.group(0) if cut is not None else ""
        start = cut.end() if cut is not None else end
    return None


def answer_hedged(answer: str, evidence_text: str) -> str | None:
    """A hedge word when every sentence of ``evidence_text`` that states ``answer`` hedges it
    (:func:`hedged_statement`); None when one states it firmly or none states it."""
    stated = [s for s in split_sentences(evidence_text) if answer_in_evidence(answer, s)]
    hedges = [hedged_statement(s, answer) for s in stated]
    if not stated or any(h is None for h in hedges):
        return None
    return hedges[0]
