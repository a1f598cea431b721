"""Open-protocol items: the release ``items.jsonl`` ArcticAbstain reads (question, context, gold
answer); the options are never shown, so only those three fields and the id are used."""

from __future__ import annotations

from pathlib import Path

from arcticqa.evaluate.arcticabstain.items import EvalItem, load_items

__all__ = ["EvalItem", "load_open_items"]


def load_open_items(path: Path | str) -> list[EvalItem]:
    """The release items of ``path`` (the same validation and named errors as ArcticAbstain)."""
    return load_items(path)
