"""The LLM gateway: the one place arcticqa talks to models for the build pipeline.

``Gateway.ask(role, prompt, variables, ResponseModel)`` resolves the role's model config,
renders the versioned prompt file, answers from the cache when the same request was answered
before, otherwise asks the config's provider (:mod:`arcticqa.llm.providers`: ``openai`` or
``offline``) through tenacity transport retries honouring Retry-After, enforces the run's and
the current paper's budget caps, and hands every attempt to a :class:`CallRecorder` (the store)
as ``llm_call`` rows. The gateway knows providers only through their base class.

Pacing, in the order a call meets it: the model config's ``max_concurrency`` (held for the whole
call, retries included), then per attempt its token buckets (``requests_per_minute``,
``tokens_per_minute``; :mod:`arcticqa.llm.ratelimit`), then the endpoint's
``endpoint_max_concurrency`` shared by every config with the same ``base_url`` (held only while
a request is in flight, so one model's backoff or pacing never idles another's slots).

A model config with ``recover_in_flight`` and a recorder that is also a :class:`SendJournal`
(the store, in a build) sends each request with ``store: true`` and metadata naming it, after
writing that it is sent. A request that some other process wrote as sent, and whose answer is
not stored, is first looked up among the provider's stored completions (``Provider.recover``),
polling until ``timeout_s`` after its newest send, and is sent only if none turns up.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel
from tenacity import AsyncRetrying

from arcticqa.config import ModelConfig, Settings
from arcticqa.errors import BudgetExceeded, ConfigError, LLMError, StoredLookupUnavailable
from arcticqa.llm.batch import BatchLedger, MemoryLedger
from arcticqa.llm.prompts import load_prompt, to_jsonable
from arcticqa.llm.providers import open_provider
from arcticqa.llm.providers.base import Attempt, GenerateRequest, Provider, retrying
from arcticqa.llm.providers.offline import OfflineRole
from arcticqa.llm.ratelimit import ModelLimiter, endpoint_key, estimate_tokens
from arcticqa.llm.types import OutputT, RoleReply

__all__ = ["CallRecord", "CallRecorder", "Budget", "Gateway", "MemoryRecorder", "SendJournal", "SentMark",
           "paper_scope", "current_paper"]

_log = logging.getLogger(__name__)
#: seconds between look-ups of a request another process sent and may still be waiting for
RECOVERY_POLL_S = 1.0

@dataclass
class CallRecord:
    """One attempt (or cache hit) of one role call: what the store keeps as an ``llm_call`` row."""

    role: str
    provider: str
    model: str
    prompt_version: str
    request_hash: str
    attempt: int
    request: dict[str, Any]
    raw_response: dict[str, Any] | None = None
    parsed: dict[str, Any] | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cache_hit: bool = False
    error: str | None = None
    subject: str | None = None


class CallRecorder(Protocol):
    def cached_output(self, request_hash: str) -> dict[str, Any] | None: ...

    def record_calls(self, records: list[CallRecord]) -> None: ...


@dataclass(frozen=True)
class SentMark:
    """A request about to be sent with ``store: true``: by whom and when (epoch seconds)."""

    request_hash: str
    send_id: str
    worker: str
    run_id: str | None
    sent_at: float


@runtime_checkable
class SendJournal(Protocol):
    """Where a recorder keeps which requests were sent (``recover_in_flight``): written before
    each send, read before asking a request again."""

    def mark_sent(self, mark: SentMark) -> None: ...

    def sent_marks(self, request_hash: str) -> list[SentMark]: ...

    def stored_output(self, request_hash: str) -> dict[str, Any] | None:
        """The stored answer to this request, whoever wrote it and whenever (no cached view)."""
        ...


class MemoryRecorder:
    """An in-memory recorder (no store): used by one-off commands and unit tests."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def cached_output(self, request_hash: str) -> dict[str, Any] | None:
        for r in reversed(self.records):
            if r.request_hash == request_hash and r.parsed is not None:
                return r.parsed
        return None

    def record_calls(self, records: list[CallRecord]) -> None:
        self.records.extend(records)


_paper: contextvars.ContextVar[str | None] = contextvars.ContextVar("arcticqa_paper", default=None)


