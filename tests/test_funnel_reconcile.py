"""On the demo build (the bundled sample corpus, offline provider): the funnel adds up box by box
in one unit per box, and the audit page and the terminal views say what they count (slow: one
local build of the sample corpus, ~10 s)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.demo.run import DemoResult, run_demo
from arcticqa.pipeline.audit import audit_data
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.release.audit import render_audit_html
from arcticqa.release.models import FUNNEL_STEPS
from arcticqa.store.store import Store

pytestmark = pytest.mark.slow
runner = CliRunner()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    return run_demo(tmp_path_factory.mktemp("demo") / "out", orchestrator="local", trials=1)


@pytest.fixture(scope="module")
def store(demo: DemoResult) -> Store:
    return Store(f"sqlite:///{demo.out_dir / 'arcticqa.db'}")


def test_every_box_is_the_box_before_minus_what_it_left_out(store: Store, demo: DemoResult) -> None:
    steps = funnel_counts(store).steps
    assert [s.name for s in steps] == list(FUNNEL_STEPS)
    assert [s.unit for s in steps] == ["papers"] * 5 + ["candidates"] * 7
    for before, step in zip(steps, steps[1:], strict=False):
        if before.unit != step.unit:
            continue  # the first candidate box starts a funnel of its own
        left_out = sum(step.rejected.values()) + step.needs_review
        assert before.count == step.count + left_out, (before, step)
    by_name = {s.name: s for s in steps}
    # each unit is counted once, where it stopped: one rejection row per left-out paper here
    papers_rejected = {(r.paper_id, r.stage) for r in store.rejections() if not r.subject}
    assert sum(sum(s.rejected.values()) for s in steps[1:5]) == len({pid for pid, _ in papers_rejected})
    assert by_name["accepted"].count == demo.items == len(store.items())
    assert by_name["with_items"].count == len({i.paper_id for i in store.items()})
    # item-level rules never appear in a box that counts papers, and the reverse
    for s in steps[1:5]:
        assert not any(r.startswith(("verify.", "question.", "distractors.", "accept.")) for r in s.rejected), s
    for s in steps[5:]:
        assert not any(r.startswith(("prefilter.", "eligibility.", "construct.")) for r in s.rejected), s


def test_funnel_figure_labels_are_plain_words(store: Store, tmp_path: Path) -> None:
    figure = tmp_path / "f.svg"
    from arcticqa.release.funnel import STEP_LABELS, render_funnel

    render_funnel(funnel_counts(store), figure)
    assert figure.read_text(encoding="utf-8").lstrip().startswith("<?xml")
    assert set(STEP_LABELS) == set(FUNNEL_STEPS)  # every box has a label in words
    assert all("_" not in label for label in STEP_LABELS.values())


def test_audit_page_names_papers_cites_span_text_and_has_addresses(store: Store) -> None:
    data = audit_data(store)
    page = render_audit_html(data)
    accepted = sum(1 for it in data.items if it.status != "rejected")
    assert f"{len(data.items)} candidate items of which {accepted} accepted" in page
    titles = {p.paper_id: p.title for p in data.papers}
    for r in data.rejections:
        if r.paper_id and titles.get(r.paper_id):
            assert f'href="#paper-{r.paper_id}">{_html(titles[r.paper_id])}</a>' in page
    # every span a paper's rejection cites is shown with its text
    cited = [(p, sid) for p in data.papers for r in p.rejections for sid in r.evidence.get("spans", [])]
    assert cited  # the eligibility rejections of the sample corpus cite spans
    for paper, sid in cited:
        shown = {s.id: s.text for s in paper.evidence_spans}
        assert shown.get(sid), (paper.paper_id, sid)
    for p in data.papers:
        assert f'id="paper-{p.paper_id}"' in page
    item_ids = re.findall(r'<section class="detail" id="(item-[A-Za-z0-9_-]+)"', page)
    assert len(item_ids) == len(set(item_ids)) == len(data.items)
    for it in data.items:
        assert f'href="#{item_ids[data.items.index(it)]}"' in page  # reachable by a link
    assert "No evidence spans recorded" not in _section(page, "eligibility.south_of_arctic_circle")


def test_status_lists_stages_in_pipeline_order_and_says_what_it_counts(demo: DemoResult) -> None:
    config = str(demo.artifacts["config"])
    shown = runner.invoke(app, ["-c", config, "status"], env={"COLUMNS": "80"})
    assert shown.exit_code == 0, shown.output
    rows = [line.split() for line in shown.stdout.splitlines() if line.strip()]
    stages = [r[0] for r in rows if r and r[0] in {"prefilter", "fetch_fulltext", "extract_text", "eligibility",
                                                    "construct", "findings", "question", "verify", "accept"}]
    assert stages == ["prefilter", "fetch_fulltext", "extract_text", "eligibility", "construct", "findings",
                      "question", "verify", "accept"]
    units = {r[0]: r[1] for r in rows if len(r) > 1}
    assert units["prefilter"] == "papers" and units["verify"] == "candidates"
    as_json = json.loads(runner.invoke(app, ["status", "--json", "-c", config]).stdout)
    assert as_json["units"]["question"] == "candidates"


def test_audit_never_cuts_a_rule_or_paper_id(demo: DemoResult, store: Store) -> None:
    shown = runner.invoke(app, ["audit", "-c", str(demo.artifacts["config"])], env={"COLUMNS": "60"})
    assert shown.exit_code == 0
    for r in store.rejections():
        assert r.rule_id in shown.stdout and r.paper_id in shown.stdout
    assert "…" not in shown.stdout


def _html(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def _section(page: str, rule_id: str) -> str:
    """The detail section of the paper whose rejection is ``rule_id``."""
    for chunk in page.split('<section class="detail"')[1:]:
        if rule_id in chunk:
            return chunk
    raise AssertionError(f"no detail section names {rule_id}")
