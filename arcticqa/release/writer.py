"""Write a release folder: items, conditions, prompt, excluded items, funnel, card, manifest.

Deterministic: items sorted by id, fixed key order, no timestamp unless one is passed in, a
byte-stable funnel SVG — the same inputs give byte-identical files. Atomic: everything is
written into a temporary folder beside the target, checked with :func:`validate_release`, and
only then renamed into place; any failure leaves the target as it was.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arcticqa.errors import ConfigError, InputError, StageError
from arcticqa.outputs import check_folder_target, md_code, md_text, write_folder
from arcticqa.release.conditions import build_conditions
from arcticqa.release.cues import audit_release, cue_table
from arcticqa.release.funnel import funnel_figure_bytes
from arcticqa.release.hf import HF_CONFIGS, card_header, parquet_files, parquet_path, require_pyarrow
from arcticqa.release.jsonio import item_json, json_bytes, jsonl_bytes
from arcticqa.release.models import (
    ABSTAIN_TEXT,
    EvidenceRef,
    ExcludedItem,
    FunnelCounts,
    Manifest,
    ReleaseItem,
    ReviewSummary,
    license_allows_redistribution,
)
from arcticqa.release.validate import check_item, validate_release

__all__ = ["RELEASE_FORMAT", "RELEASE_FILES", "RELEASE_LAYOUTS", "write_release", "render_card"]

RELEASE_FORMAT = "arcticqa-release/1"
#: every file a release holds besides MANIFEST.json, in the order they are written
RELEASE_FILES: tuple[str, ...] = ("items.jsonl", "conditions.jsonl", "prompt.json",
                                  "excluded-items.json", "funnel.svg", "README.md")
#: ``--format``: the JSONL release, or the same plus Parquet per config and a card header (Hugging Face)
RELEASE_LAYOUTS: tuple[str, ...] = ("jsonl", "hf")
#: what ``--overwrite`` may replace in an existing release folder (``data``: the Parquet files)
_OWN = frozenset({*RELEASE_FILES, "MANIFEST.json", "data"})
_RELEASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def render_card(*, release_id: str, counts: Mapping[str, Any], funnel: FunnelCounts,
                roster: Mapping[str, list[str]], include_evidence: bool, dataset_license: str,
                citation: str | None, code_version: str, config_hash: str,
                policy_hashes: Mapping[str, str], cue_audit: str = "", review: ReviewSummary | None = None,
                parquet: Mapping[str, int] | None = None) -> str:
    """The dataset card (``README.md``) of a release (``cue_audit``: the Markdown table of
    :func:`arcticqa.release.cues.cue_table`, empty to leave the section out; ``review``: what an
    expert review measured, None for a release nobody reviewed; ``parquet``: the Parquet file ->
    rows of a Hugging Face release)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(loader=PackageLoader("arcticqa.release", "templates"),
                      undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["md"] = md_text
    env.filters["md_code"] = md_code
    return env.get_template("card.md.j2").render(
        release_id=release_id, counts=counts, funnel=funnel, roster=dict(sorted(roster.items())),
        include_evidence=include_evidence, dataset_license=dataset_license, citation=citation,
        code_version=code_version, config_hash=config_hash,
        policy_hashes=dict(sorted(policy_hashes.items())), cue_audit=cue_audit, review=review,
        parquet=dict(parquet or {}))


def _prepare(items: list[ReleaseItem], *, include_evidence: bool,
             require_redistributable: bool) -> tuple[list[ReleaseItem], list[ExcludedItem]]:
    seen: set[str] = set()
    for item in items:
        if item.item_id in seen:
            raise StageError(f"export: item id {item.item_id} occurs twice")
        seen.add(item.item_id)
        problems = check_item(item)
        if problems:
            first = problems[0]
            raise StageError(f"export: {first.message} (field '{first.field}') [{first.rule_id}]")
    kept: list[ReleaseItem] = []
    excluded: list[ExcludedItem] = []
    for item in sorted(items, key=lambda i: i.item_id):
        lic = item.source_license
        if require_redistributable and not (lic and lic.redistributable
                                            and license_allows_redistribution(lic.license)):
            name = lic.license if lic and lic.license else "unknown"
            excluded.append(ExcludedItem(
                item_id=item.item_id, status=item.status,
                reason=f"source licence {name!r} does not allow redistributing evidence "
                       "(--require-redistributable)"))
            continue
        if item.evidence is not None and not include_evidence:
            item = item.model_copy(update={"evidence": [
                EvidenceRef.model_validate(e.model_dump() | {"text": None}) for e in item.evidence]})
        kept.append(item)
    return kept, excluded


def _all_deterministic(item: ReleaseItem) -> bool:
    """The item's answer match and every distractor's contradiction were decided by a rule."""
    return (item.answer_match == "deterministic-match"
            and all(d.verification == "deterministic-contradiction" for d in item.distractors))


def _counts(items: list[ReleaseItem], n_conditions: int, n_excluded: int) -> dict[str, Any]:
    distractors = [d for it in items for d in it.distractors]
    return {
        "items": len(items),
        "conditions": n_conditions,
        "excluded_items": n_excluded,
        "items_by_answer_match": dict(sorted(Counter(it.answer_match or "not-recorded" for it in items).items())),
        "items_all_deterministic": sum(1 for it in items if _all_deterministic(it)),
        "distractors": len(distractors),
        "distractors_by_verification": dict(sorted(Counter(d.verification for d in distractors).items())),
        "language_script": dict(sorted(Counter(it.language_script for it in items).items())),
        "numeric_answers": sum(1 for it in items if it.numeric_answer),
    }


def write_release(items: list[ReleaseItem], out_dir: Path, *, release_id: str, prompt: dict[str, Any],
                  funnel: FunnelCounts, roster: dict[str, list[str]], config_hash: str,
                  policy_hashes: dict[str, str], code_version: str, include_evidence: bool = False,
                  require_redistributable: bool = False, format: str = "jsonl",
                  overwrite: bool = False, created_utc: str | None = None,
                  dataset_license: str = "CC-BY-4.0", citation: str | None = None,
                  allow_empty: bool = True, review: ReviewSummary | None = None) -> Path:
    """Write a release of ``items`` to ``out_dir`` and return its path.

    Refuses an existing non-empty ``out_dir`` unless ``overwrite``. With
    ``require_redistributable`` items whose source licence does not allow sharing evidence are
    left out and listed in ``excluded-items.json`` with the reason. Without
    ``include_evidence`` evidence references keep their ids, offsets and hashes but not the text.
    ``allow_empty=False`` refuses a release without items (``arcticqa export`` without
    ``--allow-empty``): an unfinished build exported by mistake must not look like a release.
    ``review`` (an expert review's summary) goes into the card, and the items it rejected into
    ``excluded-items.json`` (``items`` must not hold them).
    """
    if format not in RELEASE_LAYOUTS:
        raise ConfigError(f"release format {format!r} is not supported (give one of {', '.join(RELEASE_LAYOUTS)})")
    if format == "hf":
        require_pyarrow()  # before any work: a missing extra is one line
    if not _RELEASE_ID.match(release_id):
        raise ConfigError(f"release id {release_id!r} must be 1-100 letters, digits, '.', '_' or '-'")
    target = Path(out_dir).absolute()
    check_folder_target(target, overwrite=overwrite, own=_OWN)
    kept, excluded = _prepare(list(items), include_evidence=include_evidence,
                              require_redistributable=require_redistributable)
    if not kept and not allow_empty:
        reason = f" ({len(excluded)} left out by require_redistributable)" if excluded else ""
        raise InputError(f"no accepted items to export{reason}: refusing to write an empty release "
                         "(finish the build with `arcticqa resume`, or pass --allow-empty)", path=str(target))
    if review is not None:
        excluded = sorted([*excluded, *review.expert_rejected], key=lambda e: e.item_id)
    abstain = prompt.get("abstention_option_text", ABSTAIN_TEXT)
    if not isinstance(abstain, str) or not abstain:
        raise ConfigError("prompt 'abstention_option_text' must be a non-empty string")
    conditions = build_conditions(kept, abstain_text=abstain)
    counts = _counts(kept, len(conditions), len(excluded))

    def fill(tmp: Path) -> None:
        item_rows = [item_json(it) for it in kept]
        files: dict[str, bytes] = {
            "items.jsonl": jsonl_bytes(item_rows),
            "conditions.jsonl": jsonl_bytes([c.model_dump(mode="json") for c in conditions]),
        }
        parquet: dict[str, bytes] = parquet_files(item_rows, conditions) if format == "hf" else {}
        card = render_card(
            release_id=release_id, counts=counts, funnel=funnel, roster=roster,
            include_evidence=include_evidence, dataset_license=dataset_license,
            citation=citation, code_version=code_version, config_hash=config_hash,
            policy_hashes=policy_hashes, cue_audit=cue_table(audit_release(kept)), review=review,
            parquet={parquet_path(c): len(kept) for c in HF_CONFIGS} if parquet else None)
        if parquet:
            scripts = {it.language_script for it in kept}
            card = card_header(release_id=release_id, dataset_license=dataset_license, n_items=len(kept),
                               languages=["en", "ru"] if scripts - {"latin"} else ["en"]) + card
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        rest: dict[str, bytes] = {
            "prompt.json": json_bytes(prompt),
            "excluded-items.json": json_bytes([e.model_dump(mode="json", exclude_none=True)
                                               for e in excluded]),
            "funnel.svg": funnel_figure_bytes(funnel, "svg"),
            "README.md": card.encode("utf-8"),
            **parquet,
        }
        if parquet:
            (tmp / "data").mkdir()
        for name, data in rest.items():
            (tmp / name).write_bytes(data)
        files |= rest
        manifest = Manifest(
            release_id=release_id, format=RELEASE_FORMAT,
            files={n: hashlib.sha256(files[n]).hexdigest() for n in sorted(files)},
            counts=counts, created_utc=created_utc, code_version=code_version,
            config_hash=config_hash, policy_hashes=dict(sorted(policy_hashes.items())),
            roster={k: list(v) for k, v in sorted(roster.items())},
            include_evidence=include_evidence, funnel=funnel)
        (tmp / "MANIFEST.json").write_bytes(json_bytes(manifest.model_dump(mode="json",
                                                                           exclude_none=True)))
        report = validate_release(tmp)
        if not report.ok:
            first = report.errors[0]
            raise StageError(f"export produced an invalid release: {first}")

    write_folder(target, fill, overwrite=overwrite, own=_OWN)
    return target
