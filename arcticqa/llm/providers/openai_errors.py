"""Where the openai SDK's exceptions become :mod:`arcticqa.errors` classes: the one boundary.

Which failures mean "no answer came back" (retried by the transport loop), what the server
asked us to wait, how a failure is described in records (naming what really happened), and
:func:`map_openai_errors`, which turns whatever the SDK or instructor raised into the named
error the runner records and the CLI reports.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence

import aiohttp
import openai
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException

from arcticqa.errors import (
    ArcticQAError,
    LLMAuthError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMTransportError,
)
from arcticqa.llm.providers.base import Attempt

__all__ = ["is_transport_error", "transport_cause", "retry_after_seconds", "describe_error",
           "map_openai_error", "map_openai_errors", "is_safeguard_refusal"]


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


def transport_cause(exc: BaseException) -> BaseException | None:
    """instructor wraps API errors in InstructorRetryException; find the transport error."""
    seen: BaseException | None = exc
    while seen is not None:
        if is_transport_error(seen):
            return seen
        seen = seen.__cause__
    return None


def _status_cause(exc: BaseException) -> openai.APIStatusError | None:
    """The HTTP error status inside ``exc`` (instructor wraps a 401 as if validation failed)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, openai.APIStatusError):
            return seen
        seen = seen.__cause__
    return None


def map_openai_error(exc: BaseException, *, role: str, model: str,
                     attempts: Sequence[Attempt] = ()) -> LLMError:
    """The named error for a failed call: openai and instructor exceptions in, ours out.

    No answer (connection, timeout, 429, 408/409/5xx after retries) is :class:`LLMTransportError`;
    a refusal, a truncated or an invalid answer :class:`LLMOutputError` (a refusal or a truncation
    counted over ``attempts``: how many times the model was asked before it stands); refused credentials
    (401/403) :class:`LLMAuthError`; any other refused request (400/404/422)
    :class:`LLMRequestError`.
    """
    if isinstance(exc, LLMError):
        return exc
    if isinstance(exc, IncompleteOutputException):
        truncated = [a for a in attempts if a.truncated]
        if not truncated:
            return LLMOutputError(f"{role}: output truncated (finish_reason=length): {exc}")
        sizes = " then ".join(str((a.request or {}).get("max_tokens", "?")) for a in truncated)
        return LLMOutputError(f"{role}: output truncated (finish_reason=length) {_times(len(truncated))}, at "
                              f"max_tokens {sizes} (re-asks bounded by max_length_reasks and max_tokens_ceiling): "
                              f"{exc}")
    cause = transport_cause(exc)
    if attempts and attempts[-1].refusal:  # the last answer refused: earlier ones may have too
        refused = sum(1 for a in attempts if a.refusal)
        return LLMOutputError(f"{role}: the model refused to answer {_times(refused)} "
                              f"(re-asks bounded by max_refusal_reasks): {attempts[-1].refusal[:300]}")
    if cause is not None:
        return LLMTransportError(f"{role}: no answer from {model} after "
                                 f"{len(attempts)} attempts: {describe_error(cause)}")
    status = _status_cause(exc)
    if status is not None:
        named = LLMAuthError if status.status_code in (401, 403) else LLMRequestError
        return named(f"{role}: HTTP {status.status_code} from {model}: {status.message}")
    if isinstance(exc, InstructorRetryException):
        return LLMOutputError(f"{role}: output failed validation after "
                              f"{exc.n_attempts} attempts: {str(exc)[:500]}")
    return LLMError(f"{role}: {type(exc).__name__}: {exc}")


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


@contextlib.contextmanager
def map_openai_errors(role: str, model: str, attempts: Sequence[Attempt] = ()) -> Iterator[None]:
    """``with map_openai_errors(role, model, attempts): ...`` raises only our named errors.

    Our own errors (a budget cap reached between attempts, a missing key) pass unchanged.
    """
    try:
        yield
    except ArcticQAError:
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure leaves as a named error
        raise map_openai_error(exc, role=role, model=model, attempts=attempts) from exc


def is_safeguard_refusal(exc: BaseException) -> bool:
    """A provider safeguard answered with a 400/403 that names its policy (the evaluator
    records it as a refusal, not as an infrastructure failure)."""
    return not is_transport_error(exc) and isinstance(
        exc, openai.BadRequestError | openai.PermissionDeniedError) and \
        any(w in str(exc).lower() for w in ("safety", "policy", "content_filter"))
