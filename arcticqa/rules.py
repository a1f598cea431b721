"""Stable rejection rule ids.

A rejection is never free text alone: it carries a rule id (``stage.reason``), the stage, a
human message and the evidence that triggered it. Each stage module declares its rules with
:func:`rule` at import time, so ``arcticqa rules`` and the docs can list every id.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

__all__ = ["Rule", "Rejection", "rule", "all_rules"]


class Rejection(BaseModel):
    """One reason a paper, finding, question or option was not kept."""

    rule_id: str
    stage: str
    message: str
    evidence: dict[str, Any] = Field(default_factory=dict)


class Rule(BaseModel, frozen=True):
    """A named gate outcome: ``id`` is ``stage.reason`` and never changes once released."""

    id: str
    summary: str

    @property
    def stage(self) -> str:
        return self.id.split(".", 1)[0]

    def reject(self, message: str | None = None, **evidence: Any) -> Rejection:
        return Rejection(rule_id=self.id, stage=self.stage, message=message or self.summary,
                         evidence=evidence)


_REGISTRY: dict[str, Rule] = {}


def rule(rule_id: str, summary: str) -> Rule:
    """Declare (or fetch) a rule. Declaring the same id with another summary is a bug."""
    if "." not in rule_id:
        raise ValueError(f"rule id {rule_id!r} must look like 'stage.reason'")
    existing = _REGISTRY.get(rule_id)
    if existing is not None:
        if existing.summary != summary:
            raise ValueError(f"rule {rule_id!r} declared twice with different summaries")
        return existing
    r = Rule(id=rule_id, summary=summary)
    _REGISTRY[rule_id] = r
    return r


def all_rules() -> list[Rule]:
    return sorted(_REGISTRY.values(), key=lambda r: r.id)
