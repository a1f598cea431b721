"""Audit report and funnel figure: escaping of paper text, funnel numbers, a real browser."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from arcticqa.evidence import SpanRef, sha256_text
from arcticqa.release.audit import (
    AuditData,
    AuditItem,
    AuditOption,
    AuditPaper,
    AuditRejection,
    render_audit_html,
    safe_json_for_script,
)
from arcticqa.release.funnel import funnel_figure_bytes, render_funnel
from tests.browser import headless_chromium
from tests.conftest import REPO_ROOT
from tests.release_factories import make_funnel

EVIL_TITLE = '<script>window.__pwned = 1</script>Sea ice </textarea><img src=x onerror="window.__pwned=2">'
EVIL_SPAN = "</script><svg onload=\"window.__pwned=3\"></svg> thickness fell by 11 cm"
EVIL_QUESTION = "How much did <b onmouseover=\"window.__pwned=4\">ice</b> thin at S1 between 2001 and 2010?"


def _audit() -> AuditData:
    cited = SpanRef(id="sp-1", section="methods", page=2, start=0, end=10, sha256=sha256_text(EVIL_SPAN),
                    text=EVIL_SPAN)
    rej = AuditRejection(stage="eligibility", rule_id="eligibility.not_arctic", message="site at 60°N",
                         evidence={"span": EVIL_SPAN, "spans": ["sp-1"], "sha256": "ab" * 32}, paper_id="p1",
                         cited_spans=[cited])
    opt_rej = AuditRejection(stage="option_verify", rule_id="distractor.within_tolerance",
                             message="too close", item_id="i1", paper_id="p2", option_rank=2,
                             evidence={"option": "a decrease of 11.2 cm"})
    return AuditData(
        release_id="test-release", funnel=make_funnel(), rejections=[rej, opt_rej],
        option_rejections={"distractor.within_tolerance": 1},
        papers=[AuditPaper(paper_id="p1", title=EVIL_TITLE, doi="10.1/x", year=2019, status="rejected",
                           stage="eligibility", rejections=[rej],
                           evidence_spans=[SpanRef(id="sp-1", section="methods", page=2, start=0, end=10,
                                                   sha256=sha256_text(EVIL_SPAN), text=EVIL_SPAN)]),
                AuditPaper(paper_id="p2", title="Fram Strait ice", status="accepted", item_ids=["i1"])],
        items=[AuditItem(item_id="i1", paper_id="p2", status="accepted", question=EVIL_QUESTION,
                         question_context="S1 is a drifting station.", gold_answer="a decrease of 11 cm",
                         reconstruction="decrease of about 11 cm",
                         evidence_spans=[SpanRef(id="sp-2", section="results", page=1, start=0, end=len(EVIL_SPAN),
                                                 sha256=sha256_text(EVIL_SPAN), text=EVIL_SPAN)],
                         options=[AuditOption(kind="gold", text="a decrease of 11 cm", verdict="admitted"),
                                  AuditOption(rank=2, text="a decrease of 11.2 cm", verdict="rejected",
                                              rule_id="distractor.within_tolerance", message="too close")],
                         rejections=[opt_rej])],
    )


def test_html_escapes_paper_text_and_is_self_contained() -> None:
    html = render_audit_html(_audit())
    assert "<script>window.__pwned" not in html
    assert 'onerror="window' not in html and "<svg onload" not in html and "<b onmouseover" not in html
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in html
    assert not re.search(r"(?:src|href)=[\"']?https?:", html)  # nothing fetched from the network
    assert html.count("<script") == 2  # the JSON data block and our own script, nothing else
    assert "Content-Security-Policy" in html


def test_safe_json_cannot_close_the_script_element() -> None:
    text = safe_json_for_script({"t": "</script><!-- & \u2028"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"t": "</script><!-- & \u2028"}


def test_audit_filter() -> None:
    data = _audit()
    assert [r.rule_id for r in data.filtered(stage="eligibility")] == ["eligibility.not_arctic"]
    assert [r.paper_id for r in data.filtered(rule="distractor.")] == ["p2"]
    assert data.filtered(paper="nope") == []


def test_funnel_png_and_svg(tmp_path: Path) -> None:
    png = render_funnel(make_funnel(), tmp_path / "f.png")
    head = png.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", head[16:24])
    assert width > 500 and height > width  # one row per step: a tall figure
    svg = render_funnel(make_funnel(), tmp_path / "f.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert funnel_figure_bytes(make_funnel(), "svg") == funnel_figure_bytes(make_funnel(), "svg")
    with pytest.raises(Exception, match="png or .svg"):
        render_funnel(make_funnel(), tmp_path / "f.gif")


@pytest.mark.slow
def test_audit_report_in_headless_chromium(tmp_path: Path) -> None:
    data = _audit()
    page = tmp_path / "report.html"
    page.write_text(render_audit_html(data), encoding="utf-8")
    drv = headless_chromium(tmp_path, window="1280,1600")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    try:
        drv.get(page.as_uri())
        assert drv.execute_script("return document.body.dataset.ready") == "1"
        rows = drv.find_elements(By.CSS_SELECTOR, "#funnel-table tbody tr")
        shown = {r.get_attribute("data-step"): int(r.find_element(By.CSS_SELECTOR, ".count").text)
                 for r in rows}
        assert shown == {s.name: s.count for s in data.funnel.steps}
        # a reviewer at 1280 px reads every column: nothing scrolls sideways, not even a 64-hex hash
        for width in (1280, 1440):
            drv.set_window_size(width, 1600)
            assert drv.execute_script("return document.documentElement.scrollWidth <= "
                                      "document.documentElement.clientWidth")
        # the rejection's evidence shows the cited span's text, not its id in a JSON blob
        evidence = drv.find_element(By.CSS_SELECTOR, "#rejections tbody tr td.evidence")
        assert EVIL_SPAN in evidence.find_element(By.CSS_SELECTOR, "blockquote").text
        assert "{" not in evidence.text
        assert "distractor.within_tolerance" in drv.find_element(By.CSS_SELECTOR, ".option-rejections").text
        # filtering by rule hides the other rejection
        Select(drv.find_element(By.ID, "filter-rule")).select_by_value("distractor.within_tolerance")
        visible = [r for r in drv.find_elements(By.CSS_SELECTOR, "#rejections tbody tr") if r.is_displayed()]
        assert len(visible) == 1 and "1 of 2 shown" in drv.find_element(By.ID, "shown-count").text
        # open one item: question, reconstruction and options appear, as text
        drv.find_element(By.CSS_SELECTOR, "#items a.open").click()
        detail = drv.find_element(By.ID, "item-i1")
        assert detail.is_displayed()
        assert detail.find_element(By.CSS_SELECTOR, ".question").text == EVIL_QUESTION
        assert detail.find_element(By.CSS_SELECTOR, ".reconstruction").text == "decrease of about 11 cm"
        assert len(detail.find_elements(By.CSS_SELECTOR, "table.options tbody tr")) == 2
        # open the paper whose title and evidence carry markup: shown literally, nothing ran
        drv.find_element(By.CSS_SELECTOR, "#papers a.open").click()
        paper = drv.find_element(By.ID, "paper-p1")
        assert EVIL_TITLE in paper.find_element(By.CSS_SELECTOR, ".title").text
        assert EVIL_SPAN in paper.text
        assert drv.execute_script("return typeof window.__pwned") == "undefined"
        assert drv.find_elements(By.CSS_SELECTOR, "img, textarea, b") == []
        # every paper and item has an address: opening the page at it shows that detail
        drv.get(page.as_uri() + "#paper-p2")
        assert drv.find_element(By.ID, "paper-p2").is_displayed()
        assert not drv.find_element(By.ID, "paper-p1").is_displayed()
        artifacts = REPO_ROOT / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        drv.find_element(By.CSS_SELECTOR, "#items a.open").click()
        assert drv.save_screenshot(str(artifacts / "audit-report.png"))
    finally:
        drv.quit()
