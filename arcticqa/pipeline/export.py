"""The release read from the store: accepted items as release records, and the export itself.

An adapter from stored items, papers and spans to ``release.models.ReleaseItem``, plus what a
release records about the build that made it (the evaluation prompt it ships, the policy file
hashes on the screening decisions, the funnel, the settings hash with the input files counted by
content). ``arcticqa export`` and the demo call :func:`export_from_store`; the release format
itself lives in ``arcticqa.release``.
"""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from arcticqa import __version__
from arcticqa.config import Settings
from arcticqa.llm.prompts import PROMPTS_DIR
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.models import (
    ANSWER_MATCH,
    Construction,
    Distractor,
    EvidenceRef,
    PaperRef,
    ReleaseItem,
    SourceLicense,
    license_allows_redistribution,
)
from arcticqa.release.writer import write_release
from arcticqa.review.release import review_release
from arcticqa.stages.discover import keywords_path, parse_source
from arcticqa.store import Store

__all__ = ["release_items", "release_prompt", "policy_hashes", "input_identities", "export_from_store"]


def release_items(store: Store) -> list[ReleaseItem]:
    """Every accepted item as a release record (evidence text included; the writer drops it
    unless ``--include-evidence``)."""
    rows = store.items()
    span_ids = {e["id"] for r in rows for e in (r.payload or {}).get("evidence_spans", [])}
    texts = {sid: span.text for sid, span in store.spans(span_ids).items()}
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
                           year=p["paper"].get("year"), publication_date=p["paper"].get("publication_date"),
                           paper_family_id=row.family_id or row.paper_id),
            construction=Construction(writer_model=p["writer_model"],
                                      option_verifier_models=p.get("option_verifier_models", []),
                                      generation_prompt_version=prompt_versions.get(
                                          "question_writer", next(iter(prompt_versions.values()), "unknown"))),
            evidence=[EvidenceRef(span_id=e["id"], section=e["section"], page=e["page"], start=e["start"],
                                  end=e["end"], sha256=e["sha256"], text=texts.get(e["id"]))
                      for e in p.get("evidence_spans", [])],
            claim_type=p.get("claim_type"), scope=p.get("scope"), answer_unit=p.get("answer_unit"),
            answer_match=ANSWER_MATCH.get(p.get("answer_match_confidence") or ""),
            source_license=SourceLicense(license=licence, url=oa.url if oa else None,
                                         redistributable=license_allows_redistribution(licence)),
        ))
    return out


def release_prompt() -> dict[str, Any]:
    """The evaluation prompt a release ships (``prompts/arcticabstain/v1.json``)."""
    return dict(json.loads((PROMPTS_DIR / "arcticabstain" / "v1.json").read_text(encoding="utf-8")))


def policy_hashes(store: Store) -> dict[str, str]:
    """The policy file hashes recorded on screening decisions (name → sha256)."""
    hashes: dict[str, str] = {}
    for run in store.runs():
        out = run.output or {}
        if run.stage == "prefilter" and out.get("policy_sha256"):
            hashes["metadata"] = out["policy_sha256"]
        if run.stage == "eligibility":
            for key in ("policy_sha256", "regions_sha256", "gazetteer_sha256"):
                if out.get(key):
                    hashes[f"eligibility.{key.removesuffix('_sha256')}"] = out[key]
    return dict(sorted(hashes.items()))


def _content(path: Path) -> str | None:
    """``sha256:HEX`` of a file's bytes; None for a folder or a path that is not there."""
    if not path.is_file():
        return None
    with path.open("rb") as f:
        return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()


def input_identities(settings: Settings) -> dict[str, str]:
    """The build's input files by content, for :meth:`Settings.fingerprint`: the snapshot a
    ``snapshot:PATH`` source reads, the keyword file of ``source = "s2"``, the policy files the
    settings name; each found where the build finds it. A folder (``s2-datasets:DIR``) or a
    missing file is not hashed: the fingerprint then counts its path relative to the config file."""
    found: dict[str, str] = {}
    source = settings.build.source.strip()
    if source == "s2":
        if (keywords := _content(keywords_path(settings.build.keywords_file))) is not None:
            found["build.keywords_file"] = keywords
    else:
        spec = parse_source(source)
        if spec.path is not None and (content := _content(spec.path)) is not None:
            found["build.source"] = f"{spec.kind}:{content}"
    for name in ("metadata", "eligibility"):
        given = getattr(settings.policies, name)
        if given is not None and (content := _content(Path(given))) is not None:
            found[f"policies.{name}"] = content
    return found


def export_from_store(store: Store, settings: Settings, out: Path, *, release_id: str = "arcticqa-release",
                      prompt: dict[str, Any] | None = None, include_evidence: bool = False,
                      require_redistributable: bool = False, fmt: str = "jsonl",
                      overwrite: bool = False, allow_empty: bool = True) -> Path:
    """Write the store's accepted items as a release folder (see ``arcticqa export``)."""
    try:
        code_version = version("arcticqa")
    except PackageNotFoundError:  # a source checkout that was never installed
        code_version = __version__
    roster = {role: [settings.model_for(role).model] for role in sorted(settings.roles)}
    items, review = review_release(store.engine, release_items(store))
    return write_release(items, out, release_id=release_id,
                         prompt=prompt if prompt is not None else release_prompt(),
                         funnel=funnel_counts(store), roster=roster, config_hash=settings.fingerprint(input_identities(settings)),
                         policy_hashes=policy_hashes(store), code_version=code_version,
                         include_evidence=include_evidence, require_redistributable=require_redistributable,
                         format=fmt, overwrite=overwrite, allow_empty=allow_empty, review=review)
