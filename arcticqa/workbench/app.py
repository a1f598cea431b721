"""The workbench's routes: pick a reviewer, review one item per page, record the verdict.

Safe by default: :func:`check_bind` refuses a non-loopback address unless an access token is
set, and with a token every request must carry it (``?token=`` once, then a cookie, or an
``Authorization: Bearer`` header). Every form carries a CSRF token that must equal the
``SameSite=Strict`` cookie the server set; pages are rendered with Jinja2 autoescaping and a
Content-Security-Policy that allows only the workbench's own script file. A verdict is one row
written in one transaction, so a server killed mid-submit leaves a whole verdict or none.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from sqlalchemy.engine import Engine

from arcticqa.errors import InputError
from arcticqa.review.items import ReviewItem, load_review_items
from arcticqa.review.plan import DISTRACTOR_TRUE, FAILURE_TYPES, VERDICTS
from arcticqa.review.report import current_verdicts
from arcticqa.store.reviews import add_verdict, get_plan, plan_assignments, plan_verdicts
from arcticqa.store.tables import ReviewAssignment, ReviewVerdict

__all__ = ["create_app", "check_bind", "serve", "answer_segments", "MAX_NOTE", "CSRF_COOKIE", "ACCESS_COOKIE",
           "REVIEWER_COOKIE"]

CSRF_COOKIE, ACCESS_COOKIE, REVIEWER_COOKIE = "aqa_csrf", "aqa_access", "aqa_reviewer"
MAX_NOTE = 4000
_MAX_BODY = 64 * 1024
_STATIC = Path(__file__).with_name("static")
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'")


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond this machine without an access token."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not token:
        raise InputError(f"--host {host} is not a loopback address: the workbench refuses to listen there "
                         "without --token (every request must then carry it)")


def answer_segments(text: str, answer: str) -> list[tuple[str, bool]]:
    """``text`` split so the first verbatim occurrence of the answer (case-insensitive) is marked."""
    at = text.casefold().find(answer.casefold()) if answer.strip() else -1
    if at < 0 or len(text.casefold()) != len(text):  # casefold can change lengths (ß -> ss)
        return [(text, False)]
    end = at + len(answer)
    return [(p, m) for p, m in ((text[:at], False), (text[at:end], True), (text[end:], False)) if p]


def _failure_choices(item: ReviewItem) -> list[tuple[str, str, str]]:
    """(value, label, key hint) of each failure type the form offers for this item."""
    out: list[tuple[str, str, str]] = []
    for rule_id, r in FAILURE_TYPES.items():
        if rule_id == DISTRACTOR_TRUE:
            for o in item.options:
                if o.kind == "distractor" and o.rank is not None:
                    k = o.rank + 1
                    out.append((f"{DISTRACTOR_TRUE}:{k}", f"distractor {k} is true or defensible", str(k)))
        else:
            out.append((rule_id, r.summary.removeprefix("reviewer: "), ""))
    return out


class _Workbench:
    def __init__(self, engine: Engine, plan_id: str, reviewer: str | None, token: str | None, blind: bool):
        plan = get_plan(engine, plan_id)
        if plan is None:
            raise InputError(f"no review plan {plan_id!r} in the store (run `arcticqa review sample "
                             f"--plan {plan_id} --reviewer NAME` first)")
        if reviewer is not None and reviewer not in (plan.reviewers or []):
            raise InputError(f"reviewer {reviewer!r} is not in plan {plan_id!r} (reviewers: "
                             f"{', '.join(plan.reviewers or [])}); add them with `arcticqa review sample "
                             f"--plan {plan_id} --reviewer {reviewer}`")
        self.engine, self.plan_id, self.reviewer, self.token, self.blind = engine, plan_id, reviewer, token, blind
        self.env = Environment(loader=PackageLoader("arcticqa.workbench", "templates"), undefined=StrictUndefined,
                               autoescape=select_autoescape(default=True, default_for_string=True))
        self.env.globals["answer_segments"] = answer_segments

    def reviewers(self) -> list[str]:
        plan = get_plan(self.engine, self.plan_id)
        return list(plan.reviewers or []) if plan is not None else []

    def queue(self, reviewer: str) -> list[ReviewAssignment]:
        return plan_assignments(self.engine, self.plan_id, reviewer=reviewer)

    def state(self, reviewer: str) -> tuple[list[ReviewAssignment], dict[str, ReviewItem],
                                            dict[tuple[str, str], ReviewVerdict]]:
        queue = self.queue(reviewer)
        items = {i.key: i for i in load_review_items(self.engine)}
        live, _stale = current_verdicts(plan_verdicts(self.engine, self.plan_id), items)
        return queue, items, live

    def render(self, request: Request, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        csrf = request.cookies.get(CSRF_COOKIE) or secrets.token_urlsafe(32)
        html = self.env.get_template(name).render(csrf=csrf, plan_id=self.plan_id, **ctx)
        response = HTMLResponse(html, status_code=status)
        if request.cookies.get(CSRF_COOKIE) != csrf:
            response.set_cookie(CSRF_COOKIE, csrf, httponly=True, samesite="strict")
        return response


async def _form(request: Request) -> dict[str, list[str]]:
    """The urlencoded form body (the workbench's forms post nothing else), size-capped."""
    body = await request.body()
    if len(body) > _MAX_BODY:
        raise InputError("form too large")
    out: dict[str, list[str]] = {}
    for k, v in parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True, max_num_fields=64):
        out.setdefault(k, []).append(v)
    return out


