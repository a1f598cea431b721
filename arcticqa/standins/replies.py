"""What the OpenAI-compatible stand-in answers: replies and faults, responders, and the one
chat.completion builder that live and batch answers share (so they cannot drift).

A *responder* is a function of the request body and headers returning a :data:`Response`:
a :class:`Reply`, or a fault (:class:`Fault` status, :class:`Drop`, :class:`Hang`).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Reply", "Fault", "Drop", "Hang", "Response", "Responder", "RecordedRequest", "role_of",
           "json_reply", "by_role", "chat_completion"]


@dataclass
class Reply:
    """A normal completion. ``content`` is sent as the assistant message text, or, when
    ``tool_call`` names a function, as that call's arguments (instructor's tools mode)."""

    content: str | None
    finish_reason: str = "stop"
    prompt_tokens: int = 20
    completion_tokens: int = 5
    refusal: str | None = None
    tool_call: str | None = None


@dataclass
class Fault:
    """An HTTP error status (e.g. 429 with ``retry_after``, 500, 503)."""

    status: int
    retry_after: float | None = None
    body: str = '{"error": {"message": "injected fault", "type": "server_error"}}'


@dataclass
class Drop:
    """Close the connection without answering (a reset, from the client's point of view)."""


@dataclass
class Hang:
    """Wait ``seconds`` before answering with ``then`` (drives client read timeouts)."""

    seconds: float
    then: Reply | Fault | None = None


Response = Reply | Fault | Drop | Hang
Responder = Callable[[dict[str, Any], Mapping[str, str]], Response]
#: called with the 1-based number of each created batch: None (run normally), "failed" or "expired"
BatchFate = Callable[[int], str | None]
@dataclass
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float = field(default_factory=time.monotonic)

    @property
    def role(self) -> str | None:
        return role_of(self.headers)


def role_of(headers: Mapping[str, str]) -> str | None:
    """The arcticqa gateway names the role of each call in this header."""
    for key, value in headers.items():
        if key.lower() == "x-arcticqa-role":
            return value
    return None


def json_reply(obj: Any, **kwargs: Any) -> Reply:
    return Reply(content=json.dumps(obj), **kwargs)


def by_role(scripts: Mapping[str, Callable[[dict[str, Any]], Response] | Response | list[Response]]
            ) -> Responder:
    """A responder that dispatches on the role header.

    A value may be a fixed response, a list (consumed in order; the last one repeats), or a
    function of the request body.
    """
    lock = threading.Lock()
    queues: dict[str, list[Response]] = {
        k: list(v) for k, v in scripts.items() if isinstance(v, list)
    }

    def responder(body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        role = role_of(headers) or body.get("model", "")
        script = scripts.get(role)
        if script is None:
            return Fault(400, body=json.dumps({"error": {"message": f"no script for role {role!r}"}}))
        if isinstance(script, list):
            with lock:
                queue = queues[role]
                return queue.pop(0) if len(queue) > 1 else queue[0]
        if callable(script):
            return script(body)
        return script

    return responder


def chat_completion(number: int, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The chat.completion object for ``reply``, the ``number``-th the server produced."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_call is not None:
        message = {"role": "assistant", "content": None, "tool_calls": [{
            "id": f"call_fake_{number}", "type": "function",
            "function": {"name": reply.tool_call, "arguments": reply.content or ""}}]}
    if reply.refusal is not None:
        message["refusal"] = reply.refusal
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason,
                     "logprobs": None}],
        "usage": {"prompt_tokens": reply.prompt_tokens,
                  "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }
