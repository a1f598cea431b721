"""Eval items, the two ArcticAbstain conditions, the per-call option order and the prompt.

Answer present shows the gold answer, distractors of rank 0-2 and the abstain option; answer
absent shows distractors of rank 0-3 and the abstain option. Option ids follow the release
(``gold``, ``abstain``, ``distractor-`` + 20 hex of sha256 of ``json.dumps([text])``).

Option order is reshuffled for every call. The scheme (stored with every response):

- ``order_seed = sha256("arcticqa-order|<eval_set>|<item_id>|<condition>|<trial>|<model>")`` (hex);
- options are sorted by ``sha256("arcticqa-position|<order_seed>|<option_id>")`` and given the
  letters A-E in that order.

``eval_set`` is the item's own ``eval_set_id`` when it has one (ArcticQA v1 items do), else the
run's configured eval set name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.evaluate.outcomes import Condition, ShownOption
from arcticqa.evaluate.promptfile import read_prompt_file
from arcticqa.release.conditions import distractor_option_id
from arcticqa.release.jsonio import iter_jsonl, shown

__all__ = [
    "DEFAULT_PROMPT_PATH",
    "EvalItem",
    "PromptTemplate",
    "Call",
    "load_items",
    "load_prompt",
    "option_id_for",
    "order_seed",
    "condition_options",
    "shown_options",
    "build_call",
]

DEFAULT_PROMPT_PATH = Path(__file__).resolve().parents[2] / "prompts" / "arcticabstain" / "v1.json"


@dataclass(frozen=True)
class EvalItem:
    item_id: str
    question: str
    question_context: str
    gold_answer: str
    #: distractor texts by rank 0..3
    distractors: tuple[str, str, str, str]
    eval_set_id: str | None = None


@dataclass(frozen=True)
class PromptTemplate:
    """A prompt file: system text, user template with {question} {question_context} {options}."""

    version: str
    system_text: str
    user_template: str
    no_context_text: str
    abstention_option_text: str
    letters: str
    sha256: str

    def render_user(self, item: EvalItem, options: Sequence[ShownOption]) -> str:
        context = item.question_context if item.question_context.strip() else self.no_context_text
        listing = "\n".join(f"{o.letter}. {o.text}" for o in options)
        return self.user_template.format(question=item.question, question_context=context, options=listing)


@dataclass(frozen=True)
class Call:
    """Everything one model call shows, and the hash of what it shows."""

    item: EvalItem
    condition: Condition
    trial: int
    model: str
    eval_set: str
    order_seed: str
    options: tuple[ShownOption, ...]
    system_text: str
    user_text: str
    prompt_version: str

    @property
    def prompt_sha256(self) -> str:
        payload = json.dumps([self.system_text, self.user_text], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_text}, {"role": "user", "content": self.user_text}]

    @property
    def cell(self) -> tuple[str, str, str, int]:
        """(eval_set, item_id, condition, trial): what the store records once per model."""
        return (self.eval_set, self.item.item_id, self.condition, self.trial)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def option_id_for(text: str) -> str:
    return distractor_option_id(text)


def load_prompt(path: Path | str | None = None) -> PromptTemplate:
    """Read a prompt file in the ArcticQA v1 ``prompt.json`` format (default: the v1 prompt)."""
    path = Path(path) if path is not None else DEFAULT_PROMPT_PATH
    raw, data = read_prompt_file(path, required=("system_text", "user_template"),
                                 placeholders=("{question}", "{question_context}", "{options}"))
    letters = str(data.get("letters", "ABCDE"))
    if len(letters) != 5 or len(set(letters)) != 5:
        raise InputError("need five distinct letters", path=str(path), field="letters")
    return PromptTemplate(
        version=str(data.get("prompt_version") or path.stem), system_text=data["system_text"],
        user_template=data["user_template"], no_context_text=str(data.get("no_context_text", "(none)")),
        abstention_option_text=str(data.get("abstention_option_text", "I abstain from answering")),
        letters=letters, sha256=hashlib.sha256(raw).hexdigest(),
    )


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


def condition_options(item: EvalItem, condition: Condition,
                      abstain_text: str = "I abstain from answering") -> list[tuple[str, str, str]]:
    """(option_id, kind, text) of a condition, in listing order."""
    abstain = ("abstain", "abstain", abstain_text)
    if condition == "answer_present":
        return [("gold", "gold", item.gold_answer),
                *((option_id_for(t), "distractor", t) for t in item.distractors[:3]), abstain]
    return [*((option_id_for(t), "distractor", t) for t in item.distractors), abstain]


def order_seed(eval_set: str, item_id: str, condition: str, trial: int, model: str) -> str:
    return _sha(f"arcticqa-order|{eval_set}|{item_id}|{condition}|{trial}|{model}")


def shown_options(item: EvalItem, condition: Condition, seed: str, *, letters: str = "ABCDE",
                  abstain_text: str = "I abstain from answering") -> tuple[ShownOption, ...]:
    listed = condition_options(item, condition, abstain_text)
    ordered = sorted(listed, key=lambda o: _sha(f"arcticqa-position|{seed}|{o[0]}"))
    return tuple(ShownOption(letter, kind, text, option_id)  # type: ignore[arg-type]
                 for letter, (option_id, kind, text) in zip(letters, ordered, strict=True))


def build_call(item: EvalItem, condition: Condition, trial: int, model: str, prompt: PromptTemplate, *,
               eval_set: str = "arcticqa") -> Call:
    """The deterministic call for one cell of the design."""
    set_id = item.eval_set_id or eval_set
    seed = order_seed(set_id, item.item_id, condition, trial, model)
    options = shown_options(item, condition, seed, letters=prompt.letters,
                            abstain_text=prompt.abstention_option_text)
    return Call(item=item, condition=condition, trial=trial, model=model, eval_set=set_id, order_seed=seed,
                options=options, system_text=prompt.system_text, user_text=prompt.render_user(item, options),
                prompt_version=prompt.version)