def _csrf_ok(request: Request, form: dict[str, list[str]]) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = (form.get("csrf") or [""])[0]
    return bool(cookie) and hmac.compare_digest(cookie.encode(), sent.encode())


def create_app(engine: Engine, *, plan_id: str = "main", reviewer: str | None = None, token: str | None = None,
               blind: bool = True, allowed_hosts: list[str] | None = None) -> FastAPI:
    """The workbench for one plan of the store behind ``engine``. ``reviewer`` fixes the identity
    (else the first page asks); ``token`` makes every request need it; ``blind`` hides the machine's
    verdicts and rule labels on an item until the reviewer has answered it; ``allowed_hosts`` (the
    Host header names to answer) keeps a page on another site from reaching a loopback server
    through DNS rebinding."""
    wb = _Workbench(engine, plan_id, reviewer, token, blind)
    app = FastAPI(title="arcticqa review workbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=_STATIC), name="static")
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts)

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if token:
            auth = request.headers.get("authorization", "")
            given = (request.query_params.get("token") or request.cookies.get(ACCESS_COOKIE)
                     or auth.removeprefix("Bearer ").strip())
            if not given or not hmac.compare_digest(given.encode(), token.encode()):
                return Response("access token required\n", status_code=403, media_type="text/plain")
            if request.query_params.get("token") and request.method == "GET":
                back = RedirectResponse(request.url.path, status_code=303)
                back.set_cookie(ACCESS_COOKIE, token, httponly=True, samesite="strict")
                return back
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = _CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    def who(request: Request) -> str | None:
        name = reviewer or request.cookies.get(REVIEWER_COOKIE)
        return name if name in wb.reviewers() else None

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> Response:
        name = who(request)
        if name is None:
            return wb.render(request, "identity.html.j2", reviewers=wb.reviewers())
        queue, items, live = wb.state(name)
        for i, a in enumerate(queue, start=1):
            if (a.item_key, name) not in live:
                return RedirectResponse(f"/item/{i}", status_code=303)
        return wb.render(request, "done.html.j2", reviewer=name, assigned=len(queue))

    @app.post("/identity")
    async def identity(request: Request) -> Response:
        form = await _form(request)
        if not _csrf_ok(request, form):
            return Response("CSRF token missing or wrong\n", status_code=403, media_type="text/plain")
        name = (form.get("reviewer") or [""])[0]
        if name not in wb.reviewers():
            return wb.render(request, "identity.html.j2", status=400, reviewers=wb.reviewers(),
                             error=f"{name!r} is not a reviewer of this plan")
        back = RedirectResponse("/", status_code=303)
        back.set_cookie(REVIEWER_COOKIE, name, httponly=True, samesite="strict")
        return back

    @app.get("/item/{index}", response_class=HTMLResponse)
    async def item_page(request: Request, index: int) -> Response:
        name = who(request)
        if name is None:
            return RedirectResponse("/", status_code=303)
        queue, items, live = wb.state(name)
        if not 1 <= index <= len(queue):
            return wb.render(request, "error.html.j2", status=404, message=f"no item {index} in your queue")
        a = queue[index - 1]
        item = items.get(a.item_key)
        if item is None:
            return wb.render(request, "error.html.j2", status=410,
                             message=f"item {a.item_key} is no longer in the store")
        verdict = live.get((a.item_key, name))
        done = sum(1 for q in queue if (q.item_key, name) in live)
        return wb.render(request, "item.html.j2", reviewer=name, item=item, index=index, total=len(queue),
                         done=done, verdict=verdict, reveal=(not wb.blind) or verdict is not None,
                         failures=_failure_choices(item), summaries={k: r.summary for k, r in FAILURE_TYPES.items()},
                         next_index=index + 1 if index < len(queue) else None, max_note=MAX_NOTE)

    @app.post("/item/{index}")
    async def submit(request: Request, index: int) -> Response:
        form = await _form(request)
        if not _csrf_ok(request, form):
            return Response("CSRF token missing or wrong\n", status_code=403, media_type="text/plain")
        name = who(request)
        if name is None:
            return Response("no reviewer chosen\n", status_code=403, media_type="text/plain")
        queue, items, _live = wb.state(name)
        if not 1 <= index <= len(queue) or queue[index - 1].item_key not in items:
            return Response("no such item in your queue\n", status_code=404, media_type="text/plain")
        item = items[queue[index - 1].item_key]
        verdict = (form.get("verdict") or [""])[0]
        failures = sorted(set(form.get("failure", [])))
        note = (form.get("note") or [""])[0]
        allowed = {v for v, _label, _key in _failure_choices(item)}
        problem = (f"verdict must be one of {', '.join(VERDICTS)}" if verdict not in VERDICTS
                   else f"unknown failure type {next(f for f in failures if f not in allowed)!r}"
                   if any(f not in allowed for f in failures)
                   else "a reject needs at least one failure type" if verdict == "reject" and not failures
                   else f"the note is longer than {MAX_NOTE} characters" if len(note) > MAX_NOTE else None)
        if problem is not None:
            return Response(problem + "\n", status_code=400, media_type="text/plain")
        if (form.get("content_hash") or [""])[0] != item.content_hash:
            return wb.render(request, "error.html.j2", status=409,
                             message="this item changed since the page was loaded; reload it and review again")
        add_verdict(wb.engine, ReviewVerdict(plan_id=wb.plan_id, item_key=item.key, reviewer=name, verdict=verdict,
                                             failure_types=failures if verdict == "reject" else [],
                                             note=note, content_hash=item.content_hash))
        return RedirectResponse(f"/item/{index}", status_code=303)

    return app


def serve(engine: Engine, *, host: str = "127.0.0.1", port: int = 8765, plan_id: str = "main",
          reviewer: str | None = None, token: str | None = None, blind: bool = True) -> None:
    """Run the workbench with uvicorn until interrupted."""
    import uvicorn

    check_bind(host, token)
    # without a token, answer only to the names of this machine (and the address given)
    names = None if token else sorted({host, "127.0.0.1", "localhost", "[::1]"})
    app = create_app(engine, plan_id=plan_id, reviewer=reviewer, token=token, blind=blind, allowed_hosts=names)
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False)
