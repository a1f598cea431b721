"""bench.bench_scale, the rehearsal at scale, at a tiny scale: the whole funnel runs
against the limited stand-ins and the figures add up (no call lost or sent twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.bench_scale import Funnel, floor_seconds, main


def test_funnel_follows_the_reference_and_keeps_pages_of_a_thousand() -> None:
    full = Funnel.at(1.0, 0.58)
    assert (full.records, full.pdfs, full.eligible, full.queries) == (85_000, 4_400, 2_552, 17)
    tenth = Funnel.at(0.1, 0.58)
    assert (tenth.records, tenth.pdfs, tenth.queries) == (8_500, 440, 2)


def test_the_floor_is_each_limit_alone() -> None:
    floors = floor_seconds(tokens=1_000_000, requests=600, pages=85, tpm=2_000_000, rpm=5_000, s2_rate=1.0)
    assert floors == pytest.approx({"tokens": 30.0, "requests": 7.2, "s2": 85.0})


@pytest.mark.slow
def test_a_tiny_rehearsal_runs_the_funnel_and_loses_no_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "figures.json"
    main(["--scale", "0.0006", "--s2-rate", "4", "--latency-median", "0.05", "--latency-p99", "0.3",
          "--error-rate", "0.1", "--timeout-rate", "0", "--rpm", "600", "--tpm", "300000", "--keep",
          str(tmp_path / "work"), "--json", str(out)])
    printed = capsys.readouterr().out
    assert "wall / floor" in printed and "no call lost or sent twice" in printed
    figures = json.loads(out.read_text())
    assert figures["funnel"]["pdfs"] == 3 and figures["store"]["items"] >= 1
    model = figures["model"]
    assert model["answered"] == figures["store"]["answered_rows"] and model["answered_twice"] == 0
    assert figures["floor_s"] > 0 and figures["wall_s"] >= figures["floor_s"]
    assert figures["peak_rss_mb"] > 50
