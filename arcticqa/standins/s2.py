"""A Semantic Scholar Graph API stand-in: real HTTP on 127.0.0.1, for pointing the real client at.

Serves ``GET /graph/v1/paper/search/bulk`` (token pagination, pages of ``page_size`` records as
the real API's 1,000, ``year`` and ``openAccessPdf`` filters, ``fields`` projection) and
``POST /graph/v1/paper/batch``. Faults can be injected: status codes with or without
``Retry-After`` (429 storms, 5xx, non-JSON bodies), empty pages that still carry a token, and
expired continuation tokens. ``rate_per_s`` enforces the API's rate limit as the service does:
a request beyond it (a bucket holding ``burst`` requests) is answered 429, with a
``Retry-After`` saying when it would be taken. Every request is recorded as received
(``keep_requests=False``: only counted).
"""

from __future__ import annotations

import itertools
import json
import math
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from arcticqa.standins.limits import ServerBucket

__all__ = ["S2StandIn", "RecordedRequest", "Fault", "BULK_PATH", "BATCH_PATH"]

BULK_PATH = "/graph/v1/paper/search/bulk"
BATCH_PATH = "/graph/v1/paper/batch"


@dataclass
class RecordedRequest:
    method: str
    path: str
    raw_query: str
    params: dict[str, list[str]]
    headers: dict[str, str]
    body: Any = None

    def param(self, name: str) -> str | None:
        values = self.params.get(name)
        return values[0] if values else None


@dataclass
class Fault:
    endpoint: str  # "bulk" or "batch"
    status: int = 503
    retry_after: str | None = None
    body: bytes | None = None  # None: a JSON error body
    empty_page: bool = False  # 200 with data=[] and a token


@dataclass
class _State:
    corpus: dict[str, list[dict[str, Any]]] | list[dict[str, Any]]
    page_size: int
    requests: list[RecordedRequest] = field(default_factory=list)
    faults: deque[Fault] = field(default_factory=deque)
    tokens: dict[str, tuple[str, int]] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    lock: threading.Lock = field(default_factory=threading.Lock)
    bucket: ServerBucket | None = None
    keep_requests: bool = True
    received: int = 0
    refused: int = 0  # 429s of the rate limit (injected faults are not counted here)
    pages: int = 0  # bulk-search pages answered 200
    #: (query, year, openAccessPdf) → the matching records (the corpus does not change)
    matching: dict[tuple[str, str | None, bool], list[dict[str, Any]]] = field(default_factory=dict)


def _matches_filters(paper: dict[str, Any], params: dict[str, list[str]]) -> bool:
    year = params.get("year", [None])[0]
    if year:
        low, _, high = year.partition("-")
        value = paper.get("year")
        if not isinstance(value, int):
            return False
        if low and value < int(low) or high and value > int(high):
            return False
    if "openAccessPdf" in params:
        oa = paper.get("openAccessPdf")
        if not (isinstance(oa, dict) and oa.get("url")):
            return False
    return True


