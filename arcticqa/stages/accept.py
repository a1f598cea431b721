"""Acceptance: four admitted distractors become an item with a stable, content-derived id.

The distractors are ordered by a seeded stable hash (rank 0–3); the answer-present condition
drops rank 3. The item is ``machine_accepted_unverified`` and carries every evidence link and the
provenance of the roles that built it.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import BaseModel, Field

from arcticqa.evidence import SpanRef
from arcticqa.gates.numbers import parse_numbers
from arcticqa.gates.text import language_script
from arcticqa.rules import Rejection, rule
from arcticqa.stages.findings import ClaimType, Finding, Scope, stable_id
from arcticqa.stages.option_check import OptionCheck, Verification
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.results import StepResult

__all__ = ["TOO_FEW_DISTRACTORS", "PaperRef", "AcceptedDistractor", "AcceptedItem",
           "AcceptResult", "order_distractors", "accept_item"]

TOO_FEW_DISTRACTORS = rule("accept.too_few_distractors", "fewer than 4 distractors were admitted")


class PaperRef(BaseModel):
    paper_id: str
    doi: str | None = None
    title: str | None = None
    year: int | None = None
    publication_date: str | None = None  # ISO date from discovery (Semantic Scholar publicationDate)


class AcceptedDistractor(BaseModel):
    rank: int
    text: str
    type: str
    verification: Verification
    rule: str | None = None
    evidence_span_id: str | None = None


class AcceptedItem(BaseModel):
    item_id: str
    status: Literal["machine_accepted_unverified"] = "machine_accepted_unverified"
    question: str
    question_context: str
    gold_answer: str
    answer_type: str
    answer_unit: str | None = None
    claim_type: ClaimType
    scope: Scope
    finding_id: str
    evidence_spans: list[SpanRef]  # the text stays with the finding
    distractors: list[AcceptedDistractor]
    answer_present_drops: str
    writer_model: str
    option_verifier_models: list[str] = Field(default_factory=list)
    prompt_versions: dict[str, str] = Field(default_factory=dict)
    paper: PaperRef
    language_script: Literal["latin", "cyrillic", "mixed"]
    numeric_answer: bool
    answer_match_confidence: Literal["deterministic", "model"] = "deterministic"


class AcceptResult(StepResult):
    subject: str
    item: AcceptedItem | None = None
    rejections: list[Rejection] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.item is not None


def order_distractors(texts: list[str], seed: str, item_key: str) -> list[str]:
    """Sort by sha256(seed, item, text): stable across runs, unrelated to writer rank."""
    order_seed = hashlib.sha256(f"distractor-order:{seed}:{item_key}".encode()).hexdigest()
    return sorted(texts, key=lambda t: hashlib.sha256(f"{order_seed}:{t}".encode()).hexdigest())


def accept_item(*, paper: PaperRef, finding: Finding, draft: QuestionDraft, admitted: list[OptionCheck],
                writer_model: str, prompt_versions: dict[str, str], seed: str, subject: str,
                need: int = 4, match_confidence: Literal["deterministic", "model"] = "deterministic"
                ) -> AcceptResult:
    """Build the accepted item from ``need`` admitted options (or reject with the rule id)."""
    if len(admitted) < need:
        return AcceptResult(subject=subject, rejections=[TOO_FEW_DISTRACTORS.reject(
            f"{len(admitted)} of {need} distractors admitted", admitted=len(admitted), need=need)])
    chosen = admitted[:need]
    item_id = stable_id("aqa", {"paper": paper.paper_id, "question": draft.question,
                                "context": draft.question_context, "answer": finding.answer,
                                "distractors": sorted(c.text for c in chosen)})
    by_text = {c.text: c for c in chosen}
    ordered = order_distractors([c.text for c in chosen], seed, item_id)
    distractors = []
    for rank, text in enumerate(ordered):
        check = by_text[text]
        assert check.verification is not None  # admitted checks always carry one
        distractors.append(AcceptedDistractor(rank=rank, text=text, type=check.type,
                                              verification=check.verification, rule=check.rule,
                                              evidence_span_id=check.evidence_span_id))
    verifier_models = sorted({c.provenance.model for c in chosen if c.provenance is not None})
    script = language_script(draft.question, draft.question_context, finding.answer, *ordered)
    item = AcceptedItem(
        item_id=item_id, question=draft.question, question_context=draft.question_context,
        gold_answer=finding.answer, answer_type=finding.answer_type, answer_unit=finding.unit,
        claim_type=finding.claim_type, scope=finding.scope, finding_id=finding.id,
        evidence_spans=[s.without_text() for s in finding.all_spans], distractors=distractors,
        answer_present_drops=distractors[-1].text, writer_model=writer_model,
        option_verifier_models=verifier_models, prompt_versions=prompt_versions, paper=paper,
        language_script=script,
        numeric_answer=finding.answer_type == "numeric" or bool(parse_numbers(finding.answer)),
        answer_match_confidence=match_confidence,
    )
    return AcceptResult(subject=subject, item=item)
