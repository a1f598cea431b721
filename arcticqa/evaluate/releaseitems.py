"""A release's ``items.jsonl`` as every protocol that asks its questions reads it.

ArcticAbstain (the two conditions), Abstain-QA (two questions per item) and the open-ended protocol
(question and context only) all start from the same release items: ArcticQA v1's or ours
(``item_id``, ``question``, ``question_context``, ``gold_answer``, ``distractors[{rank, text}]``,
optional ``eval_set_id``). :func:`load_items` is the one reader, so every protocol refuses the same
bad line with the same named error (file, line, field; exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.release.jsonio import iter_jsonl, shown

__all__ = ["EvalItem", "load_items"]


@dataclass(frozen=True)
class EvalItem:
    item_id: str
    question: str
    question_context: str
    gold_answer: str
    #: distractor texts by rank 0..3
    distractors: tuple[str, str, str, str]
    eval_set_id: str | None = None


def load_items(path: Path | str) -> list[EvalItem]:
    """Items of a release ``items.jsonl`` (ArcticQA v1 or ours), in id order."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    items: dict[str, EvalItem] = {}
    # the hardened reader: size cap, strict UTF-8 and JSON, depth limit, truncated last line
    for line_no, row in iter_jsonl(path, skip_blank=True):
        for field in ("item_id", "question", "gold_answer"):
            if not isinstance(row.get(field), str) or not row[field]:
                raise InputError("missing or empty", path=name, line=line_no, field=field)
        distractors = row.get("distractors")
        by_rank: dict[int, str] = {}
        if isinstance(distractors, list):
            for d in distractors:
                if isinstance(d, dict) and isinstance(d.get("rank"), int) and isinstance(d.get("text"), str):
                    by_rank[d["rank"]] = d["text"]
        if sorted(by_rank) != [0, 1, 2, 3]:
            raise InputError("need four distractors with rank 0-3 and text", path=name, line=line_no,
                             field="distractors")
        if row["item_id"] in items:
            raise InputError(f"duplicate item_id {shown(row['item_id'])}", path=name, line=line_no,
                             field="item_id")
        context = row.get("question_context") or ""
        if not isinstance(context, str):
            raise InputError("must be a string", path=name, line=line_no, field="question_context")
        items[row["item_id"]] = EvalItem(
            item_id=row["item_id"], question=row["question"], question_context=context,
            gold_answer=row["gold_answer"],
            distractors=(by_rank[0], by_rank[1], by_rank[2], by_rank[3]),
            eval_set_id=row.get("eval_set_id") or None,
        )
    if not items:
        raise InputError("no items in file", path=name)
    return [items[k] for k in sorted(items)]
