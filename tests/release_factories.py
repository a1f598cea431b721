"""Hand-built release inputs shared by the release and audit tests (no store needed)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from arcticqa.release.models import (
    FUNNEL_STEPS,
    AnswerMatch,
    Construction,
    Distractor,
    EvidenceRef,
    FunnelCounts,
    FunnelStep,
    PaperRef,
    ReleaseItem,
    SourceLicense,
    Verification,
)
from arcticqa.release.writer import write_release

PROMPT = {
    "prompt_version": "test-prompt-v1",
    "system_text": "Answer with one letter.",
    "user_template": "QUESTION\n{question}\n\nQUESTION_CONTEXT\n{question_context}\n\nOPTIONS\n{options}",
    "no_context_text": "(none)",
    "abstention_option_text": "I abstain from answering",
    "letters": "ABCDE",
}


def make_item(n: int, *, license: str | None = "CC-BY-4.0", evidence_text: str | None = None,
              question: str | None = None, answer_match: AnswerMatch | None = None,
              verification: Verification | None = None) -> ReleaseItem:
    """Item ``n``; its distractors alternate model-verified and deterministic-contradiction unless
    ``verification`` gives them all one label."""
    text = evidence_text or f"Mean sea-ice thickness at site {n} decreased by {n + 10} cm between 2001 and 2010."
    start = 100 * n
    return ReleaseItem(
        item_id=f"aqa-{n:020x}",
        question=question or f"By how much did mean sea-ice thickness at station S{n} change between 2001 and 2010?",
        question_context=f"Station S{n} is a drifting ice station in the Fram Strait.",
        gold_answer=f"a decrease of {n + 10} cm",
        distractors=[Distractor(rank=r, text=f"an increase of {n + 10 + 7 * (r + 1)} cm",
                                type="numeric_outside_tolerance",
                                verification=verification or ("deterministic-contradiction" if r % 2
                                                              else "model-verified"))
                     for r in range(4)],
        answer_present_drops=f"an increase of {n + 10 + 28} cm",
        status="machine_accepted_unverified",
        language_script="latin",
        numeric_answer=True,
        paper=PaperRef(doi=f"10.1000/test.{n}", title=f"Sea ice paper {n}", year=2020,
                       paper_family_id=f"family-{n:020x}"),
        construction=Construction(writer_model="offline-baseline",
                                  option_verifier_models=["offline-baseline"],
                                  generation_prompt_version="question_writer@v1"),
        evidence=[EvidenceRef(span_id=f"sp-{n:016x}", role="finding", section="results", page=3,
                              start=start, end=start + len(text),
                              sha256=hashlib.sha256(text.encode()).hexdigest(), text=text)],
        claim_type="observation",
        scope={"geography": "Fram Strait", "period": "2001-2010"},
        answer_unit="cm",
        answer_match=answer_match,
        source_license=SourceLicense(license=license, url=None,
                                     redistributable=license in ("CC-BY-4.0", "CC0")),
    )


def make_funnel() -> FunnelCounts:
    counts = [50, 40, 20, 15, 12, 30, 20, 16, 12, 11, 10, 3]
    steps = []
    for i, (name, count) in enumerate(zip(FUNNEL_STEPS, counts, strict=True)):
        rejected = {f"{name}.too_few": i, f"{name}.other": 1} if i else {}
        steps.append(FunnelStep(name=name, count=count, unit="papers" if i < 5 else "candidates",
                                rejected=rejected, needs_review=1 if name == "eligible" else 0))
    return FunnelCounts(steps=steps)


def export(items: list[ReleaseItem], out: Path, **kwargs: object) -> Path:
    params: dict = {
        "release_id": "test-release", "prompt": PROMPT, "funnel": make_funnel(),
        "roster": {"question_writer": ["offline-baseline"], "option_verifier": ["offline-baseline"]},
        "config_hash": "c" * 64, "policy_hashes": {"eligibility": "e" * 64},
        "code_version": "0.1.0",
    }
    params.update(kwargs)
    return write_release(items, out, **params)
