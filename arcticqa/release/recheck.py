"""``validate-release --recheck``: re-run the deterministic gates on a release as published.

No gate logic lives here: each test is one function of :mod:`arcticqa.gates`, the same the
item-construction stages call. This module feeds them the published text and turns their
verdicts into :class:`RecheckFlag` records. Gates that reject carry their own rule ids
(``question.*``, ``distractor.*``); the two checks that only make sense on a finished item
(a direction distractor that is not a reversal, a contradiction label that no rule reproduces)
are named by the ``recheck.*`` rules below.

Gates used (all from the :mod:`arcticqa.gates` package API):

- ``answer_leak(question, context, answer) -> Rejection | None``
- ``not_standalone(question, context) -> Rejection | None``
- ``check_distractor(answer, option, earlier) -> Rejection | None`` (equals the answer,
  duplicate, within tolerance with units converted, all/none of the above, negation, compound,
  format)
- ``is_direction_reversal(answer, option) -> bool | None`` (direction-typed distractors)
- ``contradiction(option, evidence_text, answer, answer_type) -> Contradiction | None`` (only
  when the release includes evidence text: a ``deterministic-contradiction`` label that no rule
  reproduces is flagged)

Every finding carries a severity (:data:`SEVERITY`): ``error`` when the item is wrong (a leak, a
question that is not standalone, an option equal to or within tolerance of the answer, a
duplicate at precision, an answer that is the odd one out in format, a cue that beats chance) —
errors make the release invalid; ``warning`` for advice (a format difference that does not single
out the answer, a published label our rules cannot reproduce). The option-set cue audit
(:mod:`arcticqa.release.cues`) runs on the answer-present condition of every item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from arcticqa.gates import answer_leak, check_distractor, contradiction, is_direction_reversal, not_standalone
from arcticqa.gates.numbers import parse_numbers
from arcticqa.release.cues import audit_release
from arcticqa.release.models import RecheckFlag, RecheckResult, ReleaseItem
from arcticqa.rules import rule

__all__ = ["SEVERITY", "recheck_items", "answer_format_odd", "deterministic_coverage"]

R_NOT_REVERSAL = rule("recheck.direction_not_reversal",
                      "A direction distractor does not reverse the gold answer's direction")
R_NOT_REPRODUCED = rule("recheck.contradiction_not_reproduced",
                        "A distractor labelled deterministic-contradiction is not proved false by "
                        "any contradiction rule against the released evidence")
R_ANSWER_FORMAT_ODD = rule("recheck.answer_format_odd",
                           "The gold answer is the only option with (or without) decimals, a unit, "
                           "or its count of numbers: its format gives it away")
R_CUE = rule("recheck.cue_beats_chance",
             "A cue-only strategy (no question read) beats chance on the answer-present options")

#: rule id -> severity; any rule not listed (question.*, equals_answer, duplicate, …) is an error
SEVERITY: dict[str, str] = {
    "distractor.format_mismatch": "warning",
    "distractor.compound": "warning",
    "distractor.negation_only": "warning",
    R_NOT_REVERSAL.id: "warning",
    R_NOT_REPRODUCED.id: "warning",
}

def _is_direction(kind: str) -> bool:
    return "direction" in kind.lower()


def answer_format_odd(answer: str, distractors: list[str]) -> str | None:
    """Why the answer's number format singles it out among the options, or None."""
    features: dict[str, Callable[[str], bool | int]] = {
        "decimals": lambda t: any(n.decimals > 0 for n in parse_numbers(t)),
        "a unit": lambda t: any(n.unit for n in parse_numbers(t)),
        "numbers": lambda t: len(parse_numbers(t)),
    }
    if not distractors or not any(parse_numbers(t) for t in [answer, *distractors]):
        return None
    for name, feature in features.items():
        mine = feature(answer)
        if all(feature(d) != mine for d in distractors) and len({feature(d) for d in distractors}) == 1:
            if name == "numbers":
                return f"the answer has {mine} number(s), every other option {feature(distractors[0])}"
            return f"the answer is the only option {'with' if mine else 'without'} {name}"
    return None


