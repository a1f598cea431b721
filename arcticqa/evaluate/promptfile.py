"""Reading an evaluator prompt file (JSON): the checks and errors every protocol's prompt shares.

ArcticAbstain, Abstain-QA, Know2Guess and open-ended prompts are JSON objects with required text
fields and a user template with placeholders; each protocol checks its own extra fields on top.
Every protocol's call also sends its prompt the same way (:func:`chat_messages`) and records the
same digest of it (:func:`prompt_digest`).

The protocols that ask one free-text question per call (Know2Guess, the open-ended one) share the
prompt-variant file too: :class:`VariantPrompt` (variant, version, system text, user template, file
hash), read by :func:`read_variant_prompt` from a variant name (``<dir>/<variant>-v1.json``) or a
file, and :class:`VariantCall`, one item asked with one variant in one trial.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from arcticqa.errors import InputError
from arcticqa.release.jsonio import decode_json

__all__ = ["read_prompt_file", "chat_messages", "prompt_digest", "VariantPrompt", "read_variant_prompt",
           "VariantCall"]


def read_prompt_file(path: Path, *, required: Sequence[str], placeholders: Sequence[str],
                     not_found: str = "prompt file not found") -> tuple[bytes, dict[str, Any]]:
    """The file's bytes (for its hash) and its JSON object, or an InputError naming file and field."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(not_found, path=str(path)) from None
    data = decode_json(raw, path, None)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", path=str(path))
    for name in required:
        if not isinstance(data.get(name), str) or not data[name]:
            raise InputError("missing or empty", path=str(path), field=name)
    for placeholder in placeholders:
        if placeholder not in data["user_template"]:
            raise InputError(f"user template lacks {placeholder}", path=str(path), field="user_template")
    return raw, data


def chat_messages(system_text: str, user_text: str) -> list[dict[str, str]]:
    """A call's chat: the system text, then the user text."""
    return [{"role": "system", "content": system_text}, {"role": "user", "content": user_text}]


def prompt_digest(system_text: str, user_text: str) -> str:
    """The sha256 stored with every response (``prompt_sha256``): of the JSON pair [system, user],
    so a change to either text changes it."""
    payload = json.dumps([system_text, user_text], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VariantPrompt:
    """A prompt variant file of a one-question protocol: its variant name and version, the system
    text, the user template and the sha256 of the file's bytes."""

    variant: str
    version: str
    system_text: str
    user_template: str
    sha256: str


def read_variant_prompt(variant_or_path: str | Path, *, prompt_dir: Path, variants: Sequence[str],
                        placeholders: Sequence[str]) -> tuple[VariantPrompt, dict[str, Any], Path]:
    """A variant name (its v1 file ``<prompt_dir>/<variant>-v1.json``) or a prompt file: the prompt,
    the file's JSON object (for a protocol's own fields) and the path read."""
    path = Path(variant_or_path)
    if not path.suffix and not path.exists():
        path = prompt_dir / f"{variant_or_path}-v1.json"
    raw, data = read_prompt_file(path, not_found=f"prompt file not found (variants: {', '.join(variants)})",
                                 required=("prompt_version", "variant", "system_text", "user_template"),
                                 placeholders=placeholders)
    prompt = VariantPrompt(variant=data["variant"], version=data["prompt_version"], system_text=data["system_text"],
                           user_template=data["user_template"], sha256=hashlib.sha256(raw).hexdigest())
    return prompt, data, path


ItemT = TypeVar("ItemT")
PromptT = TypeVar("PromptT", bound=VariantPrompt)


@dataclass(frozen=True)
class VariantCall(ABC, Generic[ItemT, PromptT]):
    """One call of a one-question protocol: ``item`` asked with ``prompt`` in ``trial``. The
    condition a cell and a store row carry is the prompt's variant; a protocol says which id names
    the item and how the user text is filled in."""

    item: ItemT
    eval_set: str
    prompt: PromptT
    trial: int

    @property
    @abstractmethod
    def question_id(self) -> str:
        """The id of the item the cell and the store row name."""

    @property
    @abstractmethod
    def user_text(self) -> str:
        """The user template filled in with the item."""

    @property
    def condition(self) -> str:
        return self.prompt.variant

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.eval_set, self.question_id, self.condition, self.trial)

    @property
    def messages(self) -> list[dict[str, str]]:
        return chat_messages(self.prompt.system_text, self.user_text)

    @property
    def prompt_sha256(self) -> str:
        return prompt_digest(self.prompt.system_text, self.user_text)
