"""The LLM gateway: the one place arcticqa talks to models for the build pipeline.

``Gateway.ask(role, prompt, variables, ResponseModel)`` resolves the role's model config,
renders the versioned prompt file, answers from the cache when the same request was answered
before, otherwise calls the provider (instructor over the async openai client with bounded
validation re-asks; tenacity transport retries honouring Retry-After), enforces the run's and
the current paper's budget caps, and hands every attempt to a :class:`CallRecorder` (the store)
as ``llm_call`` rows.

Pacing, in the order a call meets it: the model config's ``max_concurrency`` (held for the whole
call, retries included), then per attempt its token buckets (``requests_per_minute``,
``tokens_per_minute``; :mod:`arcticqa.llm.ratelimit`), then the endpoint's
``endpoint_max_concurrency`` shared by every config with the same ``base_url`` (held only while
a request is in flight, so one model's backoff or pacing never idles another's slots).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import instructor
import openai
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException
from instructor.v2.core.errors import AsyncValidationError, ResponseParsingError
from openai import AsyncOpenAI
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from arcticqa.config import ModelConfig, Settings
from arcticqa.errors import BudgetExceeded, ConfigError, LLMError, LLMOutputError, LLMTransportError
from arcticqa.llm.batch import BatchLedger, BatchQueue, BatchTransport, MemoryLedger
from arcticqa.llm.clients import describe_error, is_transport_error, make_async_client, transport_retrying
from arcticqa.llm.offline import answer_offline
from arcticqa.llm.prompts import load_prompt, to_jsonable
from arcticqa.llm.ratelimit import ModelLimiter, endpoint_key, estimate_tokens
from arcticqa.llm.types import OutputT, RoleReply

__all__ = ["CallRecord", "CallRecorder", "Budget", "Gateway", "MemoryRecorder", "paper_scope", "current_paper"]

# instructor logs every failed attempt at ERROR; we record attempts ourselves.
logging.getLogger("instructor").setLevel(logging.CRITICAL)

_MODES = {
    "json": instructor.Mode.JSON,
    "tools": instructor.Mode.TOOLS,
    "json_schema": instructor.Mode.JSON_SCHEMA,
    "md_json": instructor.Mode.MD_JSON,
}


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


@dataclass
class _Attempt:
    request: dict[str, Any] | None = None
    response: dict[str, Any] | None = None
    error: str | None = None
    refusal: str | None = None  # the provider declined (message.refusal or content_filter)
    started: float = field(default_factory=time.perf_counter)
    finished: float | None = None
    tokens_in: int = 0
    tokens_out: int = 0


_attempts: contextvars.ContextVar[list[_Attempt] | None] = contextvars.ContextVar(
    "arcticqa_llm_attempts", default=None)


def _current() -> list[_Attempt] | None:
    return _attempts.get()


_RECORDED = ("model", "messages", "temperature", "max_tokens", "response_format", "tools", "tool_choice")


def _snapshot(value: Any) -> Any:
    """A JSON-able copy of a request field. instructor appends re-ask messages to the list it
    was given, so lists and dicts are copied; leaves are shared (a JSON dump/load round trip
    of a whole paper's prompt costs ~0.3 ms a call)."""
    if isinstance(value, dict):
        return {str(k): _snapshot(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_snapshot(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _on_kwargs(*args: Any, **kwargs: Any) -> None:
    attempts = _current()
    if attempts is not None:
        keep = {k: _snapshot(v) for k, v in kwargs.items() if k in _RECORDED}
        attempts.append(_Attempt(request=keep))


def _on_response(response: Any) -> None:
    attempts = _current()
    if attempts:
        a = attempts[-1]
        a.finished = time.perf_counter()
        try:
            a.response = response.model_dump(mode="json")
        except AttributeError:
            a.response = {"repr": repr(response)}
        usage = getattr(response, "usage", None)
        if usage is not None:
            a.tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
            a.tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        choices = getattr(response, "choices", None) or []
        if choices:
            message = getattr(choices[0], "message", None)
            refusal = getattr(message, "refusal", None)
            if refusal or getattr(choices[0], "finish_reason", None) == "content_filter":
                a.refusal = str(refusal or "finish_reason=content_filter")


def _last_refused() -> bool:
    attempts = _current()
    return bool(attempts and attempts[-1].refusal)


def _reasks(cfg: ModelConfig) -> AsyncRetrying:
    """instructor's re-ask loop: only malformed answers are asked again, never a refusal
    (asking a provider's safeguard again just buys the same refusal)."""
    return AsyncRetrying(
        stop=stop_after_attempt(cfg.max_reasks + 1),
        retry=retry_if_exception(lambda e: isinstance(e, _PARSE_ERRORS) and not _last_refused()),
        reraise=True,
    )


_PARSE_ERRORS = (ValidationError, json.JSONDecodeError, AsyncValidationError, ResponseParsingError)
_KEYLIKE = re.compile(r"(Bearer\s+)[^\s'\"]+|\bsk-[A-Za-z0-9_\-]{6,}")


def _redact(text: str, secrets: Sequence[str]) -> str:
    """Endpoints quote the caller's key in some error bodies (401s); it must not be stored."""
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, "***")
    return _KEYLIKE.sub(lambda m: (m.group(1) or "") + "***", text)


def _on_error(error: Exception, *args: Any, **kwargs: Any) -> None:
    attempts = _current()
    if attempts:
        a = attempts[-1]
        a.finished = a.finished or time.perf_counter()
        a.error = describe_error(error)


@functools.lru_cache(maxsize=256)
def _schema(response_model: type[BaseModel]) -> dict[str, Any]:
    """A response model's JSON schema, built once per class (building it costs ~2 ms a call)."""
    return response_model.model_json_schema()


@functools.lru_cache(maxsize=256)
def _wired(response_model: type[BaseModel]) -> type[BaseModel]:
    """The response model as instructor wants it, prepared once per class.

    Handed a plain pydantic model, instructor wraps it in a new ``ResponseSchema`` subclass
    (``pydantic.create_model``) and regenerates its JSON schema on every call: measured at
    ~2.3 ms of CPU a call, a fifth of the build's per-call cost. A class that already is a
    ``ResponseSchema`` is used as it is, and its schema is answered from a frozen copy.
    """
    wired = instructor.openai_schema(response_model)
    frozen = json.dumps(wired.model_json_schema())
    original = wired.model_json_schema

    def model_json_schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
        # only the default form is frozen; anything else is built as pydantic would
        return json.loads(frozen) if not args and not kwargs else original(*args, **kwargs)

    setattr(wired, "model_json_schema", model_json_schema)  # noqa: B010 - a class attribute on purpose
    return wired


def _unwired(output: BaseModel, response_model: type[OutputT]) -> OutputT:
    """instructor returns an instance of the wired subclass; callers get their own class."""
    if type(output) is response_model:
        return output
    return response_model.model_construct(_fields_set=output.model_fields_set, **dict(output))


def _request_hash(provider: str, cfg: ModelConfig, role: str, messages: list[dict[str, str]],
                  schema: dict[str, Any]) -> str:
    payload = {
        "provider": provider, "model": cfg.model, "base_url": cfg.base_url, "role": role,
        "messages": messages, "schema": schema, "temperature": cfg.temperature,
        "max_tokens": cfg.max_tokens, "mode": cfg.mode, "extra_body": cfg.extra_body,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _transport_cause(exc: BaseException) -> BaseException | None:
    """instructor wraps API errors in InstructorRetryException; find the transport error."""
    seen: BaseException | None = exc
    while seen is not None:
        if is_transport_error(seen):
            return seen
        seen = seen.__cause__
    return None


class Gateway:
    """Implements :class:`arcticqa.llm.types.RoleClient`. Use as ``async with Gateway(...)``."""

    def __init__(self, settings: Settings, recorder: CallRecorder | None = None, *,
                 budget: Budget | None = None, ledger: BatchLedger | None = None,
                 run_id: str | None = None) -> None:
        self.settings = settings
        self.recorder: CallRecorder = recorder or MemoryRecorder()
        self.budget = budget or Budget(settings.build.budget_usd, settings.build.budget_per_paper_usd)
        #: where Batch API jobs are kept (build ``batch`` mode); the store in a build
        self.ledger: BatchLedger = ledger or MemoryLedger()
        self.run_id = run_id
        self._clients: dict[tuple[str, bool], tuple[AsyncOpenAI, Any]] = {}
        self._queues: dict[str, BatchQueue] = {}
        self._limits: dict[str, asyncio.Semaphore] = {}
        self._rate: dict[str, ModelLimiter] = {}
        self._endpoints = self._endpoint_limits(settings)

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
        # The openai SDK imports its resource modules on first use (~0.6 s): pay that while the
        # build opens, not inside the first paper's first model call.
        for role, name in self.settings.roles.items():
            try:
                cfg = self.settings.model_for(role)
                if cfg.provider == "openai" and not self.batched(role, cfg):
                    self._client(name, cfg).chat.completions  # noqa: B018
            except ConfigError:
                continue  # a missing key or model is reported by the call that needs it
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        for queue in self._queues.values():
            await queue.aclose()
            await queue.api.close()
        self._queues.clear()
        for client, _ in self._clients.values():
            await client.close()
        self._clients.clear()

    def batched(self, role: str, cfg: ModelConfig) -> bool:
        """Whether ``role`` goes through the provider's Batch API (arcticqa.llm.batch)."""
        build = self.settings.build
        return build.batch and cfg.provider == "openai" and role in build.batch_roles

    def _client(self, name: str, cfg: ModelConfig, *, batch: bool = False) -> Any:
        key = (name, batch)
        if key not in self._clients:
            raw = make_async_client(cfg) if not batch else make_async_client(
                cfg, http_client=openai.DefaultAsyncHttpxClient(transport=BatchTransport(self._queue(name, cfg))))
            self._clients[key] = (raw, instructor.from_openai(raw, mode=_MODES[cfg.mode]))
            patched = self._clients[key][1]
            patched.on("completion:kwargs", _on_kwargs)
            patched.on("completion:response", _on_response)
            patched.on("completion:error", _on_error)
            patched.on("parse:error", _on_error)
        return self._clients[key][1]

    def _queue(self, name: str, cfg: ModelConfig) -> BatchQueue:
        if name not in self._queues:
            self._queues[name] = BatchQueue(cfg, make_async_client(cfg), self.ledger,
                                            self.settings.build.data_dir / "batches", run_id=self.run_id)
        return self._queues[name]

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
        messages = template.render(variables)
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

        if cfg.provider == "offline":
            started = time.perf_counter()
            result = await answer_offline(role, to_jsonable(variables), response_model)
            output = response_model.model_validate(result.model_dump())
            self.recorder.record_calls([base.record(
                attempt=1, request={"messages": messages, "variables": to_jsonable(variables)},
                parsed=output.model_dump(mode="json"), latency_s=time.perf_counter() - started)])
            return RoleReply(output=output, role=role, provider="offline", model=cfg.model,
                             prompt_version=template.version_id, request_hash=request_hash, cached=False)

        return await self._ask_openai(model_name, cfg, messages, response_model, base)

    async def _ask_openai(self, model_name: str, cfg: ModelConfig, messages: list[dict[str, str]],
                          response_model: type[OutputT], base: _CallBase) -> RoleReply[OutputT]:
        batch = self.batched(base.role, cfg)
        client = self._client(model_name, cfg, batch=batch)
        # a batched request waits in the provider's job queue, not in a connection: the
        # concurrency and rate limits pace live requests only
        limiter = self._rate_limiter(model_name, cfg) if not batch else None
        estimate = estimate_tokens(messages, cfg.max_tokens)
        paper = current_paper()
        attempts: list[_Attempt] = []
        token = _attempts.set(attempts)
        output: OutputT | None = None
        failure: LLMError | None = None
        try:
            async with self._limit(model_name, cfg) if not batch else contextlib.nullcontext():
                self.budget.check(paper)
                async for attempt in transport_retrying(cfg, retry=_retry_transport):
                    with attempt:
                        self.budget.check(paper)
                        if limiter is not None and limiter.active:
                            await limiter.acquire(estimate)
                        first = len(attempts)
                        try:
                            async with self._in_flight(cfg) if not batch else contextlib.nullcontext():
                                wired = await client.chat.completions.create(
                                    response_model=_wired(response_model),
                                    messages=messages,
                                    model=cfg.model,
                                    temperature=cfg.temperature,
                                    max_tokens=cfg.max_tokens,
                                    max_retries=_reasks(cfg),
                                    extra_headers={"X-Arcticqa-Role": base.role},
                                    **({"extra_body": cfg.extra_body} if cfg.extra_body else {}),
                                )
                                output = _unwired(wired, response_model)
                        finally:
                            if limiter is not None and limiter.active:
                                _settle(limiter, estimate, attempts[first:])
        except BudgetExceeded:
            raise
        except IncompleteOutputException as exc:
            failure = LLMOutputError(f"{base.role}: output truncated (finish_reason=length): {exc}")
        except Exception as exc:  # noqa: BLE001 - classified below, recorded, re-raised as ours
            cause = _transport_cause(exc)
            refused = next((a.refusal for a in attempts if a.refusal), None)
            if refused is not None:
                failure = LLMOutputError(f"{base.role}: the model refused to answer: {refused[:300]}")
            elif cause is not None:
                failure = LLMTransportError(f"{base.role}: no answer from {cfg.model} after "
                                            f"{len(attempts)} attempts: {describe_error(cause)}")
            elif isinstance(exc, InstructorRetryException):
                failure = LLMOutputError(f"{base.role}: output failed validation after "
                                         f"{exc.n_attempts} attempts: {str(exc)[:500]}")
            elif isinstance(exc, openai.APIStatusError):
                failure = LLMError(f"{base.role}: HTTP {exc.status_code} from {cfg.model}: {exc.message}")
            else:
                failure = LLMError(f"{base.role}: {type(exc).__name__}: {exc}")
        finally:
            _attempts.reset(token)
            self._record_attempts(cfg, attempts, base, output, batch=batch)
        if failure is not None or output is None:
            failure = failure or LLMError(f"{base.role}: no output")
            raise type(failure)(_redact(str(failure), self._secrets(cfg)))
        cost = sum(self._cost(cfg, a, batch=batch) for a in attempts)
        return RoleReply(output=output, role=base.role, provider=cfg.provider, model=cfg.model,
                         prompt_version=base.prompt_version, request_hash=base.request_hash,
                         cached=False, cost_usd=cost)

    @staticmethod
    def _cost(cfg: ModelConfig, a: _Attempt, *, batch: bool = False) -> float:
        cost = (a.tokens_in * cfg.price_in_per_mtok + a.tokens_out * cfg.price_out_per_mtok) / 1e6
        return cost * cfg.batch_price_factor if batch else cost

    @staticmethod
    def _secrets(cfg: ModelConfig) -> list[str]:
        try:
            return [cfg.api_key()]
        except ConfigError:
            return []

    def _record_attempts(self, cfg: ModelConfig, attempts: list[_Attempt], base: _CallBase,
                         output: BaseModel | None, *, batch: bool = False) -> None:
        secrets = self._secrets(cfg)
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


def _settle(limiter: ModelLimiter, estimate: int, sent: list[_Attempt]) -> None:
    """Correct the buckets with what one transport attempt really cost (re-asks included).

    The first request was paid for up front at ``estimate``; validation re-asks are requests
    of their own and are charged here. Without reported usage the estimate stands for each.
    """
    reported = [a.tokens_in + a.tokens_out for a in sent if a.response is not None]
    actual = sum(reported) if reported else estimate * max(1, len(sent))
    limiter.settle(estimate, actual, extra_requests=max(0, len(sent) - 1))


def _retry_transport(state: Any) -> bool:
    exc = state.outcome.exception() if state.outcome else None
    return exc is not None and not isinstance(exc, BudgetExceeded) and _transport_cause(exc) is not None
