"""JSON Schemas of the release files, generated from the pydantic models.

The checked-in copies live in ``schemas/`` at the repository root; a test fails when they drift
from the models. Regenerate with ``python -m arcticqa.release.schemas [DIR]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from arcticqa.release.models import ConditionRecord, Manifest, ReleaseItem, ResponseRecord

__all__ = ["SCHEMA_MODELS", "generate_schemas", "schema_bytes", "write_schemas"]

#: schema file name -> the model of one record of that file
SCHEMA_MODELS: dict[str, type[BaseModel]] = {
    "item.schema.json": ReleaseItem,
    "condition.schema.json": ConditionRecord,
    "response.schema.json": ResponseRecord,
    "manifest.schema.json": Manifest,
}
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def generate_schemas() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, model in SCHEMA_MODELS.items():
        schema = model.model_json_schema(mode="validation")
        out[name] = {"$schema": _DIALECT, "$id": f"https://arcticqa.invalid/schemas/{name}"} | schema
    return out


def schema_bytes(schema: dict[str, Any]) -> bytes:
    return (json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in generate_schemas().items():
        path = directory / name
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_bytes(schema_bytes(schema))
        tmp.replace(path)
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "schemas"
    for p in write_schemas(target):
        print(p)
