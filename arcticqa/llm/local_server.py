"""A local OpenAI-compatible server: the stand-in for tests, the demo and benchmarks.

Real HTTP on 127.0.0.1 (random free port): the real openai + instructor clients talk to it
unchanged. Replies are produced by a *responder* (a function of the request body and headers)
and can be faults: 429 with Retry-After, 5xx, dropped connections, hangs (client timeouts),
malformed JSON, ``finish_reason=length``. Every request is logged for assertions.

It also speaks the Files and Batch APIs (``/v1/files``, ``/v1/batches``), enough for the real
SDK to upload a JSONL input, create a batch, poll it, cancel it and download the output and
error files. Batch lines are answered by the same responder as live chat completions (the role
comes from the ``custom_id`` prefix before ``|``, since batch lines carry no headers), and whole
batches can be made to fail or expire with ``batch_fate``. Everything is kept in memory.
"""

from __future__ import annotations

import contextlib
import copy
import email.policy
import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = [
    "Reply",
    "Fault",
    "Drop",
    "Hang",
    "RecordedRequest",
    "StoredFile",
    "BatchFate",
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


@dataclass
class StoredFile:
    """An uploaded (or batch-produced) file: its File object and its bytes."""

    meta: dict[str, Any]
    content: bytes


_BATCH_PURPOSE = "batch"
_BATCH_ENDPOINT = "/v1/chat/completions"
_ACTIVE = ("validating", "in_progress", "finalizing")
_INJECTED_FAILURE: dict[str, Any] = {
    "object": "list",
    "data": [{"code": "injected", "message": "injected batch failure", "line": None, "param": None}],
}

# routes match on the path's tail, like the chat route, so any base-URL prefix works
_FILES = re.compile(r"(?:/.*)?/files")
_FILE = re.compile(r"(?:/.*)?/files/(?P<id>[^/]+)")
_FILE_CONTENT = re.compile(r"(?:/.*)?/files/(?P<id>[^/]+)/content")
_BATCHES = re.compile(r"(?:/.*)?/batches")
_BATCH = re.compile(r"(?:/.*)?/batches/(?P<id>[^/]+)")
_BATCH_CANCEL = re.compile(r"(?:/.*)?/batches/(?P<id>[^/]+)/cancel")


def _route_path(raw_path: str) -> str:
    return urlsplit(raw_path).path.rstrip("/")


def _api_error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _now() -> int:
    return int(time.time())


def _chat_completion(fake: FakeOpenAIServer, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The chat.completion object for ``reply``; the one builder, so live and batch answers cannot drift."""
    number = fake._count_completion()
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
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


def _batch_headers(custom_id: str) -> dict[str, str]:
    """Batch lines carry no headers, so the arcticqa gateway puts the role before ``|`` in custom_id."""
    return {"x-arcticqa-role": custom_id.split("|", 1)[0]} if "|" in custom_id else {}


def _output_entry(custom_id: str, status: int, body: Any) -> dict[str, Any]:
    return {"id": _new_id("batch_req_"), "custom_id": custom_id,
            "response": {"status_code": status, "request_id": _new_id("req_"), "body": body},
            "error": None}


def _error_entry(custom_id: str, code: str, message: str) -> dict[str, Any]:
    return {"id": _new_id("batch_req_"), "custom_id": custom_id, "response": None,
            "error": {"code": code, "message": message}}


def _jsonl(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries)


def _parse_multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """Form fields by name: (filename, bytes). The stdlib MIME parser needs the header it lives under."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
    message = BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not isinstance(message, EmailMessage) or not message.is_multipart():
        raise ValueError("expected a multipart/form-data body")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _jsonl_problem(content: bytes) -> str | None:
    """Why ``content`` is not JSONL of objects, or None if it is."""
    seen_line = False
    for number, text in enumerate(content.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except ValueError as exc:  # also catches bad UTF-8
            return f"line {number} is not valid JSON: {exc}"
        if not isinstance(obj, dict):
            return f"line {number} is not a JSON object"
        seen_line = True
    return None if seen_line else "the file has no JSON lines"


def _batch_requests(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The input's request lines and, like OpenAI's validating step, every problem with them."""
    requests: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()

    def problem(number: int | None, message: str, param: str | None) -> None:
        problems.append({"code": "invalid_request", "message": message, "line": number, "param": param})

    for number, text in enumerate(content.splitlines(), start=1):
        if not text.strip():
            continue
        line = json.loads(text)  # the upload already checked that every line is a JSON object
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            problem(number, "custom_id must be a non-empty string", "custom_id")
        elif custom_id in seen:
            problem(number, f"duplicate custom_id {custom_id!r}", "custom_id")
        else:
            seen.add(custom_id)
        if line.get("method") != "POST":
            problem(number, "method must be POST", "method")
        if line.get("url") != endpoint:
            problem(number, f"url must be {endpoint!r}, the batch's endpoint", "url")
        if not isinstance(line.get("body"), dict):
            problem(number, "body must be a JSON object", "body")
        requests.append(line)
    if not requests:
        problem(None, "the input file has no requests", None)
    return requests, problems


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
        fake = self.server.fake
        path = _route_path(self.path)
        if match := _FILE_CONTENT.fullmatch(path):
            stored = fake._file(match["id"])
            if stored is None:
                self._send_json(404, _api_error(f"No such File object: {match['id']}"))
            else:
                self._send_raw(200, stored.content, {}, content_type="application/octet-stream")
        elif match := _FILE.fullmatch(path):
            stored = fake._file(match["id"])
            if stored is None:
                self._send_json(404, _api_error(f"No such File object: {match['id']}"))
            else:
                self._send_json(200, stored.meta)
        elif _BATCHES.fullmatch(path):
            self._send_json(*fake._list_batches(parse_qs(urlsplit(self.path).query)))
        elif match := _BATCH.fullmatch(path):
            self._send_json(*fake._retrieve_batch(match["id"]))
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_DELETE(self) -> None:
        self._read_body()  # keep the keep-alive stream aligned if a client sent a body
        match = _FILE.fullmatch(_route_path(self.path))
        if match is None:
            self._send_json(404, _api_error(f"unknown path {self.path}"))
        else:
            self._send_json(*self.server.fake._delete_file(match["id"]))

    def do_POST(self) -> None:
        raw = self._read_body()
        fake = self.server.fake
        path = _route_path(self.path)
        if _FILES.fullmatch(path):
            self._send_json(*fake._upload_file(self.headers.get("content-type") or "", raw))
            return
        if _BATCHES.fullmatch(path):
            self._send_json(*fake._create_batch(raw))
            return
        if match := _BATCH_CANCEL.fullmatch(path):
            self._send_json(*fake._cancel_batch(match["id"]))
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
        self._send_json(200, _chat_completion(fake, body, response))

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


class FakeOpenAIServer:
    """``with FakeOpenAIServer(responder) as srv: ... srv.base_url ...``

    ``latency`` is added to every completion; ``max_concurrency`` caps completions in progress
    (the rest wait their turn), so ``max_concurrency / latency`` is the endpoint's best rate.

    Batches: ``latency`` and ``max_concurrency`` do not apply to batch lines; instead a batch
    spends at least ``batch_latency`` seconds ``in_progress``. ``batch_fate(n)`` (n = 1, 2, ...
    in creation order) may return ``"failed"`` or ``"expired"`` to make the n-th batch end so.
    ``batch_latency``, ``batch_fate`` and ``responder`` may be reassigned while the server runs.
    """

    def __init__(self, responder: Responder, *, latency: float = 0.0, host: str = "127.0.0.1",
                 port: int = 0, max_concurrency: int | None = None, batch_latency: float = 0.0,
                 batch_fate: BatchFate | None = None) -> None:
        self.responder = responder
        self.latency = latency
        #: at most this many completions are in progress (latency included); None: no cap
        self.max_concurrency = max_concurrency
        self._slots = threading.BoundedSemaphore(max_concurrency) if max_concurrency else None
        self.requests: list[RecordedRequest] = []
        #: chat.completion objects produced, live and in batches (their ids are numbered by it)
        self.completions = 0
        self.batch_latency = batch_latency
        self.batch_fate = batch_fate
        #: files uploaded by clients (batch output and error files are not counted)
        self.files_created = 0
        self.batches_created = 0
        #: every batch input line handed to the responder, in the order processed
        self.batch_lines: list[dict[str, Any]] = []
        #: GET /v1/batches/{id} calls, to check how hard a client polls
        self.batch_status_polls = 0
        #: file id -> file, uploads and batch outputs alike
        self.files: dict[str, StoredFile] = {}
        #: batch id -> Batch object as served (mutated by the batch's thread under ``_lock``)
        self.batches: dict[str, dict[str, Any]] = {}
        self._batch_wake: dict[str, threading.Event] = {}
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
        with self._lock:
            self.requests.append(request)

    def _count_completion(self) -> int:
        with self._lock:
            self.completions += 1
            return self.completions

    def requests_for(self, role: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.role == role]

    # -- files ---------------------------------------------------------------------------------

    def _store_file(self, filename: str, purpose: str, content: bytes) -> dict[str, Any]:
        file_id = _new_id("file-")
        meta: dict[str, Any] = {"id": file_id, "object": "file", "bytes": len(content), "created_at": _now(),
                "filename": filename, "purpose": purpose, "status": "processed"}
        with self._lock:
            self.files[file_id] = StoredFile(meta, content)
        return meta

    def _file(self, file_id: object) -> StoredFile | None:
        with self._lock:
            return self.files.get(file_id) if isinstance(file_id, str) else None

    def _upload_file(self, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            fields = _parse_multipart(content_type, raw)
        except ValueError as exc:
            return 400, _api_error(str(exc))
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose != _BATCH_PURPOSE:
            return 400, _api_error(f"unsupported purpose {purpose!r}; this server only takes 'batch'",
                                   "invalid_value")
        if "file" not in fields:
            return 400, _api_error("missing the 'file' field", "missing_required_parameter")
        filename, content = fields["file"]
        if problem := _jsonl_problem(content):
            return 400, _api_error(f"invalid JSONL file: {problem}", "invalid_file_format")
        meta = self._store_file(filename or "upload.jsonl", purpose, content)
        with self._lock:
            self.files_created += 1
        return 200, meta

    def _delete_file(self, file_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.files.pop(file_id, None) is None:
                return 404, _api_error(f"No such File object: {file_id}")
        return 200, {"id": file_id, "object": "file", "deleted": True}

    # -- batches -------------------------------------------------------------------------------

    def _create_batch(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return 400, _api_error("the request body is not valid JSON")
        if not isinstance(request, dict):
            return 400, _api_error("the request body must be a JSON object")
        input_file_id = request.get("input_file_id")
        endpoint = request.get("endpoint")
        window = request.get("completion_window")
        metadata = request.get("metadata")
        if endpoint != _BATCH_ENDPOINT:
            return 400, _api_error(f"unsupported endpoint {endpoint!r}; only {_BATCH_ENDPOINT!r}",
                                   "invalid_value")
        if window != "24h":
            return 400, _api_error(f"unsupported completion_window {window!r}; only '24h'", "invalid_value")
        if metadata is not None and not isinstance(metadata, dict):
            return 400, _api_error("metadata must be an object", "invalid_type")
        stored = self._file(input_file_id)
        if stored is None:
            return 404, _api_error(f"No such File object: {input_file_id}")
        if stored.meta["purpose"] != _BATCH_PURPOSE:
            return 400, _api_error(f"file {input_file_id} has purpose {stored.meta['purpose']!r}, not 'batch'")
        with self._lock:
            self.batches_created += 1
            number = self.batches_created
        fate = self.batch_fate(number) if self.batch_fate is not None else None
        if fate not in (None, "failed", "expired"):
            # a test bug: say so loudly rather than run a batch with a fate nobody meant
            return 500, _api_error(f"batch_fate returned {fate!r}; expected None, 'failed' or 'expired'")
        created = _now()
        batch: dict[str, Any] = {
            "id": _new_id("batch_"), "object": "batch", "endpoint": endpoint, "errors": None,
            "input_file_id": input_file_id, "completion_window": window, "status": "validating",
            "output_file_id": None, "error_file_id": None, "created_at": created,
            "in_progress_at": None, "expires_at": created + 24 * 3600, "finalizing_at": None,
            "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
            "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": metadata,
        }
        with self._lock:
            self.batches[batch["id"]] = batch
            self._batch_wake[batch["id"]] = threading.Event()
            snapshot = copy.deepcopy(batch)
        threading.Thread(target=self._run_batch, args=(batch["id"], stored.content, fate),
                         name=f"fake-batch-{number}", daemon=True).start()
        return 200, snapshot

    def _retrieve_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.batch_status_polls += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _api_error(f"No such Batch object: {batch_id}")
            return 200, copy.deepcopy(batch)

    def _list_batches(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        try:
            limit = min(max(int(query.get("limit", ["20"])[0]), 1), 100)
        except ValueError:
            return 400, _api_error("limit must be an integer", "invalid_type")
        after = query.get("after", [None])[0]
        with self._lock:
            newest_first = [copy.deepcopy(b) for b in reversed(self.batches.values())]
        if after is not None:
            ids = [b["id"] for b in newest_first]
            newest_first = newest_first[ids.index(after) + 1:] if after in ids else []
        page = newest_first[:limit]
        return 200, {"object": "list", "data": page, "has_more": len(newest_first) > limit,
                     "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None}

    def _cancel_batch(self, batch_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return 404, _api_error(f"No such Batch object: {batch_id}")
            if batch["status"] in _ACTIVE:
                batch["status"] = "cancelling"
                batch["cancelling_at"] = _now()
                self._batch_wake[batch_id].set()
            elif batch["status"] not in ("cancelling", "cancelled"):
                return 409, _api_error(f"Cannot cancel a batch with status {batch['status']!r}.")
            return 200, copy.deepcopy(batch)

    def _batch_status(self, batch_id: str) -> str:
        with self._lock:
            return str(self.batches[batch_id]["status"])

    def _answer_batch_line(self, line: dict[str, Any]) -> dict[str, Any]:
        custom_id: str = line["custom_id"]
        body: dict[str, Any] = line["body"]
        with self._lock:
            self.batch_lines.append(line)
        try:
            response = self.responder(body, _batch_headers(custom_id))
        except Exception as exc:  # a broken responder must fail its line, not wedge the batch forever
            return _error_entry(custom_id, "server_error", f"the responder raised {exc!r}")
        # no client is waiting on a batch line, so a hang or a drop is a line that never got an answer
        if isinstance(response, Hang):
            return _error_entry(custom_id, "server_error", "the request timed out")
        if isinstance(response, Drop):
            return _error_entry(custom_id, "server_error", "the connection was dropped")
        if isinstance(response, Fault):
            try:
                fault_body: Any = json.loads(response.body)
            except ValueError:  # a deliberately malformed fault body is passed on as text
                fault_body = response.body
            return _output_entry(custom_id, response.status, fault_body)
        return _output_entry(custom_id, 200, _chat_completion(self, body, response))

    def _run_batch(self, batch_id: str, content: bytes, fate: str | None) -> None:
        wake = self._batch_wake[batch_id]
        with self._lock:
            batch = self.batches[batch_id]
            endpoint = batch["endpoint"]
        requests, problems = _batch_requests(content, endpoint)
        if fate == "failed" or problems:
            with self._lock:
                if batch["status"] == "cancelling":
                    batch.update(status="cancelled", cancelled_at=_now())
                else:
                    found = _INJECTED_FAILURE if fate == "failed" else {"object": "list", "data": problems}
                    batch.update(status="failed", failed_at=_now(), errors=copy.deepcopy(found))
            return

        started = time.monotonic()
        with self._lock:
            if batch["status"] == "validating":
                batch.update(status="in_progress", in_progress_at=_now())
            batch["request_counts"]["total"] = len(requests)
        # an expiring batch runs out of window halfway through
        answerable = len(requests) // 2 if fate == "expired" else len(requests)
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for index, line in enumerate(requests):
            if self._closed.is_set():
                return
            if self._batch_status(batch_id) == "cancelling":
                entry = _error_entry(line["custom_id"], "batch_cancelled",
                                     "The batch was cancelled before this request ran.")
            elif index >= answerable:
                entry = _error_entry(line["custom_id"], "batch_expired",
                                     "This request could not be executed before the completion window expired.")
            else:
                entry = self._answer_batch_line(line)
                ok = entry["response"] is not None and entry["response"]["status_code"] == 200
                with self._lock:
                    batch["request_counts"]["completed" if ok else "failed"] += 1
            (outputs if entry["response"] is not None else errors).append(entry)

        remaining = self.batch_latency - (time.monotonic() - started)
        if remaining > 0:
            wake.wait(remaining)  # a cancel (or stop) cuts the wait short
        if self._closed.is_set():
            return
        with self._lock:
            if batch["status"] == "in_progress" and fate != "expired":
                batch.update(status="finalizing", finalizing_at=_now())
        # reversed, because OpenAI does not keep input order and clients must not rely on it
        output_id = (self._store_file(f"{batch_id}_output.jsonl", "batch_output", _jsonl(outputs[::-1]))["id"]
                     if outputs else None)
        error_id = (self._store_file(f"{batch_id}_error.jsonl", "batch_output", _jsonl(errors[::-1]))["id"]
                    if errors else None)
        completed = sum(1 for e in outputs if e["response"]["status_code"] == 200)
        with self._lock:
            batch.update(output_file_id=output_id, error_file_id=error_id,
                         request_counts={"total": len(requests), "completed": completed,
                                         "failed": len(requests) - completed})
            if batch["status"] == "cancelling":
                batch.update(status="cancelled", cancelled_at=_now())
            elif fate == "expired":
                batch.update(status="expired", expired_at=_now())
            else:
                batch.update(status="completed", completed_at=_now())

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closed.set()
        with self._lock:
            wakes = list(self._batch_wake.values())
        for wake in wakes:
            wake.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
