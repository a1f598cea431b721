"""Per-option contradiction checks (``option_verifier``, never the distractor writer).

Candidates are checked in rank order until ``need`` are admitted. For each:

1. if the option matches another value the cited evidence states, it may be true → rejected
   ``option.supported_by_evidence`` without a model;
2. if a deterministic rule proves it false from a cited span (numeric outside tolerance,
   direction reversal, closed set) → admitted as ``deterministic-contradiction`` (no model call,
   unless ``confirm_deterministic`` asks the verifier as well);
3. otherwise the ``option_verifier`` must cite a span that contradicts it within the question's
   scope → ``model-verified``; "supported" or "not addressed" (absence is not contradiction)
   rejects it.

Model checks are one call per option by default. With ``options_per_call`` k > 1 the verifier
gets up to k options in one call (``option_verifier/multi-v1``: one verdict per option, each
judged on its own), which cuts an item's verifier calls by up to k where the per-call cost of
an endpoint dominates; an option the reply leaves out is rejected ``option.not_contradicted``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from arcticqa.gates.contradiction import contradiction, evidence_supports_value
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection, rule
from arcticqa.stages.distractors import DistractorCandidate
from arcticqa.stages.findings import Finding, Provenance, span_payload
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.results import StepResult

__all__ = ["OPTION_PROMPT", "MULTI_OPTION_PROMPT", "OptionVerdicts", "SUPPORTED", "NOT_CONTRADICTED", "UNRESOLVED_SPAN", "Verification",
           "OptionVerdict", "OptionCheck", "OptionCheckResult", "check_options"]

OPTION_PROMPT = "option_verifier/v1"
MULTI_OPTION_PROMPT = "option_verifier/multi-v1"

SUPPORTED = rule("option.supported_by_evidence", "a reasonable reading of the evidence supports the option")
NOT_CONTRADICTED = rule("option.not_contradicted",
                        "no cited evidence contradicts the option within the question's scope")
UNRESOLVED_SPAN = rule("option.unresolved_span", "the verdict cites a span it was not given")

Verification = Literal["deterministic-contradiction", "model-verified"]


class OptionVerdict(BaseModel):
    """The option verifier's output."""

    verdict: Literal["contradicted", "supported", "not_addressed", "ambiguous"]
    span_ids: list[str] = Field(default_factory=list, description="spans that contradict (or support) it")
    interpretation: str = Field(default="", description="how the option reads as an answer to the question")
    reason: str = ""


class OptionVerdictItem(OptionVerdict):
    option_id: int = Field(description="the option_id the verdict is for")


class OptionVerdicts(BaseModel):
    """The option verifier's output when it is given several options in one call."""

    verdicts: list[OptionVerdictItem]


class OptionCheck(BaseModel):
    """What is stored for every checked option."""

    index: int  # position in the writer's candidates
    text: str
    type: str
    admitted: bool
    verification: Verification | None = None
    rule: str | None = None  # contradiction rule (numeric_outside_tolerance, ...) or rejection rule id
    evidence_span_id: str | None = None
    evidence: str | None = None
    verdict: str  # contradicted|supported|not_addressed|ambiguous
    rejection: Rejection | None = None
    provenance: Provenance | None = None


