"""The open protocol's prompt (``prompts/open/<variant>-v1.json``) and the planned calls of a run.

The model sees the context and the question, no options, and is asked to answer briefly or to say in
its own words that it does not know.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from arcticqa.evaluate.open.items import EvalItem
from arcticqa.evaluate.promptfile import VariantCall, VariantPrompt, read_variant_prompt

__all__ = ["VARIANTS", "PROMPT_DIR", "CONDITION", "OpenPrompt", "OpenCall", "load_open_prompt", "plan_calls"]

VARIANTS: tuple[str, ...] = ("answer_or_abstain",)
PROMPT_DIR = Path(__file__).resolve().parents[3] / "prompts" / "open"
#: the condition name cells and store rows carry (there are no option sets to vary)
CONDITION = "open"


#: the open protocol's prompt is the shared prompt-variant file, with no fields of its own
OpenPrompt = VariantPrompt


def load_open_prompt(variant_or_path: str | Path) -> OpenPrompt:
    """A variant name (its v1 file under ``prompts/open``) or a prompt file."""
    return read_variant_prompt(variant_or_path, prompt_dir=PROMPT_DIR, variants=VARIANTS,
                               placeholders=("{question}", "{context}"))[0]


class OpenCall(VariantCall[EvalItem, OpenPrompt]):
    """One open-protocol call: context and question filled into the variant's user template."""

    @property
    def question_id(self) -> str:
        return self.item.item_id

    @property
    def user_text(self) -> str:
        return self.prompt.user_template.format(question=self.item.question, context=self.item.question_context)


def plan_calls(items: Sequence[EvalItem], prompts: Sequence[OpenPrompt], *, trials: int,
               eval_set: str) -> list[OpenCall]:
    """Every call of a run (the same for every model): item by item, each variant, trial 1..n.
    Cells are namespaced ``open:<eval_set>`` so they never collide with the MC protocol's."""
    set_id = f"open:{eval_set}"
    return [OpenCall(item, set_id, prompt, trial)
            for item in items for prompt in prompts for trial in range(1, trials + 1)]