@contextlib.contextmanager
def paper_scope(paper_id: str | None) -> Iterator[None]:
    """Charge the model calls made inside (this task and tasks it starts) to ``paper_id``.

    The runner opens one around each paper's stage, so the per-paper cap applies without the
    stages passing paper ids to the gateway.
    """
    token = _paper.set(paper_id)
    try:
        yield
    finally:
        _paper.reset(token)


def current_paper() -> str | None:
    return _paper.get()


@dataclass
class Budget:
    """Spending caps: per run and per paper. Checked before each paid call; in-flight calls may
    overshoot by at most one call per concurrent slot, which is why a cap stops *new* calls only.

    A run cap raises :class:`BudgetExceeded` with ``scope = "run"`` (the build stops starting
    work); a paper cap raises it with ``scope = "paper"`` (only that paper's stage fails).
    """

    cap_usd: float | None = None
    per_paper_cap_usd: float | None = None
    spent_usd: float = 0.0
    paper_spent_usd: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of_build(cls, settings: Settings) -> Budget:
        """The caps ``settings.build`` sets, nothing spent yet."""
        return cls(settings.build.budget_usd, settings.build.budget_per_paper_usd)

    def check(self, paper_id: str | None = None) -> None:
        if self.cap_usd is not None and self.spent_usd >= self.cap_usd:
            exc = BudgetExceeded(f"budget cap of USD {self.cap_usd:.2f} reached "
                                 f"(spent USD {self.spent_usd:.4f}); no new model calls are started")
            exc.scope = "run"  # type: ignore[attr-defined]
            raise exc
        if self.per_paper_cap_usd is not None and paper_id is not None:
            spent = self.paper_spent_usd.get(paper_id, 0.0)
            if spent >= self.per_paper_cap_usd:
                exc = BudgetExceeded(f"per-paper budget cap of USD {self.per_paper_cap_usd:.4f} reached for "
                                     f"paper {paper_id} (spent USD {spent:.4f}); no new model calls for it")
                exc.scope = "paper"  # type: ignore[attr-defined]
                raise exc

    def add(self, cost: float, paper_id: str | None = None) -> None:
        self.spent_usd += cost
        if paper_id is not None:
            self.paper_spent_usd[paper_id] = self.paper_spent_usd.get(paper_id, 0.0) + cost


@dataclass(frozen=True)
class _CallBase:
    """What every record of one role call shares."""

    role: str
    provider: str
    model: str
    prompt_version: str
    request_hash: str
    subject: str | None

    def record(self, **fields: Any) -> CallRecord:
        return CallRecord(role=self.role, provider=self.provider, model=self.model,
                          prompt_version=self.prompt_version, request_hash=self.request_hash,
                          subject=self.subject, **fields)


_KEYLIKE = re.compile(r"(Bearer\s+)[^\s'\"]+|\bsk-[A-Za-z0-9_\-]{6,}")


def _redact(text: str, secrets: Sequence[str]) -> str:
    """Endpoints quote the caller's key in some error bodies (401s); it must not be stored."""
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub(lambda m: (m.group(1) or "") + "***", text)


@functools.lru_cache(maxsize=256)
def _schema(response_model: type[BaseModel]) -> dict[str, Any]:
    """A response model's JSON schema, built once per class (building it costs ~2 ms a call)."""
    return response_model.model_json_schema()


