"""The evaluator's own settings: which models to evaluate, how many trials, which eval set.

Read from the ``[evaluate]`` table of a TOML file (``arcticqa.toml`` or a separate file)::

    [evaluate]
    trials = 3
    eval_set = "arcticqa-v1"
    items = "data/release/items.jsonl"
    prompt = "prompts/arcticabstain/v1.json"   # optional; the v1 prompt by default
    db_url = "sqlite:///arcticqa-eval.db"

    [[evaluate.models]]
    label = "gpt-x-high"              # the design's model id (order seed, store, tables)
    display_name = "GPT X (high)"     # optional; the tables' model name
    base_url = "https://api.example.com/v1"
    model = "gpt-x"
    api_key_env = "EXAMPLE_API_KEY"
    max_concurrency = 8
    requests_per_second = 2.0         # optional rate limit
    extra_body = { reasoning_effort = "high" }

Each model entry takes every :class:`arcticqa.config.ModelConfig` field plus ``label``,
``display_name`` and ``requests_per_second``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator

from arcticqa.config import ModelConfig, read_toml
from arcticqa.errors import ConfigError

__all__ = ["EvalModel", "EvaluateSettings", "load_evaluate_settings"]


class EvalModel(ModelConfig):
    """A model under evaluation: how to reach it, plus its id in the design."""

    model_config = {"extra": "forbid"}  # a misspelt key must not silently fall back to a default

    label: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._:@/+-]+$")
    display_name: str | None = None
    requests_per_second: float | None = Field(default=None, gt=0)

    @property
    def name(self) -> str:
        return self.display_name or self.label


class EvaluateSettings(BaseModel):
    model_config = {"extra": "forbid"}

    trials: int = Field(3, ge=1)
    eval_set: str = "arcticqa"
    items: Path | None = None
    prompt: Path | None = None
    db_url: str = "sqlite:///arcticqa-eval.db"
    models: list[EvalModel] = Field(default_factory=list)

    @field_validator("models")
    @classmethod
    def _unique_labels(cls, models: list[EvalModel]) -> list[EvalModel]:
        labels = [m.label for m in models]
        duplicates = sorted({x for x in labels if labels.count(x) > 1})
        if duplicates:
            raise ValueError(f"model labels must be unique; repeated: {', '.join(duplicates)}")
        return models


def load_evaluate_settings(path: Path | str) -> EvaluateSettings:
    """The ``[evaluate]`` table of ``path``; relative paths in it resolve against the file's folder."""
    path = Path(path)
    data = read_toml(path)
    section = data.get("evaluate")
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: no [evaluate] table")
    try:
        settings = EvaluateSettings(**section)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: setting 'evaluate.{loc}': {first['msg']}") from exc
    base = path.resolve().parent
    updates: dict[str, Path] = {}
    for name in ("items", "prompt"):
        value = getattr(settings, name)
        if value is not None and not value.is_absolute():
            updates[name] = base / value
    return settings.model_copy(update=updates)
