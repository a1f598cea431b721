"""Client-side limits for model endpoints: token buckets and per-endpoint concurrency.

Providers limit requests per minute (RPM) and tokens per minute (TPM); exceeding either earns
429s, each of which costs a Retry-After wait. The gateway spends from a :class:`TokenBucket`
before every request so that a build paces itself instead. Buckets hold one second's worth of
budget (not a minute's): a full minute's burst would be sent at once and then be refused by a
provider that enforces its limit over shorter windows, which most do.

A request may cost more tokens than the bucket holds (a long prompt plus ``max_tokens``); it is
let through once the bucket is full and leaves it in debt, so the long-run rate still holds.
Token costs are estimated before the call and corrected with the usage the provider reports.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from arcticqa.config import ModelConfig

__all__ = ["TokenBucket", "ModelLimiter", "estimate_tokens", "endpoint_key", "CHARS_PER_TOKEN"]

#: a rough, provider-independent ratio; the estimate is corrected with reported usage anyway
CHARS_PER_TOKEN = 4.0


class TokenBucket:
    """A token bucket refilled at ``rate_per_s`` up to ``capacity``; waiters are served in order.

    ``clock`` and ``sleep`` are injectable so tests can drive time without waiting.
    """

    def __init__(self, rate_per_s: float, capacity: float, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rate_per_s <= 0 or capacity <= 0:
            raise ValueError("a token bucket needs a positive rate and capacity")
        self.rate, self.capacity = rate_per_s, capacity
        self._clock, self._sleep = clock, sleep
        self.level = capacity
        self._updated = clock()
        # asyncio.Lock wakes waiters first-come first-served: a large request is not starved
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    async def take(self, amount: float) -> float:
        """Wait until ``amount`` may be spent, spend it, and return the seconds waited."""
        waited = 0.0
        async with self._lock:
            while True:
                self._refill()
                need = min(amount, self.capacity)  # larger requests go into debt from a full bucket
                if self.level >= need:
                    self.level -= amount
                    return waited
                delay = (need - self.level) / self.rate
                waited += delay
                await self._sleep(delay)

    def adjust(self, amount: float) -> None:
        """Charge (positive) or refund (negative) after the fact, e.g. with the actual usage."""
        self._refill()
        self.level = min(self.capacity, self.level - amount)


@dataclass
class ModelLimiter:
    """The RPM and TPM buckets of one model config (either may be absent)."""

    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None

    @classmethod
    def for_config(cls, cfg: ModelConfig) -> ModelLimiter:
        def bucket(per_minute: float | None) -> TokenBucket | None:
            if not per_minute:
                return None
            per_s = per_minute / 60.0
            return TokenBucket(per_s, max(1.0, per_s))

        return cls(requests=bucket(cfg.requests_per_minute), tokens=bucket(cfg.tokens_per_minute))

    @property
    def active(self) -> bool:
        return self.requests is not None or self.tokens is not None

    async def acquire(self, estimated_tokens: int) -> float:
        """Spend one request and the estimated tokens; returns the seconds waited."""
        waited = 0.0
        if self.requests is not None:
            waited += await self.requests.take(1)
        if self.tokens is not None:
            waited += await self.tokens.take(estimated_tokens)
        return waited

    def settle(self, estimated_tokens: int, actual_tokens: int | None, extra_requests: int = 0) -> None:
        """Correct the buckets once the provider said what the call really cost.

        ``actual_tokens`` None (no usage reported, e.g. a failed request) keeps the estimate;
        ``extra_requests`` charges validation re-asks, which are requests of their own.
        """
        if self.tokens is not None and actual_tokens is not None:
            self.tokens.adjust(actual_tokens - estimated_tokens)
        if self.requests is not None and extra_requests:
            self.requests.adjust(extra_requests)


def estimate_tokens(messages: list[dict[str, str]], max_tokens: int) -> int:
    """What a request may cost before it is sent: its prompt (by length) plus the answer ceiling."""
    chars = sum(len(m.get("content") or "") for m in messages)
    return int(chars / CHARS_PER_TOKEN) + max_tokens


def endpoint_key(cfg: ModelConfig) -> str:
    """The endpoint a config talks to (``None`` base_url means the provider's default)."""
    return (cfg.base_url or "https://api.openai.com/v1").rstrip("/")
