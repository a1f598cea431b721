"""The build's funnel read from the store: how many papers and candidates reached each box.

An adapter from stored stage attempts and rejections to ``release.models.FunnelCounts``, the
model that ``arcticqa funnel``, the audit page and the release card and ``funnel.svg`` are drawn from.
"""

from __future__ import annotations

from collections import Counter

from arcticqa.release.models import FunnelCounts, FunnelStep
from arcticqa.store import Store
from arcticqa.store.tables import RejectionRow, StageRun

__all__ = ["funnel_counts", "PAPER_FUNNEL", "CANDIDATE_FUNNEL", "FAILED", "NOT_YET_RUN"]

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


def _first_rules(rows: list[RejectionRow]) -> dict[int, str]:
    """stage_run id -> the rule id of its first rejection (the one a left-out unit is counted under)."""
    first: dict[int, str] = {}
    for r in sorted(rows, key=lambda r: r.id or 0):
        first.setdefault(r.stage_run_id, r.rule_id)
    return first


def _outcome(runs: list[StageRun | None], rules: dict[int, str]) -> tuple[str, StageRun | None]:
    """Where one unit stopped among these stages: "passed", a rule id, FAILED or NOT_YET_RUN."""
    for run in runs:
        if run is None or run.status in ("pending", "running", "interrupted"):  # resume runs it
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
    papers = store.papers(include_duplicates=True)
    invalid = sum(1 for r in store.raw_records() if (r.payload or {}).get("rejection") is not None)
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
