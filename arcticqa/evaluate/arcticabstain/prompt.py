"""The ArcticAbstain prompt (the published ``prompt.json`` format) and the calls of a run.

Default prompt: ``prompts/arcticabstain/v1.json``, a byte-identical copy of the published
``prompt.json`` (system text; user template with QUESTION / QUESTION_CONTEXT / OPTIONS; ``(none)``
for an empty context; options as ``A. text`` lines). Each call stores ``prompt_version`` and
``prompt_sha256`` (sha256 of ``json.dumps([system_text, user_text])``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.items import EvalItem, order_seed, shown_options
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, Condition, ShownOption
from arcticqa.evaluate.promptfile import read_prompt_file

__all__ = ["DEFAULT_PROMPT_PATH", "PromptTemplate", "Call", "load_prompt", "build_call", "plan_calls"]

DEFAULT_PROMPT_PATH = Path(__file__).resolve().parents[3] / "prompts" / "arcticabstain" / "v1.json"


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


def plan_calls(items: Sequence[EvalItem], model: str, prompt: PromptTemplate, *, trials: int,
               eval_set: str) -> list[Call]:
    """Every call of one model, item by item (id order), present before absent, trial 1..n."""
    return [build_call(item, condition, trial, model, prompt, eval_set=eval_set)
            for item in items for condition in CONDITIONS for trial in range(1, trials + 1)]
