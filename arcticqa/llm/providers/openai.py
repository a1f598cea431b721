"""The OpenAI-compatible provider: instructor over the async openai client.

Clients are built with ``max_retries=0``: the transport retries are the gateway's (and the
evaluator's, :func:`transport_retrying`), so every attempt is visible and recorded. Validation
re-asks are instructor's, bounded by ``max_reasks``. A refused answer is asked again unchanged
(``max_refusal_reasks``) and a truncated one with ``max_tokens`` doubled (``max_length_reasks``,
up to ``max_tokens_ceiling``), by :meth:`OpenAIProvider.generate`, counted apart from the
validation re-asks. A role in batch mode sends through the Batch API transport
(:mod:`arcticqa.llm.providers.openai_batch`).
Failures leave through :func:`~arcticqa.llm.providers.openai_errors.map_openai_errors`.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import json
import logging
import time
import weakref
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import instructor
import instructor.v2.core.patch as _instructor_patch
import instructor.v2.validation.async_validators as _instructor_async_validators
import openai
from instructor.v2.core.errors import AsyncValidationError, IncompleteOutputException, ResponseParsingError
from instructor.v2.core.messages import copy_messages_for_mutation, merge_consecutive_messages
from instructor.v2.core.registry import mode_registry, normalize_mode
from instructor.v2.core.response import process_response_async
from openai import NOT_GIVEN, AsyncOpenAI
from openai._base_client import make_request_options
from openai._models import construct_type
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from arcticqa.config import ModelConfig
from arcticqa.errors import ConfigError, StoredLookupUnavailable
from arcticqa.llm.batch import BatchLedger
from arcticqa.llm.providers.base import Attempt, GenerateRequest, Provider, retrying
from arcticqa.llm.providers.openai_batch import BatchQueue, BatchTransport
from arcticqa.llm.providers.openai_errors import (
    describe_error,
    is_transport_error,
    map_openai_errors,
    retry_after_seconds,
    transport_cause,
)

__all__ = ["OpenAIProvider", "make_async_client", "transport_retrying", "structure_chars"]

# instructor logs every failed attempt at ERROR; we record attempts ourselves.
logging.getLogger("instructor").setLevel(logging.CRITICAL)

_MODES = {
    "json": instructor.Mode.JSON,
    "tools": instructor.Mode.TOOLS,
    "json_schema": instructor.Mode.JSON_SCHEMA,
    "md_json": instructor.Mode.MD_JSON,
}


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


def _check_each_class_once(check: Callable[[Any], None]) -> Callable[[Any], None]:
    """instructor's ``reject_async_validators`` with its passes remembered per class.

    instructor 1.17 walks the response model's whole MRO and every field annotation, three times
    per request (``create``, the patched ``create`` and the retry loop), to refuse models that
    carry instructor's async validators: measured at ~170 us a walk for the reconstructor's
    model, ~0.5 ms of our CPU per model call, for an answer that depends on the class alone. A
    class that passed once passes again; a class that fails is walked (and refused) every time.
    """
    passed: weakref.WeakSet[type] = weakref.WeakSet()

    def reject_async_validators(response_model: Any) -> None:
        if isinstance(response_model, type) and response_model in passed:
            return
        check(response_model)
        if isinstance(response_model, type):
            passed.add(response_model)

    reject_async_validators.__wrapped__ = check  # type: ignore[attr-defined]
    return reject_async_validators


# The two names instructor calls it by: the module attribute (``client.py`` and ``retry.py``
# import it at call time) and the copy ``patch.py`` imported at its own import.
# tests/test_providers.py checks both are this wrapper, so an instructor upgrade that moves the
# function fails there instead of silently losing the saving.
_reject_async_validators = _check_each_class_once(_instructor_async_validators.reject_async_validators)
for _module in (_instructor_async_validators, _instructor_patch):
    setattr(_module, "reject_async_validators", _reject_async_validators)  # noqa: B010 - see above


# -- the request, without the SDK's parameter transform --------------------------------------

#: what ``create`` takes as request options rather than body fields
_OPTION_KEYS = ("extra_headers", "extra_query", "extra_body", "timeout")
_PLAIN_SCALARS = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    """JSON data made only of dicts with string keys, lists and scalars."""
    if isinstance(value, _PLAIN_SCALARS):
        return True
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


class _ChatCompletionAnswer(ChatCompletion):
    """What ``post`` is told to parse a chat completion into: a ``ChatCompletion``, validated.

    The SDK builds its response models with its lenient ``construct``: a pure-Python walk of the
    answer, ~0.13 ms a call here, where pydantic's validation of the same answer takes ~0.01 ms.
    A class with a ``build`` classmethod is the SDK's hook for a type that parses answers itself
    (``openai._types.ModelBuilderProtocol``): the answer is validated as a ``ChatCompletion``,
    and one that does not validate (a compatible server's missing ``created``, an unknown
    ``finish_reason``) is constructed the SDK's lenient way, so every answer the SDK took before
    is taken as before. tests/test_providers.py checks that both give the same object for the same answer.
    """

    @classmethod
    def build(cls, *, response: Any, data: Any) -> ChatCompletion:  # noqa: ARG003 - the SDK's signature
        try:
            return ChatCompletion.model_validate(data)
        except ValidationError:
            return cast(ChatCompletion, construct_type(type_=ChatCompletion, value=data))


def _direct_create(raw: AsyncOpenAI) -> Callable[..., Any]:
    """``raw.chat.completions.create`` as instructor calls it, sending a plain-JSON request as it is.

    The SDK's ``create`` first runs ``async_maybe_transform`` over the whole request: a walk of
    every message through every member of the message-type union, to rename aliased keys and
    format dates and files. Chat-completion parameters have no aliased keys, and a request of
    plain strings, numbers, lists and dicts has nothing to format, so for it the walk gives back
    what it was given, at ~0.5 ms of our CPU a call (10% of the construct stage, py-spy). Such a
    request goes out through the client's own documented ``post`` (the same auth, retries and
    transport; the answer parsed by :class:`_ChatCompletionAnswer`); anything else (a stream, a
    pydantic object in a message, a type the SDK converts) takes ``create`` unchanged.
    tests/test_providers.py checks that both send the same method, path, headers and body.
    """
    completions = raw.chat.completions

    async def send(kwargs: dict[str, Any]) -> Any:
        body = {k: v for k, v in kwargs.items() if k not in _OPTION_KEYS and v is not NOT_GIVEN}
        if body.get("stream") or not _plain(body):
            return await completions.create(**kwargs)
        options = make_request_options(extra_headers=kwargs.get("extra_headers"),
                                       extra_query=kwargs.get("extra_query"),
                                       extra_body=kwargs.get("extra_body"),
                                       timeout=kwargs.get("timeout", NOT_GIVEN), security={"bearer_auth": True})
        return await raw.post("/chat/completions", body=body, options=options, cast_to=_ChatCompletionAnswer)

    async def create(**kwargs: Any) -> Any:
        before_send = _before_send.get()
        if before_send is not None:  # written down before it leaves, and stored under that name
            kwargs = {**kwargs, "store": True, "metadata": before_send(len(_attempts.get() or ()) + 1)}
        # each try instructor makes is recorded here, where it is sent, rather than through
        # instructor's completion hooks, which bind every handler's signature on every call
        _on_kwargs(**kwargs)
        try:
            response = await send(kwargs)
        except Exception as exc:
            _on_error(exc)
            raise
        _on_response(response)
        return response

    return create


def _instruction_once(prepare: Callable[[Any, dict[str, Any]], tuple[Any, dict[str, Any]]]
                      ) -> Callable[[Any, dict[str, Any]], tuple[Any, dict[str, Any]]]:
    """instructor's JSON-mode request handler with its schema instruction written once per model.

    On every request instructor's JSON mode writes the response model's schema out with
    ``json.dumps(indent=2)`` (Python's pure-Python encoder) and dedents the instruction around
    it: 0.1-0.25 ms of our CPU a call for the build's reply models, for a text that depends on
    the model class alone. The text is taken once per class from instructor itself (the system
    message it writes for a request that has none) and added to a request's own system message
    as instructor adds it. Any other request (no system message first, content parts, a stream)
    goes to instructor unchanged. tests/test_providers.py checks that both give the same request.
    """

    @functools.lru_cache(maxsize=256)
    def instruction(response_model: type[BaseModel]) -> str:
        return str(prepare(response_model, {"messages": []})[1]["messages"][0]["content"])

    def prepare_request(response_model: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        messages = kwargs.get("messages")
        if (not isinstance(response_model, type) or kwargs.get("stream") or not isinstance(messages, list)
                or not messages or messages[0].get("role") != "system"
                or not isinstance(messages[0].get("content"), str)):
            return prepare(response_model, kwargs)
        copied = copy_messages_for_mutation(messages)
        copied[0]["content"] += f"\n\n{instruction(response_model)}"
        return response_model, {**kwargs, "response_format": {"type": "json_object"},
                                "messages": merge_consecutive_messages(copied)}

    prepare_request.__wrapped__ = prepare  # type: ignore[attr-defined]
    return prepare_request


def _write_instruction_once(mode: instructor.Mode) -> None:
    """Put :func:`_instruction_once` in instructor's handler registry for JSON mode (once)."""
    handlers = mode_registry.get_handlers(instructor.Provider.OPENAI, mode)
    if mode is not instructor.Mode.JSON or hasattr(handlers.request_handler, "__wrapped__"):
        return
    fields = {f.name: getattr(handlers, f.name) for f in dataclasses.fields(handlers)}
    mode_registry.register(instructor.Provider.OPENAI, mode,
                           **{**fields, "request_handler": _instruction_once(handlers.request_handler)})


def _instructor_client(raw: AsyncOpenAI, mode: instructor.Mode) -> Any:
    """What ``instructor.from_openai(raw, mode=mode)`` builds, over :func:`_direct_create`."""
    mode = normalize_mode(instructor.Provider.OPENAI, mode)
    # instructor imports the mode's handler module on the first request (~0.2 s): the client is
    # made while the build opens (warm), so that import is paid there
    _write_instruction_once(mode)
    create = instructor.patch(create=_direct_create(raw), mode=mode, provider=instructor.Provider.OPENAI)
    return instructor.AsyncInstructor(client=raw, create=create, mode=mode, provider=instructor.Provider.OPENAI)


@functools.lru_cache(maxsize=64)
def structure_chars(mode: str, response_model: type[BaseModel]) -> int:
    """Characters a request in ``mode`` carries besides its prompt to ask for ``response_model``:
    the schema instruction instructor adds to the system message (``json``, ``md_json``), or the
    schema in ``tools`` / ``response_format``. A provider counts them as input tokens on every
    call (the estimate adds them to prompts measured without them)."""
    kind = normalize_mode(instructor.Provider.OPENAI, _MODES[mode])
    handlers = mode_registry.get_handlers(instructor.Provider.OPENAI, kind)
    prepare = getattr(handlers.request_handler, "__wrapped__", handlers.request_handler)
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    _, sent = prepare(response_model, {"messages": [dict(m) for m in base]})
    chars = sum(len(str(m.get("content") or "")) for m in sent.get("messages") or []) - 2
    for key in ("tools", "tool_choice", "response_format"):
        if sent.get(key) is not None:
            chars += len(json.dumps(sent[key], default=str))
    return max(0, chars)


# -- transport retries -----------------------------------------------------------------------

def transport_retrying(cfg: ModelConfig) -> AsyncRetrying:
    """``async for attempt in transport_retrying(cfg): with attempt: ...`` around one raw call."""
    return retrying(cfg, retry=is_transport_error, retry_after=retry_after_seconds)


# -- every request and answer becomes an Attempt (recorded by _direct_create; a parse error by
# instructor's parse:error hook) ------------------------------------------------------------------

_attempts: contextvars.ContextVar[list[Attempt] | None] = contextvars.ContextVar(
    "arcticqa_llm_attempts", default=None)

_RECORDED = ("model", "messages", "temperature", "max_tokens", "response_format", "tools", "tool_choice", "store",
             "metadata")
#: the current call's ``GenerateRequest.before_send`` (None: requests go out without store/metadata)
_before_send: contextvars.ContextVar[Callable[[int], dict[str, str]] | None] = contextvars.ContextVar(
    "arcticqa_llm_before_send", default=None)


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
    attempts = _attempts.get()
    if attempts is not None:
        keep = {k: _snapshot(v) for k, v in kwargs.items() if k in _RECORDED}
        attempts.append(Attempt(request=keep))


def _on_response(response: Any) -> None:
    attempts = _attempts.get()
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


def _on_error(error: Exception, *args: Any, **kwargs: Any) -> None:
    attempts = _attempts.get()
    if attempts:
        a = attempts[-1]
        a.finished = a.finished or time.perf_counter()
        # a refused answer fails to parse as a consequence; the record names the refusal
        a.error = f"refused: {a.refusal}" if a.refusal else describe_error(error)


def _last_refused() -> bool:
    attempts = _attempts.get()
    return bool(attempts and attempts[-1].refusal)


_PARSE_ERRORS = (ValidationError, json.JSONDecodeError, AsyncValidationError, ResponseParsingError)


# -- refusals and truncations: asked again, bounded, counted over the call's attempts ---------
# Counted over every attempt of the role call (the gateway hands the same list to each transport
# retry), so the bounds hold per call and a transport retry after a truncation keeps the raised
# max_tokens.

def _max_tokens(cfg: ModelConfig, attempts: Sequence[Attempt]) -> int:
    """``max_tokens`` for the next request: doubled for each truncated answer so far (at most
    ``max_length_reasks`` times), never above ``max_tokens_ceiling``."""
    doublings = min(sum(1 for a in attempts if a.truncated), cfg.max_length_reasks)
    raised = cfg.max_tokens * (1 << doublings)
    return raised if cfg.max_tokens_ceiling is None else min(raised, cfg.max_tokens_ceiling)


def _mark_truncated(a: Attempt) -> None:
    a.truncated = True
    a.error = (f"IncompleteOutputException: output truncated (finish_reason=length at "
               f"max_tokens={(a.request or {}).get('max_tokens')})")


def _ask_again(cfg: ModelConfig, attempts: Sequence[Attempt], *, batched: bool) -> bool:
    """Whether the answer that just failed (the last attempt) is asked again.

    A refusal: unchanged, while no more than ``max_refusal_reasks`` answers of the call were
    refused; never in batch mode, where the same request body is answered from the batch
    ledger (:meth:`~arcticqa.llm.providers.openai_batch.BatchQueue.submit`), so asking again
    would only record the stored refusal a second time. A truncation: with ``max_tokens``
    raised, while no more than ``max_length_reasks`` answers were truncated and the ceiling
    leaves room to raise it.
    """
    last = attempts[-1]
    if last.refusal:
        return not batched and sum(1 for a in attempts if a.refusal) <= cfg.max_refusal_reasks
    if last.truncated:
        asked = (last.request or {}).get("max_tokens", cfg.max_tokens)
        return (sum(1 for a in attempts if a.truncated) <= cfg.max_length_reasks
                and _max_tokens(cfg, attempts) > asked)
    return False


def _reasks(cfg: ModelConfig) -> AsyncRetrying:
    """instructor's re-ask loop: only malformed answers are asked again, never a refusal
    (instructor would add the refusal and a request to fix it to the conversation; a refusal is
    asked again unchanged by :meth:`OpenAIProvider.generate`, see :func:`_ask_again`)."""
    return AsyncRetrying(
        stop=stop_after_attempt(cfg.max_reasks + 1),
        retry=retry_if_exception(lambda e: isinstance(e, _PARSE_ERRORS) and not _last_refused()),
        reraise=True,
    )


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


def _unwired(output: BaseModel, response_model: type[BaseModel]) -> BaseModel:
    """instructor returns an instance of the wired subclass; callers get their own class."""
    if type(output) is response_model:
        return output
    return response_model.model_construct(_fields_set=output.model_fields_set, **dict(output))


# -- the provider ------------------------------------------------------------------------------

class OpenAIProvider(Provider):
    """Any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp, the loopback stand-in).

    ``ledger``, ``batch_dir`` and ``run_id`` serve roles in batch mode: where jobs are kept,
    where their JSONL files are written, and which run submitted them.
    """

    name: ClassVar[str] = "openai"
    recovers: ClassVar[bool] = True

    def __init__(self, *, ledger: BatchLedger, batch_dir: Path, run_id: str | None = None) -> None:
        self.ledger, self.batch_dir, self.run_id = ledger, batch_dir, run_id
        self._clients: dict[tuple[str, bool], tuple[AsyncOpenAI, Any]] = {}
        self._queues: dict[str, BatchQueue] = {}

    async def warm(self, model_name: str, cfg: ModelConfig, *, batched: bool) -> None:
        # The openai SDK imports its resource modules on first use (~0.6 s): pay that while the
        # build opens, not inside the first paper's first model call.
        if not batched:
            self._client(model_name, cfg).chat.completions  # noqa: B018

    async def aclose(self) -> None:
        for queue in self._queues.values():
            await queue.aclose()
            await queue.api.close()
        self._queues.clear()
        for client, _ in self._clients.values():
            await client.close()
        self._clients.clear()

    def _client(self, name: str, cfg: ModelConfig, *, batch: bool = False) -> Any:
        key = (name, batch)
        if key not in self._clients:
            raw = make_async_client(cfg) if not batch else make_async_client(
                cfg, http_client=openai.DefaultAsyncHttpxClient(transport=BatchTransport(self._queue(name, cfg))))
            self._clients[key] = (raw, _instructor_client(raw, _MODES[cfg.mode]))
            # requests, answers and transport errors are recorded by _direct_create itself
            self._clients[key][1].on("parse:error", _on_error)
        return self._clients[key][1]

    def _queue(self, name: str, cfg: ModelConfig) -> BatchQueue:
        if name not in self._queues:
            self._queues[name] = BatchQueue(cfg, make_async_client(cfg), self.ledger, self.batch_dir,
                                            run_id=self.run_id)
        return self._queues[name]

    async def generate(self, request: GenerateRequest, attempts: list[Attempt]) -> BaseModel:
        cfg = request.cfg
        client = self._client(request.model_name, cfg, batch=request.batched)
        token = _attempts.set(attempts)
        marking = _before_send.set(request.before_send) if request.before_send and not request.batched else None
        try:
            while True:  # one round per refusal or truncation asked again (see _ask_again)
                first = len(attempts)
                try:
                    wired = await client.chat.completions.create(
                        response_model=_wired(request.response_model),
                        messages=request.messages,
                        model=cfg.model,
                        temperature=cfg.temperature,
                        max_tokens=_max_tokens(cfg, attempts),
                        max_retries=_reasks(cfg),
                        extra_headers={"X-Arcticqa-Role": request.role},
                        **({"extra_body": cfg.extra_body} if cfg.extra_body else {}),
                    )
                    break
                except Exception as exc:
                    if len(attempts) == first:  # nothing was sent (a refused response model)
                        raise
                    if isinstance(exc, IncompleteOutputException):
                        _mark_truncated(attempts[-1])
                    if not _ask_again(cfg, attempts, batched=request.batched):
                        raise
        finally:
            if marking is not None:
                _before_send.reset(marking)
            _attempts.reset(token)
        return _unwired(wired, request.response_model)

    async def recover(self, request: GenerateRequest, request_hash: str, sends: Collection[str],
                      attempts: list[Attempt]) -> BaseModel | None:
        """Stored chat completions listed by their ``arcticqa_request`` metadata (newest first, one
        page of 100); the first one sent as one of ``sends`` whose answer validates is the answer."""
        cfg = request.cfg
        self._client(request.model_name, cfg)
        raw = self._clients[(request.model_name, False)][0]
        started = time.perf_counter()
        try:
            page = await raw.chat.completions.list(metadata={"arcticqa_request": request_hash}, limit=100,
                                                   order="desc")
        except (openai.NotFoundError, openai.BadRequestError, openai.PermissionDeniedError,
                openai.UnprocessableEntityError, openai.AuthenticationError) as exc:
            raise StoredLookupUnavailable(describe_error(exc)) from exc
        except openai.OpenAIError:
            return None  # a transport failure or a busy endpoint: the next look-up may get through
        mode = _MODES[cfg.mode]
        for completion in page.data:
            metadata = dict(completion.metadata or {})
            if metadata.get("arcticqa_send") not in sends:
                continue
            message = completion.choices[0].message if completion.choices else None
            if message is None or message.refusal or completion.choices[0].finish_reason == "content_filter":
                continue
            try:
                wired = await process_response_async(completion, response_model=_wired(request.response_model),
                                                     mode=mode, provider=instructor.Provider.OPENAI)
            except (*_PARSE_ERRORS, IncompleteOutputException):
                continue
            usage = completion.usage
            attempts.append(Attempt(
                request={"via": "recovered", "recovered": {"completion_id": completion.id, **metadata}},
                response=completion.model_dump(mode="json"), started=started, finished=time.perf_counter(),
                tokens_in=usage.prompt_tokens if usage else 0, tokens_out=usage.completion_tokens if usage else 0))
            return _unwired(wired, request.response_model)
        return None

    def transport_failure(self, exc: BaseException) -> BaseException | None:
        return transport_cause(exc)

    def retry_after(self, exc: BaseException) -> float | None:
        return retry_after_seconds(exc)

    def errors(self, role: str, cfg: ModelConfig,
               attempts: Sequence[Attempt]) -> contextlib.AbstractContextManager[None]:
        return map_openai_errors(role, cfg.model, attempts)

    def secrets(self, cfg: ModelConfig) -> list[str]:
        # endpoints quote the caller's key in some error bodies (401s); it must not be stored
        try:
            return [cfg.api_key()]
        except ConfigError:
            return []
