"""Abstain-QA items: answerable and unanswerable multiple-choice questions, from two sources.

- a release ``items.jsonl`` (ArcticQA v1 or ours): every item gives two questions,
  ``<item_id>#present`` (gold + distractors of rank 0–2; answerable) and ``<item_id>#absent``
  (distractors of rank 0–3; unanswerable). Their content options are ordered by
  ``sha256("abstainqa-position|<eval_set>|<question_id>|<option_id>")`` — fixed per question,
  the same for every model, variant and trial, as in Abstain-QA;
- the import format (JSONL, one object a line): ``question_id``, ``question``, ``options`` (a list
  of texts, or ``{"A": text, ...}``, in the order shown), ``gold`` (an option letter, the exact
  option text, or ``"IDK/NOTA"``), optional ``context``; other fields are kept as metadata.

The IDK/NOTA option ("I Don't Know/ None of the above") is always listed last.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcticqa.errors import InputError
from arcticqa.evaluate.options import normalise_option_text
from arcticqa.evaluate.releaseitems import load_items
from arcticqa.release.conditions import distractor_option_id
from arcticqa.release.jsonio import iter_jsonl

__all__ = ["IDK_TEXT", "IDK_GOLD", "IDK_FORMS", "LETTERS", "AbstainQAItem", "load_abstainqa_items"]

IDK_TEXT = "I Don't Know/ None of the above"
IDK_GOLD = "IDK/NOTA"

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class AbstainQAItem:
    """One question. ``options`` are the content options in shown order; IDK/NOTA comes last."""

    question_id: str
    question: str
    options: tuple[str, ...]
    gold: int | None  # index into options; None: unanswerable
    context: str = ""
    option_ids: tuple[str, ...] = ()
    order_seed: str = ""
    domain: str | None = None

    @property
    def answerable(self) -> bool:
        return self.gold is not None

    @property
    def letters(self) -> str:
        return LETTERS[:len(self.options) + 1]

    @property
    def idk_letter(self) -> str:
        return self.letters[-1]

    @property
    def correct_letter(self) -> str:
        return self.letters[self.gold] if self.gold is not None else self.idk_letter

    def shown(self) -> list[dict[str, str]]:
        """Every option as shown: letter, kind (gold | distractor | abstain), text, option_id."""
        ids = self.option_ids or tuple(distractor_option_id(t) for t in self.options)
        rows = [{"letter": letter, "kind": "gold" if i == self.gold else "distractor", "text": text,
                 "option_id": "gold" if i == self.gold else ids[i]}
                for i, (letter, text) in enumerate(zip(self.letters, self.options, strict=False))]
        return [*rows, {"letter": self.idk_letter, "kind": "abstain", "text": IDK_TEXT, "option_id": "abstain"}]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _from_release(path: Path, eval_set: str) -> list[AbstainQAItem]:
    out = []
    for item in load_items(path):
        set_id = item.eval_set_id or eval_set
        for suffix, listed in (
                ("present", [("gold", item.gold_answer), *((distractor_option_id(t), t) for t in item.distractors[:3])]),
                ("absent", [(distractor_option_id(t), t) for t in item.distractors])):
            qid = f"{item.item_id}#{suffix}"
            seed = _sha(f"abstainqa-order|{set_id}|{qid}")
            ordered = sorted(listed, key=lambda o: _sha(f"abstainqa-position|{set_id}|{qid}|{o[0]}"))  # noqa: B023
            gold = next((i for i, (oid, _) in enumerate(ordered) if oid == "gold"), None)
            out.append(AbstainQAItem(qid, item.question, tuple(t for _, t in ordered), gold,
                                     context=item.question_context, option_ids=tuple(o for o, _ in ordered),
                                     order_seed=seed))
    return out


IDK_FORMS = {normalise_option_text(t).lower() for t in (IDK_TEXT, IDK_GOLD, "IDK", "NOTA")}


def _import_row(row: dict[str, Any], *, path: str, line: int) -> AbstainQAItem:
    for name in ("question_id", "question"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise InputError("missing or empty", path=path, line=line, field=name)
    raw = row.get("options")
    if isinstance(raw, dict):
        keys = list(raw)
        if keys != list(LETTERS[:len(keys)]):
            raise InputError("option letters must be A, B, C, ... in order", path=path, line=line, field="options")
        texts = list(raw.values())
    elif isinstance(raw, list):
        texts = raw
    else:
        raise InputError("expected a list of option texts or a letter -> text object", path=path, line=line,
                         field="options")
    if len(texts) < 2 or len(texts) > len(LETTERS) - 1:
        raise InputError(f"need 2 to {len(LETTERS) - 1} options (IDK/NOTA is added)", path=path, line=line,
                         field="options")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InputError("each option must be a non-empty string", path=path, line=line, field=f"options[{i}]")
        if normalise_option_text(text).lower() in IDK_FORMS:
            raise InputError("do not list the IDK/NOTA option: it is added as the last option", path=path,
                             line=line, field=f"options[{i}]")
    norm = [normalise_option_text(t) for t in texts]
    if len(set(norm)) != len(norm):
        raise InputError("two options have the same text", path=path, line=line, field="options")
    gold_raw = row.get("gold")
    if not isinstance(gold_raw, str) or not gold_raw.strip():
        raise InputError("missing: an option letter, the option's text, or IDK/NOTA", path=path, line=line,
                         field="gold")
    gold: int | None
    if gold_raw.strip().upper() == IDK_GOLD or normalise_option_text(gold_raw).lower() in IDK_FORMS:
        gold = None
    elif gold_raw.strip() in LETTERS[:len(texts)] and len(gold_raw.strip()) == 1:
        gold = LETTERS.index(gold_raw.strip())
    elif normalise_option_text(gold_raw) in norm:
        gold = norm.index(normalise_option_text(gold_raw))
    else:
        raise InputError(f"{gold_raw[:60]!r} is neither an option letter, an option's text nor IDK/NOTA",
                         path=path, line=line, field="gold")
    context = row.get("context") or ""
    if not isinstance(context, str):
        raise InputError("must be a string", path=path, line=line, field="context")
    domain = row.get("domain")
    return AbstainQAItem(row["question_id"], row["question"], tuple(texts), gold, context=context,
                         order_seed=_sha(f"abstainqa-order|import|{row['question_id']}"),
                         domain=str(domain) if domain is not None else None)


def load_abstainqa_items(path: Path | str, *, eval_set: str = "arcticqa") -> list[AbstainQAItem]:
    """Questions of a release ``items.jsonl`` (both conditions) or of an Abstain-QA import file."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    rows: list[tuple[int, dict[str, Any]]] = []
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(path, skip_blank=True):
        rows.append((line_no, row))
    if not rows:
        raise InputError("no items in file", path=name)
    if "distractors" in rows[0][1]:
        return _from_release(path, eval_set)
    items: dict[str, AbstainQAItem] = {}
    for line_no, row in rows:
        item = _import_row(row, path=name, line=line_no)
        if item.question_id in items:
            raise InputError(f"duplicate question_id {item.question_id!r}", path=name, line=line_no,
                             field="question_id")
        items[item.question_id] = item
    return list(items.values())