def _request_hash(provider: str, cfg: ModelConfig, role: str, messages: list[dict[str, str]],
                  schema: dict[str, Any]) -> str:
    payload = {
        "provider": provider, "model": cfg.model, "base_url": cfg.base_url, "role": role,
        "messages": messages, "schema": schema, "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens, "mode": cfg.mode, "extra_body": cfg.extra_body,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class Gateway:
    """Implements :class:`arcticqa.llm.types.RoleClient`. Use as ``async with Gateway(...)``.

    ``offline_roles`` answers roles whose model config says ``provider = "offline"`` (the
    build runner passes :data:`arcticqa.standins.offline.roles.OFFLINE_ROLES`); without it such a
    role is a configuration error.
    """

    def __init__(self, settings: Settings, recorder: CallRecorder | None = None, *,
                 budget: Budget | None = None, ledger: BatchLedger | None = None,
                 run_id: str | None = None, offline_roles: Mapping[str, OfflineRole] | None = None) -> None:
        self.settings = settings
        self.recorder: CallRecorder = recorder or MemoryRecorder()
        self.budget = budget or Budget.of_build(settings)
        #: where Batch API jobs are kept (build ``batch`` mode); the store in a build
        self.ledger: BatchLedger = ledger or MemoryLedger()
        self.run_id = run_id
        self.offline_roles: Mapping[str, OfflineRole] = offline_roles or {}
        self._providers: dict[str, Provider] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._rate: dict[str, ModelLimiter] = {}
        self._endpoints = self._endpoint_limits(settings)
        #: where sends are written before they leave (recover_in_flight); None: nowhere to write them
        self._journal: SendJournal | None = self.recorder if isinstance(self.recorder, SendJournal) else None
        #: this gateway, in the marks it writes: its own in-flight requests are never looked up
        self._worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        #: model configs whose endpoint refused a stored-completion look-up (told once, not asked again)
        self._no_lookup: set[str] = set()

    @staticmethod
    def _endpoint_limits(settings: Settings) -> dict[str, asyncio.Semaphore]:
        """One semaphore per endpoint that any config bounds; the smallest bound wins."""
        bounds: dict[str, int] = {}
        for cfg in settings.models.values():
            if cfg.provider == "openai" and cfg.endpoint_max_concurrency is not None:
                key = endpoint_key(cfg)
                bounds[key] = min(bounds.get(key, cfg.endpoint_max_concurrency), cfg.endpoint_max_concurrency)
        return {key: asyncio.Semaphore(n) for key, n in bounds.items()}

    async def __aenter__(self) -> Gateway:
        for role, name in self.settings.roles.items():
            try:
                cfg = self.settings.model_for(role)
                await self._provider(cfg).warm(name, cfg, batched=self.batched(role, cfg))
            except ConfigError:
                continue  # a missing key or model is reported by the call that needs it
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()

    def batched(self, role: str, cfg: ModelConfig) -> bool:
        """Whether ``role`` goes through the provider's Batch API (arcticqa.llm.batch)."""
        build = self.settings.build
        return build.batch and cfg.provider == "openai" and role in build.batch_roles

    def _provider(self, cfg: ModelConfig) -> Provider:
        if cfg.provider not in self._providers:
            self._providers[cfg.provider] = open_provider(
                cfg.provider, ledger=self.ledger, batch_dir=self.settings.build.data_dir / "batches",
                run_id=self.run_id, offline_roles=self.offline_roles)
        return self._providers[cfg.provider]

    def _limit(self, name: str, cfg: ModelConfig) -> asyncio.Semaphore:
        if name not in self._limits:
            self._limits[name] = asyncio.Semaphore(cfg.max_concurrency)
        return self._limits[name]

    def _rate_limiter(self, name: str, cfg: ModelConfig) -> ModelLimiter:
        if name not in self._rate:
            self._rate[name] = ModelLimiter.for_config(cfg)
        return self._rate[name]

    def _in_flight(self, cfg: ModelConfig) -> contextlib.AbstractAsyncContextManager[Any]:
        sem = self._endpoints.get(endpoint_key(cfg))
        return sem if sem is not None else contextlib.nullcontext()

    async def ask(self, role: str, prompt: str, variables: Mapping[str, Any],
                  response_model: type[OutputT], *, subject: str | None = None) -> RoleReply[OutputT]:
        model_name = self.settings.roles.get(role, "")
        cfg = self.settings.model_for(role)
        template = load_prompt(prompt)
        data = to_jsonable(variables)  # once: the prompt and the request's record both need it
        messages = template.render(data)
        schema = _schema(response_model)
        request_hash = _request_hash(cfg.provider, cfg, role, messages, schema)
        base = _CallBase(role=role, provider=cfg.provider, model=cfg.model,
                         prompt_version=template.version_id, request_hash=request_hash, subject=subject)

        cached = self.recorder.cached_output(request_hash)
        if cached is not None:
            output = response_model.model_validate(cached)
            self.recorder.record_calls([base.record(attempt=0, request={"messages": messages},
                                                   parsed=cached, cache_hit=True)])
            return RoleReply(output=output, role=role, provider=cfg.provider, model=cfg.model,
                             prompt_version=template.version_id, request_hash=request_hash, cached=True)

        provider = self._provider(cfg)
        request = GenerateRequest(role=role, model_name=model_name, cfg=cfg, messages=messages,
                                  variables=data, response_model=response_model,
                                  batched=self.batched(role, cfg))
        if not provider.paced:
            # free and instant: no budget, pacing or retries; a failure is the provider's own error
            attempts: list[Attempt] = []
            answer = await provider.generate(request, attempts)
            self._record_attempts(cfg, provider, attempts, base, answer)
            return RoleReply(output=cast(OutputT, answer), role=role, provider=cfg.provider, model=cfg.model,
                             prompt_version=template.version_id, request_hash=request_hash, cached=False)
        return await self._ask_paced(provider, request, base)

    async def _ask_paced(self, provider: Provider, request: GenerateRequest,
                         base: _CallBase) -> RoleReply[OutputT]:
        cfg, model_name, batch = request.cfg, request.model_name, request.batched
        if cfg.recover_in_flight and not batch and provider.recovers and self._journal is not None:
            recovered = await self._recover(provider, request, base, self._journal)
            if recovered is not None:
                return cast(RoleReply[OutputT], recovered)
            request = dataclasses.replace(request, before_send=self._write_ahead(base, self._journal))
        # a batched request waits in the provider's job queue, not in a connection: the
        # concurrency and rate limits pace live requests only
        limiter = self._rate_limiter(model_name, cfg) if not batch else None
        estimate = estimate_tokens(request.messages, cfg.max_tokens)
        paper = current_paper()
        attempts: list[Attempt] = []
        output: BaseModel | None = None
        failure: LLMError | None = None
        try:
            with provider.errors(base.role, cfg, attempts):
                async with self._limit(model_name, cfg) if not batch else contextlib.nullcontext():
                    self.budget.check(paper)
                    async for attempt in self._retrying(provider, cfg):
                        with attempt:
                            self.budget.check(paper)
                            if limiter is not None and limiter.active:
                                await limiter.acquire(estimate)
                            first = len(attempts)
                            try:
                                async with self._in_flight(cfg) if not batch else contextlib.nullcontext():
                                    output = await provider.generate(request, attempts)
                            finally:
                                if limiter is not None and limiter.active:
                                    _settle(limiter, estimate, attempts[first:])
        except BudgetExceeded:
            raise
        except LLMError as exc:  # the provider's boundary named it; recorded below, re-raised redacted
            failure = exc
        finally:
            self._record_attempts(cfg, provider, attempts, base, output, batch=batch)
        if failure is not None or output is None:
            failure = failure or LLMError(f"{base.role}: no output")
            raise type(failure)(_redact(str(failure), provider.secrets(cfg)))
        cost = sum(self._cost(cfg, a, batch=batch) for a in attempts)
        return RoleReply(output=cast(OutputT, output), role=base.role, provider=cfg.provider, model=cfg.model,
                         prompt_version=base.prompt_version, request_hash=base.request_hash,
                         cached=False, cost_usd=cost)

    def _write_ahead(self, base: _CallBase, journal: SendJournal) -> Callable[[int], dict[str, str]]:
        """The ``before_send`` of one call: each send written to the journal, then named in its metadata."""
        def before_send(attempt: int) -> dict[str, str]:
            send_id = uuid.uuid4().hex
            journal.mark_sent(SentMark(base.request_hash, send_id, self._worker, self.run_id, time.time()))
            return {"arcticqa_request": base.request_hash, "arcticqa_send": send_id, "arcticqa_attempt": str(attempt)}

        return before_send

    async def _recover(self, provider: Provider, request: GenerateRequest, base: _CallBase,
                       journal: SendJournal) -> RoleReply[Any] | None:
        """The answer to a request another process sent and never recorded, without sending it again.

        Only requests written as sent by someone else are looked up (almost every request is new:
        one store read, no look-up). The provider stores a completion once it is finished, so a
        request sent less than ``timeout_s`` ago may still be on its way: it is looked up again every
        :data:`RECOVERY_POLL_S` until then. None: send it.
        """
        cfg = request.cfg
        if request.model_name in self._no_lookup:
            return None
        marks = [m for m in journal.sent_marks(base.request_hash) if m.worker != self._worker]
        if not marks:
            return None
        stored = journal.stored_output(base.request_hash)  # another process wrote the answer since
        if stored is not None:
            self.recorder.record_calls([base.record(attempt=0, request={"messages": request.messages},
                                                   parsed=stored, cache_hit=True)])
            return RoleReply(output=request.response_model.model_validate(stored), role=base.role,
                             provider=cfg.provider, model=cfg.model, prompt_version=base.prompt_version,
                             request_hash=base.request_hash, cached=True)
        sends = {m.send_id for m in marks}
        deadline = max(m.sent_at for m in marks) + cfg.timeout_s
        while True:
            attempts: list[Attempt] = []
            try:
                output = await provider.recover(request, base.request_hash, sends, attempts)
            except StoredLookupUnavailable as exc:
                self._no_lookup.add(request.model_name)
                _log.warning("model %s: stored completions cannot be looked up at %s (%s); requests sent "
                             "before are sent again", request.model_name, cfg.base_url or "the default endpoint",
                             _redact(str(exc), provider.secrets(cfg)))
                return None
            if output is not None:
                self._record_attempts(cfg, provider, attempts, base, output)
                return RoleReply(output=output, role=base.role, provider=cfg.provider, model=cfg.model,
                                 prompt_version=base.prompt_version, request_hash=base.request_hash,
                                 cached=False, cost_usd=sum(self._cost(cfg, a) for a in attempts))
            left = deadline - time.time()
            if left <= 0:
                return None
            await asyncio.sleep(min(RECOVERY_POLL_S, left))

    @staticmethod
    def _retrying(provider: Provider, cfg: ModelConfig) -> AsyncRetrying:
        """Retry what the provider calls a transport failure; a budget cap is never retried."""
        def retry(exc: BaseException) -> bool:
            return not isinstance(exc, BudgetExceeded) and provider.transport_failure(exc) is not None

        return retrying(cfg, retry=retry, retry_after=provider.retry_after)

    @staticmethod
    def _cost(cfg: ModelConfig, a: Attempt, *, batch: bool = False) -> float:
        cost = (a.tokens_in * cfg.price_in_per_mtok + a.tokens_out * cfg.price_out_per_mtok) / 1e6
        return cost * cfg.batch_price_factor if batch else cost

    def _record_attempts(self, cfg: ModelConfig, provider: Provider, attempts: list[Attempt], base: _CallBase,
                         output: BaseModel | None, *, batch: bool = False) -> None:
        secrets = provider.secrets(cfg)
        for a in attempts:
            if a.error:
                a.error = _redact(a.error, secrets)
            if a.response is not None:
                dumped = json.dumps(a.response)
                redacted = _redact(dumped, secrets)
                if redacted != dumped:  # parsing back only when something was taken out
                    a.response = json.loads(redacted)
        records = []
        paper = current_paper()
        for i, a in enumerate(attempts, start=1):
            cost = self._cost(cfg, a, batch=batch)
            if batch and a.request is not None:
                a.request["via"] = "batch"  # which road the request took, for the audit
            self.budget.add(cost, paper)
            is_last_ok = output is not None and i == len(attempts) and a.error is None and not a.refusal
            records.append(base.record(
                attempt=i, request=a.request or {}, raw_response=a.response,
                parsed=output.model_dump(mode="json") if is_last_ok and output is not None else None,
                tokens_in=a.tokens_in, tokens_out=a.tokens_out, cost_usd=cost,
                latency_s=(a.finished or time.perf_counter()) - a.started,
                error=None if is_last_ok else (a.error or (f"refused: {a.refusal}" if a.refusal else None)
                                               or ("not validated" if a.response else "no answer")),
            ))
        if records:
            self.recorder.record_calls(records)


def _settle(limiter: ModelLimiter, estimate: int, sent: list[Attempt]) -> None:
    """Correct the buckets with what one transport attempt really cost (re-asks included).

    The first request was paid for up front at ``estimate``; validation re-asks are requests
    of their own and are charged here. Without reported usage the estimate stands for each.
    """
    reported = [a.tokens_in + a.tokens_out for a in sent if a.response is not None]
    actual = sum(reported) if reported else estimate * max(1, len(sent))
    limiter.settle(estimate, actual, extra_requests=max(0, len(sent) - 1))
