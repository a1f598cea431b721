"""The shape every step of item construction returns (:mod:`arcticqa.stages.construct`).

The runner that memoises the steps (``pipeline/runner.py``) records a step's attempt as
``succeeded`` when its result is :attr:`StepResult.ok` and ``rejected`` otherwise; each result
type says itself what "ok" means for it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from pydantic import BaseModel

__all__ = ["StepResult"]


class StepResult(BaseModel, ABC):
    """A construction step's result."""

    @property
    @abstractmethod
    def ok(self) -> bool:
        """Whether the step produced something the next step can use."""
