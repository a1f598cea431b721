"""The review workbench's routes (FastAPI's TestClient, no socket) and a real uvicorn server on
127.0.0.1: identity, CSRF and access tokens, blind mode, escaping, stale verdicts, the report."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from arcticqa.errors import InputError
from arcticqa.review.items import load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.review.report import report_for_store
from arcticqa.store.db import write_session
from arcticqa.store.reviews import add_verdict, plan_verdicts, save_plan
from arcticqa.store.store import Store
from arcticqa.store.tables import ItemRow, ReviewVerdict
from arcticqa.workbench import check_bind, create_app
from tests.review_fixtures import free_port, item_payload, make_review_store, start_workbench

HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = make_review_store(tmp_path / "review.db", accepted=6, rejected=2)
    plan, rows = extend_plan(None, [], load_review_items(s.engine),
                             SamplingRequest(reviewers=["ana", "ben"], double_share=0.5))
    save_plan(s.engine, plan, rows)
    return s


def _csrf(page: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', page)
    assert m, "no CSRF field on the page"
    return m.group(1)


def _hash(page: str) -> str:
    m = re.search(r'name="content_hash" value="([0-9a-f]{64})"', page)
    assert m
    return m.group(1)


def _answer(client: TestClient, index: int, verdict: str, *failures: str, note: str = "") -> httpx.Response:
    page = client.get(f"/item/{index}").text
    return client.post(f"/item/{index}", data={"csrf": _csrf(page), "content_hash": _hash(page), "verdict": verdict,
                                               "failure": list(failures), "note": note}, follow_redirects=False)


def test_identity_prompt_then_review_and_reload_keeps_the_verdict(store: Store) -> None:
    client = TestClient(create_app(store.engine))
    first = client.get("/")
    assert "Who is reviewing?" in first.text and ">ana<" in first.text
    bad = client.post("/identity", data={"reviewer": "ana"}, follow_redirects=False)
    assert bad.status_code == 403  # no CSRF token
    ok = client.post("/identity", data={"reviewer": "ana", "csrf": _csrf(first.text)}, follow_redirects=False)
    assert ok.status_code == 303
    assert client.get("/", follow_redirects=False).headers["location"] == "/item/1"
    assert _answer(client, 1, "accept").status_code == 303
    page = client.get("/item/1").text
    assert 'class="verdict">accept<' in page and re.search(r"1 / \d+ done", page)
    assert client.get("/", follow_redirects=False).headers["location"] == "/item/2"  # the next open one
    assert [v.verdict for v in plan_verdicts(store.engine, "main")] == ["accept"]


def test_requests_without_the_csrf_token_write_nothing(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    page = client.get("/item/1").text
    for form in ({"verdict": "accept", "content_hash": _hash(page)},
                 {"verdict": "accept", "content_hash": _hash(page), "csrf": "forged"}):
        assert client.post("/item/1", data=form).status_code == 403
    other = TestClient(create_app(store.engine, reviewer="ana"))  # a page from another site: no cookie
    assert other.post("/item/1", data={"verdict": "accept", "content_hash": _hash(page),
                                       "csrf": _csrf(page)}).status_code == 403
    assert plan_verdicts(store.engine, "main") == []


def test_an_access_token_is_required_on_every_request(store: Store) -> None:
    app = create_app(store.engine, reviewer="ana", token="s3cret-token")
    client = TestClient(app)
    assert client.get("/").status_code == 403
    assert client.get("/item/1").status_code == 403
    assert client.get("/static/workbench.js").status_code == 403
    assert client.get("/?token=wrong").status_code == 403
    entered = client.get("/?token=s3cret-token", follow_redirects=False)
    assert entered.status_code == 303 and "token" not in entered.headers["location"]
    page = client.get("/item/1").text  # the cookie carries it from now on
    assert _answer(client, 1, "accept").status_code == 303
    stranger = TestClient(app)  # a valid CSRF pair but no access token
    stranger.cookies.set("aqa_csrf", "x")
    assert stranger.post("/item/1", data={"csrf": "x", "verdict": "reject", "failure": "review.other",
                                          "content_hash": _hash(page)}).status_code == 403
    bearer = TestClient(app, headers={"Authorization": "Bearer s3cret-token"})
    assert bearer.get("/item/1").status_code == 200
    assert [v.verdict for v in plan_verdicts(store.engine, "main")] == ["accept"]


def test_non_loopback_hosts_need_a_token() -> None:
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_bind(host, None)
    for host in ("0.0.0.0", "192.168.1.20", "::", "example.org"):
        with pytest.raises(InputError, match="--token"):
            check_bind(host, None)
        check_bind(host, "t")


def test_blind_mode_hides_machine_labels_until_answered(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    before = client.get("/item/1").text
    assert "model-verified" not in before and 'id="machine-verdict"' not in before and 'id="blind-note"' in before
    assert 'id="decided-by"' not in before and "decided by" not in before  # the sampling stratum too
    _answer(client, 1, "accept")
    after = client.get("/item/1").text
    assert "model-verified" in after and 'id="machine-verdict"' in after
    assert "verdicts decided by: model" in after  # its distractors are model-verified
    seeing = TestClient(create_app(store.engine, reviewer="ben", blind=False)).get("/item/1").text
    assert "model-verified" in seeing


def test_a_hostile_note_and_paper_title_are_inert(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    page = client.get("/item/1").text
    assert "&lt;b&gt;bold&lt;/b&gt;" in page and "<b>bold</b>" not in page  # the paper title's markup
    assert "script-src 'self'" in client.get("/item/1").headers["content-security-policy"]
    assert _answer(client, 1, "reject", "review.other", note=HOSTILE).status_code == 303
    shown = client.get("/item/1").text
    assert "<script>window.__pwned" not in shown and 'onerror="window' not in shown
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in shown
    assert shown.count("<script") == 1  # our own script file, nothing else
    assert plan_verdicts(store.engine, "main")[0].note == HOSTILE  # stored as written, escaped when shown


def test_bad_verdicts_are_refused(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    assert _answer(client, 1, "maybe").status_code == 400
    assert _answer(client, 1, "reject").status_code == 400  # a reject needs a failure type
    assert _answer(client, 1, "reject", "review.made_up").status_code == 400
    assert _answer(client, 1, "accept", note="x" * 5000).status_code == 400
    assert client.get("/item/99").status_code == 404
    assert plan_verdicts(store.engine, "main") == []
    with pytest.raises(InputError, match="not in plan"):
        create_app(store.engine, reviewer="mallory")
    with pytest.raises(InputError, match="no review plan"):
        create_app(store.engine, plan_id="other")


def test_a_verdict_on_changed_content_is_stale(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    page = client.get("/item/1").text
    key = re.search(r'data-key="([^"]+)"', page)
    assert key and key.group(1).startswith("aqa-")
    _answer(client, 1, "reject", "review.not_standalone")
    report = report_for_store(store.engine)
    assert report is not None and report.item_status == {key.group(1): "expert_rejected"} and report.stale == 0
    with write_session(store.engine) as s:  # the build rewrites the item's question
        row = s.exec(select(ItemRow).where(ItemRow.item_id == key.group(1))).one()
        row.payload = item_payload(int(key.group(1)[-4:]), question="A rewritten question?")
        s.add(row)
    report = report_for_store(store.engine)
    assert report is not None and report.stale == 1 and report.item_status == {}
    # the page loaded before the change cannot record a verdict on the new content
    resp = client.post("/item/1", data={"csrf": _csrf(page), "content_hash": _hash(page), "verdict": "accept"})
    assert resp.status_code == 409 and len(plan_verdicts(store.engine, "main")) == 1
    assert "A rewritten question?" in client.get("/item/1").text


def test_two_reviewers_agreement_shows_in_the_report(store: Store) -> None:
    verdicts = {}
    for name in ("ana", "ben"):
        client = TestClient(create_app(store.engine, reviewer=name))
        n = int(re.search(r"\d+ / (\d+) done", client.get("/item/1").text).group(1))  # type: ignore[union-attr]
        for i in range(1, n + 1):
            key = re.search(r'data-key="([^"]+)"', client.get(f"/item/{i}").text).group(1)  # type: ignore[union-attr]
            verdict = "reject" if key.endswith("1") else "accept"
            _answer(client, i, verdict, *(["review.distractor_true:2"] if verdict == "reject" else []))
            verdicts.setdefault(key, []).append(verdict)
    report = report_for_store(store.engine)
    assert report is not None
    doubled = [k for k, v in verdicts.items() if len(v) == 2]
    assert report.agreement.items == len(doubled) >= 2 and report.agreement.reviewers == ["ana", "ben"]
    assert report.agreement.observed_agreement == 1.0
    assert report.residual_error.hits == 1 and report.residual_error.n == 6  # aqa-test0001 rejected
    assert report.false_rejection.n == 2 and report.false_rejection.rate == 1.0  # reviewers accepted both
    assert [(m.failure, m.gate, m.items) for m in report.gate_misses] == [
        ("review.distractor_true", "model-verified", 1)]


def test_a_server_killed_mid_submit_leaves_no_partial_verdict(store: Store, tmp_path: Path) -> None:
    db = tmp_path / "review.db"
    port = free_port()
    proc = start_workbench(db, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            page = client.get("/item/1").text
            body = (f"csrf={_csrf(page)}&content_hash={_hash(page)}&verdict=reject&failure=review.ambiguous"
                    "&note=" + "x" * 2000).encode()
            # send the headers and half the form, then kill the server while it waits for the rest
            with socket.create_connection(("127.0.0.1", port)) as raw:
                raw.sendall(f"POST /item/1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nCookie: aqa_csrf={_csrf(page)}\r\n"
                            f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
                            "\r\n".encode() + body[: len(body) // 2])
                time.sleep(0.5)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert plan_verdicts(store.engine, "main") == []
    proc = start_workbench(db, port)  # the store is intact: the next submit is recorded whole
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            page = client.get("/item/1").text
            done = client.post("/item/1", data={"csrf": _csrf(page), "content_hash": _hash(page), "verdict": "reject",
                                                "failure": "review.ambiguous", "note": "x" * 2000},
                               follow_redirects=True)
            assert done.status_code == 200 and done.url.path == "/item/2" and 'id="saved"' in done.text
            assert 'class="verdict">reject<' in client.get("/item/1").text
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    rows = plan_verdicts(store.engine, "main")
    assert [(r.verdict, r.failure_types, len(r.note)) for r in rows] == [("reject", ["review.ambiguous"], 2000)]


def test_release_status_follows_every_current_verdict(store: Store) -> None:
    items = {i.key: i for i in load_review_items(store.engine)}
    keys = sorted(k for k, i in items.items() if i.population == "accepted")[:4]

    def say(key: str, reviewer: str, verdict: str) -> None:
        add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key=key, reviewer=reviewer, verdict=verdict,
                                                failure_types=["review.other"] if verdict == "reject" else [],
                                                content_hash=items[key].content_hash))

    for key, pair in zip(keys, (("accept", "accept"), ("accept", "unsure"), ("accept", "reject"), ("reject", "accept")),
                         strict=True):
        say(key, "ana", pair[0])
        say(key, "ben", pair[1])
    say(keys[3], "ana", "accept")  # ana changes her mind: her newest row counts
    report = report_for_store(store.engine)
    assert report is not None
    assert report.item_status == {keys[0]: "expert_verified", keys[2]: "expert_rejected", keys[3]: "expert_verified"}
    assert report.rejected_items == {keys[2]: ["review.other"]}


def test_a_loopback_server_answers_only_to_loopback_host_names(store: Store) -> None:
    app = create_app(store.engine, reviewer="ana", allowed_hosts=["127.0.0.1", "localhost", "[::1]"])
    assert TestClient(app, base_url="http://127.0.0.1:8765").get("/item/1").status_code == 200
    # a rebinding attack reaches 127.0.0.1 with the attacker's name in the Host header
    assert TestClient(app, base_url="http://attacker.example:8765").get("/item/1").status_code == 400