class OptionCheckResult(StepResult):
    subject: str
    checks: list[OptionCheck] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Some options were admitted."""
        return bool(self.admitted)

    @property
    def admitted(self) -> list[OptionCheck]:
        return [c for c in self.checks if c.admitted]

    @property
    def rejections(self) -> list[Rejection]:
        return [c.rejection for c in self.checks if c.rejection is not None]


def _deterministic(candidate: DistractorCandidate, finding: Finding) -> OptionCheck | None:
    for span in finding.support:
        found = contradiction(candidate.text, span.text or "", finding.answer, finding.answer_type)
        if found is not None:
            return OptionCheck(index=-1, text=candidate.text, type=candidate.type, admitted=True,
                               verification="deterministic-contradiction", rule=found.rule,
                               evidence_span_id=span.id, evidence=found.evidence, verdict="contradicted")
    return None


async def check_options(candidates: list[tuple[int, DistractorCandidate]], finding: Finding, draft: QuestionDraft,
                        llm: RoleClient, *, subject: str, need: int = 4, confirm_deterministic: bool = False,
                        options_per_call: int = 1) -> OptionCheckResult:
    """Check ``(index, candidate)`` pairs in order until ``need`` are admitted."""
    result = OptionCheckResult(subject=subject)
    given = {s.id for s in finding.all_spans}
    queue = list(candidates)
    while queue and len(result.admitted) < need:
        # the next options that need the model, deciding the free ones on the way
        asking: list[tuple[int, DistractorCandidate, OptionCheck | None]] = []
        while queue and len(asking) < options_per_call and len(result.admitted) < need:
            index, candidate = queue.pop(0)
            supported = evidence_supports_value(candidate.text, finding.evidence_text, finding.answer)
            if supported is not None:
                rejection = SUPPORTED.reject("the option matches a value the cited evidence states",
                                             option=candidate.text, evidence=supported, decided_by="rule")
                result.checks.append(OptionCheck(index=index, text=candidate.text, type=candidate.type,
                                                 admitted=False, rule=rejection.rule_id, evidence=supported,
                                                 verdict="supported", rejection=rejection))
                continue
            proof = _deterministic(candidate, finding)
            if proof is not None and not confirm_deterministic:
                result.checks.append(proof.model_copy(update={"index": index}))
                continue
            asking.append((index, candidate, proof))
        if not asking:
            continue
        common = {"question": draft.question, "question_context": draft.question_context,
                  "answer": finding.answer, "scope": finding.scope.values(),
                  "spans": span_payload(finding.all_spans)}
        if options_per_call == 1:
            index, candidate, proof = asking[0]
            reply = await llm.ask("option_verifier", OPTION_PROMPT,
                                  {**common, "option": candidate.text, "option_type": candidate.type},
                                  OptionVerdict, subject=f"{subject}/opt{index}")
            verdicts: dict[int, OptionVerdict] = {index: reply.output}
            provenance = Provenance.of(reply)
        else:
            options = [{"id": index, "text": candidate.text, "type": candidate.type}
                       for index, candidate, _ in asking]
            multi = await llm.ask("option_verifier", MULTI_OPTION_PROMPT, {**common, "options": options},
                                  OptionVerdicts, subject=f"{subject}/opts" + "-".join(str(i) for i, _, _ in asking))
            verdicts = {v.option_id: v for v in multi.output.verdicts}
            provenance = Provenance.of(multi)
        for index, candidate, proof in asking:
            result.checks.append(_judged(index, candidate, proof, verdicts.get(index), given, provenance))
    return result


def _judged(index: int, candidate: DistractorCandidate, proof: OptionCheck | None, verdict: OptionVerdict | None,
            given: set[str], provenance: Provenance) -> OptionCheck:
    """One option's check from the verifier's verdict on it (None: the reply left it out)."""
    if verdict is None:
        rejection = NOT_CONTRADICTED.reject("the verifier returned no verdict for this option", option=candidate.text)
        return OptionCheck(index=index, text=candidate.text, type=candidate.type, admitted=False,
                           verdict="ambiguous", provenance=provenance, rejection=rejection, rule=rejection.rule_id)
    unknown = [i for i in verdict.span_ids if i not in given]
    check = OptionCheck(index=index, text=candidate.text, type=candidate.type, admitted=False,
                        verdict=verdict.verdict, provenance=provenance,
                        evidence_span_id=verdict.span_ids[0] if verdict.span_ids else None)
    if verdict.verdict == "contradicted" and verdict.span_ids and not unknown:
        if proof is not None:
            check = proof.model_copy(update={"index": index, "provenance": provenance})
        else:
            check.admitted, check.verification, check.rule = True, "model-verified", "model"
    elif unknown:
        check.rejection = UNRESOLVED_SPAN.reject(option=candidate.text, span_ids=unknown)
    elif verdict.verdict == "supported":
        check.rejection = SUPPORTED.reject(verdict.reason or None, option=candidate.text,
                                           interpretation=verdict.interpretation, decided_by="model")
    else:
        check.rejection = NOT_CONTRADICTED.reject(verdict.reason or None, option=candidate.text,
                                                  verdict=verdict.verdict)
    if check.rejection is not None:
        check.rule = check.rejection.rule_id
    return check
