"""The live Semantic Scholar Graph API, reached through the ``semanticscholar`` package (0.12).

Measured pitfalls of that client and what this module does about them (see docs/discovery.md):

* It returns an *empty result* on 502/503 and hides the response (no status, no
  ``Retry-After``). We install :class:`_TransparentRequester`, a subclass of the library's own
  ``ApiRequester`` that sends the very same request but raises :class:`S2RequestError` carrying
  the status and ``Retry-After``; an answer without ``data``, or an empty page that still has a
  continuation token, is also treated as a transient failure.
* Its only retry is on 429 with a 5 s minimum wait. We construct it with ``retry=False`` and
  retry ourselves (tenacity) on 429/5xx/transport errors with configurable waits that honour
  ``Retry-After``.
* It does not URL-encode the query, so bulk syntax (``+``, ``|``, ``&``) is mangled. We pass
  ``quote_plus(query)``.
* Iterating a bulk result silently fetches every page, and the public API neither accepts nor
  exposes a continuation token. We request exactly one page per call, building the same
  parameter string the library builds, and hand the token back for the checkpoint.
* Its constructor calls ``logging.basicConfig``. We snapshot and restore the root logger.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote_plus

import httpx
from semanticscholar import AsyncSemanticScholar
from semanticscholar.ApiRequester import ApiRequester
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from arcticqa.errors import ConfigError, S2RequestError, S2TokenRejected, S2TransientError
from arcticqa.sources.ratelimit import RateLimiter

__all__ = [
    "ServerFilters",
    "RetryPolicy",
    "BulkPage",
    "S2Client",
]

log = logging.getLogger(__name__)

_TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class ServerFilters:
    """Bulk-search filters applied by the server, to cut traffic. Derived from the metadata policy."""

    year: str | None = None  # "1990-2026", "2015-", ...
    publication_types: tuple[str, ...] = ()
    open_access_pdf: bool = False
    fields_of_study: tuple[str, ...] = ()
    sort: str | None = None  # e.g. "paperId:asc"; None keeps the server default

    def as_params(self) -> str:
        params = ""
        if self.sort:
            params += f"&sort={quote_plus(self.sort)}"
        if self.year:
            params += f"&year={quote_plus(self.year)}"
        if self.publication_types:
            params += "&publicationTypes=" + quote_plus(",".join(self.publication_types))
        if self.open_access_pdf:
            params += "&openAccessPdf"
        if self.fields_of_study:
            params += "&fieldsOfStudy=" + quote_plus(",".join(self.fields_of_study))
        return params


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure (tests inject tiny waits)."""

    max_attempts: int = 6
    backoff_initial_s: float = 2.0
    backoff_max_s: float = 60.0
    retry_after_cap_s: float = 300.0  # never sleep longer than this whatever the server says


@dataclass
class BulkPage:
    total: int | None
    token: str | None
    data: list[Any] = field(default_factory=list)


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return str(body.get("error") or body.get("message") or body)[:200]
    return str(body)[:200]


class _TransparentRequester(ApiRequester):  # type: ignore[misc]  # semanticscholar ships no type hints
    """The library's requester with the response kept visible: errors carry status and Retry-After."""

    async def get_data_async(self, url: str, parameters: str, headers: dict[str, str],
                             payload: dict[str, Any] | None = None) -> Any:
        parameters = parameters.lstrip("&")
        method = "POST" if payload else "GET"
        try:
            async with httpx.AsyncClient() as client:
                response = await client.request(method, url, params=parameters, timeout=self.timeout,
                                                headers=headers, json=payload)
        except httpx.TransportError as exc:
            raise S2TransientError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status == 200:
            try:
                return response.json()
            except ValueError as exc:
                raise S2TransientError(f"{method} {url}: HTTP 200 with a body that is not JSON",
                                       status=status) from exc
        message = f"{method} {url}: HTTP {status}: {_error_text(response)}"
        retry_after = _parse_retry_after(response.headers.get("Retry-After"))
        if status in _TRANSIENT_STATUSES:
            raise S2TransientError(message, status=status, retry_after=retry_after)
        raise S2RequestError(message, status=status, retry_after=retry_after)


