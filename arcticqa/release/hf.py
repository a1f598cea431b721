"""The Hugging Face layout of a release (``arcticqa export --format hf``): Parquet per config + card header.

Three configs, one Parquet file each, every row in a ``test`` split (a benchmark has no training
data): ``items`` (one row per item, the fields of ``items.jsonl``), ``answer_present`` and
``answer_absent`` (one row per item, the fields of ``conditions.jsonl``). The dataset card is the
release's ``README.md`` with a YAML header declaring the configs and their ``data_files``, so
``datasets.load_dataset(DIR, "answer_absent")`` reads exactly that file.

Column types are declared here, not inferred, so a column that is empty in one release (no
evidence, no scope) has the same type as in the next. ``scope`` (dimension -> value, with keys
that vary per item) becomes a list of ``{dimension, value}`` rows, since a Parquet struct has fixed
fields. Bytes are deterministic for one pyarrow version: no timestamps, fixed row order (item id,
as in the JSONL files), fixed compression; another pyarrow version may write other bytes for the
same rows (its name is in the file's ``created_by``).

pyarrow is the optional ``hf`` extra (``pip install -e ".[hf]"``); it is imported when a Hugging
Face release is written, and its absence is one line naming the extra.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from arcticqa.errors import ConfigError, StageError
from arcticqa.release.models import ConditionRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["HF_CONFIGS", "HF_SPLIT", "parquet_path", "parquet_files", "card_header", "require_pyarrow"]

#: the configs of a Hugging Face release, in the order the card declares them (none is a default:
#: ``load_dataset`` needs the name, so a paired benchmark is never loaded half by accident)
HF_CONFIGS: tuple[str, ...] = ("answer_present", "answer_absent", "items")
HF_SPLIT = "test"
_COMPRESSION = "zstd"


def parquet_path(config: str) -> str:
    """The release-relative path of a config's Parquet file."""
    return f"data/{config}.parquet"


def require_pyarrow() -> Any:
    """pyarrow, or a one-line ConfigError naming the extra that installs it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401  (the submodule must be loaded for write_table)
    except ModuleNotFoundError:
        raise ConfigError('export --format hf needs pyarrow: pip install -e ".[hf]"') from None
    return pyarrow


def _item_schema(pa: Any) -> pa.Schema:
    text = pa.string()
    return pa.schema([
        ("item_id", text), ("question", text), ("question_context", text), ("gold_answer", text),
        ("distractors", pa.list_(pa.struct([("rank", pa.int64()), ("text", text), ("type", text),
                                            ("verification", text)]))),
        ("answer_present_drops", text), ("status", text), ("language_script", text),
        ("numeric_answer", pa.bool_()),
        ("paper", pa.struct([("doi", text), ("title", text), ("year", pa.int64()), ("publication_date", text),
                             ("paper_family_id", text)])),
        ("construction", pa.struct([("writer_model", text), ("option_verifier_models", pa.list_(text)),
                                    ("generation_prompt_version", text)])),
        ("eval_set_id", text), ("candidate_hash", text),
        ("evidence", pa.list_(pa.struct([
            ("span_id", text), ("role", text), ("section", text), ("page", pa.int64()), ("start", pa.int64()),
            ("end", pa.int64()), ("sha256", text), ("text", text)]))),
        ("claim_type", text),
        ("scope", pa.list_(pa.struct([("dimension", text), ("value", text)]))),
        ("answer_unit", text), ("answer_match", text),
        ("source_license", pa.struct([("license", text), ("url", text), ("redistributable", pa.bool_())])),
    ])


def _condition_schema(pa: Any) -> pa.Schema:
    text = pa.string()
    return pa.schema([
        ("item_id", text), ("condition", text), ("question", text), ("question_context", text),
        ("options", pa.list_(pa.struct([("option_id", text), ("kind", text), ("text", text)]))),
        ("correct_action", text), ("correct_option_text", text), ("dropped_distractor", text),
        ("option_order", text),
    ])


def _item_row(item: Mapping[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    unknown = set(item) - set(columns)
    if unknown:  # a new item field must get a declared column, never be dropped from the Parquet file
        raise StageError(f"export --format hf: item field(s) {', '.join(sorted(unknown))} have no Parquet column")
    row = dict(item)
    scope = row.get("scope")
    if scope is not None:
        row["scope"] = [{"dimension": k, "value": v} for k, v in scope.items()]
    return row


def _parquet_bytes(pa: Any, rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    table = pa.Table.from_pylist(rows, schema=schema)
    buffer = io.BytesIO()
    pa.parquet.write_table(table, buffer, compression=_COMPRESSION)
    return buffer.getvalue()


def parquet_files(items: Sequence[Mapping[str, Any]], conditions: Iterable[ConditionRecord]) -> dict[str, bytes]:
    """Release-relative path -> Parquet bytes of every config. ``items`` are the JSON objects of
    ``items.jsonl`` (item id order), ``conditions`` the records of ``conditions.jsonl``."""
    pa = require_pyarrow()
    by_condition: dict[str, list[dict[str, Any]]] = {"answer_present": [], "answer_absent": []}
    for record in conditions:
        by_condition[record.condition].append(record.model_dump(mode="json"))
    schema = _item_schema(pa)
    files = {parquet_path("items"): _parquet_bytes(pa, [_item_row(i, schema.names) for i in items], schema)}
    for condition, rows in by_condition.items():
        files[parquet_path(condition)] = _parquet_bytes(pa, rows, _condition_schema(pa))
    return {name: files[name] for name in sorted(files)}


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < limit:
            return label
    return "100K<n<1M"


def card_header(*, release_id: str, dataset_license: str, n_items: int, languages: Sequence[str]) -> str:
    """The YAML front matter of the dataset card: licence, languages, task, and the configs with
    their data files (what ``datasets.load_dataset`` and the Hub read)."""
    metadata = {
        "pretty_name": release_id,
        "license": dataset_license.lower(),
        "language": list(languages),
        "task_categories": ["multiple-choice", "question-answering"],
        "tags": ["abstention", "arctic", "science", "evidence-grounded"],
        "size_categories": [_size_category(n_items)],
        "configs": [{"config_name": config, "data_files": [{"split": HF_SPLIT, "path": parquet_path(config)}]}
                    for config in HF_CONFIGS],
    }
    header = yaml.safe_dump(metadata, sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{header}---\n\n"
