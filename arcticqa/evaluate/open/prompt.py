"""The open protocol's prompt (``prompts/open/<variant>-v1.json``) and the planned calls of a run.

The model sees the context and the question, no options, and is asked to answer briefly or to say in
its own words that it does not know.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arcticqa.evaluate.open.items import EvalItem
from arcticqa.evaluate.promptfile import chat_messages, prompt_digest, read_prompt_file

__all__ = ["VARIANTS", "PROMPT_DIR", "CONDITION", "OpenPrompt", "OpenCall", "load_open_prompt", "plan_calls"]

VARIANTS: tuple[str, ...] = ("answer_or_abstain",)
PROMPT_DIR = Path(__file__).resolve().parents[3] / "prompts" / "open"
#: the condition name cells and store rows carry (there are no option sets to vary)
CONDITION = "open"


@dataclass(frozen=True)
class OpenPrompt:
    variant: str
    version: str
    system_text: str
    user_template: str
    sha256: str


def load_open_prompt(variant_or_path: str | Path) -> OpenPrompt:
    """A variant name (its v1 file under ``prompts/open``) or a prompt file."""
    path = Path(variant_or_path)
    if not path.suffix and not path.exists():
        path = PROMPT_DIR / f"{variant_or_path}-v1.json"
    raw, data = read_prompt_file(path, not_found=f"prompt file not found (variants: {', '.join(VARIANTS)})",
                                 required=("prompt_version", "variant", "system_text", "user_template"),
                                 placeholders=("{question}", "{context}"))
    return OpenPrompt(variant=data["variant"], version=data["prompt_version"], system_text=data["system_text"],
                      user_template=data["user_template"], sha256=hashlib.sha256(raw).hexdigest())


@dataclass(frozen=True)
class OpenCall:
    item: EvalItem
    eval_set: str
    prompt: OpenPrompt
    trial: int

    @property
    def condition(self) -> str:
        return self.prompt.variant

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.eval_set, self.item.item_id, self.condition, self.trial)

    @property
    def user_text(self) -> str:
        return self.prompt.user_template.format(question=self.item.question, context=self.item.question_context)

    @property
    def messages(self) -> list[dict[str, str]]:
        return chat_messages(self.prompt.system_text, self.user_text)

    @property
    def prompt_sha256(self) -> str:
        return prompt_digest(self.prompt.system_text, self.user_text)


def plan_calls(items: Sequence[EvalItem], prompts: Sequence[OpenPrompt], *, trials: int,
               eval_set: str) -> list[OpenCall]:
    """Every call of a run (the same for every model): item by item, each variant, trial 1..n.
    Cells are namespaced ``open:<eval_set>`` so they never collide with the MC protocol's."""
    set_id = f"open:{eval_set}"
    return [OpenCall(item, set_id, prompt, trial)
            for item in items for prompt in prompts for trial in range(1, trials + 1)]
