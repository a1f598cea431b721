"""Finding extraction: the ``finding_extractor`` role proposes up to K ranked findings from the
document's numbered evidence spans; deterministic gates keep those whose answer and scope are
really in the cited spans and whose spans report the paper's own result.

Also home of the models every later construction stage shares (:class:`Finding`,
:class:`Scope`, :class:`Provenance`) and of :func:`span_payload`, the structured form in which
spans are passed to every role.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from arcticqa.errors import UnknownSpanError
from arcticqa.evidence import Document, Span, SpanRef, resolve_span
from arcticqa.gates.evidence import RESULT_SECTIONS, answer_in_evidence, cites_other_work, scope_in_evidence
from arcticqa.gates.text import split_sentences
from arcticqa.llm.types import RoleClient, RoleReply
from arcticqa.rules import Rejection, rule
from arcticqa.stages.results import StepResult

__all__ = [
    "AnswerType",
    "ClaimType",
    "Scope",
    "CandidateFinding",
    "FindingExtractorOutput",
    "Provenance",
    "Finding",
    "RejectedFinding",
    "FindingsResult",
    "FINDING_PROMPT",
    "UNRESOLVED_SPAN",
    "ANSWER_NOT_IN_EVIDENCE",
    "SCOPE_NOT_IN_EVIDENCE",
    "BACKGROUND_CLAIM",
    "NO_SPANS",
    "span_payload",
    "evidence_spans",
    "check_finding",
    "extract_findings",
    "stable_id",
]

FINDING_PROMPT = "finding_extractor/v1"

AnswerType = Literal["numeric", "entity", "category", "direction", "set", "other"]
ClaimType = Literal["observation", "association", "causal", "definition"]

UNRESOLVED_SPAN = rule("finding.unresolved_span", "a cited span id does not resolve in the document")
ANSWER_NOT_IN_EVIDENCE = rule("finding.answer_not_in_evidence",
                              "the answer (or its number) does not occur in the cited spans")
SCOPE_NOT_IN_EVIDENCE = rule("finding.scope_not_in_evidence",
                             "a scope value does not occur in the cited spans")
BACKGROUND_CLAIM = rule("finding.background_claim",
                        "the answer comes from background or cited work, not the paper's own result")
NO_SPANS = rule("finding.no_spans", "the finding cites no supporting span")


def stable_id(prefix: str, payload: Any, length: int = 20) -> str:
    """``prefix-`` + hex of sha256 over canonical JSON: the same content always gets the same id."""
    data = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{prefix}-{hashlib.sha256(data.encode()).hexdigest()[:length]}"


class Scope(BaseModel):
    """Where and to what the finding applies. Every non-empty value must be in the evidence."""

    location: str | None = None
    period: str | None = None
    population: str | None = None  # population / sample
    method: str | None = None
    comparison: str | None = None

    def values(self) -> dict[str, str]:
        return {k: v for k, v in self.model_dump().items() if v}


class CandidateFinding(BaseModel):
    """One finding as the extractor proposes it (span ids only, never quotes)."""

    claim: str = Field(description="the finding as one sentence, in the paper's terms")
    answer: str = Field(description="the short target answer (a value with unit, a name, a direction)")
    answer_type: AnswerType
    unit: str | None = Field(default=None, description="unit of a numeric answer, as written")
    claim_type: ClaimType
    scope: Scope = Field(default_factory=Scope)
    span_ids: list[str] = Field(description="spans from results/abstract/discussion stating the answer")
    scope_span_ids: list[str] = Field(default_factory=list,
                                      description="further spans (e.g. methods) stating the scope")


class FindingExtractorOutput(BaseModel):
    findings: list[CandidateFinding] = Field(description="ranked best first")


class Provenance(BaseModel):
    """The RoleReply facts stored with every model-derived output."""

    role: str
    prompt_version: str
    request_hash: str
    model: str
    provider: str
    cached: bool = False

    @classmethod
    def of(cls, reply: RoleReply[Any]) -> Provenance:
        return cls(role=reply.role, prompt_version=reply.prompt_version, request_hash=reply.request_hash,
                   model=reply.model, provider=reply.provider, cached=reply.cached)


class Finding(BaseModel):
    """A gated finding: the candidate plus its resolved evidence, id and rank."""

    id: str
    paper_id: str
    rank: int
    claim: str
    answer: str
    answer_type: AnswerType
    unit: str | None = None
    claim_type: ClaimType
    scope: Scope
    support: list[SpanRef]  # spans stating the answer
    setting: list[SpanRef] = Field(default_factory=list)  # further spans stating the scope

    @property
    def evidence_text(self) -> str:
        """The cited support text: the only text deterministic contradictions may use."""
        return "\n".join(s.text or "" for s in self.support)

    @property
    def all_spans(self) -> list[SpanRef]:
        return [*self.support, *self.setting]


class RejectedFinding(BaseModel):
    rank: int
    candidate: CandidateFinding
    rejections: list[Rejection]


class FindingsResult(StepResult):
    paper_id: str
    findings: list[Finding] = Field(default_factory=list)
    rejected: list[RejectedFinding] = Field(default_factory=list)
    provenance: Provenance | None = None

    @property
    def ok(self) -> bool:
        """Some candidate findings survived their gates."""
        return bool(self.findings)

    @property
    def rejections(self) -> list[Rejection]:
        return [r for f in self.rejected for r in f.rejections]


def span_payload(spans: Iterable[Span | SpanRef]) -> list[dict[str, str]]:
    """Spans as the roles receive them: ``[{id, section, text}]`` (structure, not prose)."""
    return [{"id": s.id, "section": s.section, "text": " ".join((s.text or "").split())} for s in spans]


def evidence_spans(document: Document, *, max_spans: int = 600) -> list[Span]:
    """The spans a finding may cite: evidence sections, no captions, document order."""
    kinds = {sec.kind for sec in document.sections if not sec.evidence}
    spans = [s for s in document.spans if not s.is_caption and s.section not in kinds]
    return spans[:max_spans]


def _resolve_all(document: Document, ids: Sequence[str]) -> tuple[list[Span], list[str]]:
    resolved, missing = [], []
    for span_id in ids:
        try:
            resolved.append(resolve_span(document, span_id))
        except UnknownSpanError:
            missing.append(span_id)
    return resolved, missing


def check_finding(candidate: CandidateFinding, document: Document) -> tuple[list[Span], list[Span], list[Rejection]]:
    """Gate one candidate: spans resolve, answer and scope are in them, own result not cited work.

    Returns the resolved support spans, setting spans and the rejections (empty = kept).
    """
    if not candidate.span_ids:
        return [], [], [NO_SPANS.reject(answer=candidate.answer)]
    support, missing = _resolve_all(document, candidate.span_ids)
    setting, missing_setting = _resolve_all(document, [i for i in candidate.scope_span_ids
                                                       if i not in candidate.span_ids])
    if missing or missing_setting:
        return support, setting, [UNRESOLVED_SPAN.reject(f"span ids {missing + missing_setting} do not resolve",
                                                         span_ids=missing + missing_setting)]
    rejections: list[Rejection] = []
    support_text = "\n".join(s.text for s in support)
    if not answer_in_evidence(candidate.answer, support_text):
        rejections.append(ANSWER_NOT_IN_EVIDENCE.reject(
            f"the answer {candidate.answer!r} does not occur in the cited spans",
            answer=candidate.answer, span_ids=candidate.span_ids))
    all_text = "\n".join(s.text for s in [*support, *setting])
    for dimension, value in candidate.scope.values().items():
        if not scope_in_evidence(value, all_text):
            rejections.append(SCOPE_NOT_IN_EVIDENCE.reject(
                f"the scope {dimension} {value!r} does not occur in the cited spans",
                dimension=dimension, value=value))
    wrong_section = [s.id for s in support if s.section not in RESULT_SECTIONS]
    if wrong_section:
        rejections.append(BACKGROUND_CLAIM.reject(
            "the answer is cited from outside results/abstract/discussion", span_ids=wrong_section,
            sections=sorted({s.section for s in support if s.section not in RESULT_SECTIONS})))
    else:
        cited = [sentence for s in support for sentence in split_sentences(s.text)
                 if answer_in_evidence(candidate.answer, sentence) and cites_other_work(sentence)]
        if cited:
            rejections.append(BACKGROUND_CLAIM.reject(
                "the sentence stating the answer cites other work", sentence=cited[0]))
    return support, setting, rejections


async def extract_findings(document: Document, llm: RoleClient, *, paper_id: str, k: int = 3,
                           title: str | None = None) -> FindingsResult:
    """Ask ``finding_extractor`` for up to ``k`` findings and keep the ones that pass the gates.

    Candidates are gated in the model's rank order; the kept findings are re-ranked 0.. in that
    order, so a later stage can fall back to the next one.
    """
    spans = evidence_spans(document)
    variables = {"paper_id": paper_id, "title": title or "", "k": k, "spans": span_payload(spans)}
    reply = await llm.ask("finding_extractor", FINDING_PROMPT, variables, FindingExtractorOutput,
                          subject=paper_id)
    result = FindingsResult(paper_id=paper_id, provenance=Provenance.of(reply))
    for rank, candidate in enumerate(reply.output.findings[:k]):
        support, setting, rejections = check_finding(candidate, document)
        if rejections:
            result.rejected.append(RejectedFinding(rank=rank, candidate=candidate, rejections=rejections))
            continue
        finding_id = stable_id("fd", {"paper": paper_id, "doc": document.sha256, "claim": candidate.claim,
                                      "answer": candidate.answer, "spans": candidate.span_ids}, 16)
        result.findings.append(Finding(
            id=finding_id, paper_id=paper_id, rank=len(result.findings), claim=candidate.claim,
            answer=candidate.answer, answer_type=candidate.answer_type, unit=candidate.unit,
            claim_type=candidate.claim_type, scope=candidate.scope,
            support=[s.ref() for s in support], setting=[s.ref() for s in setting]))
    return result
