"""Synthetic mooring papers and a prompt-reading stand-in model, shared by tests and benchmarks.

Each paper reports one sea-ice finding at its own mooring, rendered to a real PDF by the
project's typesetter. :class:`ScriptedModel` answers every build role by reading the prompt the
gateway sent (span ids and all), as a real model would, so whole builds can run over the
OpenAI-compatible loopback server through the real openai + instructor path.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from arcticqa.config import ROLES
from arcticqa.llm.local_server import Fault, Reply, json_reply, role_of
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = ["mooring_paper", "write_corpus", "prompt_spans", "results_finding", "ScriptedModel",
           "stand_in_config"]

_SPAN = re.compile(r"\[(sp-[0-9a-f]+)\] \((\w+)\) (.*)")
_DECREASE = re.compile(r"decreased by (\d+)%")


def mooring_paper(i: int, *, site: str, lat: float, lon: float, pct: int, kind: str = "test",
                  region: str | None = None) -> tuple[dict[str, Any], PaperSource]:
    """Paper ``i``: sea ice at the ``site`` mooring (in ``region``) thinned by ``pct``%."""
    region = region or site
    pid = hashlib.sha1(f"{'fixture' if kind == 'test' else kind + '-fixture'}-{i}".encode()).hexdigest()
    source = PaperSource(
        title=f"Sea-ice thinning at the {site} mooring",
        authors=["A. Fixture", f"B. {kind.title()}"],
        venue=f"arcticqa {kind} fixtures (fictional)",
        abstract=(f"Fictional study written for the arcticqa {'tests' if kind == 'test' else kind + 'marks'}. "
                  f"We report a decade of sea-ice thickness "
                  f"observations from an oceanographic mooring in the {site} of the Arctic Ocean."),
        sections=[
            ("1. Introduction", ["Arctic sea ice has thinned over recent decades. Smith et al. (2015) "
                                 "reported thinning of 27% in the Beaufort Sea."]),
            ("2. Study area and methods", [f"The mooring was deployed in the {region} ({lat:.2f}°N, "
                                           f"{lon:.2f}°E). Ice thickness was measured by upward-looking "
                                           f"sonar at the {site} mooring from 2010 to 2020."]),
            ("3. Results", [f"Mean sea-ice thickness at the {site} mooring decreased by {pct}% between "
                            f"2010 and 2020."]),
            ("4. Discussion", ["The thinning is consistent with regional warming."]),
        ],
        references=["Smith, J. (2015). Sea ice of the Beaufort Sea. Journal of Fixtures 1, 1-10."],
    )
    record = {
        "paperId": pid, "corpusId": (1000 if kind == "test" else 100_000) + i,
        "externalIds": {"DOI": f"10.5555/arcticqa-{kind}.{i}"},
        "title": source.title, "abstract": source.abstract, "year": 2015 + i % 9,
        "publicationTypes": ["JournalArticle"], "fieldsOfStudy": ["Environmental Science"],
        "isOpenAccess": True,
        "openAccessPdf": {"url": f"https://example.org/{kind}-{i}.pdf", "license": "CC-BY"},
        "localPdf": f"pdf/{kind}-{i:04d}.pdf",
    }
    return record, source


def write_corpus(directory: Path, papers: Iterable[tuple[dict[str, Any], PaperSource]]) -> Path:
    """Render the papers' PDFs and write their S2-shaped snapshot; returns the JSONL path."""
    (directory / "pdf").mkdir(parents=True, exist_ok=True)
    lines = []
    for record, source in papers:
        render_paper_pdf(source, directory / record["localPdf"])
        lines.append(json.dumps(record))
    path = directory / "papers.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def prompt_spans(body: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(span id, section, text) of every span listed in the request's user prompt."""
    user = body["messages"][-1]["content"]
    return [m.groups() for m in (_SPAN.match(line) for line in user.splitlines()) if m]  # type: ignore[misc]


