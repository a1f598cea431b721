"""Fixture papers and a prompt-reading scripted model for whole-pipeline tests.

The papers are real PDFs rendered by the project's typesetter; the "model" answers each role by
reading the rendered prompt the gateway sent (span ids and all), like a real model would, so the
tests drive the real openai + instructor path over loopback HTTP.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from arcticqa.llm.local_server import Fault, Reply, json_reply, role_of
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = ["SITES", "MORE_SITES", "make_corpus", "ScriptedModel", "write_config", "postgres_server"]

#: (site name, latitude, longitude, percent decrease) per fixture paper
SITES = [
    ("Nansen Basin", 84.0, 30.0, 18),
    ("Fram Strait", 79.0, 2.0, 23),
    ("Kongsfjorden", 78.95, 11.9, 12),
]

#: further Arctic sites, so scale-out tests can build more than three papers (papers 3, 4, ...)
MORE_SITES = [
    ("Barents Sea", 76.0, 35.0, 15),
    ("Laptev Sea", 76.5, 125.0, 21),
    ("Kara Sea", 75.0, 70.0, 14),
    ("East Siberian Sea", 74.0, 160.0, 19),
    ("Hinlopen Strait", 79.5, 19.0, 16),
]

_SPAN = re.compile(r"\[(sp-[0-9a-f]+)\] \((\w+)\) (.*)")
_DECREASE = re.compile(r"decreased by (\d+)%")


def _paper(i: int) -> tuple[dict[str, Any], PaperSource]:
    site, lat, lon, pct = (SITES + MORE_SITES)[i]
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
    """Render ``n`` (at most ``len(SITES + MORE_SITES)``) fixture papers and their S2-shaped
    snapshot; returns the JSONL path."""
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
                 extra: str = "", store_url: str | None = None) -> Path:
    """An arcticqa.toml that sends every role to the stand-in server (``extra``: more [build] keys;
    ``store_url``: a store other than ``<directory>/arcticqa.db``)."""
    roles = "\n".join(f'{r} = "stand-in"' for r in (
        "site_extractor", "finding_extractor", "question_writer", "reconstructor", "verifier",
        "distractor_writer", "option_verifier"))
    text = f'''
[store]
url = "{store_url or f"sqlite:///{directory / 'arcticqa.db'}"}"

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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def postgres_server(db: str = "arcticqa") -> Iterator[str]:
    """A throwaway PostgreSQL server on a free loopback port; yields the SQLAlchemy URL of ``db``.

    Uses the Debian packages' binaries (``apt-get install -y postgresql``) and skips when they
    are absent. PostgreSQL refuses to run as root, so as root the cluster belongs to the
    ``postgres`` user, in a fresh folder under the system temp dir (pytest's tmp_path is
    root-only). Durability is switched off: the data dies with the test.
    """
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    bindir = next((Path(b) for b in reversed(bindirs) if (Path(b) / "initdb").exists()), None)
    if bindir is None:
        pytest.skip("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                    "(apt-get install -y postgresql)")
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []
    if as_root and shutil.which("runuser") is None:
        pytest.skip("running as root, and runuser (util-linux) is missing to start PostgreSQL as postgres")
    base = Path(tempfile.mkdtemp(prefix="arcticqa-pg-"))
    if as_root:
        shutil.chown(base, user="postgres", group="postgres")
    data, port = base / "data", _free_port()

    def run(*args: str) -> None:
        proc = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, cwd=base)
        if proc.returncode != 0:
            log = (base / "server.log").read_text() if (base / "server.log").exists() else ""
            raise RuntimeError(f"{args[0]} failed: {proc.stdout}{proc.stderr}{log}")

    started = False
    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
            "--no-sync", "--no-instructions")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(base / "server.log"), "-w", "-t", "60",
            "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off "
                  "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200", "start")
        started = True
        if db != "postgres":  # initdb made that one
            run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", db)
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/{db}"
    finally:
        if started:
            subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60, cwd=base)
        shutil.rmtree(base, ignore_errors=True)
