"""Blinded reconstruction: the ``reconstructor`` role answers the question from the evidence
spans without ever seeing the answer.

Blinding is structural: :func:`reconstructor_variables` — the only place the prompt variables are
built — has no parameter through which the answer (or the finding) could pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from arcticqa.evidence import Span, SpanRef
from arcticqa.llm.types import RoleClient
from arcticqa.rules import Rejection, rule
from arcticqa.stages.findings import ClaimType, Provenance, span_payload
from arcticqa.stages.results import StepResult

__all__ = ["RECONSTRUCT_PROMPT", "UNRESOLVED_SPAN", "Reconstruction", "ReconstructResult",
           "reconstructor_variables", "reconstruct"]

RECONSTRUCT_PROMPT = "reconstructor/v1"
UNRESOLVED_SPAN = rule("reconstruct.unresolved_span", "the reconstruction cites a span it was not given")


class Reconstruction(BaseModel):
    """The reconstructor's output."""

    answer: str = Field(description="the answer the evidence gives to the question")
    span_ids: list[str] = Field(default_factory=list, description="spans supporting that answer")
    claim_type: ClaimType
    alternatives: list[str] = Field(default_factory=list,
                                    description="other answers a careful reader could defend")


class ReconstructResult(StepResult):
    subject: str
    output: Reconstruction
    rejections: list[Rejection] = Field(default_factory=list)
    provenance: Provenance

    @property
    def ok(self) -> bool:
        return not self.rejections


def reconstructor_variables(question: str, question_context: str,
                            spans: Sequence[Span | SpanRef]) -> dict[str, Any]:
    """The reconstructor's prompt variables. Deliberately no answer parameter."""
    return {"question": question, "question_context": question_context, "spans": span_payload(spans)}


async def reconstruct(question: str, question_context: str, spans: Sequence[Span | SpanRef],
                      llm: RoleClient, *, subject: str) -> ReconstructResult:
    """Have ``reconstructor`` answer blind; gate that its cited spans are among those given."""
    variables = reconstructor_variables(question, question_context, spans)
    reply = await llm.ask("reconstructor", RECONSTRUCT_PROMPT, variables, Reconstruction, subject=subject)
    given = {s.id for s in spans}
    unknown = [i for i in reply.output.span_ids if i not in given]
    rejections = [UNRESOLVED_SPAN.reject(span_ids=unknown)] if unknown else []
    return ReconstructResult(subject=subject, output=reply.output, rejections=rejections,
                             provenance=Provenance.of(reply))
