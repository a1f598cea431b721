"""The offline provider: deterministic, rule-based stand-ins for every model role.

A baseline for trying the pipeline without an API key and for tests, not a substitute for an
LLM. Each role's implementation receives the same structured variables a prompt would be
rendered from and returns the role's pydantic output model. Implementations register with
:func:`offline_role`.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel

from arcticqa.errors import ConfigError

__all__ = ["OfflineRole", "offline_role", "answer_offline"]

OfflineRole = Callable[[Mapping[str, Any], type[BaseModel]], BaseModel | Awaitable[BaseModel]]
_ROLES: dict[str, OfflineRole] = {}
#: modules that register offline roles when imported
_MODULES = ("arcticqa.llm.offline.roles",)


def offline_role(role: str) -> Callable[[OfflineRole], OfflineRole]:
    def register(fn: OfflineRole) -> OfflineRole:
        _ROLES[role] = fn
        return fn

    return register


def _load_all() -> None:
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise


async def answer_offline(role: str, variables: Mapping[str, Any],
                         response_model: type[BaseModel]) -> BaseModel:
    if role not in _ROLES:
        _load_all()
    fn = _ROLES.get(role)
    if fn is None:
        raise ConfigError(f"the offline provider has no implementation for role {role!r}; "
                          "configure a model for it under [models]")
    result = fn(variables, response_model)
    if isinstance(result, Awaitable):
        result = await result
    return response_model.model_validate(result.model_dump()) if not isinstance(result, response_model) \
        else result
