"""`arcticqa demo` end to end (slow): the Prefect flow on the sample corpus with the offline
provider, export, validation, audit, funnel and the reference-policy evaluation (multiple-choice and
open-ended); a second run adds no rows and makes no model call; the same demo built in two folders
gives byte-identical releases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from sqlmodel import select

from arcticqa.config import Settings, load_settings
from arcticqa.demo.run import SAMPLE_CORPUS, run_demo
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.validate import validate_release
from arcticqa.store.db import read_session
from arcticqa.store.store import Store
from arcticqa.store.tables import LLMCall, RejectionRow, StageRun

pytestmark = pytest.mark.slow


def _branches() -> Counter[str]:
    return Counter(json.loads(line)["arcticqa_sample"]["branch"]
                   for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip())


def _row_counts(store: Store) -> dict[str, int]:
    with read_session(store.engine) as s:
        return {t.__tablename__: len(s.exec(select(t)).all()) for t in (StageRun, LLMCall, RejectionRow)}


def _temporary_server(config: Path) -> Settings:
    # a Prefect server of this build's own, stopped with it (the shared one would outlive the test)
    return load_settings(config, prefect={"server": "temporary"})


def test_demo_builds_releases_audits_and_evaluates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    out = tmp_path / "demo"
    first = run_demo(out, orchestrator="prefect", trials=2, load=_temporary_server)

    branches = _branches()
    eligible = branches["eligible_terrestrial"] + branches["eligible_marine"] + branches["eligible_russian"]
    store = Store(f"sqlite:///{out / 'arcticqa.db'}")
    funnel = {s.name: s.count for s in funnel_counts(store).steps}
    assert funnel["discovered"] == sum(branches.values())
    assert funnel["prefiltered"] == funnel["discovered"] - branches["review"] - branches["closed_access"]
    assert funnel["full_text"] == funnel["prefiltered"] - branches["corrupt_pdf"] - branches["image_only_pdf"]
    assert funnel["eligible"] == eligible + branches["unverifiable"]
    assert funnel["accepted"] == first.items == eligible  # one item per eligible paper family
    rules = {r.rule_id for r in store.rejections()}
    assert {"prefilter.publication_type_excluded", "prefilter.no_open_access_pdf",
            "extract_text.not_extracted", "eligibility.south_of_arctic_circle",
            "eligibility.southern_hemisphere", "construct.no_item"} <= rules
    assert {c.provider for c in store.llm_calls()} == {"offline"}

    assert validate_release(out / "release").errors == []
    for name in ("items.jsonl", "conditions.jsonl", "MANIFEST.json", "README.md", "prompt.json"):
        assert (out / "release" / name).stat().st_size > 0, name
    assert "<html" in (out / "audit.html").read_text(encoding="utf-8").lower()
    assert (out / "funnel.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((first.artifacts["evaluation"] / "summary.json").read_text(encoding="utf-8"))
    assert summary  # the evaluator wrote its report
    tables = first.artifacts["tables"].read_text(encoding="utf-8")
    for policy in ("always-abstain", "first-option", "random", "oracle"):
        assert policy in tables
    # the open-ended protocol on the same release, paired with the multiple-choice run
    opened = json.loads((first.artifacts["evaluation_open"] / "summary.json").read_text(encoding="utf-8"))
    by = {g["model_id"]: g for g in opened["groups"]}
    cells = first.items * 2
    assert set(by) == {"always-abstain", "first-option", "random", "oracle"}
    assert (by["oracle"]["correct"], by["always-abstain"]["abstained"]) == (cells, cells)
    assert by["first-option"]["correct"] == 0  # it answers with a verified distractor
    assert {p["model"]: p["cells"] for p in opened["pairing"]} == {name: cells for name in by}
    assert "| oracle |" in first.artifacts["open_tables"].read_text(encoding="utf-8")

    before = _row_counts(store)
    release_bytes = (out / "release" / "items.jsonl").read_bytes()
    second = run_demo(out, orchestrator="local", trials=2)
    assert _row_counts(store) == before  # resumed: nothing re-ran, no model call
    assert set(second.build["stages"]["construct"]) <= {"skipped", "blocked"}
    assert (out / "release" / "items.jsonl").read_bytes() == release_bytes  # deterministic export
    assert os.path.exists(out / "summary.json")


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_demo_release_does_not_depend_on_the_folder_it_was_built_in(tmp_path: Path) -> None:
    # two folders at different depths, each with the demo's own absolute paths in its demo.toml
    releases = []
    for cwd, out in ((tmp_path / "one", "A"), (tmp_path / "two" / "deeper", "B")):
        cwd.mkdir(parents=True)
        done = subprocess.run([sys.executable, "-m", "arcticqa", "demo", "--out", out, "--orchestrator", "local",
                               "--trials", "1"], cwd=cwd, capture_output=True, text=True, timeout=540)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert str(cwd / out) in (cwd / out / "demo.toml").read_text(encoding="utf-8")
        releases.append(_files(cwd / out / "release"))
    first, second = releases
    assert "MANIFEST.json" in first and "README.md" in first
    assert first.keys() == second.keys()
    differ = [name for name in first if first[name] != second[name]]
    assert not differ, f"release files that differ between the two folders: {differ}"
