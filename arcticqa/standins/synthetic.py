"""Synthetic mooring papers for tests and benchmarks, and a config that points every role at
the OpenAI-compatible stand-in.

Each paper reports one sea-ice finding at its own mooring, rendered to a real PDF by the
project's typesetter; :class:`arcticqa.standins.scripted.ScriptedModel` answers them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from arcticqa.config import ROLES
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = ["mooring_paper", "write_corpus", "stand_in_config"]


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
