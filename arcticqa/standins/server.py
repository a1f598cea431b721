"""A local OpenAI-compatible server: the stand-in for tests, the demo and benchmarks.

Real HTTP on 127.0.0.1 (random free port): the real openai + instructor clients talk to it
unchanged. Replies are produced by a *responder* (:mod:`arcticqa.standins.replies`: a function
of the request body and headers) and can be faults: 429 with Retry-After, 5xx, dropped
connections, hangs (client timeouts), malformed JSON, ``finish_reason=length``. Every request is
logged for assertions. This module serves chat completions; the Files and Batch APIs are
:mod:`arcticqa.standins.batches`, stored completions (``store: true``, listed by metadata)
:mod:`arcticqa.standins.stored`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from arcticqa.standins.batches import BatchFate, FilesAndBatches
from arcticqa.standins.replies import Drop, Fault, Hang, RecordedRequest, Responder, chat_completion
from arcticqa.standins.stored import StoredCompletions, metadata_error

__all__ = ["FakeOpenAIServer"]


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
            return
        answer = self.server.fake.handle_stored_get(self.path) or self.server.fake.handle_get(self.path)
        if answer is None:
            self._send_json(404, {"error": {"message": "not found"}})
        elif isinstance(answer[1], bytes):
            self._send_raw(answer[0], answer[1], {}, content_type="application/octet-stream")
        else:
            self._send_json(*answer)

    def do_DELETE(self) -> None:
        self._read_body()  # keep the keep-alive stream aligned if a client sent a body
        self._send_json(*self.server.fake.handle_delete(self.path))

    def do_POST(self) -> None:
        raw = self._read_body()
        fake = self.server.fake
        answer = fake.handle_post(self.path, self.headers.get("content-type") or "", raw)
        if answer is not None:
            self._send_json(*answer)
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send_json(400, {"error": {"message": "bad json"}})
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        fake._record(RecordedRequest(self.path, headers, body))
        if (refused := metadata_error(body.get("metadata"))) is not None:
            self._send_json(400, {"error": {"message": refused, "type": "invalid_request_error",
                                            "param": "metadata", "code": None}})
            return
        # the endpoint's own concurrency cap: requests beyond it queue here, like at a provider
        with fake._slots or contextlib.nullcontext():
            self._complete(fake, body, headers)

    def _read_body(self) -> bytes:
        # a streamed upload (a file-like object of unknown size) arrives chunked, without a length
        if "chunked" in (self.headers.get("transfer-encoding") or "").lower():
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                pass
            return b"".join(chunks)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length)

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
        completion = chat_completion(fake._count_completion(), body, response)
        fake.keep_completion(completion, body)  # finished: stored even if the client is gone
        self._send_json(200, completion)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_raw(status, json.dumps(obj).encode(), {})

    def _send_raw(self, status: int, data: bytes, extra: dict[str, str],
                  content_type: str = "application/json") -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
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

    def handle_error(self, request: Any, client_address: Any) -> None:
        # a client killed mid-request (the fault rehearsal SIGKILLs a build process) resets its
        # connection: the client's doing, not a stand-in failure worth a traceback
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeOpenAIServer(FilesAndBatches, StoredCompletions):
    """``with FakeOpenAIServer(responder) as srv: ... srv.base_url ...``

    ``latency`` is added to every completion; ``max_concurrency`` caps completions in progress
    (the rest wait their turn), so ``max_concurrency / latency`` is the endpoint's best rate.

    Batches: ``latency`` and ``max_concurrency`` do not apply to batch lines; instead a batch
    spends at least ``batch_latency`` seconds ``in_progress``. ``batch_fate(n)`` (n = 1, 2, ...
    in creation order) may return ``"failed"`` or ``"expired"`` to make the n-th batch end so.
    ``batch_latency``, ``batch_fate`` and ``responder`` may be reassigned while the server runs.

    Stored completions (:mod:`arcticqa.standins.stored`): ``keeps_completions=False`` makes an
    endpoint that stores none and answers 404 to their look-ups.
    """

    def __init__(self, responder: Responder, *, latency: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, max_concurrency: int | None = None, batch_latency: float = 0.0,
                 batch_fate: BatchFate | None = None, keep_requests: bool = True,
                 keeps_completions: bool = True) -> None:
        self.responder = responder
        #: False for a long-lived server (``arcticqa standin``): requests are not kept for assertions
        self.keep_requests = keep_requests
        self.latency = latency
        #: at most this many completions are in progress (latency included); None: no cap
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self.requests: list[RecordedRequest] = []
        #: chat.completion objects produced, live and in batches (their ids are numbered by it)
        self.completions = 0
        self._init_batches(batch_latency, batch_fate)
        self._init_stored(keeps_completions)
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._server = _Server((host, port), _Handler)
        self._server.fake = self
        # stop() waits for the serve loop's next poll; the default 0.5 s made every test pay that
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _record(self, request: RecordedRequest) -> None:
        if not self.keep_requests:
            return
        with self._lock:
            self.requests.append(request)

    def _count_completion(self) -> int:
        with self._lock:
            self.completions += 1
            return self.completions

    def requests_for(self, role: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.role == role]

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closed.set()
        self._wake_batches()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
