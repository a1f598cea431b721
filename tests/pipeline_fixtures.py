"""Fixture papers and a prompt-reading scripted model for whole-pipeline tests.

The papers are real PDFs rendered by the project's typesetter; the "model" answers each role by
reading the rendered prompt the gateway sent (span ids and all), like a real model would, so the
tests drive the real openai + instructor path over loopback HTTP.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arcticqa.llm.local_server import Fault, Reply, json_reply, role_of
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = ["SITES", "make_corpus", "ScriptedModel", "write_config"]

#: (site name, latitude, longitude, percent decrease) per fixture paper
SITES = [
    ("Nansen Basin", 84.0, 30.0, 18),
    ("Fram Strait", 79.0, 2.0, 23),
    ("Kongsfjorden", 78.95, 11.9, 12),
]

_SPAN = re.compile(r"\[(sp-[0-9a-f]+)\] \((\w+)\) (.*)")
_DECREASE = re.compile(r"decreased by (\d+)%")


def _paper(i: int) -> tuple[dict[str, Any], PaperSource]:
    site, lat, lon, pct = SITES[i]
    pid = hashlib.sha1(f"fixture-{i}".encode()).hexdigest()
    source = PaperSource(
        title=f"Sea-ice thinning at the {site} mooring",
        authors=["A. Fixture", "B. Test"],
        venue="arcticqa test fixtures (fictional)",
        abstract=(f"Fictional study written for the arcticqa tests. We report a decade of sea-ice thickness "
                  f"observations from an oceanographic mooring in the {site} of the Arctic Ocean."),
        sections=[
            ("1. Introduction", ["Arctic sea ice has thinned over recent decades. Smith et al. (2015) "
                                 "reported thinning of 27% in the Beaufort Sea."]),
            ("2. Study area and methods", [f"The mooring was deployed in the {site} ({lat:.2f}°N, "
                                           f"{lon:.2f}°E). Ice thickness was measured by upward-looking "
                                           f"sonar at the {site} mooring from 2010 to 2020."]),
            ("3. Results", [f"Mean sea-ice thickness at the {site} mooring decreased by {pct}% between "
                            f"2010 and 2020."]),
            ("4. Discussion", ["The thinning is consistent with regional warming."]),
        ],
        references=["Smith, J. (2015). Sea ice of the Beaufort Sea. Journal of Fixtures 1, 1-10."],
    )
    record = {
        "paperId": pid, "corpusId": 1000 + i, "externalIds": {"DOI": f"10.5555/arcticqa-test.{i}"},
        "title": source.title, "abstract": source.abstract, "year": 2021 + i % 3,
        "publicationTypes": ["JournalArticle"], "fieldsOfStudy": ["Environmental Science"],
        "isOpenAccess": True,
        "openAccessPdf": {"url": f"https://example.org/fixture-{i}.pdf", "license": "CC-BY"},
        "localPdf": f"pdf/fixture-{i}.pdf",
    }
    return record, source


def make_corpus(directory: Path, n: int = 3) -> Path:
    """Render ``n`` fixture papers and their S2-shaped snapshot; returns the JSONL path."""
    (directory / "pdf").mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(n):
        record, source = _paper(i)
        render_paper_pdf(source, directory / record["localPdf"])
        lines.append(json.dumps(record))
    path = directory / "papers.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _spans(body: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    user = body["messages"][-1]["content"]
    return [m.groups() for m in (_SPAN.match(line) for line in user.splitlines()) if m]  # type: ignore[misc]


def _result(spans: list[tuple[str, str, str]]) -> tuple[str, str, int]:
    for sid, section, text in spans:
        m = _DECREASE.search(text)
        if m and section == "results":
            site = text.split("at the ", 1)[1].split(" mooring", 1)[0]
            return sid, site, int(m.group(1))
    raise AssertionError("fixture results span not in the prompt")


class ScriptedModel:
    """A responder for :class:`FakeOpenAIServer`: answers every build role from the prompt.

    ``fail_when`` (a substring of the user prompt) makes matching requests fail with HTTP 500
    while ``failing`` is true, to simulate a model outage for one paper.
    """

    def __init__(self) -> None:
        self.fail_when: str | None = None
        self.failing = False
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        user = body["messages"][-1]["content"]
        if self.failing and self.fail_when and self.fail_when in user:
            return Fault(500)
        role = role_of(headers)
        spans = _spans(body)
        if role == "site_extractor":
            return json_reply({"sites": []})
        sid, site, pct = _result(spans)
        methods = next(s for s, section, _ in spans if section in ("methods", "study_area")) \
            if role == "finding_extractor" else None
        if role == "finding_extractor":
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


def write_config(directory: Path, *, base_url: str, corpus: Path, api_key_env: str = "ARCTICQA_TEST_KEY",
                 extra: str = "") -> Path:
    """An arcticqa.toml that sends every role to the stand-in server."""
    roles = "\n".join(f'{r} = "stand-in"' for r in (
        "site_extractor", "finding_extractor", "question_writer", "reconstructor", "verifier",
        "distractor_writer", "option_verifier"))
    text = f'''
[store]
url = "sqlite:///{directory / 'arcticqa.db'}"

[build]
data_dir = "{directory / 'data'}"
source = "snapshot:{corpus}"
batch_size = 2
paper_concurrency = 2
{extra}

[models.stand-in]
provider = "openai"
base_url = "{base_url}"
model = "stand-in-model"
api_key_env = "{api_key_env}"
max_retries = 2
backoff_initial_s = 0.01
backoff_max_s = 0.05
timeout_s = 10
price_in_per_mtok = 1.0
price_out_per_mtok = 2.0

[roles]
{roles}
'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "arcticqa.toml"
    path.write_text(text, encoding="utf-8")
    return path
