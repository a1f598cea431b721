"""Building OpenAI-compatible clients and the transport retry policy shared by every call.

Retries live here (tenacity), not in the openai client (``max_retries=0``), so that every
attempt is visible to us and can be recorded, and so that ``Retry-After`` is honoured the same
way for build roles and for the evaluator.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import aiohttp
import openai
from openai import AsyncOpenAI
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from arcticqa.config import ModelConfig

__all__ = ["make_async_client", "is_transport_error", "transport_retrying", "retry_after_seconds", "describe_error"]


def make_async_client(cfg: ModelConfig, *, http_client: Any = None) -> AsyncOpenAI:
    """An AsyncOpenAI client for ``cfg``. Use it as ``async with`` so it closes inside its loop.

    ``http_client`` replaces the configured transport (the Batch API mode passes its own).
    """
    if http_client is None and cfg.http_client == "aiohttp":
        http_client = openai.DefaultAioHttpClient(timeout=cfg.timeout_s)
    return AsyncOpenAI(
        base_url=cfg.base_url,
        api_key=cfg.api_key(),
        timeout=cfg.timeout_s,
        max_retries=0,
        http_client=http_client,
    )


def is_transport_error(exc: BaseException) -> bool:
    """True for failures where the endpoint never gave an answer worth keeping."""
    if isinstance(exc, openai.APIConnectionError | openai.APITimeoutError | openai.RateLimitError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 408 or exc.status_code == 409 or exc.status_code >= 500
    return False


def describe_error(exc: BaseException) -> str:
    """``"ErrorClass: message"`` for records and messages, naming what really happened.

    The openai SDK's aiohttp transport maps every aiohttp connection error to a connect
    *timeout*, so a reset connection would be recorded as "Request timed out"; the original
    aiohttp error is the chained cause, and a non-timeout one is named a connection error here.
    """
    root: BaseException = exc
    while root.__cause__ is not None:
        root = root.__cause__
    if isinstance(exc, openai.APITimeoutError) and isinstance(root, aiohttp.ClientConnectionError) \
            and not isinstance(root, asyncio.TimeoutError):
        return f"APIConnectionError: connection error ({type(root).__name__}: {root})"
    return f"{type(exc).__name__}: {exc}"


def retry_after_seconds(exc: BaseException) -> float | None:
    """The server's ``Retry-After`` (seconds form) when the error, or what it wraps, carries a
    response: instructor wraps the openai error, whose response has the header."""
    seen: BaseException | None = exc
    response = None
    while seen is not None and response is None:
        response = getattr(seen, "response", None)
        seen = seen.__cause__ or seen.__context__
    if response is None:
        return None
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


class _RetryAfterOrJitter:
    """Wait what the server asked for, else full-jitter exponential backoff (capped)."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.initial, self.maximum = initial, maximum

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_seconds(exc) if exc else None
        if asked is not None:
            return min(asked, self.maximum)
        ceiling = min(self.maximum, self.initial * (2 ** (state.attempt_number - 1)))
        return random.uniform(ceiling / 2, ceiling)


def transport_retrying(cfg: ModelConfig, *, retry: Any = None) -> AsyncRetrying:
    """``async for attempt in transport_retrying(cfg): with attempt: ...``

    ``retry`` overrides which failures are retried (the gateway unwraps instructor's errors).
    """
    return AsyncRetrying(
        retry=retry or retry_if_exception(is_transport_error),
        stop=stop_after_attempt(cfg.max_retries + 1),
        wait=_RetryAfterOrJitter(cfg.backoff_initial_s, cfg.backoff_max_s),
        reraise=True,
    )
