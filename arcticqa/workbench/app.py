"""The workbench's routes: pick a reviewer, review one item per page, record the verdict.

Safe by default: :func:`check_bind` refuses a non-loopback address unless an access token is
set, and with a token every request must carry it (``?token=`` once, then a cookie, or an
``Authorization: Bearer`` header). Before a route runs, :class:`~arcticqa.workbench.guard.Guard`
refuses an oversized body (413, from ``Content-Length`` or while it streams), a foreign Host and
a missing token. Every form carries a CSRF token that must equal the ``SameSite=Strict`` cookie
the server set; a form that is not valid UTF-8 urlencoded text, or has more than 64 fields, is
refused with 400 and writes nothing. Pages, error pages included, are HTML rendered with Jinja2
autoescaping under a Content-Security-Policy that allows only the workbench's own script file. A
verdict is one row written in one transaction, so a server killed mid-submit leaves a whole
verdict or none.

Options are shown in an order shuffled per item from the plan's seed (:func:`shown_options`), so
the gold answer's position tells a reviewer nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from sqlalchemy.engine import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException

from arcticqa.errors import InputError
from arcticqa.review.items import ReviewItem, ReviewOption, load_review_items
from arcticqa.review.plan import DISTRACTOR_TRUE, FAILURE_TYPES, VERDICTS
from arcticqa.review.report import current_verdicts
from arcticqa.store.reviews import add_verdict, get_plan, plan_assignments, plan_verdicts
from arcticqa.store.tables import ReviewAssignment, ReviewVerdict
from arcticqa.workbench.guard import (
    ACCESS_COOKIE,
    MAX_BODY,
    MAX_FIELDS,
    SECURITY_HEADERS,
    Guard,
    WorkbenchH11Protocol,
    plain_page,
)

__all__ = ["create_app", "check_bind", "serve", "answer_segments", "shown_options", "contradiction_groups",
           "ShownOption", "MAX_NOTE", "MAX_BODY", "MAX_FIELDS", "CSRF_COOKIE", "ACCESS_COOKIE", "REVIEWER_COOKIE"]

CSRF_COOKIE, REVIEWER_COOKIE = "aqa_csrf", "aqa_reviewer"
MAX_NOTE = 4000
_STATIC = Path(__file__).with_name("static")
_LOG = logging.getLogger(__name__)
#: C0 control characters a note may not hold (tab, line feed and carriage return are text)
_CONTROL = {chr(c) for c in range(32) if chr(c) not in "\t\n\r"} | {"\x7f"}


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


@dataclass(frozen=True)
class ShownOption:
    """An option as the workbench lists it: its letter in the item's shuffled order."""

    letter: str
    option: ReviewOption


def _option_id(o: ReviewOption) -> str:
    return f"distractor-{o.rank}" if o.kind == "distractor" else o.kind


def shown_options(item: ReviewItem, seed: int) -> list[ShownOption]:
    """The options a model is given with the answer present (gold, distractors 1-3, abstain), in an
    order fixed for the item: sorted by ``sha256("arcticqa-review-position|<seed>|<item key>|<option
    id>")`` (option ids ``gold``, ``abstain``, ``distractor-<rank>``) and lettered A, B, ... Every
    reviewer of a plan sees one item in the same order; across items the gold answer's position is
    uniform, so it tells the reviewer nothing (a release lists the gold answer first)."""
    listed = [o for o in item.options if not o.answer_absent_only]

    def place(o: ReviewOption) -> str:
        return hashlib.sha256(f"arcticqa-review-position|{seed}|{item.key}|{_option_id(o)}".encode()).hexdigest()

    return [ShownOption(chr(ord("A") + i), o) for i, o in enumerate(sorted(listed, key=place))]


@dataclass
class ContradictionGroup:
    """One contradicting span and the distractors that cite it, in rank order."""

    span_id: str | None
    span_text: str | None
    distractors: list[tuple[ReviewOption, str | None]] = field(default_factory=list)


