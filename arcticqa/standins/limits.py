"""A model endpoint that enforces a provider's limits: the stand-in a rehearsal builds against.

:class:`LimitedResponder` wraps any responder (:mod:`arcticqa.standins.replies`) of
:class:`~arcticqa.standins.server.FakeOpenAIServer` and answers as a rate-limited provider does:

* **requests per minute** and **tokens per minute**, each a token bucket holding ``burst_s``
  seconds' worth (providers enforce their per-minute limits over short windows). A request the
  buckets cannot take now is refused with **429** and a ``Retry-After`` computed from them: the
  seconds until they can, so a client that honours it is admitted when it comes back (unless
  others took the room meanwhile);
* **tokens** as a provider counts them: the prompt (its characters / 4) and the answer; with
  ``charge = "usage"`` a request is admitted when the bucket holds its prompt and is charged
  prompt + answer, with ``charge = "max_tokens"`` it must find prompt + ``max_tokens`` and is
  charged that (OpenAI's documented rule). A request larger than the bucket is admitted from a
  full one and leaves it in debt, so the long-run rate holds. Answers carry this ``usage``;
* **latency** drawn from a lognormal with the given median and 99th percentile (capped);
* **faults**: a share of 5xx answers and of requests that hang past the client's timeout (the
  connection closes unanswered).

Faults and latencies are drawn per request from ``seed`` and the request's body (and how many
times that body came before), not from arrival order, so a run's faults do not depend on how
its threads interleave. :attr:`LimitedResponder.stats` counts what the endpoint did, and which
request bodies it answered how often: a body answered twice is a call sent twice.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from arcticqa.standins.replies import Fault, Hang, Reply, Responder, Response, role_of

__all__ = ["ServerBucket", "ProviderLimits", "LimiterStats", "LimitedResponder", "prompt_tokens", "body_key",
           "CHARS_PER_TOKEN"]

#: how the stand-in counts a prompt's tokens (the client's estimate uses the same ratio)
CHARS_PER_TOKEN = 4.0
#: z of the 99th percentile of a standard normal
_Z99 = 2.3263478740


class ServerBucket:
    """A thread-safe token bucket on the server's side: ``per_s`` refill, ``capacity`` held.

    :meth:`wait` says how long until ``amount`` could be taken (0: now); :meth:`take` spends it.
    Both are called under the caller's lock (the buckets of one endpoint decide together).
    """

    def __init__(self, per_s: float, capacity: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_s <= 0 or capacity <= 0:
            raise ValueError("a bucket needs a positive rate and capacity")
        self.rate, self.capacity, self._clock = per_s, capacity, clock
        self.level = capacity
        self._updated = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._updated) * self.rate)
        self._updated = now

    def wait(self, amount: float) -> float:
        """Seconds until ``amount`` (at most a full bucket: larger amounts go into debt) fits."""
        self._refill()
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount


@dataclass(frozen=True)
class ProviderLimits:
    """What the limited endpoint enforces and how it behaves (every field optional)."""

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    #: seconds' worth each bucket holds (the window a provider enforces its limit over)
    burst_s: float = 1.0
    charge: Literal["usage", "max_tokens"] = "usage"
    #: the answer ceiling assumed when a request names none (``charge = "max_tokens"``)
    default_max_tokens: int = 4096
    #: lognormal latency: median and 99th percentile in seconds (None: the median, no spread)
    latency_median_s: float = 0.0
    latency_p99_s: float | None = None
    #: no latency above this (keep it under the client's timeout, or slow answers become timeouts)
    latency_cap_s: float | None = None
    #: shares of admitted requests answered 5xx, or left hanging for ``hang_s`` then dropped
    error_rate: float = 0.0
    timeout_rate: float = 0.0
    hang_s: float = 30.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.latency_p99_s is not None and self.latency_p99_s < self.latency_median_s:
            raise ValueError("latency_p99_s is below latency_median_s")
        if not 0 <= self.error_rate + self.timeout_rate <= 1:
            raise ValueError("error_rate + timeout_rate must lie in [0, 1]")

    @property
    def sigma(self) -> float:
        """The lognormal's sigma that puts the 99th percentile at ``latency_p99_s``."""
        if self.latency_p99_s is None or self.latency_median_s <= 0:
            return 0.0
        return math.log(self.latency_p99_s / self.latency_median_s) / _Z99


@dataclass
class LimiterStats:
    """What the endpoint did (read after the run; counters only grow)."""

    received: int = 0
    refused_rpm: int = 0  # 429s because of the request bucket (both empty: counted here)
    refused_tpm: int = 0
    errors: int = 0  # injected 5xx
    timeouts: int = 0  # injected hangs
    answered: int = 0  # 200s (the inner responder's faults are not)
    inner_faults: int = 0
    #: tokens charged to the TPM bucket (what its floor is computed from), and the usage reported
    tokens_charged: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0  # summed over answered requests
    first_at: float | None = None
    last_at: float | None = None  # when the last answer was decided (its latency still to come)
    #: body hash → times answered 200; by role
    bodies: Counter[str] = field(default_factory=Counter)
    by_role: Counter[str] = field(default_factory=Counter)

    @property
    def refused(self) -> int:
        return self.refused_rpm + self.refused_tpm

    @property
    def answered_twice(self) -> int:
        """Request bodies answered more than once (each extra answer is a call sent twice)."""
        return sum(n - 1 for n in self.bodies.values() if n > 1)

    def summary(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("bodies", "by_role")}
        out.update(refused=self.refused, distinct_answered=len(self.bodies), answered_twice=self.answered_twice,
                   by_role=dict(self.by_role))
        return out


