"""Release files: models vs ArcticQA v1, writer determinism/atomicity, schemas, validate-release."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.errors import InputError
from arcticqa.release.conditions import build_conditions
from arcticqa.release.jsonio import item_json, iter_jsonl, jsonl_bytes
from arcticqa.release.models import ReleaseItem
from arcticqa.release.schemas import generate_schemas, schema_bytes
from arcticqa.release.validate import validate_release
from tests.conftest import REPO_ROOT
from tests.release_factories import PROMPT, export, make_item

runner = CliRunner()


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture
def release(tmp_path: Path) -> Path:
    return export([make_item(i) for i in (3, 1, 2)], tmp_path / "rel")


# --- ArcticQA v1 compatibility -------------------------------------------------------------

def test_v1_items_and_conditions_reserialise_byte_identically(arcticqa_v1: Path) -> None:
    items = [ReleaseItem.model_validate(o, strict=True)
             for _, o in iter_jsonl(arcticqa_v1 / "items.jsonl")]
    assert jsonl_bytes([item_json(i) for i in items]) == (arcticqa_v1 / "items.jsonl").read_bytes()
    conditions = build_conditions(items)
    assert (jsonl_bytes([c.model_dump(mode="json") for c in conditions])
            == (arcticqa_v1 / "conditions.jsonl").read_bytes())


def test_published_v1_passes_validate_release(arcticqa_v1: Path) -> None:
    report = validate_release(arcticqa_v1)
    assert report.errors == []
    manifest = json.loads((arcticqa_v1 / "MANIFEST.json").read_text())
    assert report.counts["items"] == manifest["counts"]["items"]
    assert report.counts["conditions"] == manifest["counts"]["condition_renderings"]
    # the shared copy leaves out responses.jsonl: reported, not fatal
    assert any(w.rule_id == "release.listed_file_absent" for w in report.warnings)
    items_only = validate_release(arcticqa_v1 / "items.jsonl")
    assert items_only.ok and items_only.counts["items"] == manifest["counts"]["items"]


def test_cli_validates_published_v1(arcticqa_v1: Path) -> None:
    result = runner.invoke(app, ["validate-release", str(arcticqa_v1)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.output


# --- export --------------------------------------------------------------------------------

def test_export_round_trip_validates(release: Path) -> None:
    report = validate_release(release)
    assert report.errors == [] and report.warnings == []
    assert report.counts == {"items": 3, "conditions": 6, "excluded_items": 0}
    ids = [json.loads(line)["item_id"] for line in (release / "items.jsonl").read_text().splitlines()]
    assert ids == sorted(ids)
    manifest = json.loads((release / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"items.jsonl", "conditions.jsonl", "prompt.json",
                                      "excluded-items.json", "funnel.svg", "README.md"}
    assert manifest["roster"]["question_writer"] == ["offline-baseline"]
    assert json.loads((release / "prompt.json").read_text()) == PROMPT
    card = (release / "README.md").read_text()
    assert "`eligible.too_few`: 3" in card and "funnel.svg" in card
    result = runner.invoke(app, ["validate-release", str(release)])
    assert result.exit_code == 0, result.output


def test_export_is_byte_deterministic(tmp_path: Path) -> None:
    items = [make_item(i) for i in range(4)]
    a = export(items, tmp_path / "a")
    b = export(list(reversed(items)), tmp_path / "b")
    assert _tree(a) == _tree(b)
    assert len(_tree(a)) == 7


def test_answer_match_is_recorded_and_the_card_counts_rule_and_model_verdicts(tmp_path: Path) -> None:
    items = [make_item(1, answer_match="deterministic-match", verification="deterministic-contradiction"),
             make_item(2, answer_match="deterministic-match"),  # two of its distractors are model-verified
             make_item(3, answer_match="model-verified", verification="deterministic-contradiction")]
    out = export(items, tmp_path / "rel")
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["answer_match"] for r in rows] == ["deterministic-match", "deterministic-match", "model-verified"]
    keys = list(rows[0])
    assert keys.index("answer_match") == keys.index("answer_unit") + 1
    counts = json.loads((out / "MANIFEST.json").read_text())["counts"]
    assert counts["items_by_answer_match"] == {"deterministic-match": 2, "model-verified": 1}
    assert counts["distractors_by_verification"] == {"deterministic-contradiction": 10, "model-verified": 2}
    assert counts["items_all_deterministic"] == 1
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| Answer match (3 items) | 2 `deterministic-match` | 1 `model-verified` |\n" in card
    assert ("| Distractor contradicts the evidence (12 distractors) | 10 `deterministic-contradiction` "
            "| 2 `model-verified` |\n") in card
    assert "1 of 3 items had every part decided by a rule" in card and "Not recorded" not in card
    assert "the other 2 rest on at least one model verdict." in card
    assert validate_release(out).ok
    ruled = (export(items[:1], tmp_path / "ruled") / "README.md").read_text(encoding="utf-8")
    assert "Every item had every part decided by a rule" in ruled


def test_a_release_without_answer_match_still_validates(tmp_path: Path) -> None:
    # releases written before the answer match was recorded (and ArcticQA v1) leave the key out
    out = export([make_item(1), make_item(2, answer_match="model-verified")], tmp_path / "rel")
    rows = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert "answer_match" not in rows[0] and rows[1]["answer_match"] == "model-verified"
    assert validate_release(out).ok
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "| Answer match (2 items) | 0 `deterministic-match` | 1 `model-verified` | 1 |" in card
    assert "0 of 2 items had every part decided by a rule" in card
    assert json.loads((out / "MANIFEST.json").read_text())["counts"]["items_by_answer_match"] == {
        "model-verified": 1, "not-recorded": 1}


def test_evidence_text_only_with_include_evidence(tmp_path: Path) -> None:
    plain = export([make_item(1)], tmp_path / "plain")
    item = json.loads((plain / "items.jsonl").read_text())
    assert item["evidence"][0]["text"] is None and len(item["evidence"][0]["sha256"]) == 64
    full = export([make_item(1)], tmp_path / "full", include_evidence=True)
    item = json.loads((full / "items.jsonl").read_text())
    assert item["evidence"][0]["text"].startswith("Mean sea-ice thickness")
    assert validate_release(full).ok


def test_require_redistributable_excludes_and_records(tmp_path: Path) -> None:
    items = [make_item(1), make_item(2, license="publisher-specific-oa"), make_item(3, license=None)]
    out = export(items, tmp_path / "rel", require_redistributable=True, include_evidence=True)
    kept = [json.loads(x)["item_id"] for x in (out / "items.jsonl").read_text().splitlines()]
    assert kept == [items[0].item_id]
    excluded = json.loads((out / "excluded-items.json").read_text())
    assert [e["item_id"] for e in excluded] == [items[1].item_id, items[2].item_id]
    assert "publisher-specific-oa" in excluded[0]["reason"]
    assert validate_release(out).ok


def test_export_refuses_non_empty_target(tmp_path: Path) -> None:
    target = tmp_path / "rel"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        export([make_item(1)], target)
    assert _tree(target) == {"keep.txt": hashlib.sha256(b"mine").hexdigest()}


def test_failed_export_leaves_target_untouched(tmp_path: Path) -> None:
    old = export([make_item(1)], tmp_path / "rel")
    before = _tree(old)
    # NaN is not JSON: prompt.json fails after items.jsonl and conditions.jsonl were written
    bad_prompt = PROMPT | {"temperature": float("nan")}
    with pytest.raises(ValueError):
        export([make_item(1), make_item(2)], old, prompt=bad_prompt, overwrite=True)
    assert _tree(old) == before
    with pytest.raises(ValueError):
        export([make_item(2)], tmp_path / "new", prompt=bad_prompt)
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rel"]  # no temp folder left behind


def test_overwrite_replaces_release(tmp_path: Path) -> None:
    out = export([make_item(1)], tmp_path / "rel")
    export([make_item(1), make_item(2)], out, overwrite=True)
    assert validate_release(out).counts["items"] == 2


# --- schemas -------------------------------------------------------------------------------

def test_checked_in_schemas_match_models() -> None:
    generated = generate_schemas()
    folder = REPO_ROOT / "schemas"
    on_disk = {p.name for p in folder.glob("*.schema.json")}
    assert on_disk == set(generated), "regenerate with: python -m arcticqa.release.schemas"
    for name, schema in generated.items():
        assert (folder / name).read_bytes() == schema_bytes(schema), (
            f"schemas/{name} drifted from the models; regenerate with python -m arcticqa.release.schemas")


# --- malformed releases --------------------------------------------------------------------

def _rewrite_items(release: Path, edit) -> None:  # type: ignore[no-untyped-def]
    lines = (release / "items.jsonl").read_bytes().splitlines(keepends=True)
    (release / "items.jsonl").write_bytes(edit(lines))


def _obj_edit(index: int, change):  # type: ignore[no-untyped-def]
    def edit(lines: list[bytes]) -> bytes:
        obj = json.loads(lines[index])
        change(obj)
        lines[index] = (json.dumps(obj, ensure_ascii=False) + "\n").encode()
        return b"".join(lines)
    return edit


def _dup_id(lines: list[bytes]) -> bytes:
    first = json.loads(lines[0])
    obj = json.loads(lines[1])
    obj["item_id"] = first["item_id"]
    lines[1] = (json.dumps(obj) + "\n").encode()
    return b"".join(lines)


MALFORMED = [
    ("bad_json", lambda ls: ls[0] + b"{not json\n" + b"".join(ls[2:]), "release.unreadable", 2, None),
    ("truncated", lambda ls: b"".join(ls[:2]) + ls[2][:40], "release.unreadable", 3, None),
    ("invalid_utf8", lambda ls: ls[0] + ls[1].replace(b"sea-ice", b"sea\xff\xfeice") + ls[2],
     "release.unreadable", 2, None),
    ("duplicate_id", _dup_id, "release.duplicate_id", 2, "item_id"),
    ("three_distractors", _obj_edit(1, lambda o: o["distractors"].pop()), "release.distractor_count", 2,
     "distractors"),
    ("wrong_dropped_rank", _obj_edit(0, lambda o: o.update(answer_present_drops=o["distractors"][0]["text"])),
     "release.dropped_rank", 1, "answer_present_drops"),
    ("wrong_type", _obj_edit(2, lambda o: o.update(numeric_answer="yes")), "release.schema", 3,
     "numeric_answer"),
    ("extra_field", _obj_edit(0, lambda o: o.update(surprise=1)), "release.schema", 1, "surprise"),
    ("unknown_answer_match", _obj_edit(1, lambda o: o.update(answer_match="by-hand")), "release.schema", 2,
     "answer_match"),
    ("repeated_distractor", _obj_edit(0, lambda o: o["distractors"][1].update(text=o["gold_answer"].upper())),
     "release.distractor_duplicate", 1, "distractors[1].text"),
]


@pytest.mark.parametrize(("name", "edit", "rule_id", "line", "field"), MALFORMED,
                         ids=[m[0] for m in MALFORMED])
def test_malformed_items_give_named_error(release: Path, name: str, edit, rule_id: str, line: int,  # type: ignore[no-untyped-def]
                                          field: str | None) -> None:
    _rewrite_items(release, edit)
    before = _tree(release)
    report = validate_release(release)
    item_errors = [e for e in report.errors if e.path == "items.jsonl"]
    assert item_errors, report.errors
    first = item_errors[0]
    assert (first.rule_id, first.line, first.field) == (rule_id, line, field)
    # the changed file no longer matches the manifest either
    assert any(e.rule_id == "release.hash_mismatch" for e in report.errors)
    with pytest.raises(InputError) as exc_info:
        report.raise_for_errors()
    assert exc_info.value.path == "items.jsonl"
    result = runner.invoke(app, ["validate-release", str(release)])
    assert result.exit_code == 2
    assert f"items.jsonl:{line}" in result.output and rule_id in result.output
    assert _tree(release) == before  # validation writes nothing


def test_huge_line_is_refused_without_reading_it(release: Path) -> None:
    with (release / "items.jsonl").open("ab") as fh:
        fh.write(b'{"item_id": "' + b"x" * (100 * 1024 * 1024) + b'"}\n')
    report = validate_release(release)
    errors = [e for e in report.errors if e.rule_id == "release.unreadable"]
    assert errors and errors[0].line == 4 and "longer than" in errors[0].message


def test_condition_inconsistent_with_item(release: Path) -> None:
    path = release / "conditions.jsonl"
    lines = path.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["options"][0], rec["options"][1] = rec["options"][1], rec["options"][0]
    lines[1] = json.dumps(rec, ensure_ascii=False)
    path.write_text("\n".join(lines[:-1]) + "\n")  # also drop the last condition
    errors = {(e.rule_id, e.line, e.field) for e in validate_release(release).errors}
    assert ("release.condition_mismatch", 2, "options[0].option_id") in errors
    assert any(rid == "release.condition_missing" for rid, _, _ in errors)


def test_manifest_hash_and_unsafe_paths(release: Path) -> None:
    (release / "README.md").write_text("edited\n")
    manifest = json.loads((release / "MANIFEST.json").read_text())
    manifest["files"]["../outside.txt"] = "0" * 64
    (release / "MANIFEST.json").write_text(json.dumps(manifest))
    errors = {(e.rule_id, e.path) for e in validate_release(release).errors}
    assert ("release.hash_mismatch", "README.md") in errors
    assert ("release.unsafe_path", "MANIFEST.json") in errors


def test_missing_folder_is_input_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate-release", str(tmp_path / "nope")])
    assert result.exit_code == 2


# --- recheck -------------------------------------------------------------------------------

def test_recheck_flags_leaks_and_tolerance(tmp_path: Path) -> None:
    pytest.importorskip("arcticqa.gates.question", reason="arcticqa.gates is not available")
    leaky = make_item(1, question="Did mean sea-ice thickness show a decrease of 11 cm between 2001 and 2010?")
    close = make_item(2)
    close = close.model_copy(update={"distractors": [
        close.distractors[0].model_copy(update={"text": "a decrease of 12.0 cm"}), *close.distractors[1:]]})
    clean = make_item(3)
    out = export([leaky, close, clean], tmp_path / "rel")
    report = validate_release(out, recheck=True)
    assert report.recheck is not None
    assert not report.ok and not report.errors  # the schema is fine; the recheck errors make it invalid
    flagged = {(f.item_id, f.option_rank, f.rule_id, f.severity) for f in report.recheck}
    assert (leaky.item_id, None, "question.answer_leak", "error") in flagged
    assert not any(item_id == clean.item_id for item_id, _, _, _ in flagged)
    result = runner.invoke(app, ["validate-release", str(out), "--recheck", "--json"])
    assert result.exit_code == 2, result.output
    records = [json.loads(line) for line in result.stdout.splitlines() if line.strip().startswith("{")]
    assert {"item_id": leaky.item_id, "option_rank": None, "rule_id": "question.answer_leak",
            "severity": "error"}.items() <= records[0].items()
    assert all(r["severity"] in ("error", "warning") for r in records if "item_id" in r or "rule_id" in r)
    assert [r for r in records if "deterministic_coverage" in r][0]["deterministic_coverage"]["distractors"] == 12
    assert {r["cue_audit"]["strategy"] for r in records if "cue_audit" in r} >= {"middle numeric value", "longest option"}


def test_copy_of_release_elsewhere_still_validates(release: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(release, copy)
    assert validate_release(copy).ok