def contradiction_groups(item: ReviewItem, letters: dict[int, str]) -> list[ContradictionGroup]:
    """The distractors grouped by the span that contradicts them, each span once (several
    distractors usually cite the same sentence); ``letters`` maps a rank to its shown letter."""
    groups: dict[tuple[str | None, str | None], ContradictionGroup] = {}
    for o in sorted((o for o in item.options if o.kind == "distractor"), key=lambda o: o.rank or 0):
        key = (o.span_id, o.span_text)
        group = groups.setdefault(key, ContradictionGroup(span_id=o.span_id, span_text=o.span_text))
        group.distractors.append((o, letters.get(o.rank) if o.rank is not None else None))
    return list(groups.values())


def _failure_choices(item: ReviewItem, letters: dict[int, str]) -> list[tuple[str, str, str]]:
    """(value, label, key hint) of each failure type the form offers for this item; a distractor's
    label names its shown letter, so the verdict refers to the option the reviewer looked at."""
    out: list[tuple[str, str, str]] = []
    for rule_id, r in FAILURE_TYPES.items():
        if rule_id == DISTRACTOR_TRUE:
            for o in item.options:
                if o.kind == "distractor" and o.rank is not None:
                    k = o.rank + 1
                    where = (f"option {letters[o.rank]}" if o.rank in letters
                             else "listed when the answer is absent")
                    out.append((f"{DISTRACTOR_TRUE}:{k}", f"distractor {k} ({where}) is true or defensible", str(k)))
        else:
            out.append((rule_id, r.summary.removeprefix("reviewer: "), ""))
    return out


class _BadRequest(Exception):
    """A request the workbench refuses with 400 before it changes anything."""


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
        self.seed = plan.seed
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

    def error_page(self, status: int, message: str) -> str:
        """An error page without a request (the guard's refusals)."""
        return self.env.get_template("error.html.j2").render(csrf="", plan_id=self.plan_id, status=status,
                                                             message=message)

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.render(request, "error.html.j2", status=status, message=message)


def _form(request: Request, body: bytes) -> dict[str, list[str]]:
    """The urlencoded form (the workbench's forms post nothing else): valid UTF-8 text, at most
    :data:`MAX_FIELDS` fields (the guard has already bounded the body to :data:`MAX_BODY` bytes);
    anything else is :class:`_BadRequest`."""
    kind = request.headers.get("content-type", "")
    media, _, params = kind.partition(";")
    charset = params.strip().lower().removeprefix("charset=").strip('"') if "charset=" in params.lower() else "utf-8"
    if body and (media.strip().lower() != "application/x-www-form-urlencoded" or charset not in ("utf-8", "utf8")):
        raise _BadRequest(f"a form must be sent as application/x-www-form-urlencoded UTF-8 (got {kind[:80]!r})")
    try:
        text = body.decode("utf-8")  # strict: bytes that are not UTF-8 are refused, never replaced
        pairs = parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_FIELDS, encoding="utf-8",
                          errors="strict")
    except UnicodeDecodeError as exc:
        raise _BadRequest("the form is not valid UTF-8 text") from exc
    except ValueError as exc:  # "Max number of fields exceeded"
        raise _BadRequest(f"the form has more than {MAX_FIELDS} fields") from exc
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


def _csrf_ok(request: Request, form: dict[str, list[str]]) -> bool:
    cookie = request.cookies.get(CSRF_COOKIE, "")
    sent = (form.get("csrf") or [""])[0]
    return bool(cookie) and hmac.compare_digest(cookie.encode(), sent.encode())


