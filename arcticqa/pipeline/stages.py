"""Stage adapters: load a paper's inputs from the store, call the pure stage, shape the result.

Each adapter is ``async (ctx, paper_id) -> StageResult`` plus an ``inputs`` function whose hash
is recorded on the attempt. ``BUILD_STAGES`` is the per-paper order the build runs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from arcticqa.errors import ConfigError, StageError
from arcticqa.papers import PaperRecord
from arcticqa.pipeline.runner import BuildContext, StageResult, StageSpec
from arcticqa.sources import resolve_local_pdf
from arcticqa.stages import extract_text as extract_stage
from arcticqa.stages import fetch_fulltext as fetch_stage
from arcticqa.stages.discover import (
    DiscoveryOptions,
    deduplicate,
    discover,
    load_queries,
)
from arcticqa.stages.prefilter import (
    MetadataPolicy,
    load_metadata_policy,
    prefilter,
    server_filters_from_policy,
)
from arcticqa.store.discovery import StoreCheckpoint
from arcticqa.store.tables import FetchRow, ScreeningDecision
from arcticqa.text.extract import ExtractionLimits
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
async def discover_papers(ctx: BuildContext) -> dict[str, Any]:
    """Run discovery from the configured source into the store, then dedupe into papers."""
    settings = ctx.settings
    policy = _metadata_policy(settings.policies.metadata)
    d = settings.discovery
    options = DiscoveryOptions(api_url=d.api_url, api_key_env=d.api_key_env, rate_per_s=d.rate_per_s,
                               timeout_s=d.timeout_s, max_attempts=d.max_attempts, page_size=d.page_size,
                               server_filters=server_filters_from_policy(policy))
    source = settings.build.source
    queries = load_queries(settings.build.keywords_file) if source.strip() == "s2" else []
    checkpoint = StoreCheckpoint(ctx.store)
    result = await discover(queries, source=source, checkpoint=checkpoint, options=options)
    dedup = deduplicate(checkpoint.all_records())
    duplicate_of = {d.record.paper_id: d.duplicate_of for d in dedup.duplicates
                    if d.record.paper_id and d.record.paper_id != d.duplicate_of}
    new: list[tuple[PaperRecord, dict[str, Any]]] = []
    for raw in [*dedup.kept, *(d.record for d in dedup.duplicates)]:
        if raw.paper is None:
            continue
        paper = raw.paper
        local = resolve_local_pdf(raw)
        if local is not None:
            paper = paper.model_copy(update={"localPdf": str(local)})
        pid = paper.paperId
        new.append((paper, {"family_id": dedup.family_of.get(pid), "duplicate_of": duplicate_of.get(pid),
                            "source": raw.origin}))
    added = ctx.store.add_papers(new)
    return {"source": source, "complete": result.complete, "records_this_run": len(result.records),
            "failed_queries": [o.query for o in result.failed], "kept": len(dedup.kept),
            "duplicates": len(dedup.duplicates), "invalid": len(dedup.invalid), "new_papers": added}


# -- prefilter ----------------------------------------------------------------------------------
def _prefilter_inputs(ctx: BuildContext, pid: str) -> Any:
    return {"paper": _paper(ctx, pid), "policy": _metadata_policy(ctx.settings.policies.metadata).sha256}


async def _prefilter(ctx: BuildContext, pid: str) -> StageResult:
    policy = _metadata_policy(ctx.settings.policies.metadata)
    decision = prefilter(_paper(ctx, pid), policy)
    row = ScreeningDecision(stage="prefilter", decision=decision.disposition, rule_ids=decision.rule_ids,
                            policy_hash=decision.policy_sha256, payload=decision.model_dump(mode="json"),
                            stage_run_id=0, paper_id=pid)
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


def _extraction_limits(ctx: BuildContext) -> ExtractionLimits:
    try:
        return ExtractionLimits.model_validate(ctx.settings.extraction)
    except ValueError as exc:
        raise ConfigError(f"setting 'extraction': {exc}") from exc


def _fetched_path(ctx: BuildContext, pid: str) -> Path:
    run = ctx.store.latest_run(pid, "fetch_fulltext")
    if run is None or run.output is None or not run.output.get("path"):
        raise StageError(f"paper {pid} has no fetched PDF")
    return Path(run.output["path"])


def _extract_inputs(ctx: BuildContext, pid: str) -> Any:
    run = ctx.store.latest_run(pid, "fetch_fulltext")
    return {"pdf_sha256": run.output.get("sha256") if run and run.output else None,
            "limits": _extraction_limits(ctx)}


async def _extract(ctx: BuildContext, pid: str) -> StageResult:
    import asyncio

    path = _fetched_path(ctx, pid)
    document = await asyncio.to_thread(extract_stage.extract_document, path, _extraction_limits(ctx))
    rejection = extract_stage.rejection_for(document)
    summary = {"status": document.status, "message": document.message, "pages": document.pages,
               "sha256": document.sha256, "spans": len(document.spans)}
    return StageResult(status="rejected" if rejection else "succeeded", output=summary,
                       rejections=[rejection] if rejection else [], document=document)


BUILD_STAGES: list[StageSpec] = [
    StageSpec("prefilter", _prefilter, _prefilter_inputs, after=None),
    StageSpec("fetch_fulltext", _fetch, _fetch_inputs, after="prefilter"),
    StageSpec("extract_text", _extract, _extract_inputs, after="fetch_fulltext"),
]
