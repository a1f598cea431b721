"""A local OpenAI-compatible chat-completions server: the stand-in for tests, the demo and benchmarks.

Real HTTP on 127.0.0.1 (random free port): the real openai + instructor clients talk to it
unchanged. Replies are produced by a *responder* (a function of the request body and headers)
and can be faults: 429 with Retry-After, 5xx, dropped connections, hangs (client timeouts),
malformed JSON, ``finish_reason=length``. Every request is logged for assertions.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Reply",
    "Fault",
    "Drop",
    "Hang",
    "RecordedRequest",
    "FakeOpenAIServer",
    "role_of",
    "by_role",
    "json_reply",
]


@dataclass
class Reply:
    """A normal completion. ``content`` is sent as the assistant message text."""

    content: str | None
    finish_reason: str = "stop"
    prompt_tokens: int = 20
    completion_tokens: int = 5
    refusal: str | None = None


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


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # headers and body go out as separate writes; with Nagle on, delayed ACK adds ~45 ms a call
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # silence per-request stderr lines
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "bad json"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake = self.server.fake
        fake._record(RecordedRequest(self.path, headers, body))
        # the endpoint's own concurrency cap: requests beyond it queue here, like at a provider
        with fake._slots or contextlib.nullcontext():
            self._complete(fake, body, headers)

    def _complete(self, fake: FakeOpenAIServer, body: dict[str, Any], headers: dict[str, str]) -> None:
        if fake.latency:
            time.sleep(fake.latency)
        response = fake.responder(body, headers)
        if isinstance(response, Hang):
            time.sleep(response.seconds)
            if response.then is None:
                self.close_connection = True
                return
            response = response.then
        if isinstance(response, Drop):
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if isinstance(response, Fault):
            extra = {"Retry-After": f"{response.retry_after:g}"} if response.retry_after is not None else {}
            self._send_raw(response.status, response.body.encode(), extra)
            return
        fake._count_completion()
        message: dict[str, Any] = {"role": "assistant", "content": response.content}
        if response.refusal is not None:
            message["refusal"] = response.refusal
        payload = {
            "id": f"chatcmpl-fake-{fake.completions}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": response.finish_reason,
                         "logprobs": None}],
            "usage": {"prompt_tokens": response.prompt_tokens,
                      "completion_tokens": response.completion_tokens,
                      "total_tokens": response.prompt_tokens + response.completion_tokens},
        }
        self._send_json(200, payload)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_raw(status, json.dumps(obj).encode(), {})

    def _send_raw(self, status: int, data: bytes, extra: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    fake: FakeOpenAIServer


class FakeOpenAIServer:
    """``with FakeOpenAIServer(responder) as srv: ... srv.base_url ...``

    ``latency`` is added to every completion; ``max_concurrency`` caps completions in progress
    (the rest wait their turn), so ``max_concurrency / latency`` is the endpoint's best rate.
    """

    def __init__(self, responder: Responder, *, latency: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, max_concurrency: int | None = None) -> None:
        self.responder = responder
        self.latency = latency
        #: at most this many completions are in progress (latency included); None: no cap
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self.requests: list[RecordedRequest] = []
        self.completions = 0
        self._lock = threading.Lock()
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _count_completion(self) -> None:
        with self._lock:
            self.completions += 1

    def requests_for(self, role: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.role == role]

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
