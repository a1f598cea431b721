"""What a reviewer judges: the accepted items and the candidates rejected at verification or
option check, read from the store into one shape (:class:`ReviewItem`).

An item's ``content_hash`` covers everything the reviewer sees that the build could change
(question, context, answer, options, evidence spans), so a verdict given on an older version of
an item is recognised as stale instead of being reused.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from arcticqa.errors import InputError
from arcticqa.geo.regions import load_regions
from arcticqa.release.models import ABSTAIN_TEXT, ANSWER_MATCH
from arcticqa.store.db import read_session
from arcticqa.store.tables import ItemRow, Paper, RejectionRow, SpanRow, StageRun

__all__ = ["Population", "ReviewSpan", "ReviewOption", "ReviewItem", "STRATUM_DIMENSIONS", "FIRST_DIMENSIONS",
           "REJECTED_DIMENSIONS", "REJECTED_AT", "load_review_items", "content_hash", "rejected_key", "decided_by"]

Population = Literal["accepted", "rejected"]
#: the dimensions accepted items are stratified by, in the order a stratum key lists them;
#: ``decided_by`` is ``model`` when the answer match or any distractor's contradiction rests on a
#: model's verdict, ``rule`` when every one was decided by a rule
STRATUM_DIMENSIONS: tuple[str, ...] = ("answer_type", "claim_type", "language", "region", "decided_by")
#: the dimensions of plans drawn before ``decided_by`` was one (a plan keeps its strata)
FIRST_DIMENSIONS: tuple[str, ...] = ("answer_type", "claim_type", "language", "region")
#: rejected candidates are stratified by the rule that rejected them
REJECTED_DIMENSIONS: tuple[str, ...] = ("rule",)
#: the construct steps whose rejections are sampled to estimate false rejections
REJECTED_AT: tuple[str, ...] = ("verify", "option_check")


class ReviewSpan(BaseModel):
    span_id: str
    section: str | None = None
    page: int | None = None
    text: str | None = None


class ReviewOption(BaseModel):
    """One option as a model sees it; ``rank`` is None for the gold answer and the abstain option."""

    kind: Literal["gold", "distractor", "abstain"]
    text: str
    rank: int | None = None
    #: machine labels, hidden in blind mode until the reviewer has answered
    verification: str | None = None
    rule: str | None = None
    span_id: str | None = None
    span_text: str | None = None
    answer_absent_only: bool = False


class ReviewItem(BaseModel):
    key: str
    population: Population
    paper_id: str
    subject: str
    item_id: str | None = None
    question: str = ""
    question_context: str = ""
    gold_answer: str = ""
    options: list[ReviewOption] = Field(default_factory=list)
    evidence: list[ReviewSpan] = Field(default_factory=list)
    paper_title: str | None = None
    doi: str | None = None
    strata: dict[str, str] = Field(default_factory=dict)
    #: the machine's verdict: ``machine_accepted_unverified`` or the rule id that rejected it
    machine_status: str = ""
    machine_rules: list[str] = Field(default_factory=list)
    #: how the blind reconstruction was matched to the gold answer (the release's ``answer_match``:
    #: ``deterministic-match`` or ``model-verified``; None when not recorded); a machine label,
    #: hidden in blind mode until the reviewer has answered
    answer_match: str | None = None
    content_hash: str = ""

    @property
    def stratum(self) -> str:
        return " | ".join(self.strata.get(d, "unknown") for d in self.strata)

    def stratum_in(self, dimensions: Sequence[str]) -> str:
        """The stratum key over ``dimensions`` (a plan's; ``unknown`` for a dimension the item lacks)."""
        return " | ".join(self.strata.get(d, "unknown") for d in dimensions)


def content_hash(item: ReviewItem) -> str:
    seen = {"question": item.question, "question_context": item.question_context, "gold": item.gold_answer,
            "options": [[o.kind, o.rank, o.text] for o in item.options],
            "evidence": [[e.span_id, e.text] for e in item.evidence]}
    return hashlib.sha256(json.dumps(seen, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def rejected_key(paper_id: str, subject: str) -> str:
    """The review key of a rejected candidate (it has no item id): the audit page's address form."""
    return f"{paper_id[:12]}:{subject}"


def _latest_runs(engine: Engine) -> dict[tuple[str, str, str], StageRun]:
    with read_session(engine) as s:
        runs = s.exec(select(StageRun).order_by(col(StageRun.attempt), col(StageRun.id))).all()
    return {(r.paper_id, r.stage, r.subject): r for r in runs}


def _region(runs: dict[tuple[str, str, str], StageRun], paper_id: str) -> str:
    """The marine region of the paper's first eligible study site that can be placed. The
    eligibility rule judges a site on land by its latitude alone and names no region for it
    (Bayelva on Svalbard, Zackenberg in north-east Greenland, Toolik Lake in Alaska): such a site
    is placed in the region containing or nearest to its coordinates, the sea it borders."""
    run = runs.get((paper_id, "eligibility", ""))
    for site in ((run.output or {}).get("sites") or []) if run is not None else []:
        if site.get("verdict") != "eligible":
            continue
        if site.get("region"):
            return str(site["region"])
        mention = site.get("mention") or {}
        lat, lon = mention.get("lat"), mention.get("lon")
        if isinstance(lat, int | float) and isinstance(lon, int | float):
            try:
                regions = load_regions()
            except InputError:  # no region file: the stratum stays unknown
                return "unknown"
            return regions.regions[regions.nearest(float(lat), float(lon))[0]].name
    return "unknown"


def decided_by(answer_match: str | None, verifications: Sequence[str | None]) -> str:
    """``model`` when the answer match or any distractor's contradiction rests on a model's verdict,
    ``rule`` when a rule decided every one, ``unknown`` when the answer match is not recorded and no
    distractor is model-verified."""
    if answer_match == "model-verified" or "model-verified" in verifications:
        return "model"
    return "rule" if answer_match == "deterministic-match" else "unknown"


def _finish(item: ReviewItem) -> ReviewItem:
    item.content_hash = content_hash(item)
    return item


def load_review_items(engine: Engine) -> list[ReviewItem]:
    """Every accepted item and every candidate rejected at verification or option check."""
    runs = _latest_runs(engine)
    with read_session(engine) as s:
        item_rows = s.exec(select(ItemRow).order_by(col(ItemRow.item_id))).all()
        papers = {p.paper_id: p for p in s.exec(select(Paper)).all()}
        rejections = s.exec(select(RejectionRow).order_by(col(RejectionRow.id))).all()
        span_ids: set[str] = set()
        for row in item_rows:
            span_ids |= {e["id"] for e in (row.payload or {}).get("evidence_spans", [])}
        for run in runs.values():
            if run.stage == "findings":
                span_ids |= {e["id"] for f in (run.output or {}).get("findings", []) for e in f.get("support", [])}
        texts = {r.span_id: r.text for r in
                 s.exec(select(SpanRow).where(col(SpanRow.span_id).in_(sorted(span_ids)))).all()} if span_ids else {}
    rules_by_run: dict[int, list[str]] = defaultdict(list)
    for r in rejections:
        rules_by_run[r.stage_run_id].append(r.rule_id)
    out = [_accepted(row, papers.get(row.paper_id), runs, texts) for row in item_rows]
    findings = {f["id"]: f for run in runs.values() if run.stage == "findings"
                for f in (run.output or {}).get("findings", [])}
    for (pid, stage, subject), run in sorted(runs.items()):
        if stage in REJECTED_AT and run.status == "rejected" and subject:
            out.append(_rejected(run, papers.get(pid), runs, findings, texts, rules_by_run.get(run.id or -1, [])))
    return out


def _paper_fields(paper: Paper | None, payload_paper: dict[str, Any] | None = None) -> dict[str, Any]:
    pp = payload_paper or {}
    return {"paper_title": pp.get("title") or (paper.title if paper else None),
            "doi": pp.get("doi") or (paper.doi if paper else None)}


def _accepted(row: ItemRow, paper: Paper | None, runs: dict[tuple[str, str, str], StageRun],
              texts: dict[str, str]) -> ReviewItem:
    p: dict[str, Any] = row.payload or {}
    ranked = sorted(p.get("distractors", []), key=lambda d: d["rank"])
    spans = {e["id"]: e for e in p.get("evidence_spans", [])}
    # the answer-present listing (gold, ranks 0-2, abstain); rank 3 appears only when the answer is absent
    options = [ReviewOption(kind="gold", text=p.get("gold_answer", ""))]
    for d in ranked:
        sid = d.get("evidence_span_id")
        options.append(ReviewOption(kind="distractor", text=d["text"], rank=d["rank"],
                                    verification=d.get("verification"), rule=d.get("rule"), span_id=sid,
                                    span_text=texts.get(sid) if sid else None, answer_absent_only=d["rank"] == 3))
    options.append(ReviewOption(kind="abstain", text=ABSTAIN_TEXT))
    answer_match = ANSWER_MATCH.get(str(p.get("answer_match_confidence") or ""))
    return _finish(ReviewItem(
        key=row.item_id, population="accepted", paper_id=row.paper_id, subject=row.subject,
        item_id=row.item_id, question=p.get("question", ""), question_context=p.get("question_context", ""),
        gold_answer=p.get("gold_answer", ""), options=options,
        evidence=[ReviewSpan(span_id=sid, section=e.get("section"), page=e.get("page"), text=texts.get(sid))
                  for sid, e in spans.items()],
        **_paper_fields(paper, p.get("paper")),
        strata={"answer_type": str(p.get("answer_type") or ("numeric" if p.get("numeric_answer") else "text")),
                "claim_type": str(p.get("claim_type") or "unknown"),
                "language": str(p.get("language_script") or "unknown"),
                "region": _region(runs, row.paper_id),
                "decided_by": decided_by(answer_match, [d.get("verification") for d in ranked])},
        machine_status=row.status, machine_rules=sorted({str(d["rule"]) for d in ranked if d.get("rule")}),
        answer_match=answer_match))


def _rejected(run: StageRun, paper: Paper | None, runs: dict[tuple[str, str, str], StageRun],
              findings: dict[str, dict[str, Any]], texts: dict[str, str], rules: list[str]) -> ReviewItem:
    pid, subject = run.paper_id, run.subject
    draft = ((runs.get((pid, "question", subject)) or run).output or {}).get("draft") or {}
    finding = findings.get(subject.split("/")[0], {})
    options = [ReviewOption(kind="gold", text=str(finding.get("answer", "")))]
    checks = (run.output or {}).get("checks", []) if run.stage == "option_check" else []
    for rank, c in enumerate(checks):
        options.append(ReviewOption(kind="distractor", text=c["text"], rank=rank, verification=c.get("verification"),
                                    rule=c.get("rule"), span_id=c.get("evidence_span_id"),
                                    span_text=c.get("evidence")))
    options.append(ReviewOption(kind="abstain", text=ABSTAIN_TEXT))
    first = rules[0] if rules else f"{run.stage}.rejected"
    return _finish(ReviewItem(
        key=rejected_key(pid, subject), population="rejected", paper_id=pid, subject=subject,
        question=str(draft.get("question", "")), question_context=str(draft.get("question_context", "")),
        gold_answer=str(finding.get("answer", "")), options=options,
        evidence=[ReviewSpan(span_id=e["id"], section=e.get("section"), page=e.get("page"),
                             text=e.get("text") or texts.get(e["id"])) for e in finding.get("support", [])],
        **_paper_fields(paper), strata={"rule": first}, machine_status=first, machine_rules=rules or [first]))
