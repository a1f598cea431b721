"""A real HTTP server on 127.0.0.1 that misbehaves on purpose, for the PDF downloader's tests.

Routes are registered per test: each maps a path to a list of canned answers (the last one
repeats), so "429 then 200" is ``[Reply(429), Reply(200, body)]``. Special bodies model the
reliability cases: ``trickle`` sends one byte per interval (slow-loris), ``endless`` streams
forever without Content-Length. The server records every request (path, headers) and how many
body bytes it actually sent, so tests can assert a download stopped early.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Reply", "PdfServer", "pdf_server"]


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: "normal", "trickle" (1 byte per ``interval``), "endless" (chunks forever, no length)
    mode: str = "normal"
    interval: float = 0.05
    send_length: bool = True


class PdfServer:
    def __init__(self) -> None:
        self.routes: dict[str, list[Reply]] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.sent: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def route(self, path: str, *replies: Reply) -> str:
        self.routes[path] = list(replies)
        return self.url(path)

    def _next(self, path: str) -> Reply:
        with self._lock:
            replies = self.routes.get(path)
            if not replies:
                return Reply(404, b"not found")
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def do_GET(self) -> None:  # noqa: N802
                path = self.path
                with server._lock:
                    server.requests.append((path, dict(self.headers.items())))
                reply = server._next(path)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                sent = 0
                try:
                    if reply.mode == "endless":
                        self.send_header("Content-Type", "application/pdf")
                        self.send_header("Connection", "close")
                        self.end_headers()
                        chunk = b"%PDF-1.7\n" + b"0" * 65527
                        while True:
                            self.wfile.write(chunk)
                            sent += len(chunk)
                            with server._lock:
                                server.sent[path] = sent
                    if reply.send_length:
                        self.send_header("Content-Length", str(len(reply.body)))
                    else:
                        self.send_header("Connection", "close")
                    self.end_headers()
                    if reply.mode == "trickle":
                        for i in range(len(reply.body)):
                            self.wfile.write(reply.body[i:i + 1])
                            self.wfile.flush()
                            sent += 1
                            time.sleep(reply.interval)
                    else:
                        for i in range(0, len(reply.body), 65536):
                            self.wfile.write(reply.body[i:i + 65536])
                            sent += len(reply.body[i:i + 65536])
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, which is what several tests want
                finally:
                    with server._lock:
                        server.sent[path] = server.sent.get(path, 0) + sent if reply.mode != "endless" \
                            else sent
                if not reply.send_length:
                    self.close_connection = True

        return Handler

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def pdf_server() -> Iterator[PdfServer]:
    server = PdfServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
