"""Answer-first question writing: the ``question_writer`` role gets the fixed answer, claim and
scope and writes a standalone question plus a ``question_context`` (definitions, place, period,
sample; never results). Deterministic gates then check leak, standalone wording, scope, length,
and a cause the finding does not state.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from arcticqa.gates.question import (
    answer_leak,
    length_bounds,
    not_standalone,
    scope_dropped,
    unsupported_cause,
)
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection
from arcticqa.stages.findings import Finding, Provenance, span_payload
from arcticqa.stages.results import StepResult

__all__ = ["QUESTION_PROMPT", "QuestionDraft", "QuestionResult", "check_question", "write_question"]

QUESTION_PROMPT = "question_writer/v1"


class QuestionDraft(BaseModel):
    """The question writer's output."""

    question: str = Field(description="a standalone question whose answer is the given answer")
    question_context: str = Field(default="", description="definitions, place, period, sample; never results")


class QuestionResult(StepResult):
    finding_id: str
    revision: int
    draft: QuestionDraft
    rejections: list[Rejection] = Field(default_factory=list)
    provenance: Provenance

    @property
    def ok(self) -> bool:
        return not self.rejections


def check_question(draft: QuestionDraft, finding: Finding) -> list[Rejection]:
    """All deterministic question gates (each rule at most once)."""
    checks = [
        answer_leak(draft.question, draft.question_context, finding.answer),
        not_standalone(draft.question, draft.question_context),
        scope_dropped(draft.question, draft.question_context, dict(finding.scope.values())),
        length_bounds(draft.question, draft.question_context),
        unsupported_cause(draft.question, f"{finding.claim}\n{finding.evidence_text}", finding.claim_type),
    ]
    return [c for c in checks if c is not None]


async def write_question(finding: Finding, llm: RoleClient, *, revision: int = 0,
                         feedback: list[str] | None = None,
                         previous: QuestionDraft | None = None) -> QuestionResult:
    """Ask ``question_writer`` for a question about ``finding``; revisions get the failure reasons."""
    variables = {
        "finding": {"claim": finding.claim, "answer_type": finding.answer_type, "unit": finding.unit,
                    "claim_type": finding.claim_type, "scope": finding.scope.values()},
        "answer": finding.answer,
        "spans": span_payload(finding.all_spans),
        "revision": revision,
        "feedback": list(feedback or []),
        "previous": previous.model_dump() if previous else None,
    }
    subject = f"{finding.id}/r{revision}"
    reply = await llm.ask("question_writer", QUESTION_PROMPT, variables, QuestionDraft, subject=subject)
    return QuestionResult(finding_id=finding.id, revision=revision, draft=reply.output,
                          rejections=check_question(reply.output, finding), provenance=Provenance.of(reply))
