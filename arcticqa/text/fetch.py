"""Polite, bounded PDF downloads into a content-addressed cache.

One download: redirects are followed by hand (at most ``max_redirects``, every hop's scheme
checked against the policy), the body is streamed to a temporary file while it is hashed and
counted, and is given up as soon as it is over the size cap (``Content-Length`` is checked
first, so an honest oversize server is refused before any body byte is read) or its first
bytes are not ``%PDF-``. 429 and 5xx answers are retried with exponential backoff, honouring
``Retry-After`` up to the backoff ceiling. A whole-download deadline bounds slow servers that
trickle bytes just fast enough to dodge the read timeout. At most ``per_host_concurrency``
downloads run against one host at a time.

The cache is ``<cache_dir>/<sha256>.pdf`` (callers pass ``<data_dir>/pdf``), written with a
temporary file and ``os.replace``: a reader never sees half a PDF.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tempfile
import weakref
from pathlib import Path
from typing import Literal

import httpx
from pydantic import BaseModel

from arcticqa.config import FetchPolicy
from arcticqa.errors import InputError

__all__ = [
    "FetchStatus",
    "FetchResult",
    "HostLimiter",
    "download_pdf",
    "store_pdf_bytes",
    "store_pdf_file",
    "pdf_cache_dir",
    "cached_pdf_path",
    "is_redistributable",
]

FetchStatus = Literal["ok", "no_url", "http_error", "not_pdf", "too_large", "timeout", "license_blocked"]

_PDF_MAGIC = b"%PDF-"
_MAGIC_WINDOW = 1024
_REDIRECTS = {301, 302, 303, 307, 308}


class FetchResult(BaseModel):
    """What one paper's acquisition produced; the store records all of it."""

    status: FetchStatus
    url: str | None = None
    final_url: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    license: str | None = None
    path: str | None = None
    message: str | None = None
    http_status: int | None = None
    attempts: int = 0


def _timeout(policy: FetchPolicy) -> httpx.Timeout:
    return httpx.Timeout(policy.read_timeout_s, connect=policy.connect_timeout_s)


def pdf_cache_dir(data_dir: Path) -> Path:
    """The content-addressed PDF cache under the configured data directory."""
    return Path(data_dir) / "pdf"


_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def cached_pdf_path(cache_dir: Path, sha: str) -> Path:
    """``<cache_dir>/<sha>.pdf``; anything but 64 lowercase hex digits is refused, so a name
    from elsewhere (a stored row, a map) can never point outside the cache."""
    if not isinstance(sha, str) or not _SHA256.match(sha):
        raise InputError(f"not a SHA-256 hex digest: {str(sha)[:80]!r}", path=str(cache_dir))
    return Path(cache_dir) / f"{sha}.pdf"


def is_redistributable(license_name: str | None, policy: FetchPolicy) -> bool:
    if not license_name:
        return False
    key = re.sub(r"[\s_\-]+", "", license_name).lower()
    return key in {re.sub(r"[\s_\-]+", "", n).lower() for n in policy.redistributable_licenses}


class HostLimiter:
    """Per-host semaphores (one set per event loop, so tests with fresh loops stay independent)."""

    def __init__(self, per_host: int) -> None:
        self.per_host = per_host
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary())

    def for_host(self, host: str) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        per_loop = self._semaphores.setdefault(loop, {})
        if host not in per_loop:
            per_loop[host] = asyncio.Semaphore(self.per_host)
        return per_loop[host]


_LIMITERS: dict[int, HostLimiter] = {}


def _default_limiter(per_host: int) -> HostLimiter:
    return _LIMITERS.setdefault(per_host, HostLimiter(per_host))


def _store_temp(tmp: Path, sha: str, cache_dir: Path) -> Path:
    target = cached_pdf_path(cache_dir, sha)
    if target.exists():
        tmp.unlink(missing_ok=True)
    else:
        os.replace(tmp, target)
    return target


def store_pdf_bytes(data: bytes, cache_dir: Path) -> tuple[str, Path]:
    """Put PDF bytes into the cache (atomically); returns ``(sha256, path)``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    sha = hashlib.sha256(data).hexdigest()
    fd, name = tempfile.mkstemp(prefix=".incoming-", suffix=".pdf", dir=cache_dir)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return sha, _store_temp(Path(name), sha, cache_dir)


def store_pdf_file(source: Path, cache_dir: Path) -> tuple[str, int, Path]:
    """Hash and copy a local PDF into the cache; returns ``(sha256, bytes, path)``."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, name = tempfile.mkstemp(prefix=".incoming-", suffix=".pdf", dir=cache_dir)
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            while block := src.read(1 << 20):
                digest.update(block)
                size += len(block)
                out.write(block)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    sha = digest.hexdigest()
    return sha, size, _store_temp(Path(name), sha, cache_dir)


class _Outcome(Exception):
    """Internal: ends one download attempt with a final result."""

    def __init__(self, result: FetchResult) -> None:
        super().__init__(result.status)
        self.result = result


def _retry_after(response: httpx.Response, default: float, ceiling: float) -> float:
    value = response.headers.get("Retry-After", "")
    try:
        return min(max(float(value), 0.0), ceiling)
    except ValueError:
        return min(default, ceiling)


