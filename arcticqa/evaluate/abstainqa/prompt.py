"""Abstain-QA prompt variants and the planned calls of a live run.

Variants (``prompts/abstainqa/<variant>-v1.json``): ``standard``, ``abstain``, ``extreme_abstain``
(the abstain clause: none; explicitly allowed; strongly urged). With verbal confidence the model
also gives a confidence 1–5 and the condition is ``<variant>+confidence``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from arcticqa.errors import InputError
from arcticqa.evaluate.abstainqa.items import IDK_TEXT, AbstainQAItem
from arcticqa.evaluate.promptfile import chat_messages, prompt_digest, read_prompt_file

__all__ = ["VARIANTS", "PROMPT_DIR", "CONFIDENCE_SUFFIX", "AbstainQAPrompt", "AbstainQACall",
           "load_abstainqa_prompt", "variant_label", "build_abstainqa_call", "plan_calls"]

VARIANTS: tuple[str, ...] = ("standard", "abstain", "extreme_abstain")
PROMPT_DIR = Path(__file__).resolve().parents[3] / "prompts" / "abstainqa"
CONFIDENCE_SUFFIX = "+confidence"


@dataclass(frozen=True)
class AbstainQAPrompt:
    variant: str
    version: str
    system_text: str
    user_template: str
    context_template: str
    reply_instruction: str
    confidence_instruction: str
    sha256: str

    def system(self, verbal_confidence: bool) -> str:
        tail = self.confidence_instruction if verbal_confidence else self.reply_instruction
        return f"{self.system_text}\n{tail}"

    def user(self, item: AbstainQAItem) -> str:
        block = self.context_template.format(context=item.context) if item.context.strip() else ""
        listing = "\n".join(f"{o['letter']}. {o['text']}" for o in item.shown())
        return self.user_template.format(question=item.question, context_block=block, options=listing)


def load_abstainqa_prompt(variant_or_path: str | Path) -> AbstainQAPrompt:
    """A variant name (``standard``, ``abstain``, ``extreme_abstain``: its v1 file) or a prompt file."""
    path = Path(variant_or_path)
    if str(variant_or_path) in VARIANTS or (not path.suffix and not path.exists()):
        path = PROMPT_DIR / f"{variant_or_path}-v1.json"
    raw, data = read_prompt_file(
        path, not_found=f"prompt file not found (variants: {', '.join(VARIANTS)})",
        required=("prompt_version", "variant", "system_text", "user_template", "reply_instruction",
                  "confidence_instruction"),
        placeholders=("{question}", "{context_block}", "{options}"))
    if data.get("idk_option_text", IDK_TEXT) != IDK_TEXT:
        raise InputError(f"the IDK/NOTA option text is fixed: {IDK_TEXT!r}", path=str(path), field="idk_option_text")
    return AbstainQAPrompt(variant=data["variant"], version=data["prompt_version"], system_text=data["system_text"],
                           user_template=data["user_template"],
                           context_template=str(data.get("context_template", "\nCONTEXT\n{context}\n")),
                           reply_instruction=data["reply_instruction"],
                           confidence_instruction=data["confidence_instruction"], sha256=_sha_bytes(raw))


def _sha_bytes(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def variant_label(variant: str, verbal_confidence: bool) -> str:
    return f"{variant}{CONFIDENCE_SUFFIX}" if verbal_confidence else variant


@dataclass(frozen=True)
class AbstainQACall:
    item: AbstainQAItem
    eval_set: str
    condition: str  # the variant label
    trial: int
    verbal_confidence: bool
    system_text: str
    user_text: str
    prompt_version: str

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.eval_set, self.item.question_id, self.condition, self.trial)

    @property
    def messages(self) -> list[dict[str, str]]:
        return chat_messages(self.system_text, self.user_text)

    @property
    def prompt_sha256(self) -> str:
        return prompt_digest(self.system_text, self.user_text)


def build_abstainqa_call(item: AbstainQAItem, prompt: AbstainQAPrompt, *, trial: int = 1,
                         verbal_confidence: bool = False, eval_set: str = "abstainqa:arcticqa") -> AbstainQACall:
    return AbstainQACall(item=item, eval_set=eval_set, condition=variant_label(prompt.variant, verbal_confidence),
                         trial=trial, verbal_confidence=verbal_confidence,
                         system_text=prompt.system(verbal_confidence), user_text=prompt.user(item),
                         prompt_version=prompt.version)


def plan_calls(items: Sequence[AbstainQAItem], prompts: Sequence[AbstainQAPrompt], *, trials: int,
               verbal_confidence: bool, eval_set: str) -> list[AbstainQACall]:
    """Every call of a run (the same for every model): item by item, each variant, trial 1..n.
    Cells are namespaced ``abstainqa:<eval_set>`` so they never collide with ArcticAbstain's."""
    set_id = f"abstainqa:{eval_set}"
    return [build_abstainqa_call(item, prompt, trial=trial, verbal_confidence=verbal_confidence, eval_set=set_id)
            for item in items for prompt in prompts for trial in range(1, trials + 1)]
