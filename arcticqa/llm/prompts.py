"""Prompt files: loading, versioning and rendering (``prompts/<prompt>/<version>.md``).

The recorded version is ``<prompt>@<version>#<sha12>`` where the hash covers the file's bytes,
so an edited file can never pass for the version it replaced.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel

from arcticqa.errors import ConfigError

__all__ = ["PROMPTS_DIR", "Prompt", "load_prompt", "to_jsonable"]

PROMPTS_DIR = Path(__file__).resolve().parents[2] / "prompts"

_SYSTEM = "=== system ==="
_USER = "=== user ==="
_env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False,
                          autoescape=False)
_env.filters["tojson_compact"] = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True)


def to_jsonable(value: Any) -> Any:
    """Pydantic models → dicts, recursively, so variables are plain JSON data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    return value


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    sha256: str
    system: str
    user: str

    @property
    def version_id(self) -> str:
        return f"{self.name}@{self.version}#{self.sha256[:12]}"

    def render(self, variables: Mapping[str, Any]) -> list[dict[str, str]]:
        data = to_jsonable(variables)
        try:
            system = _template(self.system).render(**data).strip()
            user = _template(self.user).render(**data).strip()
        except jinja2.UndefinedError as exc:
            raise ConfigError(f"prompt {self.version_id}: {exc}") from exc
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@functools.lru_cache(maxsize=256)
def _template(source: str) -> jinja2.Template:
    """Compiled once per prompt text: compiling costs ~3 ms, which every model call used to pay."""
    return _env.from_string(source)


@functools.lru_cache(maxsize=128)
def _load(path: Path) -> Prompt:
    raw = path.read_bytes()
    text = raw.decode("utf-8")
    if _SYSTEM not in text or _USER not in text:
        raise ConfigError(f"{path}: a prompt file needs '{_SYSTEM}' and '{_USER}' sections")
    before_user, user = text.split(_USER, 1)
    system = before_user.split(_SYSTEM, 1)[1]
    return Prompt(name=path.parent.name, version=path.stem, sha256=hashlib.sha256(raw).hexdigest(),
                  system=system.strip(), user=user.strip())


@functools.lru_cache(maxsize=256)
def load_prompt(ref: str, prompts_dir: Path | None = None) -> Prompt:
    """Load ``"<prompt>/<version>"`` (e.g. ``"question_writer/v1"``).

    Remembered per reference: the file's text already is (``_load``), and its path checks (two
    file-system calls) were ~2% of the construct stage's CPU, paid on every model call.
    """
    name, _, version = ref.partition("/")
    if not name or not version or ".." in ref:
        raise ConfigError(f"prompt reference {ref!r} must look like 'name/version'")
    path = (prompts_dir or PROMPTS_DIR) / name / f"{version}.md"
    if not path.exists():
        raise ConfigError(f"prompt file not found: {path}")
    return _load(path.resolve())
