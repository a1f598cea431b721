"""The offline provider: answers each role with a deterministic function instead of a model.

The functions themselves (the rule-based baseline the demo and the default settings use) live
in :mod:`arcticqa.standins.offline`, above this layer: ``llm/`` must not depend on the gates and
the gazetteer they use. Whoever opens the gateway hands them in (``Gateway(...,
offline_roles=OFFLINE_ROLES)``; the build runner does), so the dependency is visible at the one
place that wires the build, with no import-time registration and no ``importlib`` load.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel

from arcticqa.errors import ConfigError
from arcticqa.llm.providers.base import Attempt, GenerateRequest, Provider

__all__ = ["OfflineRole", "OfflineProvider"]

#: one role's offline answer: (JSON-able prompt variables, the role's output model) -> output
OfflineRole = Callable[[Mapping[str, Any], type[BaseModel]], BaseModel | Awaitable[BaseModel]]


class OfflineProvider(Provider):
    """Answers from ``roles`` (role name -> :data:`OfflineRole`); free, instant, never retried."""

    name: ClassVar[str] = "offline"
    paced: ClassVar[bool] = False

    def __init__(self, roles: Mapping[str, OfflineRole]) -> None:
        self.roles = roles

    async def generate(self, request: GenerateRequest, attempts: list[Attempt]) -> BaseModel:
        fn = self.roles.get(request.role)
        if fn is None:
            raise ConfigError(f"the offline provider has no implementation for role {request.role!r}; "
                              "configure a model for it under [models]")
        started = time.perf_counter()
        response_model = request.response_model
        result = fn(request.variables, response_model)
        if isinstance(result, Awaitable):
            result = await result
        # validated as a model's answer would be: a role may return another model of the same shape
        output = response_model.model_validate(result.model_dump())
        attempts.append(Attempt(request={"messages": request.messages, "variables": dict(request.variables)},
                                started=started, finished=time.perf_counter()))
        return output
