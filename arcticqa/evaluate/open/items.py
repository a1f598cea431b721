"""Open-protocol items: a release ``items.jsonl``, read by the evaluator's one release-items reader
(:mod:`arcticqa.evaluate.releaseitems`, as ArcticAbstain and Abstain-QA read it); the options are
never shown, so only question, context, gold answer and the id are used."""

from __future__ import annotations

from pathlib import Path

from arcticqa.evaluate.releaseitems import EvalItem, load_items

__all__ = ["EvalItem", "load_open_items"]


def load_open_items(path: Path | str) -> list[EvalItem]:
    """The release items of ``path`` (the same validation and named errors as every protocol that reads release items)."""
    return load_items(path)
