"""The review plan: a seeded, stratified draw that only ever grows, stored in the store."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from arcticqa.errors import InputError
from arcticqa.review.items import FIRST_DIMENSIONS, ReviewItem, decided_by, load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.review.report import build_report
from arcticqa.store.reviews import get_plan, plan_assignments, save_plan
from arcticqa.store.tables import ItemRow, ReviewAssignment, ReviewPlan, ReviewVerdict
from tests.review_fixtures import item_payload, make_review_store


def _items(n: int, *, rejected: int = 0, start: int = 0) -> list[ReviewItem]:
    out = [ReviewItem(key=f"aqa-{i:05d}", population="accepted", paper_id=f"p{i}", subject="s", item_id=f"aqa-{i:05d}",
                      strata={"answer_type": "numeric" if i % 3 else "text", "claim_type": "observation",
                              "language": "latin", "region": ["Barents Sea", "Fram Strait", "unknown"][i % 3 // 2]},
                      content_hash=f"h{i}") for i in range(start, start + n)]
    out += [ReviewItem(key=f"rej-{i:05d}", population="rejected", paper_id=f"q{i}", subject="s",
                       strata={"rule": "verify.not_entailed" if i % 2 else "option.supported_by_evidence"},
                       content_hash=f"r{i}") for i in range(start, start + rejected)]
    return out


def _rows(rows: list[ReviewAssignment]) -> list[tuple[str, int, str, int, str]]:
    return sorted((a.item_key, a.slot, a.reviewer, a.position, a.stratum) for a in rows)


def test_the_draw_is_seeded_stratified_and_independent_of_listing_order() -> None:
    items = _items(300, rejected=40)
    req = SamplingRequest(reviewers=["ana", "ben"], n=60, rejected_n=10)
    plan, rows = extend_plan(None, [], items, req)
    shuffled = list(items)
    random.Random(1).shuffle(shuffled)
    assert _rows(extend_plan(None, [], shuffled, req)[1]) == _rows(rows)
    primary = [a for a in rows if a.slot == 1]
    assert sum(a.population == "accepted" for a in primary) == 60
    assert sum(a.population == "rejected" for a in primary) == 10
    # proportional allocation: the text stratum holds a third of the items, so a third of the sample
    assert sum(a.stratum.startswith("text") for a in primary if a.population == "accepted") == 20
    assert plan.strata is not None and sum(plan.strata["accepted"].values()) == 300
    seconds = [a for a in rows if a.slot == 2]
    assert len(seconds) == round(0.2 * 70)
    first = {a.item_key: a.reviewer for a in primary}
    assert all(a.reviewer != first[a.item_key] for a in seconds)
    other = extend_plan(None, [], items, req.model_copy(update={"seed": 21}))[1]
    assert _rows(other) != _rows(rows)


def test_the_sample_size_follows_the_half_width() -> None:
    plan, rows = extend_plan(None, [], _items(1000), SamplingRequest(reviewers=["ana"], half_width=0.05))
    assert sum(a.slot == 1 for a in rows) == 278  # 384.1 / (1 + 383.1/1000) = 277.7
    assert not [a for a in rows if a.slot == 2]  # one reviewer: nobody to double with yet


def test_extending_never_changes_an_assignment() -> None:
    items = _items(120, rejected=10)
    plan, rows = extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], n=30, rejected_n=4))
    # a second reviewer: takes the double reviews, nothing already assigned moves
    plan2, added = extend_plan(plan, rows, items, SamplingRequest(reviewers=["ben"]))
    assert added and all(a.slot == 2 and a.reviewer == "ben" for a in added)
    assert len(added) == round(0.2 * 34)
    # new items in the store and a larger sample: the old rows stay as they were
    more = items + _items(60, start=500)
    plan3, added3 = extend_plan(plan2, rows + added, more, SamplingRequest(n=45, reviewers=["cy"]))
    assert sum(a.slot == 1 and a.population == "accepted" for a in rows + added + added3) == 45
    assert {a.item_key for a in added3 if a.slot == 1}.isdisjoint({a.item_key for a in rows})
    assert plan3.reviewers == ["ana", "ben", "cy"] and plan3.seed == plan.seed
    assert "cy" in {a.reviewer for a in added3}
    # asking again with nothing new adds nothing
    assert extend_plan(plan3, rows + added + added3, more, SamplingRequest())[1] == []


def test_bad_requests_are_refused_with_one_line() -> None:
    plan, rows = extend_plan(None, [], _items(10), SamplingRequest(reviewers=["ana"]))
    with pytest.raises(InputError, match="keeps its seed"):
        extend_plan(plan, rows, _items(10), SamplingRequest(seed=99))
    with pytest.raises(InputError, match="at least one reviewer"):
        extend_plan(None, [], _items(10), SamplingRequest())
    with pytest.raises(InputError, match="--half-width"):
        extend_plan(None, [], _items(10), SamplingRequest(reviewers=["a"], half_width=2.0))
    with pytest.raises(InputError, match="reviewer name"):
        extend_plan(None, [], _items(10), SamplingRequest(reviewers=[" "]))


def test_the_plan_is_stored_and_extends_in_the_store(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "s.db", accepted=8, rejected=2)
    items = load_review_items(store.engine)
    plan, rows = extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], n=5))
    save_plan(store.engine, plan, rows)
    stored = plan_assignments(store.engine, "main")
    before = [(a.id, a.item_key, a.slot, a.reviewer, a.position, a.content_hash) for a in stored]
    again = get_plan(store.engine, "main")
    assert again is not None and again.seed == plan.seed and again.strata == plan.strata
    plan2, added = extend_plan(again, stored, items, SamplingRequest(reviewers=["ben"], n=8))
    save_plan(store.engine, plan2, added)
    after = plan_assignments(store.engine, "main")
    assert [(a.id, a.item_key, a.slot, a.reviewer, a.position, a.content_hash) for a in after
            if a.id in {b[0] for b in before}] == before
    assert len(after) == len(before) + len(added) and len(added) >= 3
    store.close()


def _decided(n: int, *, model_every: int = 4) -> list[ReviewItem]:
    """``n`` accepted items, every ``model_every``-th with a model-decided verdict."""
    items = _items(n)
    for i, item in enumerate(items):
        model = i % model_every == 0
        item.strata["decided_by"] = "model" if model else "rule"
        item.answer_match = "model-verified" if model else "deterministic-match"
    return items


def _model_share(rows: list[ReviewAssignment], items: list[ReviewItem]) -> float:
    model = {i.key for i in items if i.strata.get("decided_by") == "model"}
    primary = [a for a in rows if a.slot == 1 and a.population == "accepted"]
    return sum(a.item_key in model for a in primary) / len(primary)


def test_model_decided_items_are_oversampled_reproducibly() -> None:
    items = _decided(400)  # a quarter model-decided
    req = SamplingRequest(reviewers=["ana"], n=80)
    plan, rows = extend_plan(None, [], items, req)
    assert plan.params is not None and plan.params["model_weight"] == 3.0
    assert plan.params["dimensions"][-1] == "decided_by"
    assert all(a.stratum.endswith((" | model", " | rule")) for a in rows)
    # weight 3: model strata get 3 x 100 of 3 x 100 + 300 shares, half the sample instead of a quarter
    assert _model_share(rows, items) == pytest.approx(0.5, abs=0.04) and _model_share(rows, items) > 0.25
    shuffled = list(items)
    random.Random(2).shuffle(shuffled)
    assert _rows(extend_plan(None, [], shuffled, req)[1]) == _rows(rows)  # the seed fixes the draw
    assert _rows(extend_plan(None, [], items, req.model_copy(update={"seed": 21}))[1]) != _rows(rows)
    proportional = extend_plan(None, [], items, req.model_copy(update={"model_weight": 1.0}))[1]
    assert _model_share(proportional, items) == pytest.approx(0.25, abs=0.04)


def test_oversampling_keeps_the_half_width_and_the_estimate_unbiased() -> None:
    items = _decided(400)
    plan, rows = extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], half_width=0.1))
    proportional = extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], half_width=0.1, model_weight=1))[1]
    # oversampling costs precision on the overall rate: the sample grows so Kish's n_eff still meets it
    assert sum(a.slot == 1 for a in rows) > sum(a.slot == 1 for a in proportional)
    # every model-decided item is wrong and no rule-decided one: the truth is a quarter, the sample holds about half
    verdicts = [ReviewVerdict(id=k, plan_id="main", item_key=a.item_key, reviewer=a.reviewer,
                              verdict="reject" if a.stratum.endswith("model") else "accept",
                              failure_types=["review.other"] if a.stratum.endswith("model") else [],
                              content_hash=next(i.content_hash for i in items if i.key == a.item_key))
                for k, a in enumerate(rows, 1) if a.slot == 1]
    assert sum(v.verdict == "reject" for v in verdicts) / len(verdicts) > 0.4
    report = build_report(plan, rows, verdicts, items)
    assert report.residual_error.rate == pytest.approx(0.25)
    assert report.residual_error.n_effective < report.residual_error.n
    assert report.by_decision["model"].rate == 1.0 and report.by_decision["rule"].rate == 0.0
    assert list(report.by_decision) == ["rule", "model"]


def test_a_plan_drawn_before_decided_by_keeps_its_strata() -> None:
    items = _decided(120)
    legacy = ReviewPlan(id="main", seed=20, reviewers=["ana"],
                        params={"seed": 20, "half_width": 0.05, "expected_rate": 0.5, "double_share": 0.2, "n": 30,
                                "credited": []})
    plan, rows = extend_plan(legacy, [], items, SamplingRequest())
    assert plan.params is not None and "dimensions" not in plan.params and "model_weight" not in plan.params
    assert plan.strata is not None
    assert set(plan.strata["accepted"]) == {i.stratum_in(FIRST_DIMENSIONS) for i in items}
    assert {a.stratum for a in rows} <= set(plan.strata["accepted"])
    verdicts = [ReviewVerdict(id=k, plan_id="main", item_key=a.item_key, reviewer="ana", verdict="accept",
                              content_hash=next(i.content_hash for i in items if i.key == a.item_key))
                for k, a in enumerate(rows, 1)]
    report = build_report(plan, rows, verdicts, items)
    assert report.residual_error.n == 30 and report.coverage == 1.0 and report.by_decision == {}
    with pytest.raises(InputError, match="before model-decided items were a stratum"):
        extend_plan(plan, rows, items, SamplingRequest(model_weight=3))
    with pytest.raises(InputError, match="--model-weight"):
        extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], model_weight=0.5))


def test_who_decided_is_read_from_the_stored_item(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "s.db", accepted=1, rejected=1)  # model-verified distractors
    for i, confidence in ((7, "deterministic"), (8, "model")):
        payload = item_payload(i) | {"answer_match_confidence": confidence}
        payload["distractors"] = [d | {"verification": "deterministic-contradiction"} for d in payload["distractors"]]
        pid = f"paper{i:036d}"
        store.record_run(pid, "accept", f"fd-{i}/r0", input_hash=f"h{i}", status="succeeded",
                         evidence=[ItemRow(stage_run_id=0, paper_id=pid, subject=f"fd-{i}/r0",
                                           item_id=payload["item_id"], payload=payload)])
    got = {i.key: (i.answer_match, i.strata.get("decided_by")) for i in load_review_items(store.engine)}
    assert got == {"aqa-test0000": (None, "model"),  # the answer match predates the record; a distractor decides
                   "aqa-test0007": ("deterministic-match", "rule"), "aqa-test0008": ("model-verified", "model"),
                   "rejected0000000000000000000000000000"[:12] + ":fd-r0/r0": (None, None)}
    assert decided_by(None, ["deterministic-contradiction"]) == "unknown"
    store.close()


def _doubly_reviewed(ratings: list[tuple[str, str, str, str]]) -> tuple[list[ReviewAssignment], list[ReviewVerdict],
                                                                       list[ReviewItem]]:
    """(first reviewer, their verdict, second reviewer, their verdict) per item, both slots filled."""
    items = _items(len(ratings))
    rows, verdicts = [], []
    for n, (item, (r1, v1, r2, v2)) in enumerate(zip(items, ratings, strict=True)):
        for slot, reviewer, verdict in ((1, r1, v1), (2, r2, v2)):
            rows.append(ReviewAssignment(plan_id="main", item_key=item.key, population="accepted", stratum="s",
                                         reviewer=reviewer, slot=slot, position=n, content_hash=item.content_hash))
            verdicts.append(ReviewVerdict(id=len(verdicts) + 1, plan_id="main", item_key=item.key, reviewer=reviewer,
                                          verdict=verdict, failure_types=["review.other"] if verdict == "reject" else [],
                                          content_hash=item.content_hash))
    return rows, verdicts, items


def test_kappa_pairs_reviewers_not_review_slots() -> None:
    # ana: accept ×4, unsure ×3; bo: accept, accept, accept, reject, accept, reject, reject. On the
    # fifth item bo reviewed first: pairing by slot mixes the two reviewers' marginals (0.125);
    # between the reviewers kappa is (4/7 - 17/49) / (1 - 17/49) = 5/33, by hand
    ana = ["accept"] * 4 + ["unsure"] * 3
    bo = ["accept", "accept", "accept", "reject", "accept", "reject", "reject"]
    ratings = [("bo", b, "ana", a) if i == 4 else ("ana", a, "bo", b) for i, (a, b) in enumerate(zip(ana, bo, strict=True))]
    rows, verdicts, items = _doubly_reviewed(ratings)
    plan = ReviewPlan(id="main", seed=1, reviewers=["ana", "bo"], strata={"accepted": {"s": len(items)}})
    agreement = build_report(plan, rows, verdicts, items).agreement
    assert agreement.items == 7 and agreement.reviewers == ["ana", "bo"]
    assert agreement.cohen_kappa == pytest.approx(5 / 33)
    assert [(p.reviewers, p.items) for p in agreement.pairwise] == [(("ana", "bo"), 7)]
    assert agreement.headline == "cohen_kappa"


def test_more_than_two_reviewers_get_pairwise_and_fleiss_kappa_beside_alpha() -> None:
    ratings = [("ana", "accept", "bo", "accept"), ("bo", "reject", "cy", "reject"), ("cy", "accept", "ana", "reject"),
               ("ana", "accept", "cy", "accept"), ("bo", "accept", "ana", "accept"), ("cy", "reject", "bo", "accept")]
    rows, verdicts, items = _doubly_reviewed(ratings)
    plan = ReviewPlan(id="main", seed=1, reviewers=["ana", "bo", "cy"], strata={"accepted": {"s": len(items)}})
    agreement = build_report(plan, rows, verdicts, items).agreement
    assert agreement.headline == "krippendorff_alpha" and agreement.cohen_kappa is None
    assert [(p.reviewers, p.items) for p in agreement.pairwise] == [(("ana", "bo"), 2), (("ana", "cy"), 2),
                                                                      (("bo", "cy"), 2)]
    # Fleiss over the six items' two ratings: P̄ = 4/6; accept 8/12, reject 4/12 -> P̄e = 5/9
    assert agreement.fleiss_kappa == pytest.approx((4 / 6 - 5 / 9) / (1 - 5 / 9))
    assert agreement.krippendorff_alpha is not None


def test_a_sampled_item_counts_in_the_stratum_it_was_drawn_from_after_a_relabel() -> None:
    items = _items(60)
    plan, rows = extend_plan(None, [], items, SamplingRequest(reviewers=["ana"], n=30))
    verdicts = [ReviewVerdict(id=k, plan_id="main", item_key=a.item_key, reviewer="ana", verdict="accept",
                              content_hash=next(i.content_hash for i in items if i.key == a.item_key))
                for k, a in enumerate(rows, 1) if a.slot == 1]
    before = build_report(plan, rows, verdicts, items).residual_error
    # a better region lookup moves the Fram Strait items to another region after the plan was drawn
    relabelled = [i.model_copy(update={"strata": {**i.strata, "region": "Svalbard waters"}})
                  if i.strata.get("region") == "Fram Strait" else i for i in items]
    assert any(i.strata["region"] == "Fram Strait" for i in items)
    after = build_report(plan, rows, verdicts, relabelled).residual_error
    assert (after.n, after.rate) == (before.n, before.rate) == (30, 0.0)