def _quiet_client(**kwargs: Any) -> AsyncSemanticScholar:
    """Build the library client without letting its ``logging.basicConfig`` touch the root logger."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        return AsyncSemanticScholar(**kwargs)
    finally:
        for handler in list(root.handlers):
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)


class S2Client:
    """One-page-at-a-time access to bulk search and batch lookup, rate-limited and retried."""

    def __init__(self, *, api_url: str | None, api_key: str | None, timeout_s: float,
                 limiter: RateLimiter, retry: RetryPolicy,
                 sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        self._s2 = _quiet_client(timeout=timeout_s, api_key=api_key, api_url=api_url, retry=False)
        self._s2._requester = _TransparentRequester(timeout_s, retry=False)
        self._limiter, self._retry = limiter, retry
        self._sleep = sleep
        self.requests = 0  # attempts sent, including retries (reported in the result)

    @property
    def graph_url(self) -> str:
        return f"{self._s2.api_url}{self._s2.BASE_PATH_GRAPH}"

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return float(min(retry_after, self._retry.retry_after_cap_s))
        backoff = self._retry.backoff_initial_s * 2 ** (state.attempt_number - 1)
        return float(min(backoff, self._retry.backoff_max_s))

    def _before_sleep(self, state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        log.warning("Semantic Scholar request failed (attempt %d/%d), retrying: %s",
                    state.attempt_number, self._retry.max_attempts, exc)

    async def _with_retries(self, call: Callable[[], Awaitable[Any]]) -> Any:
        kwargs: dict[str, Any] = {}
        if self._sleep is not None:
            kwargs["sleep"] = self._sleep
        retrying = AsyncRetrying(stop=stop_after_attempt(self._retry.max_attempts), wait=self._wait,
                                 retry=retry_if_exception_type(S2TransientError), reraise=True,
                                 before_sleep=self._before_sleep, **kwargs)
        async for attempt in retrying:
            with attempt:
                await self._limiter.acquire()
                self.requests += 1
                return await call()
        raise AssertionError("unreachable: tenacity either returns or reraises")

    async def bulk_page(self, query: str, token: str | None, *, fields: Sequence[str],
                        filters: ServerFilters) -> BulkPage:
        """Fetch one bulk-search page (the first when ``token`` is None)."""
        url = f"{self.graph_url}/paper/search/bulk"
        params = f"query={quote_plus(query)}{filters.as_params()}"
        if token is not None:
            params += f"&token={quote_plus(token)}"
        params += "&fields=" + ",".join(fields)

        async def once() -> BulkPage:
            try:
                body = await self._s2._requester.get_data_async(url, params, self._s2.auth_header)
            except S2TransientError:
                raise
            except S2RequestError as exc:
                if exc.status == 400 and token is not None:
                    raise S2TokenRejected(str(exc), status=exc.status) from exc
                if exc.status in (401, 403):
                    raise ConfigError(f"Semantic Scholar refused the request ({exc}); check the "
                                      "API key environment variable") from exc
                raise
            return _bulk_page_from(body, url)

        page: BulkPage = await self._with_retries(once)
        return page

    async def get_papers(self, ids: Sequence[str], *, fields: Sequence[str]) -> list[dict[str, Any]]:
        """Batch lookup (up to 500 ids) through the library's ``get_papers``; unknown ids are dropped."""
        if not ids:
            return []

        async def once() -> list[dict[str, Any]]:
            papers = await self._s2.get_papers(list(ids), fields=list(fields))
            return [dict(p.raw_data) for p in papers]

        result: list[dict[str, Any]] = await self._with_retries(once)
        return result


def _bulk_page_from(body: Any, url: str) -> BulkPage:
    if not isinstance(body, dict) or not isinstance(body.get("data"), list):
        # The library's own requester turns 502/503 into {}: never take "no data" for "no results".
        raise S2TransientError(f"GET {url}: answer has no 'data' list")
    token = body.get("token") or None
    if not body["data"] and token is not None:
        raise S2TransientError(f"GET {url}: empty page with a continuation token")
    total = body.get("total")
    return BulkPage(total=total if isinstance(total, int) else None, token=token, data=body["data"])
