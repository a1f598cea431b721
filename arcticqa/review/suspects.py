"""Suspect items sent to review by the item audit (``arcticqa evaluate items`` -> ``suspects.csv``).

The file has one row per flag: ``item_id``, ``rule_id``, ``reason`` (further columns are ignored).
Suspects join a review plan as their own population (``suspect``): they are reviewed like any
sampled item, their reasons are shown only after the reviewer's verdict, and the report measures
the error rate among them apart from the random sample, whose estimate they never enter.
"""

from __future__ import annotations

import csv
from pathlib import Path

from arcticqa.errors import InputError

__all__ = ["SUSPECT_POPULATION", "read_suspects"]

#: the population of an assignment added because the item audit flagged the item
SUSPECT_POPULATION = "suspect"
_MAX_BYTES = 20_000_000


def read_suspects(path: Path | str) -> dict[str, list[dict[str, str]]]:
    """item id -> its flags (``{"rule": rule id, "reason": text}``), in file order."""
    path = Path(path)
    name = str(path)
    if not path.is_file():
        raise InputError("file not found", path=name)
    if path.stat().st_size > _MAX_BYTES:
        raise InputError(f"larger than {_MAX_BYTES} bytes", path=name)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", path=name) from None
    reader = csv.DictReader(text.splitlines(), strict=True)
    missing = {"item_id", "rule_id", "reason"} - set(reader.fieldnames or [])
    if missing:
        raise InputError("missing column (a suspects.csv of `arcticqa evaluate items`)", path=name, line=1,
                         field=sorted(missing)[0])
    out: dict[str, list[dict[str, str]]] = {}
    try:
        for line, row in enumerate(reader, start=2):
            item, rule_id = (row.get("item_id") or "").strip(), (row.get("rule_id") or "").strip()
            if not item or not rule_id:
                raise InputError("missing value", path=name, line=line, field="item_id" if not item else "rule_id")
            if len(item) > 200 or len(rule_id) > 200 or any(ord(ch) < 32 for ch in item + rule_id):
                raise InputError("not an id", path=name, line=line, field="item_id")
            flag = {"rule": rule_id, "reason": (row.get("reason") or "").strip()[:2000]}
            if flag not in out.setdefault(item, []):
                out[item].append(flag)
    except csv.Error as exc:
        raise InputError(f"malformed CSV: {exc}", path=name) from None
    if not out:
        raise InputError("no suspects in file", path=name)
    return out
