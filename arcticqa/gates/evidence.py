"""Evidence gates for findings: is the answer (and each scope value) in the cited spans, and do
those spans report the paper's own result rather than cited work?"""

from __future__ import annotations

import re

from arcticqa.gates.numbers import parse_numbers, values_agree
from arcticqa.gates.question import answer_variants, phrase_covered
from arcticqa.gates.text import contains_phrase

__all__ = ["answer_in_evidence", "scope_in_evidence", "cites_other_work", "RESULT_SECTIONS"]

#: section kinds whose spans may support a finding's answer (the paper's own results)
RESULT_SECTIONS = frozenset({"abstract", "results", "discussion", "conclusions"})

_CITATION = re.compile(
    r"\b[A-Z][A-Za-z'\-]+(?: and [A-Z][A-Za-z'\-]+)?(?: et al\.?)?,? \(?(?:19|20)\d\d[a-z]?\)?"  # Smith et al. (2010)
    r"|\((?:e\.g\.,? |see |cf\. )?[A-Z][^()]{0,80}?(?:19|20)\d\d[a-z]?\)"  # (Smith, 2010; ...)
    r"|\[\d+(?:[,–-]\s?\d+)*\]"  # [12], [3-5]
    r"|\b(?:previous(?:ly)?|earlier|prior) (?:studies|work|research|reports?|investigations?)\b"
    r"|\b(?:has|have) been (?:reported|documented|shown|observed) (?:by|in|previously)\b"
    r"|\b(?:reported|found|observed|shown) by [A-Z]"
)


def cites_other_work(text: str) -> bool:
    """Whether ``text`` attributes something to other publications (author-year, [n], "previous studies")."""
    return bool(_CITATION.search(text))


def answer_in_evidence(answer: str, evidence_text: str) -> bool:
    """The answer occurs in the evidence: as text (or a bracket variant), or every one of its
    numbers occurs with a compatible unit (within stated precision)."""
    numbers = parse_numbers(answer)
    if numbers:
        evidence_numbers = parse_numbers(evidence_text)
        return all(any(values_agree(n, e) is True and (n.unit is None or e.unit is not None or n.decimals > 0)
                       for e in evidence_numbers) for n in numbers)
    return any(contains_phrase(evidence_text, v) for v in answer_variants(answer) or [answer])


def scope_in_evidence(value: str, evidence_text: str) -> bool:
    """A scope value is stated in the evidence (verbatim or by its key words)."""
    return phrase_covered(evidence_text, value)


