"""What the workbench's item page shows (FastAPI's TestClient): options in a seeded order per item
that spreads the gold answer over every position, verdicts that name the option shown, each
contradicting span once, and Save that moves on to the next item with a way back."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arcticqa.review.items import load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.store.reviews import plan_verdicts, save_plan
from arcticqa.store.store import Store
from arcticqa.workbench import create_app
from arcticqa.workbench.app import shown_options
from tests.review_fixtures import make_review_store

LETTERS = "ABCDE"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = make_review_store(tmp_path / "review.db", accepted=24, rejected=0)
    plan, rows = extend_plan(None, [], load_review_items(s.engine),
                             SamplingRequest(reviewers=["ana", "ben"], n=24, double_share=1.0))
    save_plan(s.engine, plan, rows)
    return s


def _options(page: str) -> list[tuple[str, str, str]]:
    """(letter, kind, text) of each listed option, in page order."""
    block = page.split('id="options">', 1)[1].split("</ol>", 1)[0]
    found = re.findall(r'<li class="option (\w+)" id="option-(\w)" data-letter="\w"><span class="text">([^<]*)</span>',
                       block)
    return [(letter, kind, text) for kind, letter, text in found]


def _queue(client: TestClient) -> int:
    m = re.search(r"\d+ / (\d+) done", client.get("/item/1").text)
    assert m
    return int(m.group(1))


def test_the_gold_answers_position_is_spread_over_every_letter(store: Store) -> None:
    ana = TestClient(create_app(store.engine, reviewer="ana"))
    ben = TestClient(create_app(store.engine, reviewer="ben"))
    gold_at: Counter[str] = Counter()
    orders: dict[str, list[tuple[str, str, str]]] = {}
    for i in range(1, _queue(ana) + 1):
        page = ana.get(f"/item/{i}").text
        key = re.search(r'data-key="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        shown = _options(page)
        assert [s[0] for s in shown] == list(LETTERS)  # gold, distractors 1-3, abstain, lettered A-E
        assert sorted(s[1] for s in shown) == ["abstain", "distractor", "distractor", "distractor", "gold"]
        gold_at[next(letter for letter, kind, _ in shown if kind == "gold")] += 1
        orders[key] = shown
        assert _options(ana.get(f"/item/{i}").text) == shown  # fixed for the item: a reload shows the same order
    assert len(orders) == 24
    assert set(gold_at) == set(LETTERS), gold_at  # every position used
    assert max(gold_at.values()) <= len(orders) // 2, gold_at  # none holds half the items
    for i in range(1, _queue(ben) + 1):  # every reviewer of the plan sees an item in one order
        page = ben.get(f"/item/{i}").text
        key = re.search(r'data-key="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        assert _options(page) == orders[key]
    assert "in the order a model sees them" not in page and 'id="order-note"' in page


def test_the_order_follows_the_plans_seed(store: Store) -> None:
    items = [i for i in load_review_items(store.engine) if i.population == "accepted"]
    first = [[s.option.kind for s in shown_options(i, 20)] for i in items]
    assert first == [[s.option.kind for s in shown_options(i, 20)] for i in items]  # deterministic
    assert first != [[s.option.kind for s in shown_options(i, 21)] for i in items]


def test_a_distractor_verdict_names_the_option_the_reviewer_saw(store: Store) -> None:
    client = TestClient(create_app(store.engine, reviewer="ana"))
    page = client.get("/item/1").text
    key = re.search(r'data-key="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    shown = _options(page)
    # the form's checkbox for a distractor names its letter; the letter's option is that distractor
    boxes = re.findall(r'value="review\.distractor_true:(\d)" data-key="\d"> distractor \1 \(option (\w)\)', page)
    assert len(boxes) == 3
    item = next(i for i in load_review_items(store.engine) if i.key == key)
    by_rank = {o.rank: o.text for o in item.options if o.kind == "distractor"}
    for k, letter in boxes:
        assert dict((s[0], s[2]) for s in shown)[letter] == by_rank[int(k) - 1]
    k, letter = boxes[-1]
    absent = re.search(r'value="review\.distractor_true:4" data-key="4"> distractor 4 \(listed when the answer is absent\)',
                       page)
    assert absent
    r = client.post("/item/1", data={"csrf": re.search(r'name="csrf" value="([^"]+)"', page).group(1),  # type: ignore[union-attr]
                                     "content_hash": re.search(r'name="content_hash" value="(\w+)"', page).group(1),  # type: ignore[union-attr]
                                     "verdict": "reject", "failure": f"review.distractor_true:{k}"},
                    follow_redirects=False)
    assert r.status_code == 303
    [v] = plan_verdicts(store.engine, "main")
    assert v.failure_types == [f"review.distractor_true:{k}"]
    assert by_rank[int(v.failure_types[0].rsplit(":", 1)[1]) - 1] == dict((s[0], s[2]) for s in shown)[letter]


def test_each_contradicting_span_is_shown_once(store: Store) -> None:
    page = TestClient(create_app(store.engine, reviewer="ana")).get("/item/1").text
    table = page.split('id="contradictions">', 1)[1].split("</table>", 1)[0]
    rows = table.split("<tbody>", 1)[1].count("<tr>")
    assert rows == 1  # the fixture's four distractors all cite one span
    assert table.count("<li>") == 4 and "distractor 4 (listed when the answer is absent)" in table
    m = re.search(r'data-key="aqa-test(\d+)"', page)
    assert m and table.count(f"sp-{int(m.group(1)):04d}") == 1  # the span (its id: the fixture stores no text)


def _save(client: TestClient, index: int) -> Any:
    page = client.get(f"/item/{index}").text
    return client.post(f"/item/{index}", data={
        "csrf": re.search(r'name="csrf" value="([^"]+)"', page).group(1),  # type: ignore[union-attr]
        "content_hash": re.search(r'name="content_hash" value="(\w+)"', page).group(1),  # type: ignore[union-attr]
        "verdict": "unsure"}, follow_redirects=False)


def test_save_goes_on_to_the_next_item_with_a_way_back(tmp_path: Path) -> None:
    s = make_review_store(tmp_path / "review.db", accepted=3, rejected=0)
    plan, rows = extend_plan(None, [], load_review_items(s.engine), SamplingRequest(reviewers=["ana"]))
    save_plan(s.engine, plan, rows)
    client = TestClient(create_app(s.engine, reviewer="ana"))
    assert 'id="prev"' not in client.get("/item/1").text
    r = _save(client, 1)
    assert r.status_code == 303 and r.headers["location"] == "/item/2?saved=1"
    page = client.get(r.headers["location"]).text
    assert '<a href="/item/1" id="back">' in page and '<a href="/item/1" id="prev">' in page
    assert "Saved your verdict on item 1" in page
    assert 'class="verdict">unsure<' in client.get("/item/1").text  # back: the verdict is there
    assert _save(client, 3).headers["location"] == "/?saved=3"  # the last item: the first still open
    assert client.get("/?saved=3", follow_redirects=False).headers["location"] == "/item/2?saved=3"
    assert _save(client, 2).headers["location"] == "/item/3?saved=2"
    done = client.get("/?saved=2").text
    assert "All 3 assigned item(s) reviewed" in done and '<a href="/item/2" id="back">' in done
    assert 'id="saved"' not in client.get("/item/2?saved=junk").text
