"""Know2Guess items: open-ended questions in zones A–D, validated line by line.

Items (JSONL, one object a line): ``question_id``, ``split``, ``zone`` (``A|B|C|D``), ``domain``,
``question_type``, ``question_text``, ``gold_answer`` (may be null for zone D),
``acceptable_variants[]``, ``grading_rule`` (``exact_normalized_match``), ``abstention_expected``
(true exactly for zone D), ``item_origin`` (``real_public|synthetic_unknown``),
``contamination_risk`` (``low|medium|high``); any other field is kept as metadata.
:func:`load_know2guess_items` names the file, line and field of the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arcticqa.errors import InputError
from arcticqa.release.jsonio import iter_jsonl

__all__ = ["ZONES", "ORIGINS", "RISKS", "GRADING_RULES", "Know2GuessItem", "load_know2guess_items"]

ZONES: tuple[str, ...] = ("A", "B", "C", "D")
ORIGINS: tuple[str, ...] = ("real_public", "synthetic_unknown")
RISKS: tuple[str, ...] = ("low", "medium", "high")
GRADING_RULES: tuple[str, ...] = ("exact_normalized_match",)

_REQUIRED_TEXT = ("question_id", "split", "domain", "question_type", "question_text", "grading_rule")
_KNOWN = {*_REQUIRED_TEXT, "zone", "gold_answer", "acceptable_variants", "abstention_expected", "item_origin",
          "contamination_risk"}


@dataclass(frozen=True)
class Know2GuessItem:
    question_id: str
    split: str
    zone: str
    domain: str
    question_type: str
    question_text: str
    gold_answer: str | None
    acceptable_variants: tuple[str, ...]
    grading_rule: str
    abstention_expected: bool
    item_origin: str
    contamination_risk: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _item(row: dict[str, Any], *, path: str, line: int) -> Know2GuessItem:
    def fail(message: str, name: str) -> InputError:
        return InputError(message, path=path, line=line, field=name)

    for name in _REQUIRED_TEXT:
        if name not in row:
            raise fail("missing", name)
        if not isinstance(row[name], str) or not row[name].strip():
            raise fail("must be a non-empty string", name)
    if row.get("zone") not in ZONES:
        raise fail(f"must be one of {', '.join(ZONES)}, not {row.get('zone')!r}", "zone")
    if not isinstance(row.get("abstention_expected"), bool):
        raise fail("missing or not true/false", "abstention_expected")
    if row["abstention_expected"] != (row["zone"] == "D"):
        raise fail(f"must be true exactly for zone D (zone {row['zone']}, got {row['abstention_expected']})",
                   "abstention_expected")
    if row.get("item_origin") not in ORIGINS:
        raise fail(f"must be one of {', '.join(ORIGINS)}, not {row.get('item_origin')!r}", "item_origin")
    if row.get("contamination_risk") not in RISKS:
        raise fail(f"must be one of {', '.join(RISKS)}, not {row.get('contamination_risk')!r}",
                   "contamination_risk")
    if row["grading_rule"] not in GRADING_RULES:
        raise fail(f"unsupported grading rule {row['grading_rule']!r}; supported: {', '.join(GRADING_RULES)}",
                   "grading_rule")
    if "gold_answer" not in row:
        raise fail("missing (null is allowed for zone D)", "gold_answer")
    gold = row["gold_answer"]
    if gold is not None and not isinstance(gold, str):
        raise fail("must be a string or null", "gold_answer")
    if not row["abstention_expected"] and not (gold or "").strip():
        raise fail("an answer-expected item needs a gold answer", "gold_answer")
    variants = row.get("acceptable_variants")
    if not isinstance(variants, list):
        raise fail("missing or not a list (use [] for none)", "acceptable_variants")
    for i, v in enumerate(variants):
        if not isinstance(v, str) or not v.strip():
            raise fail("must be a non-empty string", f"acceptable_variants[{i}]")
    return Know2GuessItem(
        question_id=row["question_id"], split=row["split"], zone=row["zone"], domain=row["domain"],
        question_type=row["question_type"], question_text=row["question_text"], gold_answer=gold,
        acceptable_variants=tuple(variants), grading_rule=row["grading_rule"],
        abstention_expected=row["abstention_expected"], item_origin=row["item_origin"],
        contamination_risk=row["contamination_risk"],
        metadata={k: v for k, v in row.items() if k not in _KNOWN})


def load_know2guess_items(path: Path | str) -> list[Know2GuessItem]:
    """Validated items in file order; the first problem raises :class:`InputError` (exit 2)."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    items: dict[str, Know2GuessItem] = {}
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(path, skip_blank=True):
        item = _item(row, path=name, line=line_no)
        if item.question_id in items:
            raise InputError(f"duplicate question_id {item.question_id!r}", path=name, line=line_no,
                             field="question_id")
        items[item.question_id] = item
    if not items:
        raise InputError("no items in file", path=name)
    return list(items.values())
