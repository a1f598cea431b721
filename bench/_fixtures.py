"""Generated papers and a prompt-reading stand-in model for the pipeline benchmarks.

A self-contained variant of ``tests/pipeline_fixtures.py`` (benches must not import tests):
``make_corpus(dir, n)`` renders ``n`` distinct fixture PDFs, each naming its own mooring, so no
two papers produce the same prompt (identical prompts would be answered from the gateway's
cache and flatter the numbers). :class:`ScriptedModel` answers every build role by reading the
prompt the gateway sent, like a real model would.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from arcticqa.llm.local_server import Fault, Reply, json_reply, role_of
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = ["SITES", "make_corpus", "ScriptedModel", "write_config"]

#: (site name, latitude, longitude) cycled over the generated papers
SITES = [
    ("Nansen Basin", 84.0, 30.0),
    ("Fram Strait", 79.0, 2.0),
    ("Kongsfjorden", 78.95, 11.9),
]

_SPAN = re.compile(r"\[(sp-[0-9a-f]+)\] \((\w+)\) (.*)")
_DECREASE = re.compile(r"decreased by (\d+)%")


def _paper(i: int) -> tuple[dict[str, Any], PaperSource]:
    base, lat, lon = SITES[i % len(SITES)]
    site = f"{base} M{i:04d}"
    pct = 10 + i % 40
    pid = hashlib.sha1(f"bench-fixture-{i}".encode()).hexdigest()
    source = PaperSource(
        title=f"Sea-ice thinning at the {site} mooring",
        authors=["A. Fixture", "B. Bench"],
        venue="arcticqa bench fixtures (fictional)",
        abstract=(f"Fictional study generated for the arcticqa benchmarks. We report a decade of sea-ice "
                  f"thickness observations from mooring M{i:04d} in the {base} of the Arctic Ocean."),
        sections=[
            ("1. Introduction", ["Arctic sea ice has thinned over recent decades. Smith et al. (2015) "
                                 "reported thinning of 27% in the Beaufort Sea."]),
            ("2. Study area and methods", [f"The mooring was deployed in the {base} ({lat:.2f}°N, "
                                           f"{lon:.2f}°E). Ice thickness was measured by upward-looking "
                                           f"sonar at the {site} mooring from 2010 to 2020."]),
            ("3. Results", [f"Mean sea-ice thickness at the {site} mooring decreased by {pct}% between "
                            f"2010 and 2020."]),
            ("4. Discussion", ["The thinning is consistent with regional warming."]),
        ],
        references=["Smith, J. (2015). Sea ice of the Beaufort Sea. Journal of Fixtures 1, 1-10."],
    )
    record = {
        "paperId": pid, "corpusId": 100_000 + i, "externalIds": {"DOI": f"10.5555/arcticqa-bench.{i}"},
        "title": source.title, "abstract": source.abstract, "year": 2015 + i % 9,
        "publicationTypes": ["JournalArticle"], "fieldsOfStudy": ["Environmental Science"],
        "isOpenAccess": True,
        "openAccessPdf": {"url": f"https://example.org/bench-{i}.pdf", "license": "CC-BY"},
        "localPdf": f"pdf/bench-{i:04d}.pdf",
    }
    return record, source


def make_corpus(directory: Path, n: int) -> Path:
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
    raise ValueError("fixture results span not in the prompt")


class ScriptedModel:
    """A responder for :class:`FakeOpenAIServer` answering every build role from the prompt."""

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        role = role_of(headers)
        spans = _spans(body)
        if role == "site_extractor":
            return json_reply({"sites": []})
        try:
            sid, site, pct = _result(spans)
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


def write_config(directory: Path, *, base_url: str, corpus: Path, batch_size: int, paper_concurrency: int,
                 max_concurrency: int, extra_build: str = "", extra_model: str = "") -> Path:
    """An arcticqa.toml sending every role to the stand-in (no key needed)."""
    roles = "\n".join(f'{r} = "stand-in"' for r in (
        "site_extractor", "finding_extractor", "question_writer", "reconstructor", "verifier",
        "distractor_writer", "option_verifier"))
    text = f'''
[store]
url = "sqlite:///{directory / 'arcticqa.db'}"

[build]
data_dir = "{directory / 'data'}"
source = "snapshot:{corpus}"
batch_size = {batch_size}
paper_concurrency = {paper_concurrency}
{extra_build}

[models.stand-in]
provider = "openai"
base_url = "{base_url}"
model = "stand-in-model"
api_key_env = ""
max_retries = 2
backoff_initial_s = 0.05
backoff_max_s = 0.5
timeout_s = 60
max_concurrency = {max_concurrency}
price_in_per_mtok = 1.0
price_out_per_mtok = 2.0
{extra_model}

[roles]
{roles}
'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "arcticqa.toml"
    path.write_text(text, encoding="utf-8")
    return path
