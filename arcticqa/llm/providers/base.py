"""What the gateway asks of a model provider: one ``generate`` and a few policy hooks.

The gateway keeps everything that is the same whichever provider answers: roles, the cache, the
budget, pacing, the transport retry loop and the ``llm_call`` records. A provider keeps what
differs: how one request reaches a model (``generate``), which failures are worth asking again
and how long the server asked us to wait (the retry policy hooks), what its failures are called
in :mod:`arcticqa.errors` (``errors``) and which credentials must never be stored (the auth
policy hook, ``secrets``).
"""

from __future__ import annotations

import contextlib
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from arcticqa.config import ModelConfig

__all__ = ["Attempt", "GenerateRequest", "Provider", "RetryAfterOrJitter", "retrying"]


@dataclass
class Attempt:
    """One request a provider sent (a validation re-ask is an attempt of its own)."""

    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    error: str | None = None
    refusal: str | None = None  # the provider declined (message.refusal or content_filter)
    truncated: bool = False  # the answer stopped at max_tokens (finish_reason=length)
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0


@dataclass(frozen=True)
class GenerateRequest:
    """One role call as the provider sees it: the rendered prompt and the structured variables
    it was rendered from (a model reads the first, the offline provider the second)."""

    role: str
    model_name: str  # the [models] key, which names the client and its pacing
    cfg: ModelConfig
    messages: list[dict[str, str]]
    variables: Mapping[str, Any]
    response_model: type[BaseModel]
    batched: bool = False
    #: called just before each request of the call is sent, with its attempt number; returns the
    #: metadata to send it with, stored by the provider (a model config's ``recover_in_flight``)
    before_send: Callable[[int], dict[str, str]] | None = None


class Provider(ABC):
    """A way to reach models, chosen by a model config's ``provider`` string."""

    name: ClassVar[str]
    #: whether calls cost money and meet the config's limits (budget, concurrency, token buckets)
    paced: ClassVar[bool] = True
    #: whether :meth:`recover` can find answers it stored for requests sent with ``before_send``
    recovers: ClassVar[bool] = False

    @abstractmethod
    async def generate(self, request: GenerateRequest, attempts: list[Attempt]) -> BaseModel:
        """Answer ``request`` once (re-asks included), appending every request sent
        to ``attempts`` as it goes, so a failure still leaves what happened on record."""

    async def recover(self, request: GenerateRequest, request_hash: str, sends: Collection[str],
                      attempts: list[Attempt]) -> BaseModel | None:
        """The answer the provider stored for one of ``sends`` of this request (the ``before_send``
        metadata it went out with), validated; None when there is none yet. A provider that stores
        none (``recovers`` False) is never asked; one whose endpoint refuses the look-up raises
        :class:`~arcticqa.errors.StoredLookupUnavailable`. A recovered answer is appended to ``attempts``."""
        return None

    async def warm(self, model_name: str, cfg: ModelConfig, *, batched: bool) -> None:  # noqa: B027
        """Pay one-off set-up costs while the build opens (default: none)."""

    async def aclose(self) -> None:  # noqa: B027
        """Release clients and background work (default: nothing to release)."""

    # -- retry policy -------------------------------------------------------------------------

    def transport_failure(self, exc: BaseException) -> BaseException | None:
        """The failure inside ``exc`` after which no answer came back (retried), else None."""
        return None

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked us to wait before asking again, if it said."""
        return None

    # -- errors and auth policy ----------------------------------------------------------------

    def errors(self, role: str, cfg: ModelConfig,
               attempts: Sequence[Attempt]) -> contextlib.AbstractContextManager[None]:
        """The boundary where this provider's exceptions become :mod:`arcticqa.errors` classes."""
        return contextlib.nullcontext()

    def secrets(self, cfg: ModelConfig) -> list[str]:
        """Credential values that must never reach a record or a message."""
        return []


class RetryAfterOrJitter:
    """Wait what the server asked for, else full-jitter exponential backoff (capped)."""

    def __init__(self, initial: float, maximum: float,
                 retry_after: Callable[[BaseException], float | None]) -> None:
        self.initial, self.maximum, self.retry_after = initial, maximum, retry_after

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = self.retry_after(exc) if exc else None
        if asked is not None:
            return min(asked, self.maximum)
        ceiling = min(self.maximum, self.initial * (2 ** (state.attempt_number - 1)))
        return random.uniform(ceiling / 2, ceiling)


def retrying(cfg: ModelConfig, *, retry: Callable[[BaseException], bool],
             retry_after: Callable[[BaseException], float | None]) -> AsyncRetrying:
    """``async for attempt in retrying(cfg, ...): with attempt: ...`` — the transport retry loop.

    Retries live here (tenacity), not in the provider's client, so that every attempt is
    visible to us and can be recorded, and so that ``Retry-After`` is honoured the same way for
    build roles and for the evaluator.
    """
    return AsyncRetrying(
        retry=retry_if_exception(retry),
        stop=stop_after_attempt(cfg.max_retries + 1),
        wait=RetryAfterOrJitter(cfg.backoff_initial_s, cfg.backoff_max_s, retry_after),
        reraise=True,
    )
