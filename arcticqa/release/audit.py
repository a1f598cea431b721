"""The audit report: why every paper, question and option that is not in a release was rejected.

:class:`AuditData` is what the store hands over (funnel counts, rejections, per-paper and
per-item detail); :func:`render_audit_html` turns it into one self-contained HTML file (inline
CSS, JS and SVG; no network). Paper text is untrusted: Jinja2 autoescapes everything, the data
the script reads is JSON with ``<``, ``>`` and ``&`` escaped, the script only ever writes
``textContent``, and a Content-Security-Policy allows no script but our own (by hash).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from arcticqa.evidence import SpanRef
from arcticqa.release.funnel import STEP_LABELS, funnel_svg
from arcticqa.release.models import FunnelCounts

__all__ = ["AuditRejection", "AuditOption", "AuditItem", "AuditPaper", "AuditData",
           "render_audit_html", "safe_json_for_script"]


class AuditRejection(BaseModel):
    """One rejection (or needs-review flag) with the rule and the evidence that triggered it."""

    stage: str
    rule_id: str
    message: str
    status: Literal["rejected", "needs_review"] = "rejected"
    evidence: dict[str, Any] = Field(default_factory=dict)
    paper_id: str | None = None
    item_id: str | None = None
    option_rank: int | None = None
    #: the spans the evidence cites (``spans``, ``span_ids``, …), with their text where the store has it
    cited_spans: list[SpanRef] = Field(default_factory=list)


class AuditOption(BaseModel):
    """One answer option (gold or distractor proposal) with the option verifier's verdict."""

    kind: Literal["gold", "distractor"] = "distractor"
    rank: int | None = None
    text: str
    type: str | None = None
    verdict: str = Field(description="admitted|rejected|needs_review")
    verification: str | None = None
    rule_id: str | None = None
    message: str | None = None
    evidence: dict[str, Any] = Field(default_factory=dict)


class AuditItem(BaseModel):
    item_id: str
    #: the candidate (finding/revision) the CLI and the rejections name, e.g. ``fd-…/r0``
    candidate: str | None = None
    paper_id: str | None = None
    status: str
    stage: str | None = Field(default=None, description="the last stage the item reached")
    question: str | None = None
    question_context: str | None = None
    gold_answer: str | None = None
    reconstruction: str | None = None
    evidence_spans: list[SpanRef] = Field(default_factory=list)
    options: list[AuditOption] = Field(default_factory=list)
    rejections: list[AuditRejection] = Field(default_factory=list)


class AuditPaper(BaseModel):
    paper_id: str
    title: str | None = None
    doi: str | None = None
    year: int | None = None
    status: str
    stage: str | None = None
    evidence_spans: list[SpanRef] = Field(default_factory=list)
    rejections: list[AuditRejection] = Field(default_factory=list)
    item_ids: list[str] = Field(default_factory=list)


class AuditData(BaseModel):
    """Everything the audit report shows. Built from the store by ``arcticqa.pipeline.audit.audit_data``."""

    title: str = "arcticqa build audit"
    release_id: str | None = None
    generated_utc: str | None = None
    funnel: FunnelCounts
    rejections: list[AuditRejection] = Field(default_factory=list)
    papers: list[AuditPaper] = Field(default_factory=list)
    items: list[AuditItem] = Field(default_factory=list)
    #: rule id -> distractor proposals the option checks left out (options, not candidates)
    option_rejections: dict[str, int] = Field(default_factory=dict)

    def filtered(self, *, stage: str | None = None, rule: str | None = None,
                 paper: str | None = None) -> list[AuditRejection]:
        """Rejections matching every given filter (``rule`` may be a prefix ending in '.')."""
        out = []
        for r in self.rejections:
            if stage is not None and r.stage != stage:
                continue
            if rule is not None and not (r.rule_id == rule or (rule.endswith(".") and r.rule_id.startswith(rule))):
                continue
            if paper is not None and r.paper_id != paper:
                continue
            out.append(r)
        return out


_JS_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028",
               "\u2029": "\\u2029"}


def safe_json_for_script(data: Any) -> str:
    """JSON that cannot end a ``<script>`` element or open an HTML comment inside one."""
    text = json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)
    for raw, esc in _JS_ESCAPES.items():
        text = text.replace(raw, esc)
    return text


#: evidence keys that hold span ids: the page shows the spans' text instead
_SPAN_KEYS = frozenset({"spans", "span_ids", "span_id", "evidence_span_id"})


def _fields(evidence: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, value as one line of text) of the evidence, span ids left to the cited spans."""
    out = []
    for key in sorted(evidence):
        if key in _SPAN_KEYS:
            continue
        value = evidence[key]
        if isinstance(value, list):
            text = "; ".join(str(v) for v in value)
        elif isinstance(value, dict):
            text = "; ".join(f"{k}: {v}" for k, v in sorted(value.items()))
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append((key, text))
    return out


def _anchors(prefix: str, identifiers: list[str]) -> dict[str, str]:
    """identifier -> an HTML id usable as a URL fragment as typed (letters, digits, ``-``, ``_``),
    unique on the page."""
    out: dict[str, str] = {}
    used: set[str] = set()
    for ident in identifiers:
        base = f"{prefix}-{re.sub(r'[^A-Za-z0-9_-]+', '-', ident).strip('-') or 'x'}"
        anchor, n = base, 1
        while anchor in used:
            n += 1
            anchor = f"{base}-{n}"
        used.add(anchor)
        out[ident] = anchor
    return out


def render_audit_html(data: AuditData) -> str:
    """One self-contained HTML page: funnel, filterable rejections, per-paper/item detail."""
    from importlib import resources

    from jinja2 import Environment, PackageLoader, StrictUndefined
    from markupsafe import Markup

    script = resources.files("arcticqa.release").joinpath("templates/audit.js").read_text("utf-8")
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    env = Environment(loader=PackageLoader("arcticqa.release", "templates"),
                      undefined=StrictUndefined, autoescape=True)
    env.filters["fields"] = _fields
    summary = {
        "funnel": [{"name": s.name, "count": s.count, "unit": s.unit,
                    "rejected": sum(s.rejected.values())} for s in data.funnel.steps],
        "rejections": len(data.rejections),
        "papers": len(data.papers),
        "items": len(data.items),
    }
    # addresses that stay the same from one audit of a store to the next (paper and item ids)
    paper_anchor = _anchors("paper", [p.paper_id for p in data.papers])
    item_anchor = _anchors("item", [it.item_id for it in data.items])
    # rejections name a candidate as the CLI does (fd-…/r0): their links find the item by it
    candidate_anchor = {(it.paper_id, it.candidate): item_anchor[it.item_id] for it in data.items if it.candidate}
    stages = sorted({r.stage for r in data.rejections})
    rules = sorted({r.rule_id for r in data.rejections})
    return env.get_template("audit.html.j2").render(
        data=data, stages=stages, rules=rules, paper_anchor=paper_anchor, item_anchor=item_anchor,
        candidate_anchor=candidate_anchor,
        paper_titles={p.paper_id: p.title for p in data.papers}, step_labels=STEP_LABELS,
        # matplotlib draws text as paths, so the SVG holds no text from the data
        funnel_svg=Markup(funnel_svg(data.funnel)),
        summary_json=Markup(safe_json_for_script(summary)),
        script=Markup(script), script_hash=script_hash,
    )
