"""What every request to the workbench passes before a route sees it, and what every response carries.

:class:`Guard` is a plain ASGI middleware (no ``BaseHTTPMiddleware``: it never buffers a body it
has not bounded). In order, before anything else is read or decided:

1. a ``Content-Length`` above :data:`MAX_BODY` is refused with 413 at once, without reading the
   body; a malformed one (not digits, or two that differ) with 400;
2. the body is read into memory only up to :data:`MAX_BODY` bytes: a longer one, chunked or not,
   is refused with 413 while it streams, and the rest is discarded by the server as it arrives;
3. a ``Host`` that is not one of this machine's names (DNS rebinding; without a token) gets 400;
4. with an access token, a request without it gets 403; ``GET /…?token=`` sets the cookie and
   redirects to the same path on this origin, never to another one.

Every response, from the guard, a route, a static file or an error handler, carries the
Content-Security-Policy, ``nosniff``, ``no-referrer`` and ``no-store`` headers, and every refusal
is a small HTML page. :class:`WorkbenchH11Protocol` gives uvicorn's own refusals (a request its
HTTP parser cannot read: a bad request line, a negative length) the same headers.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import quote

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["Guard", "WorkbenchH11Protocol", "MAX_BODY", "MAX_FIELDS", "CSP", "SECURITY_HEADERS", "ACCESS_COOKIE",
           "safe_local_path", "plain_page"]

#: the largest request body read (a review form with a full 4,000-character note is under 50 KiB)
MAX_BODY = 64 * 1024
#: the most form fields parsed from one body
MAX_FIELDS = 64
ACCESS_COOKIE = "aqa_access"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
_SECURITY_NAMES = {name for name, _ in SECURITY_HEADERS}

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: renders an error page: (status, message) -> HTML
PageRenderer = Callable[[int, str], str]


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


def plain_page(status: int, message: str) -> str:
    """A minimal error page, for when the templates cannot be used."""
    from html import escape

    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{status}</title></head>'
            f'<body><p id="error">{escape(message)}</p><p><a href="/">Back</a></p></body></html>')


def safe_local_path(path: str) -> str:
    """``path`` as a same-origin redirect target: one leading slash, never ``//host`` or ``/\\host``
    (which a browser reads as another origin), percent-encoded."""
    return "/" + quote(path.lstrip("/\\"), safe="/:@!$&'()*+,;=-._~")


def _secured(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _SECURITY_NAMES]
            message["headers"] = headers + list(SECURITY_HEADERS)
        await send(message)
    return wrapped


async def _respond(send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _header(scope: Scope, name: bytes) -> list[bytes]:
    return [v for k, v in scope.get("headers", []) if k.lower() == name]


def _cookie(scope: Scope, name: str) -> str:
    from starlette.requests import cookie_parser

    for raw in _header(scope, b"cookie"):
        value = cookie_parser(raw.decode("latin-1")).get(name)
        if value:
            return value
    return ""


def _query_token(scope: Scope) -> str | None:
    from urllib.parse import parse_qs

    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("token")
    return values[0] if values else None


async def _read_body(receive: Receive, limit: int) -> bytes:
    """The whole body; :class:`_TooLarge` as soon as it passes ``limit`` bytes, :class:`_Disconnected`
    when the client goes away before sending all of it (a partial form is never acted on)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


class Guard:
    """The outer guard of the workbench app (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str | None = None, allowed_hosts: list[str] | None = None,
                 render: PageRenderer = plain_page, max_body: int = MAX_BODY) -> None:
        self.app, self.token, self.render, self.max_body = app, token, render, max_body
        self.allowed_hosts = {h.lower() for h in allowed_hosts} if allowed_hosts else None

    async def refuse(self, send: Send, status: int, message: str) -> None:
        try:
            page = self.render(status, message)
        except Exception:  # the templates must never turn a refusal into a 500
            page = plain_page(status, message)
        await _respond(send, status, page.encode("utf-8"), [(b"content-type", b"text/html; charset=utf-8")])

    def _host_ok(self, scope: Scope) -> bool:
        if self.allowed_hosts is None:
            return True
        hosts = _header(scope, b"host")
        if len(hosts) != 1:
            return False
        host = hosts[0].decode("latin-1").strip().lower()
        name = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host.split(":")[0]
        return name in self.allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _secured(send)
        lengths = {v.strip() for v in _header(scope, b"content-length")}
        if len(lengths) > 1 or any(not v.isdigit() for v in lengths):
            await self.refuse(send, 400, "malformed Content-Length header")
            return
        if lengths and int(next(iter(lengths))) > self.max_body:
            await self.refuse(send, 413, f"request body too large (the limit is {self.max_body // 1024} KiB)")
            return
        try:
            body = await _read_body(receive, self.max_body)
        except _TooLarge:
            await self.refuse(send, 413, f"request body too large (the limit is {self.max_body // 1024} KiB)")
            return
        except _Disconnected:
            return
        if not self._host_ok(scope):
            await self.refuse(send, 400, "this workbench answers only to this machine's names (Host header)")
            return
        if self.token and not await self._access(scope, send):
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _access(self, scope: Scope, send: Send) -> bool:
        """True when the request carries the token; else the refusal (or the cookie redirect) is sent."""
        assert self.token is not None
        query = _query_token(scope)
        auth = b"".join(_header(scope, b"authorization")[:1]).decode("latin-1")
        given = query or _cookie(scope, ACCESS_COOKIE) or auth.removeprefix("Bearer ").strip()
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            await self.refuse(send, 403, "access token required: open the address the workbench printed")
            return False
        if query and scope["method"] in ("GET", "HEAD"):
            jar: SimpleCookie = SimpleCookie()
            jar[ACCESS_COOKIE] = self.token
            jar[ACCESS_COOKIE].update({"httponly": "true", "path": "/", "samesite": "Strict"})
            cookie = jar.output(header="").strip()
            await _respond(send, 303, b"", [(b"location", safe_local_path(scope["path"]).encode("ascii")),
                                            (b"set-cookie", cookie.encode("latin-1"))])
            return False
        return True


class WorkbenchH11Protocol(H11Protocol):
    """uvicorn's h11 protocol whose own 400 (a request the HTTP parser refuses) carries the
    workbench's security headers and an HTML body, like every other refusal."""

    def send_400_response(self, msg: str) -> None:
        import h11

        body = plain_page(400, f"bad request: {msg}").encode("utf-8")
        headers = [(b"content-type", b"text/html; charset=utf-8"), *SECURITY_HEADERS, (b"connection", b"close")]
        try:
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers, reason=b"Bad Request"))
                                 or b"")
            self.transport.write(self.conn.send(h11.Data(data=body)) or b"")
            self.transport.write(self.conn.send(h11.EndOfMessage()) or b"")
        except h11.LocalProtocolError:  # a response had already started: nothing more can be said
            pass
        self.transport.close()
