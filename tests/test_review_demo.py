"""Expert review on the demo build (the bundled sample corpus, offline provider; slow: one local
build, ~10-30 s): the workbench in headless Chromium driven by the keyboard, and what a review
changes in ``arcticqa export`` and the audit."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import uvicorn

from arcticqa.config import load_settings
from arcticqa.demo.run import DemoResult, run_demo
from arcticqa.pipeline.audit import audit_data
from arcticqa.pipeline.export import export_from_store
from arcticqa.release.validate import validate_release
from arcticqa.review.items import load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.review.report import report_for_store
from arcticqa.store.reviews import add_verdict, plan_assignments, save_plan
from arcticqa.store.store import Store
from arcticqa.store.tables import ReviewVerdict
from arcticqa.workbench import create_app
from tests.browser import headless_chromium
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(tmp_path_factory.mktemp("demo") / "out", orchestrator="local", trials=1)


@pytest.fixture
def store(demo: DemoResult, tmp_path: Path) -> Iterator[Store]:
    """A private copy of the demo store (SQLite's backup API: the WAL is included)."""
    copy = tmp_path / "arcticqa.db"
    with sqlite3.connect(demo.out_dir / "arcticqa.db") as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    s = Store(f"sqlite:///{copy}")
    yield s
    s.close()


def _plan(store: Store, *reviewers: str, credited: tuple[str, ...] = ()) -> None:
    plan, rows = extend_plan(None, [], load_review_items(store.engine),
                             SamplingRequest(reviewers=list(reviewers), credited=list(credited)))
    save_plan(store.engine, plan, rows)


def _export(store: Store, out: Path) -> Path:
    settings = load_settings(None)
    return export_from_store(store, settings, out, release_id="arcticqa-demo")


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_plan_without_verdicts_leaves_the_release_byte_identical(store: Store, tmp_path: Path) -> None:
    before = _files(_export(store, tmp_path / "before"))
    _plan(store, "ana", "ben")
    assert _files(_export(store, tmp_path / "after")) == before


def test_export_carries_the_review(store: Store, tmp_path: Path) -> None:
    _plan(store, "ana", "zoltan", credited=("ana",))
    rows = [a for a in plan_assignments(store.engine, "main") if a.population == "accepted" and a.slot == 1]
    items = {i.key: i for i in load_review_items(store.engine)}
    rejected, verified = rows[0], rows[1:]
    add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key=rejected.item_key, reviewer=rejected.reviewer,
                                            verdict="reject", failure_types=["review.distractor_true:3"],
                                            content_hash=items[rejected.item_key].content_hash))
    for a in verified:
        add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key=a.item_key, reviewer=a.reviewer,
                                                verdict="accept", content_hash=items[a.item_key].content_hash))
    out = _export(store, tmp_path / "release")
    assert validate_release(out).ok
    released = [json.loads(line) for line in (out / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert rejected.item_key not in {r["item_id"] for r in released}
    assert {r["status"] for r in released} == {"expert_verified"} and len(released) == len(verified)
    excluded = json.loads((out / "excluded-items.json").read_text(encoding="utf-8"))
    assert excluded == [{"item_id": rejected.item_key, "status": "expert_rejected",
                         "reason": "rejected by expert review (plan main): review.distractor_true:3"}]
    card = (out / "README.md").read_text(encoding="utf-8")
    n = len(rows)
    assert f"Domain experts reviewed {n} of {n}" in card and "residual error rate" in card
    assert f"**{100 / n:.1f}%**" in card  # one error in n reviewed items, one stratum each
    assert "Reviewers: ana and 1 not named." in card and "zoltan" not in card
    assert "Machine-accepted, not expert-verified" not in card
    audit = audit_data(store)
    flagged = [r for r in audit.rejections if r.stage == "review"]
    assert [(r.item_id, r.rule_id) for r in flagged] == [(rejected.item_key, "review.distractor_true")]
    assert {i.item_id: i.status for i in audit.items}[rejected.item_key] == "expert_rejected"
    assert [r.item_id for r in audit_data(store, rule="review.").rejections] == [rejected.item_key]


class _Server:
    """The workbench under uvicorn on 127.0.0.1 and an ephemeral port, in a thread."""

    def __init__(self, app: Any):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        for _ in range(200):
            if self.server.started:
                return f"http://127.0.0.1:{self.port}"
            time.sleep(0.05)
        raise AssertionError("uvicorn did not start")

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def test_reviewers_work_in_headless_chromium_with_the_keyboard(store: Store, tmp_path: Path) -> None:
    _plan(store, "ana", "ben")
    drv = headless_chromium(tmp_path, window="1100,1500")
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    wait = WebDriverWait(drv, 20, ignored_exceptions=[StaleElementReferenceException])  # Save navigates

    def key(k: str) -> None:
        ActionChains(drv).send_keys(k).perform()

    def on_item(i: int, answered: bool) -> None:
        wait.until(lambda d: urlparse(d.current_url).path == f"/item/{i}"
                   and d.execute_script("return document.documentElement.dataset.ready") == "1"
                   and bool(d.find_elements(By.ID, "your-verdict")) == answered)

    def sign_in(base: str, name: str) -> int:
        drv.delete_all_cookies()
        drv.get(base + "/")
        Select(drv.find_element(By.ID, "reviewer")).select_by_value(name)
        drv.find_element(By.CSS_SELECTOR, "#identity-form button").click()
        on_item(1, answered=False)
        return int(drv.find_element(By.ID, "progress").text.split("/")[1].split()[0])

    try:
        with _Server(create_app(store.engine)) as base:
            total = sign_in(base, "ana")
            # blind: no machine label until answered
            assert drv.find_elements(By.ID, "machine-verdict") == [] and drv.find_element(By.ID, "blind-note")
            assert "deterministic-contradiction" not in drv.page_source
            key("a")  # accept and save: on to item 2, with a link back to item 1
            on_item(2, answered=False)
            assert "Saved your verdict on item 1" in drv.find_element(By.ID, "saved").text
            drv.find_element(By.ID, "back").click()
            on_item(1, answered=True)
            assert drv.find_element(By.ID, "machine-verdict").is_displayed()
            assert "deterministic-contradiction" in drv.page_source
            key("n")
            on_item(2, answered=False)
            key("r")
            key("2")
            key(Keys.ENTER)
            on_item(3, answered=False)
            key("p")  # back to item 2: answered
            on_item(2, answered=True)
            key("n")
            on_item(3, answered=False)
            key("u")
            on_item(4, answered=False)
            shots = REPO_ROOT / "test-artifacts"
            shots.mkdir(exist_ok=True)
            assert drv.save_screenshot(str(shots / "review-workbench.png"))
            drv.refresh()  # reload: the verdicts are in the store, not the page
            for i, expected in ((1, "accept"), (2, "reject"), (3, "unsure")):
                drv.get(f"{base}/item/{i}")
                assert drv.find_element(By.CSS_SELECTOR, "#your-verdict .verdict").text == expected
                if expected == "reject":  # "2" toggled distractor 2's failure type
                    assert "review.distractor_true:2" in drv.find_element(By.ID, "your-verdict").text
            assert drv.find_element(By.ID, "progress").text == f"3 / {total} done"
            for i in range(4, total + 1):  # the rest of ana's queue
                drv.get(f"{base}/item/{i}")
                on_item(i, answered=False)
                key("a")
                wait.until(lambda d: d.find_elements(By.ID, "saved"))
            # the second reviewer accepts everything in theirs, Save moving on each time
            ben_total = sign_in(base, "ben")
            for i in range(1, ben_total + 1):
                on_item(i, answered=False)
                key("a")
                wait.until(lambda d, i=i: f"item {i}." in " ".join(e.text for e in d.find_elements(By.ID, "saved")))
    finally:
        drv.quit()
    report = report_for_store(store.engine)
    assert report is not None
    assert report.agreement.reviewers == ["ana", "ben"] and report.agreement.items == 2
    assert report.answered == len(plan_assignments(store.engine, "main"))
    assert report.residual_error.hits == 1 and report.unsure == 1


def test_the_workbench_at_1280_px_spreads_the_gold_answer_over_the_positions(store: Store, tmp_path: Path) -> None:
    """A blind reviewer cannot learn the answer from its position: over the demo's accepted items
    the gold answer is listed at several letters, none holding half of them (a release lists it
    first), and the page fits 1280 px without scrolling sideways."""
    _plan(store, "ana")
    drv = headless_chromium(tmp_path, window="1280,1000")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(drv, 20)
    gold_at: Counter[str] = Counter()
    try:
        with _Server(create_app(store.engine, reviewer="ana")) as base:
            drv.get(f"{base}/item/1")
            total = int(drv.find_element(By.ID, "progress").text.split("/")[1].split()[0])
            for i in range(1, total + 1):
                drv.get(f"{base}/item/{i}")
                wait.until(lambda d: d.execute_script("return document.documentElement.dataset.ready") == "1")
                assert drv.execute_script("return document.documentElement.scrollWidth") <= 1280
                options = drv.find_elements(By.CSS_SELECTOR, "#options > li")
                if len(options) < 5:  # a candidate rejected before its distractors were written
                    continue
                assert [o.get_attribute("data-letter") for o in options] == list("ABCDE")
                gold = drv.find_element(By.CSS_SELECTOR, "#options > li.gold")
                assert gold.is_displayed() and drv.find_element(By.ID, "order-note").is_displayed()
                gold_at[str(gold.get_attribute("data-letter"))] += 1
    finally:
        drv.quit()
    n = sum(gold_at.values())
    assert n == 6, gold_at  # the demo's accepted items
    assert len(gold_at) >= 3 and max(gold_at.values()) <= n // 2, gold_at
