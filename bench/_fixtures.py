"""Generated papers and a prompt-reading stand-in model for the pipeline benchmarks.

``make_corpus(dir, n)`` renders ``n`` distinct fixture PDFs (``arcticqa.standins.synthetic``), each
naming its own mooring, so no two papers produce the same prompt (identical prompts would be
answered from the gateway's cache and flatter the numbers). :class:`ScriptedModel` answers every
build role by reading the prompt the gateway sent, like a real model would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arcticqa.standins.scripted import ScriptedModel
from arcticqa.standins.synthetic import mooring_paper, stand_in_config, write_corpus
from arcticqa.text.render import PaperSource

__all__ = ["SITES", "make_corpus", "ScriptedModel", "write_config"]

#: (site name, latitude, longitude) cycled over the generated papers
SITES = [
    ("Nansen Basin", 84.0, 30.0),
    ("Fram Strait", 79.0, 2.0),
    ("Kongsfjorden", 78.95, 11.9),
]


def _paper(i: int) -> tuple[dict[str, Any], PaperSource]:
    base, lat, lon = SITES[i % len(SITES)]
    return mooring_paper(i, site=f"{base} M{i:04d}", region=base, lat=lat, lon=lon, pct=10 + i % 40,
                         kind="bench")


def make_corpus(directory: Path, n: int) -> Path:
    """Render ``n`` fixture papers and their S2-shaped snapshot; returns the JSONL path."""
    return write_corpus(directory, (_paper(i) for i in range(n)))


def write_config(directory: Path, *, base_url: str, corpus: Path, batch_size: int, paper_concurrency: int,
                 max_concurrency: int, extra_build: str = "", extra_model: str = "") -> Path:
    """An arcticqa.toml sending every role to the stand-in (no key needed)."""
    return stand_in_config(
        directory, base_url=base_url, corpus=corpus,
        build=f"batch_size = {batch_size}\npaper_concurrency = {paper_concurrency}\n{extra_build}",
        model=(f"max_retries = 2\nbackoff_initial_s = 0.05\nbackoff_max_s = 0.5\ntimeout_s = 60\n"
               f"max_concurrency = {max_concurrency}\n{extra_model}"))
