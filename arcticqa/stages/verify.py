"""Verification: a deterministic answer matcher first, then the ``verifier`` role.

The matcher compares the blind reconstruction with the gold answer (normalised text, numbers
with unit conversion and stated precision, numbers written in words, direction antonyms, and
non-answers such as "not stated in the evidence"). It decides ``match`` or
``mismatch`` when it can; only an ``undecided`` pair is left to the verifier's equivalence
judgement, and that path is labelled ``model`` (lower confidence). The verifier also judges
entailment, scope and claim type, context sufficiency and defensible alternatives; an answer
every cited sentence hedges is rejected by rule (``verify.hedged_answer``,
:mod:`arcticqa.gates.hedge`) whatever the verifier says.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field

from arcticqa.gates.abstain import abstention_rule
from arcticqa.gates.contradiction import set_members
from arcticqa.gates.direction import is_direction_reversal
from arcticqa.gates.distractors import options_equivalent, taxon_key
from arcticqa.gates.hedge import answer_hedged
from arcticqa.gates.numbers import numeric_within_tolerance
from arcticqa.gates.numwords import spelled_as_digits
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection, rule
from arcticqa.stages.findings import ClaimType, Finding, Provenance, span_payload
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.reconstruct import Reconstruction
from arcticqa.stages.results import StepResult

__all__ = [
    "VERIFY_PROMPT",
    "MatchDecision",
    "Verdict",
    "VerifyResult",
    "RECONSTRUCT_MISMATCH",
    "NOT_ENTAILED",
    "HEDGED_ANSWER",
    "CAUSAL_OVERCLAIM",
    "SCOPE_CHANGED",
    "CONTEXT_INSUFFICIENT",
    "CONTEXT_DISCLOSES",
    "DEFENSIBLE_ALTERNATIVE",
    "match_answers",
    "verify",
]

VERIFY_PROMPT = "verifier/v1"

RECONSTRUCT_MISMATCH = rule("reconstruct.mismatch", "the blind reconstruction does not give the answer")
NOT_ENTAILED = rule("verify.not_entailed", "the cited evidence does not entail the answer")
HEDGED_ANSWER = rule("verify.hedged_answer",
                     "every cited sentence stating the answer hedges it ('possibly declined', 'may have "
                     "increased', 'either … or'): decided by rule, whatever the verifier says")
CAUSAL_OVERCLAIM = rule("verify.causal_overclaim", "the question asks for a cause the finding does not claim")
SCOPE_CHANGED = rule("verify.scope_changed", "the question changes the finding's scope")
CONTEXT_INSUFFICIENT = rule("verify.context_insufficient",
                            "the question and context do not fix a single answer")
CONTEXT_DISCLOSES = rule("verify.context_discloses_answer", "the context discloses the answer")
DEFENSIBLE_ALTERNATIVE = rule("verify.defensible_alternative",
                              "another answer is defensible from the evidence")

MatchDecision = Literal["match", "mismatch", "undecided"]
#: a text without a letter or a digit: no answer
_NO_CONTENT = re.compile(r"[\W_]*")
#: a station, site or sample code: "B7", "FS-4", "PS106", "ARK-XXV"
_CODE = re.compile(r"[A-Z]{1,4}[-‐ ]?(?:\d{1,4}[a-z]?|[IVX]{1,5})")


def _taxa(text: str) -> frozenset[str] | None:
    """The Latin binomials a text lists by genus initial and epithet, or None when any member is
    no binomial ("Arctic willow" is left to the verifier)."""
    members = set_members(text.strip())
    keys = [taxon_key(m) for m in members]
    if not keys or any(k is None for k in keys):
        return None
    return frozenset(k for k in keys if k is not None)


def _codes(text: str) -> frozenset[str] | None:
    """The codes a text lists ("B7 and B8" → {B7, B8}), or None when any member is no code."""
    members = set_members(text.strip())
    if not members or not all(_CODE.fullmatch(m) for m in members):
        return None
    return frozenset(re.sub(r"[-‐\s]", "", m) for m in members)  # "PS-106" = "PS106"


class Verdict(BaseModel):
    """The verifier's output."""

    answers_equivalent: bool | None = Field(
        default=None, description="only when asked: does the reconstruction mean the gold answer?")
    entailed: bool = Field(description="the cited evidence entails the gold answer to this question")
    entailment_span_ids: list[str] = Field(default_factory=list)
    scope_preserved: bool = True
    question_claim_type: ClaimType = Field(description="the kind of claim the question asks about")
    context_sufficient: bool = True
    context_discloses_answer: bool = False
    defensible_alternatives: list[str] = Field(default_factory=list)
    reason: str = ""


class VerifyResult(StepResult):
    subject: str
    match: MatchDecision  # the deterministic matcher's decision
    match_confidence: Literal["deterministic", "model"]
    verdict: Verdict
    rejections: list[Rejection] = Field(default_factory=list)
    provenance: Provenance

    @property
    def ok(self) -> bool:
        return not self.rejections