async def _attempt(url: str, *, client: httpx.AsyncClient, cache_dir: Path,
                   policy: FetchPolicy) -> FetchResult:
    """One download: follow redirects, stream, check, store. Raises _Retry for 429/5xx."""
    current = httpx.URL(url)
    for _hop in range(policy.max_redirects + 1):
        if current.scheme not in (("https",) if policy.require_https else ("https", "http")):
            return FetchResult(status="http_error", url=url, final_url=str(current),
                               message=f"refused non-HTTPS URL {current}")
        async with client.stream("GET", current, headers=policy.headers(), timeout=_timeout(policy),
                                 follow_redirects=False) as response:
            if response.status_code in _REDIRECTS and "Location" in response.headers:
                current = current.join(response.headers["Location"])
                continue
            if response.status_code == 429 or response.status_code >= 500:
                raise _Retry(response.status_code,
                             _retry_after(response, 0.0, policy.backoff_max_s), str(current))
            if response.status_code != 200:
                return FetchResult(status="http_error", url=url, final_url=str(current),
                                   http_status=response.status_code,
                                   message=f"HTTP {response.status_code} {response.reason_phrase}")
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > policy.max_bytes:
                return FetchResult(status="too_large", url=url, final_url=str(current), http_status=200,
                                   bytes=int(declared),
                                   message=f"Content-Length {declared} exceeds {policy.max_bytes} bytes")
            return await _stream_body(response, url=url, final_url=str(current),
                                      cache_dir=cache_dir, policy=policy)
    return FetchResult(status="http_error", url=url, final_url=str(current),
                       message=f"more than {policy.max_redirects} redirects")


class _Retry(Exception):
    def __init__(self, status: int, wait: float, final_url: str) -> None:
        super().__init__(status)
        self.status, self.wait, self.final_url = status, wait, final_url


async def _stream_body(response: httpx.Response, *, url: str, final_url: str, cache_dir: Path,
                       policy: FetchPolicy) -> FetchResult:
    cache_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    head = b""
    fd, name = tempfile.mkstemp(prefix=".incoming-", suffix=".pdf", dir=cache_dir)
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            async for block in response.aiter_bytes():
                size += len(block)
                if size > policy.max_bytes:
                    raise _Outcome(FetchResult(status="too_large", url=url, final_url=final_url,
                                               http_status=200, bytes=size,
                                               message=f"body exceeds {policy.max_bytes} bytes; "
                                                       f"stopped after {size}"))
                if len(head) < _MAGIC_WINDOW:
                    head += block[:_MAGIC_WINDOW - len(head)]
                    if len(head) >= len(_PDF_MAGIC) and _PDF_MAGIC not in head and (
                            len(head) >= _MAGIC_WINDOW or not _could_still_be_pdf(head)):
                        raise _Outcome(_not_pdf(url, final_url, head, response))
                digest.update(block)
                out.write(block)
        if _PDF_MAGIC not in head:
            raise _Outcome(_not_pdf(url, final_url, head, response))
    except _Outcome as outcome:
        tmp.unlink(missing_ok=True)
        return outcome.result
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sha = digest.hexdigest()
    path = _store_temp(tmp, sha, cache_dir)
    return FetchResult(status="ok", url=url, final_url=final_url, http_status=200, sha256=sha,
                       bytes=size, path=str(path))


def _could_still_be_pdf(head: bytes) -> bool:
    # the magic may follow some leading whitespace or junk inside the first KiB
    return not head.lstrip()[:1] == b"<"


def _not_pdf(url: str, final_url: str, head: bytes, response: httpx.Response) -> FetchResult:
    kind = response.headers.get("Content-Type", "unknown type")
    sample = head[:40].decode("latin-1", "replace").replace("\n", " ")
    return FetchResult(status="not_pdf", url=url, final_url=final_url, http_status=200,
                       message=f"not a PDF ({kind}); starts with {sample!r}")


async def download_pdf(url: str, *, client: httpx.AsyncClient, cache_dir: Path, policy: FetchPolicy,
                       limiter: HostLimiter | None = None) -> FetchResult:
    """Download one URL into the cache with the policy's limits; never raises for HTTP trouble."""
    limiter = limiter or _default_limiter(policy.per_host_concurrency)
    host = httpx.URL(url).host or "?"
    attempts = 0
    last: FetchResult | None = None
    while True:
        attempts += 1
        try:
            async with limiter.for_host(host):
                async with asyncio.timeout(policy.total_timeout_s):
                    result = await _attempt(url, client=client, cache_dir=cache_dir, policy=policy)
            result.attempts = attempts
            return result
        except _Retry as retry:
            last = FetchResult(status="http_error", url=url, final_url=retry.final_url,
                               http_status=retry.status, attempts=attempts,
                               message=f"HTTP {retry.status} after {attempts} attempts")
            if attempts > policy.max_retries:
                return last
            backoff = min(policy.backoff_base_s * 2 ** (attempts - 1), policy.backoff_max_s)
            await asyncio.sleep(max(backoff, retry.wait))
        except (TimeoutError, httpx.TimeoutException) as exc:
            return FetchResult(status="timeout", url=url, attempts=attempts,
                               message=f"{type(exc).__name__}: {exc}" if str(exc)
                               else f"no complete answer within {policy.total_timeout_s}s")
        except httpx.InvalidURL as exc:
            return FetchResult(status="http_error", url=url, attempts=attempts, message=f"invalid URL: {exc}")
        except httpx.HTTPError as exc:
            return FetchResult(status="http_error", url=url, attempts=attempts,
                               message=f"{type(exc).__name__}: {exc}")