def _answer_type(item: ReleaseItem, kind: str) -> str:
    return "numeric" if item.numeric_answer else "direction" if _is_direction(kind) else "other"


def deterministic_coverage(items: list[ReleaseItem], prove: Callable[..., Any]) -> dict[str, Any]:
    """How many distractors the contradiction rules prove false with the question, its context
    and the gold answer as the only evidence (the figure behind "most distractors are proved
    false without a model"; a fix that makes it fall has lost a true proof)."""
    proved: dict[str, int] = {}
    total = 0
    for item in items:
        evidence = "\n".join([item.question, item.question_context, item.gold_answer])
        for d in item.distractors:
            total += 1
            proof = prove(d.text, evidence, item.gold_answer, _answer_type(item, d.type))
            if proof is not None:
                proved[proof.rule] = proved.get(proof.rule, 0) + 1
    return {"distractors": total, "proved": sum(proved.values()), "by_rule": dict(sorted(proved.items()))}


def recheck_items(items: list[ReleaseItem]) -> RecheckResult:
    """Run every deterministic gate on ``items``; return the flags, the cue audit and the coverage."""
    flags: list[RecheckFlag] = []

    def flag(item: ReleaseItem, rank: int | None, rule_id: str, message: str) -> None:
        severity = SEVERITY.get(rule_id, "error")
        flags.append(RecheckFlag(item_id=item.item_id, option_rank=rank, rule_id=rule_id,
                                 message=message, severity="warning" if severity == "warning" else "error"))

    for item in sorted(items, key=lambda i: i.item_id):
        for rej in (answer_leak(item.question, item.question_context, item.gold_answer),
                    not_standalone(item.question, item.question_context)):
            if rej is not None:
                flag(item, None, rej.rule_id, rej.message)
        evidence = None
        if item.evidence and all(e.text is not None for e in item.evidence):
            evidence = "\n".join(e.text or "" for e in item.evidence)
        earlier: list[str] = []
        for d in sorted(item.distractors, key=lambda d: d.rank):
            rej = check_distractor(item.gold_answer, d.text, earlier, question=item.question)
            earlier.append(d.text)
            if rej is not None:
                flag(item, d.rank, rej.rule_id, f"{d.text!r}: {rej.message}")
            # None means the gate cannot compare (no shared axis): only a definite "no" is flagged
            if _is_direction(d.type) and is_direction_reversal(item.gold_answer, d.text) is False:
                flag(item, d.rank, R_NOT_REVERSAL.id,
                     f"{d.text!r} does not reverse the direction of {item.gold_answer!r}")
            if evidence is not None and d.verification == "deterministic-contradiction":
                if contradiction(d.text, evidence, item.gold_answer, _answer_type(item, d.type)) is None:
                    flag(item, d.rank, R_NOT_REPRODUCED.id,
                         f"no contradiction rule proves {d.text!r} false against the evidence")
        texts = [d.text for d in sorted(item.distractors, key=lambda d: d.rank)]
        odd = answer_format_odd(item.gold_answer, texts)
        if odd:
            flag(item, None, R_ANSWER_FORMAT_ODD.id, f"{item.gold_answer!r}: {odd}")
    cues = audit_release(items)
    for cue in cues:
        if cue.severity is not None:
            flags.append(RecheckFlag(
                item_id="(release)", rule_id=R_CUE.id, severity="error" if cue.severity == "error" else "warning",
                message=(f"'{cue.strategy}' scores {cue.accuracy:.1%} (95% CI {cue.ci_low:.1%}–{cue.ci_high:.1%}) "
                         f"against chance {cue.chance:.1%} on {cue.items} items")))
    return RecheckResult(flags=flags, cues=[{**c.model_dump(), "severity": c.severity} for c in cues],
                         coverage=deterministic_coverage(items, contradiction))
