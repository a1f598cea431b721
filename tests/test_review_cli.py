"""``arcticqa review sample|serve|report`` from the command line: output, exit codes, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from arcticqa.cli import app
from tests.review_fixtures import make_review_store

runner = CliRunner()


def _config(tmp_path: Path) -> Path:
    make_review_store(tmp_path / "s.db", accepted=6, rejected=2).close()
    config = tmp_path / "a.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n', encoding="utf-8")
    return config


def test_sample_extend_and_report(tmp_path: Path) -> None:
    config = _config(tmp_path)
    none = runner.invoke(app, ["review", "report", "-c", str(config)])
    assert none.exit_code == 2 and "no review plan" in none.output
    first = runner.invoke(app, ["review", "sample", "-c", str(config), "--reviewer", "ana", "--n", "4"])
    assert first.exit_code == 0, first.output
    assert "6 assignment(s) added, 6 in all" in first.output  # 4 accepted + 2 rejected; nobody to double with
    assert "accepted: 4 of 6 item(s) sampled" in first.output
    # the fixture's distractors are all model-verified: every accepted item is model-decided
    assert "model-decided: 4 of 6 sampled (6 of 6 accepted item(s); weight 3.0)" in first.output
    weight = runner.invoke(app, ["review", "sample", "-c", str(config), "--model-weight", "0.5"])
    assert weight.exit_code == 2 and "--model-weight must be between 1 and 100" in weight.output
    second = runner.invoke(app, ["review", "sample", "-c", str(config), "--credit", "ben"])
    assert second.exit_code == 0 and "extended" in second.output and "ben: 0 primary, 1 second" in second.output
    seed = runner.invoke(app, ["review", "sample", "-c", str(config), "--seed", "5"])
    assert seed.exit_code == 2 and "keeps its seed" in seed.output
    report = runner.invoke(app, ["review", "report", "-c", str(config), "--json"])
    assert report.exit_code == 0
    data = json.loads(report.output)
    assert data["plan_id"] == "main" and data["reviewers"] == ["ana", "ben"] and data["answered"] == 0
    html = tmp_path / "r.html"
    page = runner.invoke(app, ["review", "report", "-c", str(config), "--html", str(html)])
    assert page.exit_code == 0 and "residual error rate" in page.output and html.read_text().startswith("<!doctype")
    again = runner.invoke(app, ["review", "report", "-c", str(config), "--html", str(html)])
    assert again.exit_code == 2  # never replaces a file without --overwrite


def test_serve_refuses_a_public_host_without_a_token_and_an_unknown_reviewer(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert runner.invoke(app, ["review", "sample", "-c", str(config), "--reviewer", "ana"]).exit_code == 0
    public = runner.invoke(app, ["review", "serve", "-c", str(config), "--host", "0.0.0.0"])
    assert public.exit_code == 2 and "--token" in public.output
    stranger = runner.invoke(app, ["review", "serve", "-c", str(config), "--reviewer", "zed"])
    assert stranger.exit_code == 2 and "not in plan" in stranger.output
    missing = runner.invoke(app, ["review", "serve", "-c", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2
