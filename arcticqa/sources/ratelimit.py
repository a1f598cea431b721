"""A minimal async client-side rate limiter: at most ``rate`` request starts per second.

Semantic Scholar's limits are per key (or per IP pool without one) and are stated as requests per
second, so a start-spacing limiter is all that is needed; no token bucket bursts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["RateLimiter"]


class RateLimiter:
    """Spaces successive :meth:`acquire` returns at least ``1/rate`` seconds apart."""

    def __init__(self, rate_per_s: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be positive")
        self.interval = 1.0 / rate_per_s
        self._clock, self._sleep = clock, sleep
        self._next_start: float | None = None
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            now = self._clock()
            if self._next_start is not None and now < self._next_start:
                await self._sleep(self._next_start - now)
                now = self._clock()
            self._next_start = now + self.interval