def results_finding(spans: list[tuple[str, str, str]]) -> tuple[str, str, int]:
    """(span id, site, percent) of the results sentence; ValueError when the prompt has none."""
    for sid, section, text in spans:
        m = _DECREASE.search(text)
        if m and section == "results":
            site = text.split("at the ", 1)[1].split(" mooring", 1)[0]
            return sid, site, int(m.group(1))
    raise ValueError("the synthetic paper's results span is not in the prompt")


class ScriptedModel:
    """A responder for :class:`~arcticqa.llm.local_server.FakeOpenAIServer` answering every build role.

    ``fail_when`` (a substring of the user prompt) makes matching requests fail with HTTP 500
    while ``failing`` is true, to simulate a model outage for one paper.
    """

    def __init__(self) -> None:
        self.fail_when: str | None = None
        self.failing = False
        # the server answers from many threads; subclasses that keep scripts use this lock
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        user = body["messages"][-1]["content"]
        if self.failing and self.fail_when and self.fail_when in user:
            return Fault(500)
        role = role_of(headers)
        spans = prompt_spans(body)
        if role == "site_extractor":
            return json_reply({"sites": []})
        try:
            sid, site, pct = results_finding(spans)
        except ValueError as exc:
            return Fault(400, body=json.dumps({"error": {"message": str(exc)}}))
        if role == "finding_extractor":
            methods = next(s for s, section, _ in spans if section in ("methods", "study_area"))
            return json_reply({"findings": [{
                "claim": f"Mean sea-ice thickness at the {site} mooring decreased by {pct}% from 2010 to 2020.",
                "answer": f"{pct}%", "answer_type": "numeric", "unit": "%", "claim_type": "observation",
                "scope": {"location": f"{site} mooring", "period": "2010 and 2020"},
                "span_ids": [sid], "scope_span_ids": [methods]}]})
        if role == "question_writer":
            return json_reply({
                "question": f"By what percentage did mean sea-ice thickness at the {site} mooring decrease "
                            f"between 2010 and 2020?",
                "question_context": f"Sea-ice thickness was measured by upward-looking sonar at a mooring in "
                                    f"the {site} of the Arctic Ocean."})
        if role == "reconstructor":
            return json_reply({"answer": f"{pct} %", "span_ids": [sid], "claim_type": "observation",
                               "alternatives": []})
        if role == "verifier":
            return json_reply({"entailed": True, "entailment_span_ids": [sid], "scope_preserved": True,
                               "question_claim_type": "observation", "context_sufficient": True,
                               "context_discloses_answer": False, "defensible_alternatives": [],
                               "reason": ""})
        if role == "distractor_writer":
            return json_reply({"candidates": [{"text": f"{v}%", "type": "numeric"}
                                              for v in (pct + 10, pct + 24, max(pct - 9, 2), pct + 35, pct + 5)]})
        if role == "option_verifier":
            return json_reply({"verdict": "contradicted", "span_ids": [sid], "interpretation": "value",
                               "reason": f"the evidence states {pct}%"})
        return Fault(400, body=json.dumps({"error": {"message": f"unknown role {role}"}}))


def stand_in_config(directory: Path, *, base_url: str, corpus: Path, api_key_env: str = "",
                    store_url: str | None = None, build: str = "", model: str = "") -> Path:
    """An arcticqa.toml sending every role to the stand-in (``build``/``model``: extra TOML lines
    for those sections)."""
    roles = "\n".join(f'{r} = "stand-in"' for r in ROLES)
    text = f'''
[store]
url = "{store_url or f"sqlite:///{directory / 'arcticqa.db'}"}"

[build]
data_dir = "{directory / 'data'}"
source = "snapshot:{corpus}"
{build}

[models.stand-in]
provider = "openai"
base_url = "{base_url}"
model = "stand-in-model"
api_key_env = "{api_key_env}"
price_in_per_mtok = 1.0
price_out_per_mtok = 2.0
{model}

[roles]
{roles}
'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "arcticqa.toml"
    path.write_text(text, encoding="utf-8")
    return path
