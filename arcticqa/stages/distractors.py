"""Distractor writing: the ``distractor_writer`` role proposes 4–8 typed, ranked wrong options;
the free prefilter (:mod:`arcticqa.gates.distractors`) drops the unusable ones before any
option verifier call, and numeric candidates are reordered so the answer's rank among the
admitted values is spread evenly (seeded by the subject; :func:`balance_answer_rank`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from arcticqa.gates.distractors import balance_answer_rank, prefilter_distractors
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection
from arcticqa.stages.findings import Finding, Provenance, span_payload
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.results import StepResult

__all__ = ["DISTRACTOR_PROMPT", "DistractorType", "DistractorCandidate", "DistractorWriterOutput",
           "DistractorsResult", "write_distractors"]

DISTRACTOR_PROMPT = "distractor_writer/v2"

DistractorType = Literal["numeric", "direction", "category", "entity", "scope", "closed_set"]


class DistractorCandidate(BaseModel):
    text: str
    type: DistractorType
    rationale: str = Field(default="", description="why the evidence makes this option false")


class DistractorWriterOutput(BaseModel):
    candidates: list[DistractorCandidate] = Field(min_length=4, max_length=8, description="ranked best first")


class DistractorsResult(StepResult):
    subject: str
    candidates: list[DistractorCandidate]
    kept: list[int] = Field(default_factory=list, description="indices into candidates, rank order")
    rejections: list[Rejection] = Field(default_factory=list)
    provenance: Provenance

    @property
    def ok(self) -> bool:
        """Some candidates passed the free gates."""
        return bool(self.kept)

    def kept_candidates(self) -> list[DistractorCandidate]:
        return [self.candidates[i] for i in self.kept]


async def write_distractors(finding: Finding, draft: QuestionDraft, llm: RoleClient, *,
                            subject: str) -> DistractorsResult:
    """Ask ``distractor_writer`` for candidates and run the free prefilter over them."""
    variables = {
        "question": draft.question,
        "question_context": draft.question_context,
        "answer": finding.answer,
        "finding": {"claim": finding.claim, "answer_type": finding.answer_type, "unit": finding.unit,
                    "claim_type": finding.claim_type, "scope": finding.scope.values()},
        "spans": span_payload(finding.all_spans),
    }
    reply = await llm.ask("distractor_writer", DISTRACTOR_PROMPT, variables, DistractorWriterOutput,
                          subject=subject)
    candidates = reply.output.candidates
    _, rejections = prefilter_distractors(finding.answer, [c.text for c in candidates])
    dropped = {int(r.evidence["index"]) for r in rejections}
    kept = [i for i in range(len(candidates)) if i not in dropped]
    # the option check admits in this order: spread the answer's rank among numeric options
    balanced = balance_answer_rank(finding.answer, [candidates[i].text for i in kept], subject)
    kept = [kept[j] for j in balanced]
    return DistractorsResult(subject=subject, candidates=candidates, kept=kept, rejections=rejections,
                             provenance=Provenance.of(reply))
