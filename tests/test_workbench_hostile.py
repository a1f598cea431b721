"""The review workbench under hostile requests, on a real server (``arcticqa review serve`` in a
subprocess on 127.0.0.1, plain HTTP and raw sockets): oversized bodies are refused early with the
server's memory bounded, malformed forms get 400 and write nothing, every refusal and error page
is HTML with the security headers, and a redirect never leaves this origin."""

from __future__ import annotations

import re
import signal
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from arcticqa.review.items import load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.store.reviews import plan_verdicts, save_plan
from arcticqa.store.store import Store
from arcticqa.workbench.guard import CSP, MAX_BODY
from tests.review_fixtures import free_port, make_review_store, start_workbench

FORM = "application/x-www-form-urlencoded"
TOKEN = "s3cret-token"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = make_review_store(tmp_path / "review.db", accepted=6, rejected=2)
    plan, rows = extend_plan(None, [], load_review_items(s.engine), SamplingRequest(reviewers=["ana", "ben"]))
    save_plan(s.engine, plan, rows)
    yield s
    s.close()


def _serve(db: Path, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = start_workbench(db, port, *args)
    try:
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def server(store: Store, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    yield from _serve(tmp_path / "review.db")


@pytest.fixture
def token_server(store: Store, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    yield from _serve(tmp_path / "review.db", "--token", TOKEN)


def _memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (the peak so far) of a process, in KiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: int(fields[k].split()[0]) for k in ("VmRSS", "VmHWM")}


def _is_safe_page(r: httpx.Response) -> None:
    """An HTML page under the workbench's headers, never a traceback or raw JSON."""
    assert r.headers.get("content-security-policy") == CSP, (r.status_code, r.headers)
    assert r.headers.get("x-content-type-options") == "nosniff"
    assert r.headers.get("content-type", "").startswith("text/html"), r.headers.get("content-type")
    assert "Traceback" not in r.text and not r.text.lstrip().startswith(("{", "["))


def _raw(base: str, request: bytes) -> bytes:
    """Send ``request`` on a fresh socket and read the answer until the server closes or 2 s pass."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(request)
        s.settimeout(2)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
                if b"\r\n\r\n" in out and b"</html>" in out:
                    break
        except TimeoutError:
            pass
    return out


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m
    return m.group(1)


def _hash(page: str) -> str:
    m = re.search(r'name="content_hash" value="([0-9a-f]{64})"', page)
    assert m
    return m.group(1)


def test_a_200_mb_body_is_refused_early_with_memory_bounded(store: Store, server: tuple[str, subprocess.Popen[bytes]]
                                                            ) -> None:
    base, proc = server
    httpx.get(f"{base}/item/1")  # warm: templates loaded, the store opened
    before = _memory_kib(proc.pid)
    sent = 0

    def body() -> Iterator[bytes]:  # 200 MiB in 1 MiB chunks, never held by the test
        nonlocal sent
        chunk = b"note=" + b"x" * ((1 << 20) - 5)
        for _ in range(200):
            sent += len(chunk)
            yield chunk

    # chunked (no Content-Length), cross-site: no cookie, no CSRF token
    r = httpx.post(f"{base}/item/1", content=body(), headers={"content-type": FORM}, timeout=120)
    assert r.status_code == 413 and sent == 200 << 20
    _is_safe_page(r)
    assert "too large" in r.text
    # a declared length is refused from the header alone: the answer comes before any body byte
    answer = _raw(base, f"POST /item/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: {FORM}\r\n"
                        f"Content-Length: {200 << 20}\r\n\r\n".encode())
    assert answer.startswith(b"HTTP/1.1 413 ") and f"content-security-policy: {CSP}".encode() in answer
    # and with the body streamed behind the header
    r = httpx.post(f"{base}/item/1", content=body(), headers={"content-type": FORM, "content-length": str(200 << 20)},
                   timeout=120)
    assert r.status_code == 413
    _is_safe_page(r)
    # just over the limit is refused too; a form of the limit's size is read (and then refused: no CSRF)
    assert httpx.post(f"{base}/item/1", content=b"x" * (MAX_BODY + 1), headers={"content-type": FORM}
                      ).status_code == 413
    assert httpx.post(f"{base}/item/1", content=b"x" * MAX_BODY, headers={"content-type": FORM}).status_code == 403
    after = _memory_kib(proc.pid)
    # 400 MiB went through; the server's peak grew by far less than one body (it read 64 KiB of each)
    assert after["VmHWM"] - before["VmHWM"] < 24 * 1024, (before, after)
    print(f"\nworkbench memory around two 200 MiB POSTs: VmRSS {before['VmRSS']} -> {after['VmRSS']} KiB, "
          f"peak VmHWM {before['VmHWM']} -> {after['VmHWM']} KiB")
    ok = httpx.get(f"{base}/item/1")  # still answering
    assert ok.status_code == 200 and 'id="verdict-form"' in ok.text
    assert plan_verdicts(store.engine, "main") == []


def test_malformed_forms_get_400_and_write_nothing(store: Store, server: tuple[str, subprocess.Popen[bytes]]) -> None:
    base, _proc = server
    with httpx.Client(base_url=base) as client:
        page = client.get("/item/1").text
        good = f"csrf={_csrf(page)}&content_hash={_hash(page)}&verdict=accept".encode()
        refused = {
            "more than 64 fields": good + b"".join(b"&failure=x%d" % i for i in range(70)),
            "percent-encoded bytes that are not UTF-8": good + b"&note=caf%E9%FF",
            "raw bytes that are not UTF-8": good + b"&note=caf\xe9",
            "an encoded surrogate": good + b"&note=%ED%A0%80",
            "a NUL in the note": good + b"&note=a%00b",
        }
        for why, body in refused.items():
            r = client.post("/item/1", content=body, headers={"content-type": FORM})
            assert r.status_code == 400, why
            _is_safe_page(r)
        for kind in ("multipart/form-data; boundary=x", "application/json", f"{FORM}; charset=latin-1"):
            r = client.post("/item/1", content=good, headers={"content-type": kind})
            assert r.status_code == 400, kind
            _is_safe_page(r)
        assert plan_verdicts(store.engine, "main") == []
        # the same form, well formed, is recorded (UTF-8 in the note included)
        r = client.post("/item/1", content=good + "&note=caf%C3%A9 ✓".encode(), headers={"content-type": FORM})
        assert r.status_code == 303
    assert [(v.verdict, v.note) for v in plan_verdicts(store.engine, "main")] == [("accept", "café ✓")]


def test_every_refusal_and_error_is_an_html_page_with_the_headers(store: Store, tmp_path: Path,
                                                                  server: tuple[str, subprocess.Popen[bytes]]) -> None:
    base, _proc = server
    for method, path, status in (("GET", "/item/abc", 404), ("GET", "/item/99", 404), ("GET", "/nowhere", 404),
                                 ("GET", "/item/1/", 404), ("DELETE", "/item/1", 405), ("PUT", "/identity", 405),
                                 ("POST", "/item/1", 403),  # no CSRF token
                                 ("GET", "/static/nothing.js", 404)):
        r = httpx.request(method, f"{base}{path}", follow_redirects=False)
        assert r.status_code == status, (method, path, r.status_code)
        _is_safe_page(r)
    assert httpx.request("DELETE", f"{base}/item/1").headers.get("allow")
    # the static files and redirects carry the headers too
    for r in (httpx.get(f"{base}/static/workbench.js"), httpx.get(f"{base}/", follow_redirects=False)):
        assert r.headers.get("content-security-policy") == CSP and r.headers.get("x-content-type-options") == "nosniff"
    # a Host that is not this machine (DNS rebinding)
    r = httpx.get(f"{base}/item/1", headers={"host": "attacker.example"})
    assert r.status_code == 400
    _is_safe_page(r)
    # requests the HTTP parser refuses: the server's own 400 carries the headers as well
    for request in (b"POST /item/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n",
                    b"POST /item/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                    b"GET /item/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n"):
        answer = _raw(base, request)
        assert answer.startswith(b"HTTP/1.1 400 "), answer[:80]
        assert f"content-security-policy: {CSP}".encode() in answer and b"x-content-type-options: nosniff" in answer
        assert b"text/html" in answer
    # a crash inside a route is a 500 page, never a traceback (the store loses a table under the server)
    with sqlite3.connect(tmp_path / "review.db") as db:
        db.execute("DROP TABLE review_verdict")
    r = httpx.get(f"{base}/item/1")
    assert r.status_code == 500
    _is_safe_page(r)
    assert "review_verdict" not in r.text and "sqlite" not in r.text.lower()


def test_the_token_redirect_never_leaves_this_origin(store: Store,
                                                     token_server: tuple[str, subprocess.Popen[bytes]]) -> None:
    base, _proc = token_server
    r = httpx.get(f"{base}/item/1")
    assert r.status_code == 403
    _is_safe_page(r)
    for path, where in ((f"//evil.example/?token={TOKEN}", "/evil.example/"),
                        (f"/%2F%2Fevil.example/x?token={TOKEN}", "/evil.example/x"),
                        (f"/\\evil.example/?token={TOKEN}", "/evil.example/"),
                        (f"///evil.example?token={TOKEN}", "/evil.example"),
                        (f"/item/1?token={TOKEN}", "/item/1")):
        answer = _raw(base, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head = answer.split(b"\r\n\r\n")[0].decode("latin-1").lower()
        assert head.startswith("http/1.1 303 "), (path, head)
        assert f"\r\nlocation: {where}\r\n" in head, (path, head)
        assert f"content-security-policy: {CSP}".lower() in head
    with httpx.Client(base_url=base) as client:  # the cookie it sets opens the workbench
        assert client.get(f"/?token={TOKEN}", follow_redirects=False).status_code == 303
        assert client.get("/item/1").status_code == 200
    bearer = httpx.get(f"{base}/item/1", headers={"authorization": f"Bearer {TOKEN}"})
    assert bearer.status_code == 200
    # with a token the Host is not checked, so no redirect may be built from it
    r = httpx.get(f"{base}/item/1/", headers={"authorization": f"Bearer {TOKEN}", "host": "evil.example"},
                  follow_redirects=False)
    assert r.status_code == 404 and "location" not in r.headers
