"""Stage adapters: load a paper's inputs from the store, call the pure stage, shape the result.

Each adapter is ``async (ctx, paper_id) -> StageResult`` plus an ``inputs`` function whose hash
is recorded on the attempt. ``BUILD_STAGES`` is the per-paper order the build runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from arcticqa.errors import StageError
from arcticqa.papers import PaperRecord
from arcticqa.pipeline.discovery import StoreCheckpoint
from arcticqa.pipeline.runner import BuildContext, StageResult, StageSpec, StoreStepRunner, claimed_attempt
from arcticqa.rules import rule
from arcticqa.sources import RawRecord, resolve_local_pdf
from arcticqa.stages import extract_text as extract_stage
from arcticqa.stages import fetch_fulltext as fetch_stage
from arcticqa.stages.construct import ConstructionOptions, construct_items
from arcticqa.stages.discover import (
    Deduplicator,
    DiscoveryOptions,
    checkpoint_key,
    discover,
    load_queries,
    parse_source,
)
from arcticqa.stages.eligibility import (
    EligibilityPolicy,
    decide_eligibility,
    extract_sites_llm,
    find_sites,
    load_eligibility_policy,
)
from arcticqa.stages.prefilter import (
    MetadataPolicy,
    PrefilterDecision,
    load_metadata_policy,
    prefilter,
    server_filters_from_policy,
)
from arcticqa.store.runs import EvidenceValues, input_hash
from arcticqa.store.tables import FetchRow, ItemRow, ScreeningDecision
from arcticqa.text.fetch import pdf_cache_dir

__all__ = ["BUILD_STAGES", "discover_papers"]


@functools.lru_cache(maxsize=8)
def _metadata_policy(path: Path | None) -> MetadataPolicy:
    return load_metadata_policy(path)


def _paper(ctx: BuildContext, paper_id: str) -> PaperRecord:
    paper = ctx.store.get_paper(paper_id)
    if paper is None:
        raise StageError(f"paper {paper_id} is not in the store")
    return paper


# -- discovery (batch level) ----------------------------------------------------------------------
async def discover_papers(ctx: BuildContext, *, only_unfinished: bool = False,
                          on_papers: Callable[[list[str], set[str]], None] | None = None) -> dict[str, Any] | None:
    """Run discovery from the configured source into the store, then dedupe into papers.

    ``on_papers`` (not with ``only_unfinished``): each page's new papers are added to the store
    as it arrives and their ids handed to ``on_papers`` (the build's stages start on them) with
    those whose family is written only once every record is in (:class:`_PaperFeed`); what is
    stored at the end is the same either way.

    ``only_unfinished`` (resume): finish what a killed build left undone and nothing else: every
    configured query not yet marked done (a build killed before its first page has none done),
    then add the discovered papers the store does not hold yet (a build killed between a page's
    commit and the papers' insert). Returns None when there was nothing to finish, so resuming a
    finished build repeats no discovery.
    """
    settings = ctx.settings
    policy = _metadata_policy(settings.policies.metadata)
    options = DiscoveryOptions.from_settings(settings.discovery, server_filters=server_filters_from_policy(policy))
    source = settings.build.source
    queries = load_queries(settings.build.keywords_file) if source.strip() == "s2" else []
    if on_papers is not None and not only_unfinished:
        feed = _PaperFeed(ctx, on_papers)
        result = await discover(queries, source=source, checkpoint=feed.checkpoint,
                                options=options.model_copy(update={"keep_records": False}))
        return feed.finish(source, records_this_run=result.recorded, complete=result.complete,
                           failed=[o.query for o in result.failed])
    checkpoint = StoreCheckpoint(ctx.store)
    if only_unfinished:
        spec = parse_source(source)
        keys = {q: checkpoint_key(spec, q, options.server_filters) for q in queries} if queries \
            else {"": checkpoint_key(spec, None)}
        unfinished = [q for q, key in keys.items() if not checkpoint.is_done(key)]
        if not unfinished and not _papers_missing(ctx, checkpoint) and not ctx.store.papers_without_family():
            return None
        queries = [q for q in unfinished if q]
        if not unfinished:  # discovery finished, its papers were not all added (or their families written)
            return _add_discovered(ctx, checkpoint, source, records_this_run=0, complete=True, failed=[])
    result = await discover(queries, source=source, checkpoint=checkpoint,
                            options=options.model_copy(update={"keep_records": False}))
    return _add_discovered(ctx, checkpoint, source, records_this_run=result.recorded,
                           complete=result.complete, failed=[o.query for o in result.failed])


def _papers_missing(ctx: BuildContext, checkpoint: StoreCheckpoint) -> bool:
    """Whether a discovered record's paper is not in the store yet."""
    stored = set(ctx.store.paper_ids(include_duplicates=True))
    return any(r.paper is not None and r.paper.paperId not in stored for r in checkpoint.iter_records())


#: papers added to the store in one transaction while discovery's records stream through
_ADD_CHUNK = 2_000


def _add_discovered(ctx: BuildContext, checkpoint: StoreCheckpoint, source: str, *, records_this_run: int,
                    complete: bool, failed: list[str]) -> dict[str, Any]:
    """Dedupe every discovered record into papers and add the ones not stored yet (idempotent).

    Two passes over the stored records, a chunk at a time: the first decides duplicates and
    families holding only keys (:class:`Deduplicator`), the second adds the papers not stored
    yet, ``_ADD_CHUNK`` a transaction. So memory depends on the chunk, not on the records."""
    dedup = Deduplicator()
    duplicate_of: dict[str, str] = {}
    for raw in checkpoint.iter_records():
        match = dedup.add(raw)
        if match and raw.paper_id and raw.paper_id != match[0]:
            duplicate_of[raw.paper_id] = match[0]
    family_of = dedup.families()
    stored = set(ctx.store.paper_ids(include_duplicates=True))
    added = 0
    chunk: list[tuple[PaperRecord, dict[str, Any]]] = []
    for raw in checkpoint.iter_records():
        if raw.paper is None or raw.paper.paperId in stored:
            continue
        paper = raw.paper
        pid = paper.paperId
        stored.add(pid)  # a later record of the same paper is a duplicate of this one: the first is added
        chunk.append((_with_local_pdf(raw, paper), {"family_id": family_of.get(pid),
                                                     "duplicate_of": duplicate_of.get(pid), "source": raw.origin}))
        if len(chunk) >= _ADD_CHUNK:
            added += ctx.store.add_papers(chunk)
            chunk = []
    added += ctx.store.add_papers(chunk) if chunk else 0
    # a build stopped while discovery ran (:class:`_PaperFeed`) may have left families unwritten
    ctx.store.set_families({pid: family_of[pid] for pid in ctx.store.papers_without_family() if pid in family_of})
    return _summary(dedup, source, records_this_run=records_this_run, complete=complete, failed=failed,
                    added=added)


def _with_local_pdf(raw: RawRecord, paper: PaperRecord) -> PaperRecord:
    """``paper`` with the local PDF its discovered record names, when there is one."""
    local = resolve_local_pdf(raw)
    return paper if local is None else paper.model_copy(update={"localPdf": str(local)})


def _summary(dedup: Deduplicator, source: str, *, records_this_run: int, complete: bool, failed: list[str],
             added: int) -> dict[str, Any]:
    """What discovery reports, however its papers were added."""
    return {"source": source, "complete": complete, "records_this_run": records_this_run,
            "failed_queries": failed, "kept": dedup.kept, "duplicates": dedup.duplicates,
            "invalid": dedup.invalid, "new_papers": added}


class _PaperFeed:
    """Discovered records deduplicated into papers page by page, as discovery stores them.

    A record is a duplicate of the first kept paper it matches, in arrival order, so what
    :func:`_add_discovered` decides after the last page is known at each record's arrival, and
    its paper is added to the store then. So is its family, unless it is a preprint (a published
    version found later takes it in): those are added without one, listed in ``unsettled``, and
    :meth:`finish` writes their families once discovery has ended; until then the stages that
    read a paper's family (construct) leave them waiting."""

    def __init__(self, ctx: BuildContext, on_papers: Callable[[list[str], set[str]], None]) -> None:
        self.ctx, self.on_papers = ctx, on_papers
        self.checkpoint = StoreCheckpoint(ctx.store, on_page=self.take)
        self.dedup = Deduplicator()
        self.stored = set(ctx.store.paper_ids(include_duplicates=True))
        self.last_row = 0
        self.added = 0
        #: the kept papers whose family is known only at the end: this run's preprints, and any a
        #: build stopped while its discovery ran left without one
        self.unsettled: set[str] = set(ctx.store.papers_without_family())
        if self.unsettled:
            on_papers([], set(self.unsettled))

    def take(self) -> None:
        """Deduplicate the records stored since the last call, add their new papers, hand on
        the kept ones (sorted, as :meth:`Store.paper_ids` gives them)."""
        chunk: list[tuple[PaperRecord, dict[str, Any]]] = []
        kept: list[str] = []
        for row_id, raw in self.checkpoint.iter_rows(after=self.last_row):
            self.last_row = row_id
            match = self.dedup.add(raw)
            if raw.paper is None or raw.paper.paperId in self.stored:
                continue
            paper = raw.paper
            pid = paper.paperId
            self.stored.add(pid)
            duplicate_of = match[0] if match and match[0] != pid else None
            family = None
            if match is None:
                kept.append(pid)
                family = self.dedup.settled_family()
                if family is None:
                    self.unsettled.add(pid)
            chunk.append((_with_local_pdf(raw, paper),
                          {"family_id": family, "duplicate_of": duplicate_of, "source": raw.origin}))
            if len(chunk) >= _ADD_CHUNK:
                self.added += self.ctx.store.add_papers(chunk)
                chunk = []
        self.added += self.ctx.store.add_papers(chunk) if chunk else 0
        if kept:
            self.on_papers(sorted(kept), self.unsettled.intersection(kept))

    def finish(self, source: str, *, records_this_run: int, complete: bool, failed: list[str]) -> dict[str, Any]:
        """The last records, then every added paper's family; the summary :func:`_add_discovered` gives."""
        self.take()
        family_of = self.dedup.families()
        self.ctx.store.set_families({pid: family_of[pid] for pid in self.unsettled if pid in family_of})
        self.unsettled.clear()
        return _summary(self.dedup, source, records_this_run=records_this_run, complete=complete, failed=failed,
                        added=self.added)


# -- prefilter ----------------------------------------------------------------------------------
def _prefilter_inputs(ctx: BuildContext, pid: str) -> Any:
    return {"paper": _paper(ctx, pid), "policy": _metadata_policy(ctx.settings.policies.metadata).sha256}


async def _prefilter(ctx: BuildContext, pid: str) -> StageResult:
    policy = _metadata_policy(ctx.settings.policies.metadata)
    return _prefilter_result(pid, prefilter(_paper(ctx, pid), policy))


def _prefilter_batch(ctx: BuildContext, pids: Sequence[str]) -> dict[str, tuple[str, StageResult]]:
    """The prefilter over a batch (``StageSpec.screen``): the records in one read, the policy's
    hash once. A paper not stored, or whose record the policy cannot judge, is left out: it
    runs alone and its attempt says why it failed."""
    policy = _metadata_policy(ctx.settings.policies.metadata)
    policy_sha256 = policy.sha256
    decided: dict[str, tuple[str, StageResult]] = {}
    for pid, paper in ctx.store.get_papers(pids).items():
        try:
            decision = prefilter(paper, policy, policy_sha256=policy_sha256)
        except Exception:  # noqa: BLE001 - left for the paper's own attempt, which records the error
            continue
        decided[pid] = (input_hash({"paper": paper, "policy": policy_sha256}), _prefilter_result(pid, decision))
    return decided


def _prefilter_result(pid: str, decision: PrefilterDecision) -> StageResult:
    row = EvidenceValues(ScreeningDecision, {
        "stage": "prefilter", "decision": decision.disposition, "rule_ids": decision.rule_ids,
        "policy_hash": decision.policy_sha256, "payload": decision.model_dump(mode="json"), "paper_id": pid})
    return StageResult(status="succeeded" if decision.disposition == "pass" else "rejected",
                       output=decision, rejections=list(decision.rejections), evidence=[row])


# -- full text ------------------------------------------------------------------------------------
def _fetch_inputs(ctx: BuildContext, pid: str) -> Any:
    return {"paper": _paper(ctx, pid), "policy": ctx.settings.fetch}


async def _fetch(ctx: BuildContext, pid: str) -> StageResult:
    result = await fetch_stage.fetch_fulltext(_paper(ctx, pid), client=ctx.http,
                                              cache_dir=pdf_cache_dir(ctx.data_dir), policy=ctx.settings.fetch)
    row = FetchRow(status=result.status, url=result.url, final_url=result.final_url, sha256=result.sha256,
                   bytes=result.bytes, license=result.license, payload=result.model_dump(mode="json"),
                   stage_run_id=0, paper_id=pid)
    rejection = fetch_stage.rejection_for(result)
    return StageResult(status="rejected" if rejection else "succeeded", output=result,
                       rejections=[rejection] if rejection else [], evidence=[row])


def _fetched_path(ctx: BuildContext, pid: str) -> Path:
    output = ctx.store.latest_output(pid, "fetch_fulltext")
    if not output or not output.get("path"):
        raise StageError(f"paper {pid} has no fetched PDF")
    return Path(output["path"])


def _extract_inputs(ctx: BuildContext, pid: str) -> Any:
    output = ctx.store.latest_output(pid, "fetch_fulltext")
    return {"pdf_sha256": output.get("sha256") if output else None,
            "limits": ctx.settings.extraction.limits()}


async def _extract(ctx: BuildContext, pid: str) -> StageResult:
    import asyncio

    path = _fetched_path(ctx, pid)
    extraction = ctx.settings.extraction
    document = await asyncio.to_thread(extract_stage.extract_document, path, extraction.limits(),
                                       workers=extraction.workers)
    rejection = extract_stage.rejection_for(document)
    summary = {"status": document.status, "message": document.message, "pages": document.pages,
               "sha256": document.sha256, "spans": len(document.spans)}
    return StageResult(status="rejected" if rejection else "succeeded", output=summary,
                       rejections=[rejection] if rejection else [], document=document)


# -- geographic eligibility ----------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _eligibility_policy(path: Path | None) -> EligibilityPolicy:
    return load_eligibility_policy(path)


def _eligibility_inputs(ctx: BuildContext, pid: str) -> Any:
    output = ctx.store.latest_output(pid, "extract_text")
    return {"paper": _paper(ctx, pid), "document": output.get("sha256") if output else None,
            "policy": _eligibility_policy(ctx.settings.policies.eligibility).model_dump(mode="json"),
            "site_extractor": ctx.settings.build.site_extractor}


async def _eligibility(ctx: BuildContext, pid: str) -> StageResult:
    paper = _paper(ctx, pid)
    document = ctx.store.get_document(pid)
    policy = _eligibility_policy(ctx.settings.policies.eligibility)
    sites = find_sites(document, paper, policy)
    decision = decide_eligibility(paper, sites, policy, document=document)
    when = ctx.settings.build.site_extractor
    prompt_version = None
    if when == "always" or (when == "when_undecided" and decision.decision == "needs_review"):
        extraction = await extract_sites_llm(document, paper, ctx.llm, policy)
        prompt_version = extraction.provenance.get("prompt_version")
        decision = decide_eligibility(paper, [*sites, *extraction.sites], policy, document=document,
                                      warnings=extraction.rejections)
    row = ScreeningDecision(stage="eligibility", decision=decision.decision, rule_ids=decision.rule_ids,
                            policy_hash=decision.policy_sha256, payload=decision.model_dump(mode="json"),
                            stage_run_id=0, paper_id=pid)
    return StageResult(status="succeeded" if decision.decision == "eligible" else "rejected",
                       output=decision, rejections=list(decision.rejections), evidence=[row],
                       prompt_version=prompt_version)


# -- item construction ------------------------------------------------------------------------------
NO_ITEM = rule("construct.no_item", "no candidate finding of the paper yielded an accepted item")
FAMILY_HAS_ITEM = rule("construct.family_has_item",
                       "another paper of the same paper family already has an accepted item")


def _construct_inputs(ctx: BuildContext, pid: str) -> Any:
    output = ctx.store.latest_output(pid, "extract_text")  # eligibility only gates; the text is the input
    return {"document": output.get("sha256") if output else None,
            "options": ConstructionOptions.from_settings(ctx.settings.build)}


async def _construct(ctx: BuildContext, pid: str) -> StageResult:
    row = ctx.store.paper_row(pid)  # one read for the record and its family
    if row is None or not row.record:
        raise StageError(f"paper {pid} is not in the store")
    paper = PaperRecord.model_validate(row.record)
    family = row.family_id
    options = ConstructionOptions.from_settings(ctx.settings.build)
    taken = ctx.store.family_items(family) if family else []
    if len(taken) >= ctx.settings.build.items_per_family:
        return StageResult(status="rejected", output={"items": []},
                           rejections=[FAMILY_HAS_ITEM.reject(family_id=family, items=taken)])
    document = ctx.store.get_document(pid)
    if document is None:
        raise StageError(f"paper {pid} has no extracted document")
    current = claimed_attempt() or ctx.store.latest_run(pid, "construct")  # this attempt
    steps = StoreStepRunner(ctx, pid, first_attempt=current is not None and current.attempt == 1)
    result = await construct_items(paper, document, ctx.llm, options, step=steps)
    items = [ItemRow(item_id=item.item_id, family_id=family, payload=item.model_dump(mode="json"),
                     stage_run_id=0, paper_id=pid) for item in result.items]
    summary = {"items": [i.item_id for i in result.items],
               "steps": [s.model_dump(mode="json") for s in result.steps]}
    if not items:
        rules_seen = sorted({r for s in result.steps for r in s.rule_ids})
        return StageResult(status="rejected", output=summary,
                           rejections=[NO_ITEM.reject(rule_ids=rules_seen, steps=len(result.steps))])
    return StageResult(status="succeeded", output=summary, evidence=list(items))


BUILD_STAGES: list[StageSpec] = [
    # the metadata policy and the store only: a few papers at once keep the model stages beside it
    # answered promptly (most discovered papers pass through here alone)
    StageSpec("prefilter", _prefilter, _prefilter_inputs, after=None, concurrency=4, screen=_prefilter_batch),
    StageSpec("fetch_fulltext", _fetch, _fetch_inputs, after="prefilter"),
    StageSpec("extract_text", _extract, _extract_inputs, after="fetch_fulltext"),
    StageSpec("eligibility", _eligibility, _eligibility_inputs, after="extract_text"),
    StageSpec("construct", _construct, _construct_inputs, after="eligibility", needs_families=True),
]