def match_answers(gold: str, reconstructed: str) -> MatchDecision:
    """Deterministic matcher: ``match`` / ``mismatch`` when provable, else ``undecided``.

    A reconstruction that gives no answer ("not stated in the evidence", "cannot be determined":
    the abstention lexicon of :mod:`arcticqa.gates.abstain`; or no word or digit at all: "", "—",
    "?") is a ``mismatch``, and so is another set of station or site codes ("B2 and B3" for "B7
    and B8", "FS-9" for "FS-4": a code has no synonym) or of Latin binomials ("Salix polaris" for
    "Salix arctica and Dryas octopetala"; "S. arctica" is "Salix arctica"); numbers written
    in words are read as digits ("forty percent" is 40 %, "twenty-seven percent" 27 %).
    """
    if _NO_CONTENT.fullmatch(reconstructed) and not _NO_CONTENT.fullmatch(gold):
        return "mismatch"  # "", "—", "?": no answer at all
    if abstention_rule(reconstructed) is not None and abstention_rule(gold) is None:
        return "mismatch"
    for keys in (_codes, _taxa):
        gold_keys, rebuilt_keys = keys(gold), keys(reconstructed)
        if gold_keys is not None and rebuilt_keys is not None:
            # codes and Latin binomials name one thing each: "B2 and B3" is not "B7 and B8",
            # "Salix polaris" not "Salix arctica and Dryas octopetala"; "PS106" is "PS-106"
            return "match" if gold_keys == rebuilt_keys else "mismatch"
    if options_equivalent(gold, reconstructed):
        return "match"
    gold, reconstructed = spelled_as_digits(gold), spelled_as_digits(reconstructed)
    if options_equivalent(gold, reconstructed):
        return "match"
    if is_direction_reversal(gold, reconstructed) is True:
        return "mismatch"
    within = numeric_within_tolerance(gold, reconstructed)
    if within is False:
        return "mismatch"
    if within is True and is_direction_reversal(gold, reconstructed) is None:
        return "match"
    return "undecided"


async def verify(finding: Finding, draft: QuestionDraft, reconstruction: Reconstruction, llm: RoleClient,
                 *, subject: str) -> VerifyResult:
    """Run the matcher and the ``verifier`` role; every failed check becomes a rejection."""
    decision = match_answers(finding.answer, reconstruction.answer)
    variables = {
        "question": draft.question,
        "question_context": draft.question_context,
        "answer": finding.answer,
        "finding": {"claim": finding.claim, "claim_type": finding.claim_type, "scope": finding.scope.values(),
                    "answer_type": finding.answer_type, "unit": finding.unit},
        "spans": span_payload(finding.all_spans),
        "reconstruction": reconstruction.model_dump(),
        "judge_equivalence": decision == "undecided",
    }
    reply = await llm.ask("verifier", VERIFY_PROMPT, variables, Verdict, subject=subject)
    verdict = reply.output
    rejections: list[Rejection] = []
    confidence: Literal["deterministic", "model"] = "deterministic"
    if decision == "mismatch":
        rejections.append(RECONSTRUCT_MISMATCH.reject(
            f"the blind reconstruction answered {reconstruction.answer!r}, not {finding.answer!r}",
            reconstructed=reconstruction.answer, answer=finding.answer, decided_by="matcher"))
    elif decision == "undecided":
        confidence = "model"
        if verdict.answers_equivalent is not True:
            rejections.append(RECONSTRUCT_MISMATCH.reject(
                f"the verifier did not judge {reconstruction.answer!r} equivalent to {finding.answer!r}",
                reconstructed=reconstruction.answer, answer=finding.answer, decided_by="verifier"))
    if not verdict.entailed:
        rejections.append(NOT_ENTAILED.reject(verdict.reason or None, answer=finding.answer))
    hedge = answer_hedged(finding.answer, finding.evidence_text)
    if hedge is not None:
        rejections.append(HEDGED_ANSWER.reject(
            f"every cited sentence stating {finding.answer!r} hedges it ({hedge!r})", answer=finding.answer,
            hedge=hedge, decided_by="rule"))
    asked_causal = "causal" in (verdict.question_claim_type, reconstruction.claim_type)
    if asked_causal and finding.claim_type != "causal":
        rejections.append(CAUSAL_OVERCLAIM.reject(
            f"the question is read as causal but the finding is {finding.claim_type}",
            finding_claim_type=finding.claim_type, question_claim_type=verdict.question_claim_type,
            reconstruction_claim_type=reconstruction.claim_type))
    if not verdict.scope_preserved:
        rejections.append(SCOPE_CHANGED.reject(verdict.reason or None, scope=finding.scope.values()))
    if not verdict.context_sufficient:
        rejections.append(CONTEXT_INSUFFICIENT.reject(verdict.reason or None))
    if verdict.context_discloses_answer:
        rejections.append(CONTEXT_DISCLOSES.reject(verdict.reason or None))
    alternatives = [a for a in verdict.defensible_alternatives if not options_equivalent(a, finding.answer)]
    if alternatives:
        rejections.append(DEFENSIBLE_ALTERNATIVE.reject(
            f"defensible alternative answers: {alternatives}", alternatives=alternatives,
            reconstruction_alternatives=reconstruction.alternatives))
    return VerifyResult(subject=subject, match=decision, match_confidence=confidence, verdict=verdict,
                        rejections=rejections, provenance=Provenance.of(reply))
