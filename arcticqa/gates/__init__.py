"""Deterministic gates: the model-free checks that run before and after every construction role.

This is the stable public API (also used by ``arcticqa validate-release --recheck`` on published
items, where no source text is available):

* :func:`answer_leak` (question, context, answer) -> Rejection | None
* :func:`not_standalone` (question, context) -> Rejection | None
* :func:`scope_dropped` (question, context, scope) -> Rejection | None
* :func:`length_bounds` (question, context) -> Rejection | None
* :func:`options_equivalent` (a, b) -> bool
* :func:`numeric_within_tolerance` (answer, option) -> bool | None (None = not comparable)
* :func:`is_direction_reversal` (answer, option) -> bool | None (None = not comparable)
* :func:`contradiction` (option, evidence_text, answer, answer_type) -> Contradiction | None
* :func:`evidence_supports_value` (option, evidence_text, answer) -> str | None
* :func:`prefilter_distractors` (answer, candidates) -> (kept, rejections)
* :func:`parse_numbers`, :func:`normalize`, :func:`language_script`

Every rejection carries a stable rule id declared with :func:`arcticqa.rules.rule`.
"""

from __future__ import annotations

from arcticqa.gates.contradiction import (
    Contradiction,
    ContradictionRule,
    closed_set_sentence,
    contradiction,
    evidence_supports_value,
)
from arcticqa.gates.direction import antonyms, direction_terms, is_direction_reversal
from arcticqa.gates.distractors import check_distractor, options_equivalent, prefilter_distractors
from arcticqa.gates.evidence import answer_in_evidence, cites_other_work, scope_in_evidence
from arcticqa.gates.numbers import Number, numeric_within_tolerance, parse_numbers, values_agree
from arcticqa.gates.question import answer_leak, length_bounds, not_standalone, phrase_covered, scope_dropped
from arcticqa.gates.text import language_script, normalize, normalize_loose

__all__ = [
    "Contradiction",
    "ContradictionRule",
    "Number",
    "answer_in_evidence",
    "answer_leak",
    "antonyms",
    "check_distractor",
    "cites_other_work",
    "closed_set_sentence",
    "contradiction",
    "direction_terms",
    "evidence_supports_value",
    "is_direction_reversal",
    "language_script",
    "length_bounds",
    "normalize",
    "normalize_loose",
    "not_standalone",
    "numeric_within_tolerance",
    "options_equivalent",
    "parse_numbers",
    "phrase_covered",
    "prefilter_distractors",
    "scope_dropped",
    "scope_in_evidence",
    "values_agree",
]
