"""``export --format hf``: Parquet per config and a card whose YAML header the Hugging Face tools read.

Read back with the real ``datasets`` library (``load_dataset(DIR, config)``) and the card header
with ``huggingface_hub``'s card parser and ``datasets``' own config reader, on the demo's store
(the real pipeline) and on the published ArcticQA v1 items (wording nobody here wrote: Cyrillic
questions, a gold answer holding a zero-width space). Both libraries are optional test
dependencies (in the ``dev`` extra); without them these tests skip. Offline: the Hub is never asked.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.release.models import ReleaseItem
from tests.release_factories import export, make_item

pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install -e '.[hf]')")
datasets = pytest.importorskip("datasets", reason="the Hugging Face datasets library is not installed (dev extra)")
huggingface_hub = pytest.importorskip("huggingface_hub", reason="huggingface_hub is not installed (dev extra)")

from datasets import Features, List, Value  # noqa: E402
from datasets.utils.metadata import MetadataConfigs  # noqa: E402

runner = CliRunner()

CONDITION_FEATURES = Features({
    "item_id": Value("string"), "condition": Value("string"), "question": Value("string"),
    "question_context": Value("string"),
    "options": List({"option_id": Value("string"), "kind": Value("string"), "text": Value("string")}),
    "correct_action": Value("string"), "correct_option_text": Value("string"),
    "dropped_distractor": Value("string"), "option_order": Value("string"),
})


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def load(folder: Path, config: str, cache: Path) -> Any:
    return datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache))


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def as_parquet_row(value: Any, feature: Any) -> Any:
    """An items.jsonl object as its Parquet row: every declared field present (absent ones null),
    ``scope`` as a list of ``{dimension, value}``."""
    if value is None:
        return None
    if isinstance(feature, dict):
        if "scope" in feature and isinstance(value.get("scope"), dict):
            value = value | {"scope": [{"dimension": k, "value": v} for k, v in value["scope"].items()]}
        return {k: as_parquet_row(value.get(k), f) for k, f in feature.items()}
    if isinstance(feature, List):
        return [as_parquet_row(v, feature.feature) for v in value]
    return value


def assert_hf_release_reads_back(folder: Path, cache: Path) -> None:
    """Every config loads with the right features and holds exactly the JSONL release's rows."""
    card = huggingface_hub.DatasetCard.load(folder / "README.md")
    configs = MetadataConfigs.from_dataset_card_data(card.data)
    assert {name: c["data_files"] for name, c in configs.items()} == {
        name: [{"split": "test", "path": f"data/{name}.parquet"}] for name in ("answer_present", "answer_absent", "items")}
    conditions = jsonl(folder / "conditions.jsonl")
    for condition in ("answer_present", "answer_absent"):
        table = load(folder, condition, cache)
        assert table.features == CONDITION_FEATURES
        assert table.to_list() == [c for c in conditions if c["condition"] == condition]
    items = load(folder, "items", cache)
    assert items.column_names == list(ReleaseItem.model_fields)
    assert items.features["scope"] == List({"dimension": Value("string"), "value": Value("string")})
    assert items.to_list() == [as_parquet_row(item, items.features) for item in jsonl(folder / "items.jsonl")]


@pytest.mark.slow
def test_export_hf_from_the_demo_store_loads_with_datasets(tmp_path: Path) -> None:
    from rich.console import Console

    from arcticqa.demo.run import run_demo

    demo = tmp_path / "demo"
    run_demo(demo, orchestrator="local", trials=1, console=Console(quiet=True))
    out = tmp_path / "hf"
    result = runner.invoke(app, ["export", "-c", str(demo / "demo.toml"), "--out", str(out), "--format", "hf",
                                 "--include-evidence"])
    assert result.exit_code == 0, result.output
    assert_hf_release_reads_back(out, tmp_path / "cache")
    absent = load(out, "answer_absent", tmp_path / "cache")
    assert absent.num_rows == len(jsonl(out / "items.jsonl")) and set(absent["condition"]) == {"answer_absent"}
    # the HF folder is still a release: same JSONL bytes as the plain export, every file hashed
    plain = tmp_path / "plain"
    assert runner.invoke(app, ["export", "-c", str(demo / "demo.toml"), "--out", str(plain),
                               "--include-evidence"]).exit_code == 0
    for name in ("items.jsonl", "conditions.jsonl", "prompt.json"):
        assert (out / name).read_bytes() == (plain / name).read_bytes()
    assert runner.invoke(app, ["validate-release", str(out)]).exit_code == 0


@pytest.mark.shared
def test_published_items_round_trip_through_parquet(arcticqa_v1: Path, tmp_path: Path) -> None:
    items = [ReleaseItem.model_validate(row) for row in jsonl(arcticqa_v1 / "items.jsonl")]
    out = export(items, tmp_path / "hf", format="hf")
    assert_hf_release_reads_back(out, tmp_path / "cache")
    header = (out / "README.md").read_text(encoding="utf-8").split("---\n")[1]
    assert "- ru\n" in header  # the v1 release holds Russian questions


def test_hf_bytes_are_deterministic_and_the_card_declares_the_configs(tmp_path: Path) -> None:
    items = [make_item(n, answer_match=("deterministic-match", "model-verified", None)[n % 3]) for n in range(4)]
    first = export(items, tmp_path / "a", format="hf")
    second = export(list(reversed(items)), tmp_path / "b", format="hf")
    names = sorted(p.relative_to(first).as_posix() for p in first.rglob("*") if p.is_file())
    assert [n for n in names if n.startswith("data/")] == [
        "data/answer_absent.parquet", "data/answer_present.parquet", "data/items.parquet"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    manifest = json.loads((first / "MANIFEST.json").read_text())
    assert {"data/items.parquet", "data/answer_present.parquet", "data/answer_absent.parquet"} <= set(manifest["files"])
    assert_hf_release_reads_back(first, tmp_path / "cache")
    assert load(first, "items", tmp_path / "cache")["answer_match"] == [
        "deterministic-match", "model-verified", None, "deterministic-match"]
    card = huggingface_hub.DatasetCard.load(first / "README.md")
    assert card.data.license == "cc-by-4.0" and card.data.language == ["en"]


def test_overwrite_swaps_an_hf_release_for_a_jsonl_one(tmp_path: Path) -> None:
    items = [make_item(n) for n in range(2)]
    out = export(items, tmp_path / "rel", format="hf")
    export(items, out, overwrite=True)
    assert not (out / "data").exists()
    assert "configs:" not in (out / "README.md").read_text()


def test_without_pyarrow_export_hf_is_one_line_and_writes_nothing(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from arcticqa.errors import ConfigError

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # what `import pyarrow` sees when it is not installed
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[hf\]"'):
        export([make_item(1)], tmp_path / "rel", format="hf")
    assert not (tmp_path / "rel").exists()


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    from arcticqa.errors import ConfigError

    with pytest.raises(ConfigError, match="jsonl, hf"):
        export([make_item(1)], tmp_path / "rel", format="csv")