def _index(raw: str) -> int | None:
    """A queue position from the path (``/item/3``); None for anything that is not a plain number."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None


def create_app(engine: Engine, *, plan_id: str = "main", reviewer: str | None = None, token: str | None = None,
               blind: bool = True, allowed_hosts: list[str] | None = None) -> FastAPI:
    """The workbench for one plan of the store behind ``engine``. ``reviewer`` fixes the identity
    (else the first page asks); ``token`` makes every request need it; ``blind`` hides the machine's
    verdicts and rule labels on an item until the reviewer has answered it; ``allowed_hosts`` (the
    Host header names to answer) keeps a page on another site from reaching a loopback server
    through DNS rebinding."""
    wb = _Workbench(engine, plan_id, reviewer, token, blind)
    app = FastAPI(title="arcticqa review workbench", docs_url=None, redoc_url=None, openapi_url=None)
    app.router.redirect_slashes = False  # a redirect is built from the Host header: never send one
    app.mount("/static", StaticFiles(directory=_STATIC), name="static")
    app.add_middleware(Guard, token=token, allowed_hosts=allowed_hosts, render=wb.error_page)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = {404: "no such page", 405: "this page does not take that method"}.get(
            exc.status_code, str(exc.detail))
        response = wb.error(request, exc.status_code, message)
        for k, v in (exc.headers or {}).items():  # e.g. Allow on a 405
            response.headers[k] = v
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        return wb.error(request, 422, "the request could not be read")

    @app.exception_handler(_BadRequest)
    async def bad_request(request: Request, exc: _BadRequest) -> Response:
        return wb.error(request, 400, str(exc))

    @app.exception_handler(Exception)
    async def crashed(request: Request, exc: Exception) -> Response:
        # runs outside the guard (Starlette's outermost error layer): the headers are set here
        _LOG.error("workbench error on %s %s", request.method, request.url.path, exc_info=exc)
        try:
            page = wb.error_page(500, "the workbench could not answer this request (the server's log has the details)")
        except Exception:
            page = plain_page(500, "the workbench could not answer this request")
        response = HTMLResponse(page, status_code=500)
        for k, v in SECURITY_HEADERS:
            response.headers[k.decode()] = v.decode()
        return response

    def who(request: Request) -> str | None:
        name = reviewer or request.cookies.get(REVIEWER_COOKIE)
        return name if name in wb.reviewers() else None

    def saved_of(request: Request) -> int | None:
        return _index(request.query_params.get("saved", ""))

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> Response:
        name = who(request)
        if name is None:
            return wb.render(request, "identity.html.j2", reviewers=wb.reviewers())
        queue, items, live = wb.state(name)
        saved = saved_of(request)
        for i, a in enumerate(queue, start=1):
            if (a.item_key, name) not in live:
                return RedirectResponse(f"/item/{i}" + (f"?saved={saved}" if saved else ""), status_code=303)
        return wb.render(request, "done.html.j2", reviewer=name, assigned=len(queue),
                         saved=saved if saved and saved <= len(queue) else None)

    @app.post("/identity")
    async def identity(request: Request) -> Response:
        form = _form(request, await request.body())
        if not _csrf_ok(request, form):
            return wb.error(request, 403, "CSRF token missing or wrong: reload the page and try again")
        name = (form.get("reviewer") or [""])[0]
        if name not in wb.reviewers():
            return wb.render(request, "identity.html.j2", status=400, reviewers=wb.reviewers(),
                             error=f"{name!r} is not a reviewer of this plan")
        back = RedirectResponse("/", status_code=303)
        back.set_cookie(REVIEWER_COOKIE, name, httponly=True, samesite="strict")
        return back

    @app.get("/item/{raw}", response_class=HTMLResponse)
    async def item_page(request: Request, raw: str) -> Response:
        name = who(request)
        if name is None:
            return RedirectResponse("/", status_code=303)
        queue, items, live = wb.state(name)
        index = _index(raw)
        if index is None or not 1 <= index <= len(queue):
            return wb.error(request, 404, f"no item {raw} in your queue (items 1 to {len(queue)})")
        a = queue[index - 1]
        item = items.get(a.item_key)
        if item is None:
            return wb.error(request, 410, f"item {a.item_key} is no longer in the store")
        verdict = live.get((a.item_key, name))
        done = sum(1 for q in queue if (q.item_key, name) in live)
        plan = get_plan(wb.engine, wb.plan_id)
        # the item audit's flags: machine labels like answer_match, shown only after the verdict
        flags = list(((plan.params or {}).get("suspects") or {}).get(a.item_key, [])) if plan is not None else []
        shown = shown_options(item, wb.seed)
        letters = {s.option.rank: s.letter for s in shown if s.option.rank is not None}
        saved = saved_of(request)
        return wb.render(request, "item.html.j2", reviewer=name, item=item, index=index, total=len(queue),
                         done=done, verdict=verdict, reveal=(not wb.blind) or verdict is not None, shown=shown,
                         suspect_flags=flags,
                         groups=contradiction_groups(item, letters), failures=_failure_choices(item, letters),
                         summaries={k: r.summary for k, r in FAILURE_TYPES.items()},
                         prev_index=index - 1 if index > 1 else None,
                         next_index=index + 1 if index < len(queue) else None, max_note=MAX_NOTE,
                         saved=saved if saved and saved <= len(queue) and saved != index else None)

    @app.post("/item/{raw}")
    async def submit(request: Request, raw: str) -> Response:
        form = _form(request, await request.body())
        if not _csrf_ok(request, form):
            return wb.error(request, 403, "CSRF token missing or wrong: reload the page and try again")
        name = who(request)
        if name is None:
            return wb.error(request, 403, "no reviewer chosen: open the workbench's first page")
        queue, items, _live = wb.state(name)
        index = _index(raw)
        if index is None or not 1 <= index <= len(queue) or queue[index - 1].item_key not in items:
            return wb.error(request, 404, f"no item {raw} in your queue")
        item = items[queue[index - 1].item_key]
        verdict = (form.get("verdict") or [""])[0]
        failures = sorted(set(form.get("failure", [])))
        # browsers send a textarea's line breaks as CR LF; the note is stored with LF
        note = (form.get("note") or [""])[0].replace("\r\n", "\n")
        letters = {s.option.rank: s.letter for s in shown_options(item, wb.seed) if s.option.rank is not None}
        allowed = {v for v, _label, _key in _failure_choices(item, letters)}
        problem = (f"verdict must be one of {', '.join(VERDICTS)}" if verdict not in VERDICTS
                   else f"unknown failure type {next(f for f in failures if f not in allowed)!r}"
                   if any(f not in allowed for f in failures)
                   else "a reject needs at least one failure type" if verdict == "reject" and not failures
                   else f"the note is longer than {MAX_NOTE} characters" if len(note) > MAX_NOTE
                   else "the note holds a control character" if any(c in _CONTROL for c in note) else None)
        if problem is not None:
            return wb.error(request, 400, problem)
        if (form.get("content_hash") or [""])[0] != item.content_hash:
            return wb.error(request, 409, "this item changed since the page was loaded; reload it and review again")
        add_verdict(wb.engine, ReviewVerdict(plan_id=wb.plan_id, item_key=item.key, reviewer=name, verdict=verdict,
                                             failure_types=failures if verdict == "reject" else [],
                                             note=note, content_hash=item.content_hash))
        # on to the next item of the plan; its page links back to this one
        target = f"/item/{index + 1}" if index < len(queue) else "/"
        return RedirectResponse(f"{target}?saved={index}", status_code=303)

    return app


def serve(engine: Engine, *, host: str = "127.0.0.1", port: int = 8765, plan_id: str = "main",
          reviewer: str | None = None, token: str | None = None, blind: bool = True) -> None:
    """Run the workbench with uvicorn until interrupted."""
    import uvicorn

    check_bind(host, token)
    # without a token, answer only to the names of this machine (and the address given)
    names = None if token else sorted({host, "127.0.0.1", "localhost", "[::1]"})
    app = create_app(engine, plan_id=plan_id, reviewer=reviewer, token=token, blind=blind, allowed_hosts=names)
    # h11 with the workbench's headers on the parser's own 400s; bodies are bounded by the guard
    uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False, proxy_headers=False,
                http=WorkbenchH11Protocol)
