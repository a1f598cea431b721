"""Read-only views of the store for the release, the audit and the funnel.

The release and audit packages are store-agnostic; this module turns stored stage outputs into
their input models (``ReleaseItem``, ``FunnelCounts``, ``AuditData``).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from sqlmodel import col, select

from arcticqa.evidence import SpanRef
from arcticqa.release.audit import AuditData, AuditItem, AuditOption, AuditPaper, AuditRejection
from arcticqa.release.models import (
    Construction,
    Distractor,
    EvidenceRef,
    FunnelCounts,
    FunnelStep,
    PaperRef,
    ReleaseItem,
    SourceLicense,
    license_allows_redistribution,
)
from arcticqa.review.release import mark_expert_rejected, review_release
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import ItemRow, Paper, RawRecord, RejectionRow, SpanRow, StageRun

__all__ = ["release_items", "funnel_counts", "audit_data", "PAPER_FUNNEL", "CANDIDATE_FUNNEL", "FAILED",
           "NOT_YET_RUN"]

#: the paper funnel in the order the build runs its stages (eligibility reads the full text); each
#: box counts papers, and a paper left out is counted once, at the box where it stopped
PAPER_FUNNEL: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("prefiltered", ("prefilter",)),
    ("full_text", ("fetch_fulltext", "extract_text")),
    ("eligible", ("eligibility",)),
    ("with_items", ("construct",)),
)
#: the candidate-item funnel: construct's steps after findings, once per candidate (a finding, or
#: its revision) of the papers that reached construction
CANDIDATE_FUNNEL: tuple[tuple[str, str], ...] = (
    ("questions", "question"),
    ("reconstructed", "reconstruct"),
    ("verified", "verify"),
    ("distractors", "distractors"),
    ("options_checked", "option_check"),
    ("accepted", "accept"),
)
#: the two buckets of a box that are not rule ids: the step failed (an error, retried by
#: ``arcticqa resume``), or has not run yet (a build still going, or stopped)
FAILED, NOT_YET_RUN = "failed", "not_yet_run"


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


def _span_rows(store: Store, span_ids: set[str]) -> dict[str, SpanRow]:
    if not span_ids:
        return {}
    with read_session(store.engine) as s:
        return {r.span_id: r for r in s.exec(select(SpanRow).where(col(SpanRow.span_id).in_(sorted(span_ids)))).all()}


def _span_texts(store: Store, span_ids: set[str]) -> dict[str, str]:
    return {sid: row.text for sid, row in _span_rows(store, span_ids).items()}


def release_items(store: Store) -> list[ReleaseItem]:
    """Every accepted item as a release record (evidence text included; the writer drops it
    unless ``--include-evidence``)."""
    rows = store.items()
    span_ids = {e["id"] for r in rows for e in (r.payload or {}).get("evidence_spans", [])}
    texts = _span_texts(store, span_ids)
    out: list[ReleaseItem] = []
    for row in rows:
        p: dict[str, Any] = row.payload or {}
        paper = store.get_paper(row.paper_id)
        oa = paper.openAccessPdf if paper else None
        licence = oa.license if oa else None
        prompt_versions: dict[str, str] = p.get("prompt_versions", {})
        out.append(ReleaseItem(
            item_id=p["item_id"], question=p["question"], question_context=p["question_context"],
            gold_answer=p["gold_answer"],
            distractors=[Distractor(rank=d["rank"], text=d["text"], type=d["type"],
                                    verification=d["verification"]) for d in p["distractors"]],
            answer_present_drops=p["answer_present_drops"], status=p.get("status", row.status),
            language_script=p["language_script"], numeric_answer=p["numeric_answer"],
            paper=PaperRef(doi=p["paper"].get("doi"), title=p["paper"].get("title"),
                           year=p["paper"].get("year"), paper_family_id=row.family_id or row.paper_id),
            construction=Construction(writer_model=p["writer_model"],
                                      option_verifier_models=p.get("option_verifier_models", []),
                                      generation_prompt_version=prompt_versions.get(
                                          "question_writer", next(iter(prompt_versions.values()), "unknown"))),
            evidence=[EvidenceRef(span_id=e["id"], section=e["section"], page=e["page"], start=e["start"],
                                  end=e["end"], sha256=e["sha256"], text=texts.get(e["id"]))
                      for e in p.get("evidence_spans", [])],
            claim_type=p.get("claim_type"), scope=p.get("scope"), answer_unit=p.get("answer_unit"),
            source_license=SourceLicense(license=licence, url=oa.url if oa else None,
                                         redistributable=license_allows_redistribution(licence)),
        ))
    return out


def _first_rules(rows: list[RejectionRow]) -> dict[int, str]:
    """stage_run id -> the rule id of its first rejection (the one a left-out unit is counted under)."""
    first: dict[int, str] = {}
    for r in sorted(rows, key=lambda r: r.id or 0):
        first.setdefault(r.stage_run_id, r.rule_id)
    return first


def _outcome(runs: list[StageRun | None], rules: dict[int, str]) -> tuple[str, StageRun | None]:
    """Where one unit stopped among these stages: "passed", a rule id, FAILED or NOT_YET_RUN."""
    for run in runs:
        if run is None or run.status in ("pending", "running"):
            return NOT_YET_RUN, run
        if run.status == "failed":
            return FAILED, run
        if run.status != "succeeded":
            return rules.get(run.id or -1, f"{run.stage}.rejected"), run
    return "passed", None


def funnel_counts(store: Store) -> FunnelCounts:
    """The paper funnel and the candidate-item funnel of the build.

    In every box after the first of its unit, the units that reached the box before equal those
    that reach this one plus those left out here (by rule id, ``failed``, ``not_yet_run``) plus
    those held for review: nothing is counted twice or in the wrong unit.
    """
    with read_session(store.engine) as s:
        papers = s.exec(select(Paper)).all()
        invalid = sum(1 for r in s.exec(select(RawRecord)).all()
                      if (r.payload or {}).get("rejection") is not None)
    rules = _first_rules(store.rejections())
    latest: dict[tuple[str, str, str], StageRun] = {(r.paper_id, r.stage, r.subject): r for r in store.runs()}
    reaching = sorted(p.paper_id for p in papers if p.duplicate_of is None)
    steps = [FunnelStep(name="discovered", count=len(reaching),
                        rejected={k: v for k, v in {"discover.duplicate": len(papers) - len(reaching),
                                                    "discover.invalid_record": invalid}.items() if v})]
    for name, stages in PAPER_FUNNEL:
        passed, left_out, review = [], Counter[str](), 0
        for pid in reaching:
            where, run = _outcome([latest.get((pid, st, "")) for st in stages], rules)
            if where == "passed":
                passed.append(pid)
            elif run is not None and run.stage == "eligibility" and (run.output or {}).get("decision") == "needs_review":
                review += 1
            else:
                left_out[where] += 1
        steps.append(FunnelStep(name=name, count=len(passed), rejected=dict(left_out), needs_review=review))
        reaching = passed
    construct = set(reaching) | {pid for pid, st, _ in latest if st == "construct"}
    candidates = sorted({(pid, sub) for pid, st, sub in latest
                         if sub and st in {st for _, st in CANDIDATE_FUNNEL} and pid in construct})
    steps.append(FunnelStep(name="candidates", unit="candidates", count=len(candidates)))
    for name, stage in CANDIDATE_FUNNEL:
        moving, left_out = [], Counter[str]()
        for pid, sub in candidates:
            where, _ = _outcome([latest.get((pid, stage, sub))], rules)
            if where == "passed":
                moving.append((pid, sub))
            else:
                left_out[where] += 1
        steps.append(FunnelStep(name=name, unit="candidates", count=len(moving), rejected=dict(left_out)))
        candidates = moving
    return FunnelCounts(steps=steps)


def _audit_rejection(r: RejectionRow, status: str = "rejected") -> AuditRejection:
    return AuditRejection(stage=r.stage, rule_id=r.rule_id, message=r.message, evidence=r.evidence or {},
                          paper_id=r.paper_id, item_id=r.subject or None,
                          status="needs_review" if status == "needs_review" else "rejected")


def _output(steps: dict[str, StageRun], stage: str) -> dict[str, Any]:
    run = steps.get(stage)
    return dict(run.output or {}) if run is not None else {}


def _candidate_items(runs: list[StageRun], rejections: list[RejectionRow], items: dict[str, ItemRow],
                     texts: dict[str, str]) -> list[AuditItem]:
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
        options = [AuditOption(kind="gold", text=finding.get("answer", ""), verdict="admitted")] if finding else []
        for c in checks:
            rej = c.get("rejection") or {}
            options.append(AuditOption(kind="distractor", text=c["text"], type=c.get("type"),
                                       verdict="admitted" if c.get("admitted") else "rejected",
                                       verification=c.get("verification"), rule_id=c.get("rule"),
                                       message=rej.get("message"),
                                       evidence={k: v for k, v in (("span_id", c.get("evidence_span_id")),
                                                                   ("evidence", c.get("evidence")))
                                                 if v}))
        spans = [SpanRef.model_validate({**e, "role": "finding", "text": e.get("text") or texts.get(e["id"])})
                 for e in finding.get("support", [])]
        out.append(AuditItem(
            item_id=item_id or f"{pid[:12]}:{subject}", paper_id=pid,
            status="machine_accepted_unverified" if item_id else "rejected",
            stage=reached[-1] if reached else None,
            question=(q.get("draft") or {}).get("question"),
            question_context=(q.get("draft") or {}).get("question_context"),
            gold_answer=finding.get("answer"), reconstruction=(rec.get("output") or {}).get("answer"),
            evidence_spans=spans, options=options,
            rejections=[_audit_rejection(r) for r in rejections if r.paper_id == pid and r.subject == subject]))
    return out


def audit_data(store: Store, *, stage: str | None = None, rule: str | None = None,
               paper: str | None = None) -> AuditData:
    """Everything the audit shows, filtered like ``arcticqa audit`` (stage, rule, paper)."""
    rejections = store.rejections(stage=stage, rule=rule, paper=paper)
    runs = [r for r in store.runs() if paper is None or r.paper_id == paper]
    items = {r.item_id: r for r in store.items()}
    with read_session(store.engine) as s:
        papers = {p.paper_id: p for p in s.exec(select(Paper).where(col(Paper.duplicate_of).is_(None))).all()}
    runs_by_paper: dict[str, list[StageRun]] = defaultdict(list)
    for run in runs:
        runs_by_paper[run.paper_id].append(run)
    eligibility_review = {r.paper_id for r in runs if r.stage == "eligibility" and r.output
                          and r.output.get("decision") == "needs_review"}
    all_rejections = store.rejections(paper=paper)
    cited = _span_rows(store, {sid for r in all_rejections if not r.subject for sid in _cited_span_ids(r.evidence)})
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
            rejections=[_audit_rejection(r, status) for r in paper_rejections],
            item_ids=sorted(i for i, it in items.items() if it.paper_id == pid)))
    texts = _span_texts(store, {e["id"] for r in runs if r.stage == "findings" and r.output
                                for f in r.output.get("findings", []) for e in f.get("support", [])})
    audit_items = _candidate_items(runs, all_rejections, items, texts)
    if stage or rule:
        keep = {(r.paper_id, r.subject) for r in rejections}
        audit_items = [i for i in audit_items if any((r.paper_id, r.item_id) in keep for r in i.rejections)]
        audit_papers = [p for p in audit_papers if any(r.paper_id == p.paper_id for r in rejections)]
    data = AuditData(funnel=funnel_counts(store),
                     rejections=[_audit_rejection(r, "needs_review" if r.paper_id in eligibility_review
                                                  and r.stage == "eligibility" else "rejected")
                                 for r in rejections],
                     papers=audit_papers, items=audit_items)
    return mark_expert_rejected(data, store.engine, stage=stage, rule=rule, paper=paper)


def export_from_store(store: Store, settings: Any, out: Any, *, release_id: str = "arcticqa-release",
                      prompt: dict[str, Any] | None = None, include_evidence: bool = False,
                      require_redistributable: bool = False, fmt: str = "jsonl",
                      overwrite: bool = False, allow_empty: bool = True) -> Any:
    """Write the store's accepted items as a release folder (see ``arcticqa export``)."""
    from importlib.metadata import PackageNotFoundError, version

    from arcticqa.release.writer import write_release

    try:
        code_version = version("arcticqa")
    except PackageNotFoundError:
        from arcticqa import __version__ as code_version
    roster = {role: [settings.model_for(role).model] for role in sorted(settings.roles)}
    items, review = review_release(store.engine, store.release_items())
    return write_release(items, out, release_id=release_id,
                         prompt=prompt if prompt is not None else store.release_prompt(),
                         funnel=store.funnel_counts(), roster=roster, config_hash=settings.fingerprint(),
                         policy_hashes=store.policy_hashes(), code_version=code_version,
                         include_evidence=include_evidence, require_redistributable=require_redistributable,
                         format=fmt, overwrite=overwrite, allow_empty=allow_empty, review=review)
