"""Item construction orchestrator: paper → findings → question → blind reconstruction → verification
→ distractors → option checks → accepted item.

Each step goes through a :class:`StepRunner`, which the stage runner implements to memoise
finished steps in the store (a resumed build re-runs nothing that succeeded with the same
inputs); :func:`run_directly` just runs the step. Candidates are tried in rank order; a failed
question or verification gets at most ``max_revisions`` revisions fed with the failure reasons,
then the next candidate finding is tried.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, Field

from arcticqa.config import BuildSettings
from arcticqa.evidence import Document
from arcticqa.llm.types import RoleClient
from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection
from arcticqa.stages.accept import AcceptedItem, AcceptResult, PaperRef, accept_item
from arcticqa.stages.distractors import (
    DISTRACTOR_PROMPT,
    DistractorCandidate,
    DistractorsResult,
    write_distractors,
)
from arcticqa.stages.findings import FINDING_PROMPT, Finding, FindingsResult, extract_findings
from arcticqa.stages.option_check import OPTION_PROMPT, OptionCheck, OptionCheckResult, check_options
from arcticqa.stages.question import QUESTION_PROMPT, QuestionDraft, QuestionResult, write_question
from arcticqa.stages.reconstruct import RECONSTRUCT_PROMPT, Reconstruction, ReconstructResult, reconstruct
from arcticqa.stages.results import StepResult
from arcticqa.stages.verify import HEDGED_ANSWER, NOT_ENTAILED, VERIFY_PROMPT, VerifyResult, verify

__all__ = [
    "STAGES",
    "StepRunner",
    "run_directly",
    "ConstructionOptions",
    "FindingsInput",
    "QuestionInput",
    "ReconstructInput",
    "VerifyInput",
    "DistractorsInput",
    "OptionCheckInput",
    "AcceptInput",
    "StepRecord",
    "ConstructionResult",
    "construct_items",
]

R = TypeVar("R", bound=StepResult)

STAGES = ("findings", "question", "reconstruct", "verify", "distractors", "option_check", "accept")


class StepRunner(Protocol):
    async def __call__(self, stage: str, subject: str, inputs: BaseModel, fn: Callable[[], Awaitable[R]],
                       result_type: type[R]) -> R: ...


async def run_directly(stage: str, subject: str, inputs: BaseModel, fn: Callable[[], Awaitable[R]],
                       result_type: type[R]) -> R:
    """The trivial :class:`StepRunner`: no memoisation."""
    return await fn()


class ConstructionOptions(BaseModel):
    findings_per_paper: int = Field(3, ge=1)
    max_revisions: int = Field(1, ge=0)
    items_per_paper: int = Field(1, ge=1)
    seed: str = "arcticqa-v1"
    distractors_needed: int = Field(4, ge=1)
    #: also ask the option verifier about options a rule already proved false
    confirm_deterministic: bool = False
    #: options the option verifier judges in one call (1: a separate call per option)
    options_per_call: int = Field(1, ge=1)

    @classmethod
    def from_settings(cls, build: BuildSettings) -> ConstructionOptions:
        return cls(findings_per_paper=build.findings_per_paper, max_revisions=build.max_revisions,
                   items_per_paper=build.items_per_family, seed=build.seed, options_per_call=build.options_per_call)


# ---- step inputs: everything that determines a step's result (the runner hashes them) -------

class FindingsInput(BaseModel):
    paper_id: str
    document_sha256: str
    span_ids: list[str]
    k: int
    prompt: str = FINDING_PROMPT


class QuestionInput(BaseModel):
    finding: Finding
    revision: int
    feedback: list[str]
    previous: QuestionDraft | None
    prompt: str = QUESTION_PROMPT


class ReconstructInput(BaseModel):
    draft: QuestionDraft
    span_ids: list[str]
    prompt: str = RECONSTRUCT_PROMPT


class VerifyInput(BaseModel):
    finding: Finding
    draft: QuestionDraft
    reconstruction: Reconstruction
    prompt: str = VERIFY_PROMPT


class DistractorsInput(BaseModel):
    finding: Finding
    draft: QuestionDraft
    prompt: str = DISTRACTOR_PROMPT


class OptionCheckInput(BaseModel):
    finding: Finding
    draft: QuestionDraft
    candidates: list[tuple[int, DistractorCandidate]]
    need: int
    confirm_deterministic: bool
    options_per_call: int = 1
    prompt: str = OPTION_PROMPT


class AcceptInput(BaseModel):
    paper: PaperRef
    finding: Finding
    draft: QuestionDraft
    admitted: list[OptionCheck]
    writer_model: str
    prompt_versions: dict[str, str]
    seed: str
    need: int
    match_confidence: Literal["deterministic", "model"]


class StepRecord(BaseModel):
    """One line of the audit: which step ran on what, and which rules rejected."""

    stage: str
    subject: str
    ok: bool
    rule_ids: list[str] = Field(default_factory=list)


class ConstructionResult(BaseModel):
    paper_id: str
    steps: list[StepRecord] = Field(default_factory=list)
    findings: FindingsResult | None = None
    questions: list[QuestionResult] = Field(default_factory=list)
    reconstructions: list[ReconstructResult] = Field(default_factory=list)
    verifications: list[VerifyResult] = Field(default_factory=list)
    distractors: list[DistractorsResult] = Field(default_factory=list)
    option_checks: list[OptionCheckResult] = Field(default_factory=list)
    accepts: list[AcceptResult] = Field(default_factory=list)
    items: list[AcceptedItem] = Field(default_factory=list)

    @property
    def rejections(self) -> list[Rejection]:
        out: list[Rejection] = list(self.findings.rejections) if self.findings else []
        for group in (self.questions, self.reconstructions, self.verifications, self.distractors,
                      self.option_checks, self.accepts):
            for res in group:
                out.extend(res.rejections)
        return out

    def _log(self, stage: str, subject: str, rejections: list[Rejection], ok: bool | None = None) -> None:
        self.steps.append(StepRecord(stage=stage, subject=subject, ok=not rejections if ok is None else ok,
                                     rule_ids=[r.rule_id for r in rejections]))


def _paper_ref(paper: PaperRecord) -> PaperRef:
    return PaperRef(paper_id=paper.paperId, doi=paper.doi, title=paper.title, year=paper.year,
                    publication_date=paper.publicationDate)


async def _from_finding(paper: PaperRecord, finding: Finding, llm: RoleClient, options: ConstructionOptions,
                        step: StepRunner, result: ConstructionResult) -> AcceptedItem | None:
    feedback: list[str] = []
    previous: QuestionDraft | None = None
    for revision in range(options.max_revisions + 1):
        subject = f"{finding.id}/r{revision}"

        q_in = QuestionInput(finding=finding, revision=revision, feedback=feedback, previous=previous)

        async def _question(q_in: QuestionInput = q_in) -> QuestionResult:
            return await write_question(q_in.finding, llm, revision=q_in.revision, feedback=q_in.feedback,
                                        previous=q_in.previous)

        question = await step("question", subject, q_in, _question, QuestionResult)
        result.questions.append(question)
        result._log("question", subject, question.rejections)
        if question.rejections:
            feedback, previous = [f"{r.rule_id}: {r.message}" for r in question.rejections], question.draft
            continue
        draft = question.draft

        r_in = ReconstructInput(draft=draft, span_ids=[s.id for s in finding.all_spans])

        async def _reconstruct(draft: QuestionDraft = draft, subject: str = subject) -> ReconstructResult:
            return await reconstruct(draft.question, draft.question_context, finding.all_spans, llm,
                                     subject=subject)

        rebuilt = await step("reconstruct", subject, r_in, _reconstruct, ReconstructResult)
        result.reconstructions.append(rebuilt)
        result._log("reconstruct", subject, rebuilt.rejections)
        if rebuilt.rejections:
            feedback, previous = [f"{r.rule_id}: {r.message}" for r in rebuilt.rejections], draft
            continue

        v_in = VerifyInput(finding=finding, draft=draft, reconstruction=rebuilt.output)

        async def _verify(v_in: VerifyInput = v_in, subject: str = subject) -> VerifyResult:
            return await verify(v_in.finding, v_in.draft, v_in.reconstruction, llm, subject=subject)

        verified = await step("verify", subject, v_in, _verify, VerifyResult)
        result.verifications.append(verified)
        result._log("verify", subject, verified.rejections)
        if verified.rejections:
            if any(r.rule_id in (NOT_ENTAILED.id, HEDGED_ANSWER.id) for r in verified.rejections):
                return None  # the finding itself is unsupported: no rewording fixes that
            feedback, previous = [f"{r.rule_id}: {r.message}" for r in verified.rejections], draft
            continue
        return await _options_and_accept(paper, finding, draft, question, verified, llm, options, step,
                                         result, subject)
    return None


async def _options_and_accept(paper: PaperRecord, finding: Finding, draft: QuestionDraft,
                              question: QuestionResult, verified: VerifyResult, llm: RoleClient,
                              options: ConstructionOptions, step: StepRunner, result: ConstructionResult,
                              subject: str) -> AcceptedItem | None:
    d_in = DistractorsInput(finding=finding, draft=draft)

    async def _distractors() -> DistractorsResult:
        return await write_distractors(finding, draft, llm, subject=subject)

    written = await step("distractors", subject, d_in, _distractors, DistractorsResult)
    result.distractors.append(written)
    result._log("distractors", subject, written.rejections, ok=True)

    candidates = [(i, written.candidates[i]) for i in written.kept]
    o_in = OptionCheckInput(finding=finding, draft=draft, candidates=candidates, need=options.distractors_needed,
                            confirm_deterministic=options.confirm_deterministic,
                            options_per_call=options.options_per_call)

    async def _options() -> OptionCheckResult:
        return await check_options(candidates, finding, draft, llm, subject=subject,
                                   need=options.distractors_needed,
                                   confirm_deterministic=options.confirm_deterministic,
                                   options_per_call=options.options_per_call)

    checked = await step("option_check", subject, o_in, _options, OptionCheckResult)
    result.option_checks.append(checked)
    result._log("option_check", subject, checked.rejections, ok=len(checked.admitted) >= options.distractors_needed)

    versions = {"finding_extractor": result.findings.provenance.prompt_version
                if result.findings and result.findings.provenance else "",
                "question_writer": question.provenance.prompt_version,
                "reconstructor": result.reconstructions[-1].provenance.prompt_version,
                "verifier": verified.provenance.prompt_version,
                "distractor_writer": written.provenance.prompt_version}
    verifier_versions = [c.provenance.prompt_version for c in checked.checks if c.provenance is not None]
    if verifier_versions:
        versions["option_verifier"] = verifier_versions[0]
    a_in = AcceptInput(paper=_paper_ref(paper), finding=finding, draft=draft, admitted=checked.admitted,
                       writer_model=question.provenance.model, prompt_versions=versions, seed=options.seed,
                       need=options.distractors_needed, match_confidence=verified.match_confidence)

    async def _accept() -> AcceptResult:
        return accept_item(paper=a_in.paper, finding=finding, draft=draft, admitted=a_in.admitted,
                           writer_model=a_in.writer_model, prompt_versions=a_in.prompt_versions,
                           seed=a_in.seed, subject=subject, need=a_in.need,
                           match_confidence=a_in.match_confidence)

    accepted = await step("accept", subject, a_in, _accept, AcceptResult)
    result.accepts.append(accepted)
    result._log("accept", subject, accepted.rejections)
    return accepted.item


async def construct_items(paper: PaperRecord, document: Document, llm: RoleClient, options: ConstructionOptions,
                          step: StepRunner = run_directly) -> ConstructionResult:
    """Turn one eligible paper into at most ``options.items_per_paper`` accepted items.

    Never raises for a rejection: every gate outcome is in the returned result. Model transport
    or validation failures (:class:`arcticqa.errors.LLMError`) propagate for the runner to record.
    """
    result = ConstructionResult(paper_id=paper.paperId)
    f_in = FindingsInput(paper_id=paper.paperId, document_sha256=document.sha256,
                         span_ids=[s.id for s in document.spans], k=options.findings_per_paper)

    async def _findings() -> FindingsResult:
        return await extract_findings(document, llm, paper_id=paper.paperId, k=options.findings_per_paper,
                                      title=paper.title)

    findings = await step("findings", paper.paperId, f_in, _findings, FindingsResult)
    result.findings = findings
    result._log("findings", paper.paperId, findings.rejections, ok=bool(findings.findings))
    for finding in findings.findings:
        if len(result.items) >= options.items_per_paper:
            break
        item = await _from_finding(paper, finding, llm, options, step, result)
        if item is not None:
            result.items.append(item)
    return result
