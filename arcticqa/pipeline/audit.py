"""The audit read from the store: rejected and needs-review papers and candidates, with evidence.

An adapter from stored stage attempts, rejections, spans and items to ``release.audit.AuditData``,
which ``arcticqa audit`` prints and renders as the HTML audit page.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from arcticqa.evidence import SpanRef
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.audit import AuditData, AuditItem, AuditOption, AuditPaper, AuditRejection
from arcticqa.review.release import mark_expert_rejected
from arcticqa.stages.construct import STAGES as CONSTRUCT_STEPS
from arcticqa.store import Store
from arcticqa.store.tables import ItemRow, RejectionRow, SpanRow, StageRun

__all__ = ["audit_data"]


def _cited_span_ids(evidence: dict[str, Any] | None) -> list[str]:
    """The span ids a rejection's evidence cites (``spans``, ``span_ids``, ``span_id``, ``evidence_span_id``)."""
    ev = evidence or {}
    found: list[str] = []
    for key in ("spans", "span_ids", "span_id", "evidence_span_id"):
        value = ev.get(key)
        for sid in value if isinstance(value, list) else [value]:
            if isinstance(sid, str) and sid not in found:
                found.append(sid)
    return found


def _audit_rejection(r: RejectionRow, status: str = "rejected", cited: Mapping[str, SpanRow] | None = None
                     ) -> AuditRejection:
    spans = [span.ref() for sid in _cited_span_ids(r.evidence) if (span := (cited or {}).get(sid)) is not None]
    return AuditRejection(stage=r.stage, rule_id=r.rule_id, message=r.message, evidence=r.evidence or {},
                          paper_id=r.paper_id, item_id=r.subject or None, cited_spans=spans,
                          status="needs_review" if status == "needs_review" else "rejected")


def _output(steps: dict[str, StageRun], stage: str) -> dict[str, Any]:
    run = steps.get(stage)
    return dict(run.output or {}) if run is not None else {}


def _candidate_items(runs: list[StageRun], rejections: list[RejectionRow], items: dict[str, ItemRow],
                     texts: dict[str, str], cited: Mapping[str, SpanRow]) -> list[AuditItem]:
    """One audit entry per candidate (finding/revision) that construction worked on."""
    by_subject: dict[tuple[str, str], dict[str, StageRun]] = defaultdict(dict)
    findings: dict[str, dict[str, Any]] = {}
    for run in runs:
        if run.stage == "findings" and run.output:
            for f in run.output.get("findings", []):
                findings[f["id"]] = f
        elif run.stage in ("question", "reconstruct", "verify", "distractors", "option_check", "accept"):
            by_subject[(run.paper_id, run.subject)][run.stage] = run
    accepted_by_subject = {}
    for item in items.values():
        for (pid, subject), steps in by_subject.items():
            acc = steps.get("accept")
            if acc and acc.output and (acc.output.get("item") or {}).get("item_id") == item.item_id:
                accepted_by_subject[(pid, subject)] = item.item_id
    out = []
    order = ("question", "reconstruct", "verify", "distractors", "option_check", "accept")
    for (pid, subject), steps in sorted(by_subject.items()):
        q = _output(steps, "question")
        rec = _output(steps, "reconstruct")
        checks = _output(steps, "option_check").get("checks", [])
        finding = findings.get(subject.split("/")[0], {})
        reached = [st for st in order if st in steps]
        item_id = accepted_by_subject.get((pid, subject))
        # where each admitted option stands in the release (rank 3 is dropped from answer-present)
        ranks = {d.get("text"): d.get("rank") for d in ((_output(steps, "accept").get("item") or {})
                                                        .get("distractors") or [])} if item_id else {}
        options = [AuditOption(kind="gold", text=finding.get("answer", ""), verdict="admitted")] if finding else []
        for c in checks:
            rej = c.get("rejection") or {}
            options.append(AuditOption(kind="distractor", text=c["text"], type=c.get("type"), rank=ranks.get(c["text"]),
                                       verdict="admitted" if c.get("admitted") else "rejected",
                                       verification=c.get("verification"), rule_id=c.get("rule"),
                                       message=rej.get("message"),
                                       evidence={k: v for k, v in (("span_id", c.get("evidence_span_id")),
                                                                   ("evidence", c.get("evidence")))
                                                 if v}))
        spans = [SpanRef.model_validate({**e, "role": "finding", "text": e.get("text") or texts.get(e["id"])})
                 for e in finding.get("support", [])]
        out.append(AuditItem(
            item_id=item_id or f"{pid[:12]}:{subject}", candidate=subject, paper_id=pid,
            status="machine_accepted_unverified" if item_id else "rejected",
            stage=reached[-1] if reached else None,
            question=(q.get("draft") or {}).get("question"),
            question_context=(q.get("draft") or {}).get("question_context"),
            gold_answer=finding.get("answer"), reconstruction=(rec.get("output") or {}).get("answer"),
            evidence_spans=spans, options=options,
            rejections=[_audit_rejection(r, cited=cited) for r in rejections
                        if r.paper_id == pid and r.subject == subject]))
    return out


