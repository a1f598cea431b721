"""The ArcticAbstain prompt (the published ``prompt.json`` format) and the calls of a run.

Default prompt: ``prompts/arcticabstain/v1.json``, a byte-identical copy of the published
``prompt.json`` (system text; user template with QUESTION / QUESTION_CONTEXT / OPTIONS; ``(none)``
for an empty context; options as ``A. text`` lines). Each call stores ``prompt_version`` and
``prompt_sha256`` (sha256 of ``json.dumps([system_text, user_text], ensure_ascii=False)``).

Prompt robustness: a :class:`Variant` changes the instruction (a paraphrase file beside ``v1.json``
whose system text names the reply labels through ``{label_kind}`` and ``{label_list}``), the option
labels (``letters`` A-E or ``numbers`` 1-5) and where the abstain option is listed (``shuffled`` with
the others, as published; ``first``; ``last``; or ``seeded-<seed>``, one position per item). Its id
is ``<instruction>.<labels>.<position>``; the published combination is the reference variant
``published``, whose calls are exactly the calls of a run without variants.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.arcticabstain.items import EvalItem, order_seed, shown_options
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, Condition, ShownOption
from arcticqa.evaluate.promptfile import chat_messages, prompt_digest, read_prompt_file

__all__ = ["DEFAULT_PROMPT_PATH", "PromptTemplate", "Call", "load_prompt", "build_call", "plan_calls",
           "REFERENCE_VARIANT", "INSTRUCTIONS", "LABEL_SETS", "ABSTAIN_POSITIONS", "Variant", "parse_variant_id",
           "variant_id", "load_variant"]

PROMPT_DIR = Path(__file__).resolve().parents[3] / "prompts" / "arcticabstain"
DEFAULT_PROMPT_PATH = PROMPT_DIR / "v1.json"

#: the id of the published prompt, labels and option order: the variant every plan is compared to
REFERENCE_VARIANT = "published"
#: bundled instructions: the published wording with its labels as placeholders, and three paraphrases
INSTRUCTIONS: dict[str, Path] = {name: PROMPT_DIR / f"{stem}-v1.json" for name, stem in (
    ("published", "published-labels"), ("reworded", "reworded"), ("brief", "brief"), ("checklist", "checklist"))}
#: label set -> (the five labels, how the instruction names one)
LABEL_SETS: dict[str, tuple[str, str]] = {"letters": ("ABCDE", "uppercase letter"), "numbers": ("12345", "number")}
#: where the abstain option is listed; ``seeded`` takes a seed (``seeded-7``)
ABSTAIN_POSITIONS: tuple[str, ...] = ("shuffled", "first", "last", "seeded")


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
    #: the variant id, and what the store row records of it (None for the reference variant)
    variant: str = REFERENCE_VARIANT
    variant_details: dict[str, Any] | None = None

    @property
    def prompt_sha256(self) -> str:
        return prompt_digest(self.system_text, self.user_text)

    @property
    def messages(self) -> list[dict[str, str]]:
        return chat_messages(self.system_text, self.user_text)

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


@dataclass(frozen=True)
class Variant:
    """One prompt variant: its id, its prompt (labels filled in) and where the abstain option goes."""

    id: str
    instruction: str
    labels: str
    abstain_position: str
    position_seed: int
    prompt: PromptTemplate

    @property
    def is_reference(self) -> bool:
        return self.id == REFERENCE_VARIANT

    def details(self) -> dict[str, Any] | None:
        """What a store row records of the variant (nothing for the reference: its rows stay as before)."""
        if self.is_reference:
            return None
        return {"variant": self.id, "instruction": self.instruction, "labels": self.labels,
                "abstain_position": self.abstain_position, "position_seed": self.position_seed,
                "prompt_sha256": self.prompt.sha256}


def variant_id(instruction: str, labels: str, abstain_position: str, seed: int = 0) -> str:
    """The stable id of a combination; the published one is ``published``."""
    if (instruction, labels, abstain_position) == ("published", "letters", "shuffled"):
        return REFERENCE_VARIANT
    position = f"seeded-{seed}" if abstain_position == "seeded" else abstain_position
    return f"{instruction}.{labels}.{position}"


def parse_variant_id(text: str) -> tuple[str, str, str, int]:
    """(instruction, labels, abstain position, position seed) of a variant id, or a ConfigError
    naming the part that is not known."""
    if text == REFERENCE_VARIANT:
        return ("published", "letters", "shuffled", 0)
    parts = text.split(".")
    if len(parts) != 3:
        raise ConfigError(f"variant {text!r}: expected {REFERENCE_VARIANT!r} or <instruction>.<labels>.<position> "
                          f"(e.g. reworded.numbers.last)")
    instruction, labels, position = parts
    if instruction not in INSTRUCTIONS:
        raise ConfigError(f"variant {text!r}: unknown instruction {instruction!r}; known: {', '.join(INSTRUCTIONS)}")
    if labels not in LABEL_SETS:
        raise ConfigError(f"variant {text!r}: unknown labels {labels!r}; known: {', '.join(LABEL_SETS)}")
    seed = 0
    name, _, seed_text = position.partition("-")
    if name == "seeded":
        if not seed_text.isdigit():
            raise ConfigError(f"variant {text!r}: a seeded position needs its seed, e.g. seeded-7")
        seed = int(seed_text)
    elif name not in ABSTAIN_POSITIONS or seed_text:
        raise ConfigError(f"variant {text!r}: unknown abstain position {position!r}; known: shuffled, first, last, "
                          f"seeded-<seed>")
    canonical = variant_id(instruction, labels, name, seed)
    if canonical != text:  # published.letters.shuffled, seeded-07: one id per variant
        raise ConfigError(f"variant {text!r}: write it as {canonical!r}")
    return (instruction, labels, name, seed)


def _variant_prompt(instruction: str, labels: str) -> PromptTemplate:
    path = INSTRUCTIONS[instruction]
    template = load_prompt(path)
    if "{label_list}" not in template.system_text:
        raise InputError("a variant instruction must name the reply labels with {label_list}", path=str(path),
                         field="system_text")
    letters, kind = LABEL_SETS[labels]
    label_list = ", ".join(letters[:-1]) + f", or {letters[-1]}"
    # str.replace, not str.format: the instruction text may quote braces of its own
    system_text = template.system_text.replace("{label_kind}", kind).replace("{label_list}", label_list)
    return replace(template, system_text=system_text, letters=letters)


def load_variant(text: str, published: Path | str | None = None) -> Variant:
    """The variant of an id. The reference variant uses ``published`` (the [evaluate] prompt, default
    v1.json) exactly as a run without variants does."""
    instruction, labels, position, seed = parse_variant_id(text)
    if text == REFERENCE_VARIANT:
        template = load_prompt(published)
    else:
        template = _variant_prompt(instruction, labels)
    return Variant(id=text, instruction=instruction, labels=labels, abstain_position=position,
                   position_seed=seed, prompt=template)


def build_call(item: EvalItem, condition: Condition, trial: int, model: str, prompt: PromptTemplate, *,
               eval_set: str = "arcticqa", variant: Variant | None = None) -> Call:
    """The deterministic call for one cell of the design (of ``variant``; its prompt replaces ``prompt``).

    A variant's calls keep the reference's option order seed, so a variant changes only what it
    names; its rows go to the eval set ``<eval set>@<variant>`` so every variant has its own cells.
    """
    set_id = item.eval_set_id or eval_set
    seed = order_seed(set_id, item.item_id, condition, trial, model)
    if variant is not None:
        prompt = variant.prompt
    position = "shuffled" if variant is None else variant.abstain_position
    options = shown_options(item, condition, seed, letters=prompt.letters,
                            abstain_text=prompt.abstention_option_text, abstain_position=position,
                            position_seed=0 if variant is None else variant.position_seed)
    if variant is not None and not variant.is_reference:
        return Call(item=item, condition=condition, trial=trial, model=model, eval_set=f"{set_id}@{variant.id}",
                    order_seed=seed, options=options, system_text=prompt.system_text,
                    user_text=prompt.render_user(item, options), prompt_version=prompt.version,
                    variant=variant.id, variant_details=variant.details())
    return Call(item=item, condition=condition, trial=trial, model=model, eval_set=set_id, order_seed=seed,
                options=options, system_text=prompt.system_text, user_text=prompt.render_user(item, options),
                prompt_version=prompt.version)


def plan_calls(items: Sequence[EvalItem], model: str, prompt: PromptTemplate, *, trials: int,
               eval_set: str, variants: Sequence[Variant] = ()) -> list[Call]:
    """Every call of one model, variant by variant (none: the reference), item by item (id order),
    present before absent, trial 1..n."""
    return [build_call(item, condition, trial, model, prompt, eval_set=eval_set, variant=variant)
            for variant in (variants or (None,)) for item in items for condition in CONDITIONS
            for trial in range(1, trials + 1)]