def _matching(state: _State, query: str, params: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The query's records that pass the filters, computed once per (query, filters)."""
    key = (query, params.get("year", [None])[0], "openAccessPdf" in params)
    if key not in state.matching:
        corpus = state.corpus if isinstance(state.corpus, list) else state.corpus.get(query, [])
        state.matching[key] = [p for p in corpus if _matches_filters(p, params)]
    return state.matching[key]


def _project(paper: dict[str, Any], fields: str | None) -> dict[str, Any]:
    if not fields:
        return {k: paper[k] for k in ("paperId", "title") if k in paper}
    wanted = {"paperId", *fields.split(",")}
    return {k: v for k, v in paper.items() if k in wanted}


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
            return

        def _send(self, status: int, payload: Any = None, *, raw: bytes | None = None,
                  headers: dict[str, str] | None = None) -> None:
            body = raw if raw is not None else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _record(self, body: Any = None) -> RecordedRequest:
            split = urlsplit(self.path)
            request = RecordedRequest(
                method=self.command, path=split.path, raw_query=split.query,
                params=parse_qs(split.query, keep_blank_values=True),
                headers={k.lower(): v for k, v in self.headers.items()}, body=body)
            with state.lock:
                state.received += 1
                if state.keep_requests:
                    state.requests.append(request)
            return request

        def _limited(self) -> bool:
            """Answer 429 (and True) when the rate limit refuses this request."""
            with state.lock:
                if state.bucket is None:
                    return False
                wait = state.bucket.wait(1)
                if wait <= 0:
                    state.bucket.take(1)
                    return False
                state.refused += 1
            self._send(429, {"message": "Too Many Requests. Please wait and try again or apply for a key "
                                        "for higher rate limits.", "code": "429"},
                       headers={"Retry-After": f"{math.ceil(wait * 1000) / 1000:g}"})
            return True

        def _fault(self, endpoint: str) -> Fault | None:
            with state.lock:
                if state.faults and state.faults[0].endpoint == endpoint:
                    return state.faults.popleft()
            return None

        def _apply(self, fault: Fault) -> None:
            if fault.empty_page:
                self._send(200, {"total": 99, "token": "stale-empty", "data": []})
                return
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
            if fault.body is not None:
                self._send(fault.status, raw=fault.body, headers=headers)
            else:
                self._send(fault.status, {"message": f"injected {fault.status}",
                                          "error": f"injected {fault.status}"}, headers=headers)

        def do_GET(self) -> None:  # noqa: N802 - stdlib name
            request = self._record()
            if request.path != BULK_PATH:
                self._send(404, {"error": "not found"})
                return
            if self._limited():
                return
            fault = self._fault("bulk")
            if fault is not None:
                self._apply(fault)
                return
            token = request.param("token")
            query = request.param("query") or ""
            with state.lock:
                if token is not None:
                    if token in state.expired or token not in state.tokens:
                        self._send(400, {"error": "Invalid or expired continuation token"})
                        return
                    query, offset = state.tokens[token]
                else:
                    offset = 0
                matching = _matching(state, query, request.params)
                page = matching[offset:offset + state.page_size]
                next_offset = offset + state.page_size
                next_token = None
                if next_offset < len(matching):
                    next_token = f"tok{next(state.counter)}"
                    state.tokens[next_token] = (query, next_offset)
                state.pages += 1
            self._send(200, {"total": len(matching), "token": next_token,
                             "data": [_project(p, request.param("fields")) for p in page]})

        def do_POST(self) -> None:  # noqa: N802 - stdlib name
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"null")
            request = self._record(body)
            if request.path != BATCH_PATH:
                self._send(404, {"error": "not found"})
                return
            if self._limited():
                return
            fault = self._fault("batch")
            if fault is not None:
                self._apply(fault)
                return
            corpus = state.corpus if isinstance(state.corpus, list) else \
                [p for papers in state.corpus.values() for p in papers]
            by_id: dict[str, dict[str, Any]] = {}
            for paper in corpus:
                by_id[str(paper.get("paperId"))] = paper
                doi = (paper.get("externalIds") or {}).get("DOI")
                if doi:
                    by_id[f"DOI:{doi}".lower()] = paper
            ids = body.get("ids", []) if isinstance(body, dict) else []
            found = [by_id.get(i) or by_id.get(i.lower()) for i in ids]
            self._send(200, [_project(p, request.param("fields")) if p else None for p in found])

    return Handler


class S2StandIn:
    """Context manager: ``with S2StandIn(papers, page_size=2) as s2: ... s2.url ...``.

    ``corpus``: the records every query finds (a list), or by query (a dict). ``rate_per_s``:
    the rate limit (None: none), over a bucket of ``burst`` requests.
    """

    def __init__(self, corpus: dict[str, list[dict[str, Any]]] | list[dict[str, Any]], *,
                 page_size: int = 1000, rate_per_s: float | None = None, burst: float = 1.0,
                 keep_requests: bool = True) -> None:
        bucket = ServerBucket(rate_per_s, burst) if rate_per_s else None
        self._state = _State(corpus=corpus, page_size=page_size, bucket=bucket, keep_requests=keep_requests)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self._state))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def counts(self) -> dict[str, int]:
        """Requests received, refused by the rate limit (429) and bulk pages answered."""
        with self._state.lock:
            return {"received": self._state.received, "refused": self._state.refused, "pages": self._state.pages}

    def bulk_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == BULK_PATH]

    def inject(self, status: int, *, times: int = 1, endpoint: str = "bulk",
               retry_after: str | None = None, body: bytes | None = None) -> None:
        with self._state.lock:
            for _ in range(times):
                self._state.faults.append(Fault(endpoint=endpoint, status=status,
                                                retry_after=retry_after, body=body))

    def inject_empty_page(self, *, times: int = 1) -> None:
        with self._state.lock:
            for _ in range(times):
                self._state.faults.append(Fault(endpoint="bulk", status=200, empty_page=True))

    def clear_faults(self) -> None:
        with self._state.lock:
            self._state.faults.clear()

    def expire_tokens(self) -> None:
        """Every token issued so far is rejected from now on (400, like an expired token)."""
        with self._state.lock:
            self._state.expired.update(self._state.tokens)

    def start(self) -> S2StandIn:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> S2StandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
