"""``validate-release``: check any release folder (ours or the published ArcticQA v1).

Checks, in order: every JSONL line parses (size cap, UTF-8, strict JSON) and fits its model
with no unknown keys; item invariants (unique ids, four distinct distractors ranked 0–3, the
answer-present condition drops rank 3); conditions agree with their items; the manifest's
SHA-256 of every listed file and its counts; ids referenced by responses and excluded items.
Nothing is written. Every problem is an :class:`~arcticqa.release.models.Issue` naming file, line and field, with a
stable rule id; :meth:`~arcticqa.release.models.ValidationReport.raise_for_errors` turns the first into an InputError.
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from arcticqa.errors import InputError
from arcticqa.release.conditions import conditions_for
from arcticqa.release.jsonio import MAX_LINE_BYTES, iter_jsonl_lenient, load_json
from arcticqa.release.models import (
    ABSTAIN_TEXT,
    ConditionRecord,
    ExcludedItem,
    Issue,
    Manifest,
    ReleaseItem,
    ResponseRecord,
    ValidationReport,
)
from arcticqa.release.recheck import recheck_items
from arcticqa.rules import Rule, rule

__all__ = ["validate_release", "check_item", "normalise_option"]

R_UNREADABLE = rule("release.unreadable", "A file or line cannot be read as UTF-8 JSON")
R_SCHEMA = rule("release.schema", "A record does not match its schema")
R_MISSING_FILE = rule("release.missing_file", "A required release file is missing")
R_UNSAFE_PATH = rule("release.unsafe_path", "A listed path escapes the release folder")
R_DUPLICATE_ID = rule("release.duplicate_id", "Two records share an id")
R_DISTRACTOR_COUNT = rule("release.distractor_count", "An item does not have exactly four distractors")
R_DISTRACTOR_RANKS = rule("release.distractor_ranks", "Distractor ranks are not exactly 0, 1, 2, 3")
R_DISTRACTOR_DUPLICATE = rule("release.distractor_duplicate",
                              "Two options of an item are the same text")
R_EVIDENCE_HASH = rule("release.evidence_hash",
                       "An evidence span's text does not match its SHA-256 or offsets")
R_DROPPED_RANK = rule("release.dropped_rank", "The dropped distractor is not the rank-3 distractor")
R_CONDITION_MISSING = rule("release.condition_missing", "An item lacks one of its two conditions")
R_CONDITION_MISMATCH = rule("release.condition_mismatch",
                            "A condition's option set disagrees with its item")
R_UNKNOWN_ITEM = rule("release.unknown_item", "A record names an item that is not in items.jsonl")
R_HASH_MISMATCH = rule("release.hash_mismatch", "A file's SHA-256 differs from MANIFEST.json")
R_COUNT_MISMATCH = rule("release.count_mismatch", "A count in MANIFEST.json differs from the files")
R_UNLISTED = rule("release.unlisted_file", "A file in the release is not listed in MANIFEST.json")
R_LISTED_ABSENT = rule("release.listed_file_absent", "A file listed in MANIFEST.json is not present")

_MAX_ISSUES = 1000


class _Collector:
    def __init__(self, report: ValidationReport, root: Path) -> None:
        self.report, self.root = report, root

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def add(self, r: Rule, path: Path | str, message: str, *, line: int | None = None,
            field: str | None = None, severity: Literal["error", "warning"] = "error") -> None:
        bucket = self.report.errors if severity == "error" else self.report.warnings
        if len(bucket) >= _MAX_ISSUES:
            self.report.truncated = True
            return
        where = self.rel(path) if isinstance(path, Path) else path
        bucket.append(Issue(severity=severity, rule_id=r.id, path=where, line=line, field=field,
                            message=message))

    def input_error(self, exc: InputError, path: Path) -> None:
        self.add(R_UNREADABLE, path, str(exc).split(": ", 1)[-1] if exc.line else str(exc),
                 line=exc.line)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_issues(col: _Collector, exc: ValidationError, path: Path, line: int | None) -> None:
    for err in exc.errors():
        field = _loc(err["loc"])
        r = R_SCHEMA
        if err["loc"] == ("distractors",) and err["type"] in ("too_short", "too_long"):
            r = R_DISTRACTOR_COUNT
            n = len(err["input"]) if isinstance(err.get("input"), list) else "?"
            message = f"item has {n} distractors; exactly 4 are required"
        elif err["type"] == "extra_forbidden":
            message = "unexpected field"
        elif err["type"] == "missing":
            message = "required field is missing"
        else:
            message = err["msg"]
        col.add(r, path, message, line=line, field=field or None)


def normalise_option(text: str) -> str:
    """Whitespace-collapsed, case-folded option text: two options equal under this are the same."""
    return " ".join(text.split()).casefold()


def _check_item(col: _Collector, item: ReleaseItem, path: Path, line: int) -> bool:
    ok = True
    ranks = sorted(d.rank for d in item.distractors)
    if ranks != [0, 1, 2, 3]:
        col.add(R_DISTRACTOR_RANKS, path, f"item {item.item_id}: distractor ranks are {ranks}",
                line=line, field="distractors[].rank")
        ok = False
    seen: dict[str, str] = {normalise_option(item.gold_answer): "the gold answer"}
    for i, d in enumerate(item.distractors):
        key = normalise_option(d.text)
        if key in seen:
            col.add(R_DISTRACTOR_DUPLICATE, path,
                    f"item {item.item_id}: distractor rank {d.rank} repeats {seen[key]}",
                    line=line, field=f"distractors[{i}].text")
            ok = False
        seen.setdefault(key, f"distractor rank {d.rank}")
    rank3 = item.distractor(3)
    if rank3 is None or item.answer_present_drops != rank3.text:
        col.add(R_DROPPED_RANK, path,
                f"item {item.item_id}: answer_present_drops is {item.answer_present_drops!r}, "
                f"not the rank-3 distractor {rank3.text if rank3 else None!r}",
                line=line, field="answer_present_drops")
        ok = False
    for i, e in enumerate(item.evidence or []):
        bad = None
        if e.end < e.start:
            bad = f"end {e.end} is before start {e.start}"
        elif e.text is not None and hashlib.sha256(e.text.encode("utf-8")).hexdigest() != e.sha256:
            bad = "text does not hash to sha256"
        elif e.text is not None and len(e.text) != e.end - e.start:
            bad = f"text has {len(e.text)} characters, offsets span {e.end - e.start}"
        if bad:
            col.add(R_EVIDENCE_HASH, path, f"item {item.item_id}: evidence span {e.span_id}: {bad}",
                    line=line, field=f"evidence[{i}]")
            ok = False
    return ok


def check_item(item: ReleaseItem) -> list[Issue]:
    """The invariants of one item (ranks, distinct options, dropped rank, evidence hashes)."""
    scratch = ValidationReport(release_dir="")
    _check_item(_Collector(scratch, Path(".")), item, Path("items.jsonl"), 0)
    return scratch.errors


_Record = TypeVar("_Record", bound=BaseModel)


def _valid_lines(col: _Collector, path: Path, model: type[_Record], count: str
                 ) -> Iterator[tuple[int, _Record]]:
    """Each line of ``path`` that parses and validates as ``model``; every other line's problem
    goes to the collector. ``col.report.counts[count]`` ends as the number of lines read."""
    lines = 0
    for lineno, obj in iter_jsonl_lenient(path):
        lines += 1
        if isinstance(obj, InputError):
            col.input_error(obj, path)
            continue
        try:
            yield lineno, model.model_validate(obj, strict=True)
        except ValidationError as exc:
            _schema_issues(col, exc, path, lineno)
    col.report.counts[count] = lines


def _read_items(col: _Collector, path: Path) -> dict[str, tuple[int, ReleaseItem, bool]]:
    items: dict[str, tuple[int, ReleaseItem, bool]] = {}
    for lineno, item in _valid_lines(col, path, ReleaseItem, "items"):
        if item.item_id in items:
            col.add(R_DUPLICATE_ID, path, f"item id {item.item_id} already used on line "
                    f"{items[item.item_id][0]}", line=lineno, field="item_id")
            continue
        items[item.item_id] = (lineno, item, _check_item(col, item, path, lineno))
    return items


def _first_difference(got: ConditionRecord, want: ConditionRecord) -> str | None:
    g, w = got.model_dump(), want.model_dump()
    for key in w:
        if key == "options":
            for i, (go, wo) in enumerate(zip(g["options"], w["options"], strict=False)):
                for k in wo:
                    if go[k] != wo[k]:
                        return f"options[{i}].{k}"
        elif g[key] != w[key]:
            return key
    return None


def _read_conditions(col: _Collector, path: Path, items: dict[str, tuple[int, ReleaseItem, bool]],
                     abstain_text: str) -> None:
    seen: dict[tuple[str, str], int] = {}
    expected: dict[tuple[str, str], ConditionRecord] = {}
    for _, item, good in items.values():
        if good:
            for c in conditions_for(item, abstain_text=abstain_text):
                expected[(c.item_id, c.condition)] = c
    for lineno, rec in _valid_lines(col, path, ConditionRecord, "conditions"):
        key: tuple[str, str] = (rec.item_id, rec.condition)
        if key in seen:
            col.add(R_DUPLICATE_ID, path, f"condition {rec.condition} of item {rec.item_id} "
                    f"already listed on line {seen[key]}", line=lineno, field="condition")
            continue
        seen[key] = lineno
        if rec.item_id not in items:
            col.add(R_UNKNOWN_ITEM, path, f"item {rec.item_id} is not in items.jsonl", line=lineno,
                    field="item_id")
            continue
        want = expected.get(key)
        if want is None:
            continue  # the item itself is invalid and already reported
        diff = _first_difference(rec, want)
        if diff is not None:
            col.add(R_CONDITION_MISMATCH, path,
                    f"condition {rec.condition} of item {rec.item_id} disagrees with the item",
                    line=lineno, field=diff)
    for missing in sorted(expected):
        if missing not in seen:
            col.add(R_CONDITION_MISSING, path, f"item {missing[0]} has no {missing[1]} condition",
                    field="condition")


def _read_responses_jsonl(col: _Collector, path: Path, items: dict[str, Any]) -> None:
    for lineno, rec in _valid_lines(col, path, ResponseRecord, "responses"):
        if rec.item_id not in items:
            col.add(R_UNKNOWN_ITEM, path, f"item {rec.item_id} is not in items.jsonl",
                    line=lineno, field="item_id")


def _read_responses_csv(col: _Collector, path: Path, items: dict[str, Any]) -> None:
    rows = 0
    try:
        with path.open("rb") as raw:
            # a size cap per line, as for JSONL; csv itself has no such limit by default
            text = io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline="")
            reader = csv.DictReader(text)
            header = reader.fieldnames or []
            for need in ("item_id", "condition"):
                if need not in header:
                    col.add(R_SCHEMA, path, "required column is missing", line=1, field=need)
                    return
            for row in reader:
                rows += 1
                line = reader.line_num
                if None in row or any(len(v or "") > MAX_LINE_BYTES for v in row.values()):
                    col.add(R_SCHEMA, path, "row has more fields than the header or an "
                            "over-long field", line=line)
                    continue
                if row["item_id"] not in items:
                    col.add(R_UNKNOWN_ITEM, path, f"item {row['item_id']} is not in items.jsonl",
                            line=line, field="item_id")
                if row["condition"] not in ("answer_present", "answer_absent"):
                    col.add(R_SCHEMA, path, f"unknown condition {row['condition']!r}", line=line,
                            field="condition")
    except UnicodeDecodeError as exc:
        col.add(R_UNREADABLE, path, f"invalid UTF-8 near row {rows + 1}: {exc.reason}")
    except csv.Error as exc:
        col.add(R_UNREADABLE, path, f"invalid CSV near row {rows + 1}: {exc}")
    col.report.counts["responses"] = rows


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _safe_member(root: Path, name: str) -> Path | None:
    """The path of a manifest-listed file, or None when the name could escape ``root``."""
    pure = PurePosixPath(name)
    if (not name or "\\" in name or "\x00" in name or pure.is_absolute()
            or any(p in ("..", "") for p in pure.parts) or ":" in pure.parts[0]):
        return None
    candidate = root.joinpath(*pure.parts)
    try:
        candidate.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return None
    return candidate


def _read_manifest(col: _Collector, root: Path) -> Manifest | None:
    path = root / "MANIFEST.json"
    if not path.exists():
        col.add(R_MISSING_FILE, path, "file is missing")
        return None
    try:
        data = load_json(path)
    except InputError as exc:
        col.input_error(exc, path)
        return None
    try:
        return Manifest.model_validate(data, strict=True)
    except ValidationError as exc:
        _schema_issues(col, exc, path, None)
        return None


def _check_manifest(col: _Collector, root: Path, manifest: Manifest) -> None:
    mpath = root / "MANIFEST.json"
    listed: set[Path] = set()
    for name, digest in sorted(manifest.files.items()):
        member = _safe_member(root, name)
        if member is None:
            col.add(R_UNSAFE_PATH, mpath, f"file name {name!r} is not a plain path inside the "
                    "release folder", field=f"files.{name}")
            continue
        listed.add(member.resolve())
        if not member.is_file():
            col.add(R_LISTED_ABSENT, mpath, f"{name} is listed but not present; its hash "
                    "cannot be checked", field=f"files.{name}", severity="warning")
            continue
        actual = _sha256_file(member)
        if actual != digest:
            col.add(R_HASH_MISMATCH, member, f"SHA-256 is {actual}, MANIFEST.json says {digest}",
                    field=f"files.{name}")
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            try:
                p.resolve().relative_to(root.resolve())
            except (ValueError, OSError):
                col.add(R_UNSAFE_PATH, p, "symbolic link points outside the release folder")
                continue
        if p.is_file() and p.name != "MANIFEST.json" and p.resolve() not in listed:
            col.add(R_UNLISTED, p, "not listed in MANIFEST.json (no hash to check)",
                    severity="warning")
    counts = manifest.counts
    checks = {"items": "items", "conditions": "conditions", "condition_renderings": "conditions",
              "responses": "responses", "excluded_items": "excluded_items"}
    for key, ours in checks.items():
        want = counts.get(key)
        got = col.report.counts.get(ours)
        if isinstance(want, int) and got is not None and want != got:
            col.add(R_COUNT_MISMATCH, mpath, f"counts.{key} is {want} but the files hold {got}",
                    field=f"counts.{key}")


def _read_excluded(col: _Collector, path: Path, items: dict[str, Any]) -> None:
    try:
        data = load_json(path)
    except InputError as exc:
        col.input_error(exc, path)
        return
    if not isinstance(data, list):
        col.add(R_SCHEMA, path, "expected a JSON array of excluded items")
        return
    for i, obj in enumerate(data):
        try:
            rec = ExcludedItem.model_validate(obj, strict=True)
        except ValidationError as exc:
            for err in exc.errors():
                col.add(R_SCHEMA, path, err["msg"], field=f"[{i}]." + _loc(err["loc"]))
            continue
        if rec.item_id in items:
            col.add(R_DUPLICATE_ID, path, f"item {rec.item_id} is both excluded and in items.jsonl",
                    field=f"[{i}].item_id")
    col.report.counts["excluded_items"] = len(data)


def _abstain_text(col: _Collector, root: Path) -> str:
    path = root / "prompt.json"
    if not path.exists():
        return ABSTAIN_TEXT
    try:
        data = load_json(path)
    except InputError as exc:
        col.input_error(exc, path)
        return ABSTAIN_TEXT
    if not isinstance(data, dict):
        col.add(R_SCHEMA, path, "expected a JSON object")
        return ABSTAIN_TEXT
    text = data.get("abstention_option_text", ABSTAIN_TEXT)
    if not isinstance(text, str) or not text:
        col.add(R_SCHEMA, path, "must be a non-empty string", field="abstention_option_text")
        return ABSTAIN_TEXT
    return text


def _items_file(path: Path) -> tuple[ValidationReport, list[ReleaseItem]]:
    report = ValidationReport(release_dir=str(path.parent))
    items = _read_items(_Collector(report, path.parent), path)
    return report, [it for _, it, good in items.values() if good]


def validate_release(release_dir: Path | str, *, recheck: bool = False) -> ValidationReport:
    """Check a release folder (or a bare ``items.jsonl``) and return every issue found.

    With ``recheck=True`` the deterministic question/option gates of :mod:`arcticqa.gates`
    are run again on the published text (see :mod:`arcticqa.release.recheck`).
    """
    root = Path(release_dir)
    if root.is_file():
        report, good_items = _items_file(root)
        if recheck:
            report.add_recheck(recheck_items(good_items))
        return report
    if not root.is_dir():
        raise InputError("release folder not found", path=str(root))
    report = ValidationReport(release_dir=str(root))
    col = _Collector(report, root)
    items_path = root / "items.jsonl"
    items: dict[str, tuple[int, ReleaseItem, bool]] = {}
    if items_path.is_file():
        items = _read_items(col, items_path)
    else:
        col.add(R_MISSING_FILE, items_path, "file is missing")
    abstain = _abstain_text(col, root)
    cond_path = root / "conditions.jsonl"
    if cond_path.is_file():
        _read_conditions(col, cond_path, items, abstain)
    else:
        col.add(R_MISSING_FILE, cond_path, "file is missing")
    if (root / "responses.jsonl").is_file():
        _read_responses_jsonl(col, root / "responses.jsonl", items)
    elif (root / "responses.csv").is_file():
        _read_responses_csv(col, root / "responses.csv", items)
    if (root / "excluded-items.json").is_file():
        _read_excluded(col, root / "excluded-items.json", items)
    manifest = _read_manifest(col, root)
    if manifest is not None:
        _check_manifest(col, root, manifest)
    if recheck:
        report.add_recheck(recheck_items([it for _, it, good in items.values() if good]))
    return report

