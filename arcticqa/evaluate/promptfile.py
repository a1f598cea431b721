"""Reading an evaluator prompt file (JSON): the checks and errors every protocol's prompt shares.

ArcticAbstain, Abstain-QA, Know2Guess and open-ended prompts are JSON objects with required text
fields and a user template with placeholders; each protocol checks its own extra fields on top.
Every protocol's call also sends its prompt the same way (:func:`chat_messages`) and records the
same digest of it (:func:`prompt_digest`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arcticqa.errors import InputError
from arcticqa.release.jsonio import decode_json

__all__ = ["read_prompt_file", "chat_messages", "prompt_digest"]


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
