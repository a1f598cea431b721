"""The contract between stages and the LLM gateway.

A stage never builds a client: it receives a :class:`RoleClient` and asks a *role* to answer a
*prompt file* (``prompts/<prompt>/<version>.md``) filled with typed variables, getting back a
validated pydantic object plus the provenance that must be stored with the stage's output.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

__all__ = ["OutputT", "RoleReply", "RoleClient"]

OutputT = TypeVar("OutputT", bound=BaseModel)


@dataclass(frozen=True)
class RoleReply(Generic[OutputT]):
    """A validated answer from a role, with what must be recorded alongside it."""

    output: OutputT
    role: str
    provider: str
    model: str
    prompt_version: str  # e.g. "question_writer@v1#3fa2c1d9e0b4"
    request_hash: str  # the cache key; the llm_call rows carry it
    cached: bool
    cost_usd: float = 0.0


class RoleClient(Protocol):
    """What stages see of the gateway."""

    async def ask(
        self,
        role: str,
        prompt: str,
        variables: Mapping[str, Any],
        response_model: type[OutputT],
        *,
        subject: str | None = None,
    ) -> RoleReply[OutputT]:
        """Render ``prompts/<prompt>`` with ``variables`` and have ``role``'s model answer.

        ``variables`` must be JSON-serialisable (pydantic models are dumped); the offline
        provider receives them as they are, so it can work on structure, not prose.
        ``subject`` (paper/finding id) is recorded on the llm_call rows for auditing.
        Raises :class:`arcticqa.errors.LLMError` subclasses when no valid answer is had.
        """
        ...
