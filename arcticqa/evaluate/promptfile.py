"""Reading an evaluator prompt file (JSON): the checks and errors every protocol's prompt shares.

ArcticAbstain, Abstain-QA and Know2Guess prompts are JSON objects with required text fields
and a user template with placeholders; each protocol checks its own extra fields on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arcticqa.errors import InputError
from arcticqa.release.jsonio import decode_json

__all__ = ["read_prompt_file"]


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
