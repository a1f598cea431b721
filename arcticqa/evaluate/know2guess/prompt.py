"""Know2Guess prompt variants and the planned calls of a live run.

Prompts (``prompts/know2guess/<variant>-v1.json``): ``answer_or_abstain`` (the fixed protocol
prompt: one JSON object with ``decision`` ANSWER|ABSTAIN, ``answer``, ``confidence`` in [0,1]),
``answer_only`` (the control: always answer), ``answer_or_abstain_terse`` (a template variant).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.evaluate.know2guess.items import Know2GuessItem
from arcticqa.evaluate.promptfile import VariantCall, VariantPrompt, read_variant_prompt

__all__ = ["VARIANTS", "MODES", "PROMPT_DIR", "Know2GuessPrompt", "Know2GuessCall", "load_know2guess_prompt",
           "mode_of", "plan_calls"]

VARIANTS: tuple[str, ...] = ("answer_or_abstain", "answer_only", "answer_or_abstain_terse")
MODES: tuple[str, ...] = ("answer_or_abstain", "answer_only")
PROMPT_DIR = Path(__file__).resolve().parents[3] / "prompts" / "know2guess"


@dataclass(frozen=True)
class Know2GuessPrompt(VariantPrompt):
    """A Know2Guess prompt variant: the shared variant file plus its ``mode``."""

    mode: str


def load_know2guess_prompt(variant_or_path: str | Path) -> Know2GuessPrompt:
    """A variant name (its v1 file under ``prompts/know2guess``) or a prompt file."""
    prompt, data, path = read_variant_prompt(variant_or_path, prompt_dir=PROMPT_DIR, variants=VARIANTS,
                                             placeholders=("{question}",))
    if data.get("mode") not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}", path=str(path), field="mode")
    return Know2GuessPrompt(**vars(prompt), mode=data["mode"])


@functools.lru_cache(maxsize=64)  # external files name a variant on every line
def mode_of(variant: str) -> str:
    """The mode of a named variant (its prompt file), else ``answer_or_abstain``."""
    path = PROMPT_DIR / f"{variant}-v1.json"
    if path.exists():
        return load_know2guess_prompt(path).mode
    return "answer_only" if variant.startswith("answer_only") else "answer_or_abstain"


class Know2GuessCall(VariantCall[Know2GuessItem, Know2GuessPrompt]):
    """One Know2Guess call: the question alone, filled into the variant's user template."""

    @property
    def question_id(self) -> str:
        return self.item.question_id

    @property
    def user_text(self) -> str:
        return self.prompt.user_template.format(question=self.item.question_text)


def plan_calls(items: Sequence[Know2GuessItem], prompts: Sequence[Know2GuessPrompt], *, trials: int,
               eval_set: str) -> list[Know2GuessCall]:
    """Every call of a run (the same for every model): item by item, each variant, trial 1..n.
    Cells are namespaced ``know2guess:<eval_set>`` so they never collide with ArcticAbstain's."""
    set_id = f"know2guess:{eval_set}"
    return [Know2GuessCall(item, set_id, prompt, trial)
            for item in items for prompt in prompts for trial in range(1, trials + 1)]
