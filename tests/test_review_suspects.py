"""The loop from the item audit to review: `review sample --from-suspects` adds flagged items as
their own population, the workbench shows their reasons only after the verdict, and `review
report` gives the error rate among suspects beside the random sample's, which they never enter."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.errors import InputError
from arcticqa.review.items import load_review_items
from arcticqa.review.plan import SamplingRequest, extend_plan
from arcticqa.review.report import build_report, render_html, render_text
from arcticqa.review.stats import proportion, stratified_proportion
from arcticqa.review.suspects import read_suspects
from arcticqa.store.reviews import add_verdict, get_plan, plan_assignments, plan_verdicts, save_plan
from arcticqa.store.tables import ReviewVerdict
from arcticqa.workbench import create_app
from tests.review_fixtures import make_review_store


def _suspects_csv(path: Path, rows: list[tuple[str, str, str]]) -> Path:
    lines = ["item_id,rule_id,condition,option,option_text,reason,suspect_score"]
    lines += [f'{i},{r},answer_present,distractor 1,x,"{why}",1.0' for i, r, why in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _plan(store, n: int, suspects: dict[str, list[dict[str, str]]] | None = None, reviewers=("ana",)):  # type: ignore[no-untyped-def]
    items = load_review_items(store.engine)
    old = get_plan(store.engine, "main")
    new, added = extend_plan(old, plan_assignments(store.engine, "main"), items,
                             SamplingRequest(n=n, rejected_n=0, double_share=0.0, reviewers=list(reviewers),
                                             suspects=suspects or {}))
    save_plan(store.engine, new, added)
    return new


def _verdict(store, key: str, verdict: str, reviewer: str = "ana") -> None:  # type: ignore[no-untyped-def]
    items = {i.key: i for i in load_review_items(store.engine)}
    add_verdict(store.engine, ReviewVerdict(plan_id="main", item_key=key, reviewer=reviewer, verdict=verdict,
                                            failure_types=["review.ambiguous"] if verdict == "reject" else [],
                                            content_hash=items[key].content_hash))


def test_read_suspects_keeps_every_flag_and_names_a_bad_file(tmp_path: Path) -> None:
    path = _suspects_csv(tmp_path / "s.csv", [("aqa-test0001", "items.absent_converge", "why, 1"),
                                              ("aqa-test0001", "items.low_discrimination", "why 2")])
    assert read_suspects(path) == {"aqa-test0001": [{"rule": "items.absent_converge", "reason": "why, 1"},
                                                    {"rule": "items.low_discrimination", "reason": "why 2"}]}
    (tmp_path / "bad.csv").write_text("item,rule\nx,y\n", encoding="utf-8")
    with pytest.raises(InputError, match="missing column"):
        read_suspects(tmp_path / "bad.csv")


def test_suspects_are_their_own_population_and_the_random_draw_ignores_them(tmp_path: Path) -> None:
    plain = make_review_store(tmp_path / "plain.db", accepted=12, rejected=0)
    _plan(plain, 4)
    random_keys = {a.item_key for a in plan_assignments(plain.engine, "main")}
    flagged = sorted({f"aqa-test{i:04d}" for i in range(12)} - random_keys)[:3] + sorted(random_keys)[:1]
    suspects = {k: [{"rule": "items.strong_models_converge", "reason": f"why {k}"}] for k in flagged}

    store = make_review_store(tmp_path / "s.db", accepted=12, rejected=0)
    _plan(store, 0, suspects)  # flagged first, then the random sample is drawn
    plan = _plan(store, 4)
    rows = plan_assignments(store.engine, "main")
    assert {a.item_key for a in rows if a.population == "suspect"} == set(flagged)
    assert plan.params["random_also"] == [flagged[3]]
    # the same draw as without suspects: the one flagged item the draw reaches counts as drawn
    drawn = {a.item_key for a in rows if a.population == "accepted"} | set(plan.params["random_also"])
    assert drawn == random_keys
    assert set(plan.params["suspects"]) == set(flagged)


def test_report_compares_suspects_with_the_random_sample_by_hand(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "r.db", accepted=12, rejected=0)
    _plan(store, 6)
    random_keys = sorted(a.item_key for a in plan_assignments(store.engine, "main"))
    outside = sorted({f"aqa-test{i:04d}" for i in range(12)} - set(random_keys))
    flagged = {outside[0]: "items.strong_models_converge", outside[1]: "items.absent_converge",
               outside[2]: "items.absent_converge", random_keys[0]: "items.absent_converge"}
    plan = _plan(store, 6, {k: [{"rule": r, "reason": "r"}] for k, r in flagged.items()})
    verdicts = {random_keys[0]: "reject", random_keys[1]: "reject", random_keys[2]: "accept",
                random_keys[3]: "accept", random_keys[4]: "accept", random_keys[5]: "unsure",
                outside[0]: "reject", outside[1]: "reject", outside[2]: "accept"}
    for key, v in verdicts.items():
        _verdict(store, key, v)
    items = load_review_items(store.engine)
    report = build_report(plan, plan_assignments(store.engine, "main"), plan_verdicts(store.engine, "main"), items)
    # by hand: the random sample, stratum-weighted, over its own items only
    stratum = {a.item_key: a.stratum for a in plan_assignments(store.engine, "main") if a.population == "accepted"}
    observed: dict[str, list[bool]] = {}
    for key in random_keys:
        if verdicts[key] != "unsure":
            observed.setdefault(stratum[key], []).append(verdicts[key] == "reject")
    expected_random = stratified_proportion(observed, plan.strata["accepted"])
    assert report.residual_error.model_dump() == pytest.approx(expected_random.model_dump())
    assert (report.residual_error.hits, report.residual_error.n) == (2, 5)
    s = report.suspects
    assert s is not None and s.items == 4 and s.in_random_sample == 1
    # suspects: 3 rejects of 4 reviewed (outside[0], outside[1] and random_keys[0] rejected; outside[2] accepted)
    assert s.error == proportion(3, 4)
    assert s.by_rule["items.absent_converge"] == proportion(2, 3)
    assert s.by_rule["items.strong_models_converge"] == proportion(1, 1)
    assert s.random_sample == report.residual_error
    assert "error rate 75.0%" in render_text(report)
    # the HTML page shows the same comparison, from the same numbers
    page = render_html(report)
    para = re.search(r'<p id="suspects">(.*?)</p>', page, re.S)
    assert para is not None
    text = " ".join(para.group(1).split())
    assert "4 item(s) flagged" in text and "(1 also drawn into the random sample)" in text
    assert f"error rate {proportion(3, 4).text} among those reviewed" in text
    assert f"beside {expected_random.text} in the random sample" in text
    table = re.search(r'<table id="suspects-by-rule">(.*?)</table>', page, re.S)
    assert table is not None
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table.group(1))
    assert rows == [("<code>items.absent_converge</code>", proportion(2, 3).text),
                    ("<code>items.strong_models_converge</code>", proportion(1, 1).text),
                    ("random sample (for comparison)", expected_random.text)]


def test_html_report_without_suspects_has_no_suspect_section_and_escapes_rule_ids(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "h.db", accepted=6, rejected=0)
    plan = _plan(store, 3)
    items = load_review_items(store.engine)
    plain = render_html(build_report(plan, plan_assignments(store.engine, "main"),
                                     plan_verdicts(store.engine, "main"), items))
    assert 'id="suspects"' not in plain and "item audit" not in plain
    # no item reviewed twice: no reviewers to name, so no empty "()" after the count
    agreement = re.search(r'<p id="agreement">(.*?)</p>', plain, re.S)
    assert agreement is not None and agreement.group(1).startswith("0 doubly reviewed item(s):")
    outside = sorted({i.key for i in items if i.population == "accepted"}
                     - {a.item_key for a in plan_assignments(store.engine, "main")})[0]
    plan = _plan(store, 3, {outside: [{"rule": "items.<b>odd</b>", "reason": "r"}]})
    _verdict(store, outside, "reject")
    page = render_html(build_report(plan, plan_assignments(store.engine, "main"),
                                    plan_verdicts(store.engine, "main"), load_review_items(store.engine)))
    assert 'id="suspects"' in page and "items.&lt;b&gt;odd&lt;/b&gt;" in page and "<b>odd" not in page
    assert proportion(1, 1).text in page and "not measured (no verdicts)" in page  # no random verdict yet


def test_workbench_shows_a_suspects_reason_only_after_the_verdict(tmp_path: Path) -> None:
    store = make_review_store(tmp_path / "w.db", accepted=4, rejected=0)
    _plan(store, 0, {"aqa-test0002": [{"rule": "items.strong_models_converge",
                                       "reason": "the strongest models chose distractor 2 <b>"}]})
    client = TestClient(create_app(store.engine, reviewer="ana"))
    before = client.get("/item/1").text
    assert "suspect-reasons" not in before and "strongest models" not in before
    assert "items.strong_models_converge" not in before
    page = before
    csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    digest = re.search(r'name="content_hash" value="([0-9a-f]{64})"', page).group(1)  # type: ignore[union-attr]
    assert client.post("/item/1", data={"csrf": csrf, "content_hash": digest, "verdict": "accept"},
                       follow_redirects=False).status_code == 303
    after = client.get("/item/1").text
    assert 'id="suspect-reasons"' in after and "items.strong_models_converge" in after
    assert "distractor 2 &lt;b&gt;" in after  # escaped


def test_cli_from_suspects(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    make_review_store(db, accepted=6, rejected=0).close()
    config = tmp_path / "c.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{db}"\n', encoding="utf-8")
    path = _suspects_csv(tmp_path / "s.csv", [("aqa-test0003", "items.absent_converge", "why"),
                                              ("aqa-elsewhere", "items.absent_converge", "why")])
    result = CliRunner().invoke(app, ["review", "sample", "-c", str(config), "--reviewer", "ana", "--n", "2",
                                      "--from-suspects", str(path)])
    assert result.exit_code == 0, result.output
    assert "suspects: 1 flagged item(s)" in result.output and "1 flagged id(s) not accepted items" in result.output
    report = CliRunner().invoke(app, ["review", "report", "-c", str(config)])
    assert report.exit_code == 0, report.output
    assert "suspects flagged by the item audit (1 item(s)" in report.output
    html = tmp_path / "r.html"
    page = CliRunner().invoke(app, ["review", "report", "-c", str(config), "--html", str(html)])
    assert page.exit_code == 0, page.output
    assert '<p id="suspects">1 item(s) flagged' in html.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_loop_in_docs_review_md_runs_as_written(tmp_path: Path) -> None:
    """docs/review.md "The loop end to end on the demo": its commands up to the workbench run as
    written (the folder moved to tmp_path), the workbench shows the flag only after the verdict, and
    the report prints the line the docs quote."""
    import os
    import subprocess
    import sys

    from arcticqa.review.report import report_for_store
    from arcticqa.store.db import make_engine

    doc = (Path(__file__).parents[1] / "docs" / "review.md").read_text(encoding="utf-8")
    section = doc.split("### The loop end to end on the demo", 1)[1]
    block = section.split("```bash\n", 1)[1].split("\n```", 1)[0]
    lines = block.splitlines()
    assert lines[0] == ". .venv/bin/activate" and lines[1].startswith("D=out/loop ")
    serve = next(i for i, line in enumerate(lines) if line.startswith("arcticqa review serve"))
    script = "\n".join(["set -e", f"D={tmp_path / 'loop'}", *lines[2:serve]])
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    out = " ".join(run.stdout.split())
    for quoted in ("144 responses of 4 models on 6 items: 1 suspect item(s)", "items.low_discrimination: 1",
                   "accepted: 3 of 6 item(s) sampled",
                   "suspects: 1 flagged item(s), 1 added for review, 0 already in the random sample"):
        assert quoted in out and quoted in " ".join(section.split())
    planted = re.search(r"planted a mislabel on (\S+)", out).group(1)  # type: ignore[union-attr]
    assert f"{planted},items.low_discrimination" in (tmp_path / "loop" / "items" / "suspects.csv").read_text()

    engine = make_engine(f"sqlite:///{tmp_path / 'loop' / 'arcticqa.db'}")
    client = TestClient(create_app(engine, reviewer="ana"))
    for n in range(1, 5):  # "answer the 4 items": every one accepted
        page = client.get(f"/item/{n}").text
        assert "items.low_discrimination" not in page
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        digest = re.search(r'name="content_hash" value="([0-9a-f]{64})"', page).group(1)  # type: ignore[union-attr]
        assert client.post(f"/item/{n}", data={"csrf": csrf, "content_hash": digest, "verdict": "accept"},
                           follow_redirects=False).status_code == 303
    assert client.get("/item/4").text.count("items.low_discrimination") == 1  # the suspect comes last
    report = report_for_store(engine)
    assert report is not None
    line = next(x for x in render_text(report).splitlines() if x.startswith("suspects flagged"))
    assert line in " ".join(section.replace("`", "").split())
