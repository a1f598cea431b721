"""The Files and Batch APIs of the OpenAI-compatible stand-in (``/v1/files``, ``/v1/batches``).

Enough for the real SDK to upload a JSONL input, create a batch, poll it, cancel it and download
the output and error files. Batch lines are answered by the server's responder, like live chat
completions (the role comes from the ``custom_id`` prefix before ``|``, since batch lines carry
no headers), and whole batches can be made to fail or expire with ``batch_fate``. Everything is
kept in memory. :class:`FilesAndBatches` is the server's half that holds them; the HTTP routes
call its ``handle_*`` methods.
"""

from __future__ import annotations

import copy
import email.policy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

from arcticqa.standins.replies import Drop, Fault, Hang, Responder, chat_completion

__all__ = ["StoredFile", "BatchFate", "FilesAndBatches", "api_error"]

#: called with the 1-based number of each created batch: None (run normally), "failed" or "expired"
BatchFate = Callable[[int], str | None]


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
def api_error(message: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}


def _new_id(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def _now() -> int:
    return int(time.time())

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


_FILES = re.compile(r"(?:/.*)?/files")
_FILE = re.compile(r"(?:/.*)?/files/(?P<id>[^/]+)")
_FILE_CONTENT = re.compile(r"(?:/.*)?/files/(?P<id>[^/]+)/content")
_BATCHES = re.compile(r"(?:/.*)?/batches")
_BATCH = re.compile(r"(?:/.*)?/batches/(?P<id>[^/]+)")
_BATCH_CANCEL = re.compile(r"(?:/.*)?/batches/(?P<id>[^/]+)/cancel")


def _route_path(raw_path: str) -> str:
    return urlsplit(raw_path).path.rstrip("/")


#: a GET answer: (status, JSON object) or (status, raw bytes for a file's content)
Answer = tuple[int, dict[str, Any] | bytes]


class FilesAndBatches:
    """Uploaded files and batches, with the thread that runs each batch.

    The server class mixes this in; it provides ``responder``, ``_lock``, ``_closed`` and
    ``_count_completion``.
    """

    responder: Responder
    _lock: threading.Lock
    _closed: threading.Event

    def _count_completion(self) -> int:
        raise NotImplementedError

    def _init_batches(self, batch_latency: float, batch_fate: BatchFate | None) -> None:
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

    def _wake_batches(self) -> None:
        with self._lock:
            wakes = list(self._batch_wake.values())
        for wake in wakes:
            wake.set()

    # -- routes --------------------------------------------------------------------------------

    def handle_get(self, raw_path: str) -> Answer | None:
        """The answer to a files or batches GET, or None when the path is not one of theirs."""
        path = _route_path(raw_path)
        if match := _FILE_CONTENT.fullmatch(path):
            stored = self._file(match["id"])
            return (404, api_error(f"No such File object: {match['id']}")) if stored is None else (200, stored.content)
        if match := _FILE.fullmatch(path):
            stored = self._file(match["id"])
            return (404, api_error(f"No such File object: {match['id']}")) if stored is None else (200, stored.meta)
        if _BATCHES.fullmatch(path):
            return self._list_batches(parse_qs(urlsplit(raw_path).query))
        if match := _BATCH.fullmatch(path):
            return self._retrieve_batch(match["id"])
        return None

    def handle_delete(self, raw_path: str) -> tuple[int, dict[str, Any]]:
        match = _FILE.fullmatch(_route_path(raw_path))
        if match is None:
            return 404, api_error(f"unknown path {raw_path}")
        return self._delete_file(match["id"])

    def handle_post(self, raw_path: str, content_type: str, raw: bytes) -> tuple[int, dict[str, Any]] | None:
        """The answer to a files or batches POST, or None when the path is not one of theirs."""
        path = _route_path(raw_path)
        if _FILES.fullmatch(path):
            return self._upload_file(content_type, raw)
        if _BATCHES.fullmatch(path):
            return self._create_batch(raw)
        if match := _BATCH_CANCEL.fullmatch(path):
            return self._cancel_batch(match["id"])
        return None

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
            return 400, api_error(str(exc))
        purpose = fields.get("purpose", (None, b""))[1].decode("utf-8", "replace")
        if purpose != _BATCH_PURPOSE:
            return 400, api_error(f"unsupported purpose {purpose!r}; this server only takes 'batch'",
                                   "invalid_value")
        if "file" not in fields:
            return 400, api_error("missing the 'file' field", "missing_required_parameter")
        filename, content = fields["file"]
        if problem := _jsonl_problem(content):
            return 400, api_error(f"invalid JSONL file: {problem}", "invalid_file_format")
        meta = self._store_file(filename or "upload.jsonl", purpose, content)
        with self._lock:
            self.files_created += 1
        return 200, meta

    def _delete_file(self, file_id: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            if self.files.pop(file_id, None) is None:
                return 404, api_error(f"No such File object: {file_id}")
        return 200, {"id": file_id, "object": "file", "deleted": True}

    # -- batches -------------------------------------------------------------------------------

    def _create_batch(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            request = json.loads(raw or b"{}")
        except ValueError:
            return 400, api_error("the request body is not valid JSON")
        if not isinstance(request, dict):
            return 400, api_error("the request body must be a JSON object")
        input_file_id = request.get("input_file_id")
        endpoint = request.get("endpoint")
        window = request.get("completion_window")
        metadata = request.get("metadata")
        if endpoint != _BATCH_ENDPOINT:
            return 400, api_error(f"unsupported endpoint {endpoint!r}; only {_BATCH_ENDPOINT!r}",
                                   "invalid_value")
        if window != "24h":
            return 400, api_error(f"unsupported completion_window {window!r}; only '24h'", "invalid_value")
        if metadata is not None and not isinstance(metadata, dict):
            return 400, api_error("metadata must be an object", "invalid_type")
        stored = self._file(input_file_id)
        if stored is None:
            return 404, api_error(f"No such File object: {input_file_id}")
        if stored.meta["purpose"] != _BATCH_PURPOSE:
            return 400, api_error(f"file {input_file_id} has purpose {stored.meta['purpose']!r}, not 'batch'")
        with self._lock:
            self.batches_created += 1
            number = self.batches_created
        fate = self.batch_fate(number) if self.batch_fate is not None else None
        if fate not in (None, "failed", "expired"):
            # a test bug: say so loudly rather than run a batch with a fate nobody meant
            return 500, api_error(f"batch_fate returned {fate!r}; expected None, 'failed' or 'expired'")
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
                return 404, api_error(f"No such Batch object: {batch_id}")
            return 200, copy.deepcopy(batch)

    def _list_batches(self, query: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        try:
            limit = min(max(int(query.get("limit", ["20"])[0]), 1), 100)
        except ValueError:
            return 400, api_error("limit must be an integer", "invalid_type")
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
                return 404, api_error(f"No such Batch object: {batch_id}")
            if batch["status"] in _ACTIVE:
                batch["status"] = "cancelling"
                batch["cancelling_at"] = _now()
                self._batch_wake[batch_id].set()
            elif batch["status"] not in ("cancelling", "cancelled"):
                return 409, api_error(f"Cannot cancel a batch with status {batch['status']!r}.")
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
        return _output_entry(custom_id, 200, chat_completion(self._count_completion(), body, response))

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