def prompt_tokens(body: Mapping[str, Any]) -> int:
    """A request's prompt in tokens, as the stand-in counts it: its messages' characters / 4."""
    chars = 0
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        chars += len(content) if isinstance(content, str) else len(json.dumps(content or ""))
    return max(1, int(chars / CHARS_PER_TOKEN))


#: request fields that say how the answer is kept, not what is asked: a request sent again
#: under another ``metadata`` name is the same request
_NOT_THE_QUESTION = ("store", "metadata")


def body_key(body: Mapping[str, Any]) -> str:
    """What makes two requests the same request (their bodies, less ``store`` and ``metadata``)."""
    asked = {k: v for k, v in body.items() if k not in _NOT_THE_QUESTION}
    return hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class LimitedResponder:
    """``FakeOpenAIServer(LimitedResponder(inner, ProviderLimits(...)))``: see the module doc.

    ``clock`` drives the buckets (tests pass a fake one). Latency is served by the server as a
    :class:`Hang` before the answer, so leave the server's own ``latency`` at 0.
    """

    def __init__(self, inner: Responder, limits: ProviderLimits, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner, self.limits, self._clock = inner, limits, clock
        burst = limits.burst_s

        def bucket(per_minute: float | None) -> ServerBucket | None:
            if not per_minute:
                return None
            per_s = per_minute / 60.0
            return ServerBucket(per_s, max(1.0, per_s * burst), clock)

        self.requests = bucket(limits.requests_per_minute)
        self.tokens = bucket(limits.tokens_per_minute)
        self.stats = LimiterStats()
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()  # body hash → times received (drives the fault draws)

    def _rng(self, key: str) -> random.Random:
        with self._lock:
            self._seen[key] += 1
            nth = self._seen[key]
        return random.Random(f"{self.limits.seed}:{key}:{nth}")

    def _latency(self, rng: random.Random) -> float:
        limits = self.limits
        if limits.latency_median_s <= 0:
            return 0.0
        value = limits.latency_median_s * math.exp(limits.sigma * rng.gauss(0.0, 1.0))
        return min(value, limits.latency_cap_s) if limits.latency_cap_s is not None else value

    def _admit(self, prompt: int, reserve: int) -> Fault | None:
        """Take the request and its admission tokens from the buckets, or the 429 saying when."""
        with self._lock:
            self.stats.received += 1
            wait_r = self.requests.wait(1) if self.requests is not None else 0.0
            wait_t = self.tokens.wait(reserve) if self.tokens is not None else 0.0
            if wait_r > 0 or wait_t > 0:
                if wait_r >= wait_t:
                    self.stats.refused_rpm += 1
                else:
                    self.stats.refused_tpm += 1
                # rounded up to the millisecond, so the client never comes back a moment too early
                retry_after = math.ceil(max(wait_r, wait_t) * 1000) / 1000
                return Fault(429, retry_after=retry_after, body=json.dumps({"error": {
                    "message": f"Rate limit reached ({'requests' if wait_r >= wait_t else 'tokens'} per "
                               f"minute); try again in {retry_after:g}s", "type": "requests",
                    "code": "rate_limit_exceeded"}}))
            if self.requests is not None:
                self.requests.take(1)
            charged = reserve if self.limits.charge == "max_tokens" else prompt
            if self.tokens is not None:
                self.tokens.take(charged)
            self.stats.tokens_charged += charged
            now = self._clock()
            self.stats.first_at = now if self.stats.first_at is None else self.stats.first_at
            return None

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        limits = self.limits
        prompt = prompt_tokens(body)
        ceiling = body.get("max_tokens") or body.get("max_completion_tokens") or limits.default_max_tokens
        refusal = self._admit(prompt, prompt + int(ceiling) if limits.charge == "max_tokens" else prompt)
        if refusal is not None:
            return refusal
        key = body_key(body)
        rng = self._rng(key)
        draw, latency = rng.random(), self._latency(rng)
        if draw < limits.timeout_rate:
            with self._lock:
                self.stats.timeouts += 1
            return Hang(limits.hang_s)
        if draw < limits.timeout_rate + limits.error_rate:
            with self._lock:
                self.stats.errors += 1
            status = (500, 502, 503)[int(rng.random() * 3)]
            fault = Fault(status, body='{"error": {"message": "injected server error", "type": "server_error"}}')
            return Hang(latency, fault) if latency > 0 else fault
        response = self.inner(body, headers)
        if not isinstance(response, Reply):
            with self._lock:
                self.stats.inner_faults += 1
            return response
        completion = max(1, int(len(response.content or "") / CHARS_PER_TOKEN))
        response = dataclasses.replace(response, prompt_tokens=prompt, completion_tokens=completion)
        with self._lock:
            if limits.charge == "usage":
                if self.tokens is not None:
                    self.tokens.take(completion)
                self.stats.tokens_charged += completion
            stats = self.stats
            stats.answered += 1
            stats.prompt_tokens += prompt
            stats.completion_tokens += completion
            stats.latency_s += latency
            stats.last_at = self._clock()
            stats.bodies[key] += 1
            stats.by_role[role_of(headers) or "?"] += 1
        return Hang(latency, response) if latency > 0 else response