def _option_rejections(runs: list[StageRun]) -> dict[str, int]:
    """rule id -> distractor proposals the option checks left out, over every candidate."""
    counts: dict[str, int] = defaultdict(int)
    for run in runs:
        if run.stage == "option_check" and run.output:
            for c in run.output.get("checks", []):
                if not c.get("admitted"):
                    counts[c.get("rule") or (c.get("rejection") or {}).get("rule_id") or "unknown"] += 1
    return dict(sorted(counts.items()))


_PIPELINE_ORDER = ("discover", "prefilter", "fetch_fulltext", "extract_text", "eligibility", "construct",
                   *CONSTRUCT_STEPS)


def _pipeline_order(r: RejectionRow) -> tuple[int, str, str, str, str, str]:
    """Pipeline stage, then paper, subject and rule: the store's row ids follow the order in which
    concurrent papers finished, so sorting by them made two builds of one corpus differ."""
    rank = _PIPELINE_ORDER.index(r.stage) if r.stage in _PIPELINE_ORDER else len(_PIPELINE_ORDER)
    return rank, r.stage, r.paper_id, r.subject, r.rule_id, r.message


def audit_data(store: Store, *, stage: str | None = None, rule: str | None = None,
               paper: str | None = None) -> AuditData:
    """Everything the audit shows, filtered like ``arcticqa audit`` (stage, rule, paper)."""
    rejections = sorted(store.rejections(stage=stage, rule=rule, paper=paper), key=_pipeline_order)
    runs = [r for r in store.runs() if paper is None or r.paper_id == paper]
    items = {r.item_id: r for r in store.items()}
    papers = {p.paper_id: p for p in store.papers()}
    runs_by_paper: dict[str, list[StageRun]] = defaultdict(list)
    for run in runs:
        runs_by_paper[run.paper_id].append(run)
    eligibility_review = {r.paper_id for r in runs if r.stage == "eligibility" and r.output
                          and r.output.get("decision") == "needs_review"}
    all_rejections = store.rejections(paper=paper)
    cited = store.spans({sid for r in all_rejections for sid in _cited_span_ids(r.evidence)})
    audit_papers = []
    paper_stage_order = ("prefilter", "fetch_fulltext", "extract_text", "eligibility", "construct")
    for pid, row in sorted(papers.items()):
        if paper is not None and pid != paper:
            continue
        mine = {r.stage: r for r in runs_by_paper.get(pid, []) if r.stage in paper_stage_order}
        last = next((st for st in reversed(paper_stage_order) if st in mine), None)
        status = mine[last].status if last else "pending"
        if pid in eligibility_review and last == "eligibility":
            status = "needs_review"
        paper_rejections = [r for r in all_rejections if r.paper_id == pid and not r.subject]
        # every span a rejection cites, with its text, so the page shows what the rule read
        spans = [span.ref(role=r.rule_id)
                 for r in paper_rejections for sid in _cited_span_ids(r.evidence)
                 if (span := cited.get(sid)) is not None]
        audit_papers.append(AuditPaper(
            paper_id=pid, title=row.title, doi=row.doi, year=row.year, status=status, stage=last,
            evidence_spans=spans,
            rejections=[_audit_rejection(r, status, cited) for r in paper_rejections],
            item_ids=sorted(i for i, it in items.items() if it.paper_id == pid)))
    texts = {sid: span.text for sid, span in store.spans(
        e["id"] for r in runs if r.stage == "findings" and r.output
        for f in r.output.get("findings", []) for e in f.get("support", [])).items()}
    audit_items = _candidate_items(runs, all_rejections, items, texts, cited)
    if stage or rule:
        keep = {(r.paper_id, r.subject) for r in rejections}
        audit_items = [i for i in audit_items if any((r.paper_id, r.item_id) in keep for r in i.rejections)]
        audit_papers = [p for p in audit_papers if any(r.paper_id == p.paper_id for r in rejections)]
    data = AuditData(funnel=funnel_counts(store),
                     rejections=[_audit_rejection(r, "needs_review" if r.paper_id in eligibility_review
                                                  and r.stage == "eligibility" else "rejected", cited)
                                 for r in rejections],
                     papers=audit_papers, items=audit_items, option_rejections=_option_rejections(runs))
    return mark_expert_rejected(data, store.engine, stage=stage, rule=rule, paper=paper)
