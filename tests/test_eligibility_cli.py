"""``arcticqa eligibility explain``: text, file and store input, JSON output, and clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.papers import PaperRecord

runner = CliRunner()


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, ["eligibility", "explain", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_text_json_lists_sites_rules_and_decision() -> None:
    out = _json(["--text", "Soil cores from Ny-Ålesund (78°55′N, 11°56′E); background work at McMurdo."])
    assert out["decision"] == "needs_review"  # Ny-Ålesund is Arctic, McMurdo is not
    assert out["rule_ids"] == ["eligibility.mixed_sites"]
    by_name = {s["name"]: s for s in out["sites"]}
    assert by_name["Ny-Ålesund"]["eligible"] is True and by_name["Ny-Ålesund"]["kind"] == "land"
    assert by_name["McMurdo Station"]["eligible"] is False
    assert by_name["78°55′N, 11°56′E"]["source"] == "coordinates"
    # written beside Ny-Ålesund, the coordinate is that land site: no marine region
    assert by_name["78°55′N, 11°56′E"]["kind"] == "land" and by_name["78°55′N, 11°56′E"]["region"] is None


def test_site_rule_override_changes_the_decision() -> None:
    out = _json(["--text", "Soil cores from Ny-Ålesund and McMurdo.", "--site-rule", "any"])
    assert out["decision"] == "eligible" and out["site_rule"] == "any"


def test_policy_file_option_is_used_and_hashed(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parent.parent
    text = (repo / "data" / "policies" / "eligibility.toml").read_text(encoding="utf-8")
    custom = tmp_path / "policies" / "loose.toml"
    custom.parent.mkdir()
    custom.write_text(text.replace('marginal_seas = "north_of_circle"', 'marginal_seas = "whole_region"')
                      .replace('"../regions/', f'"{repo}/data/regions/')
                      .replace('"../gazetteer/', f'"{repo}/data/gazetteer/'), encoding="utf-8")
    default = _json(["--text", "A cruise in the Chukchi Sea."])
    loose = _json(["--text", "A cruise in the Chukchi Sea.", "--policy", str(custom)])
    assert (default["decision"], loose["decision"]) == ("needs_review", "eligible")
    assert default["policy_sha256"] != loose["policy_sha256"]
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[policies]\neligibility = "{custom}"\n', encoding="utf-8")
    via_settings = _json(["--text", "A cruise in the Chukchi Sea.", "--config", str(config)])
    assert via_settings["policy_sha256"] == loose["policy_sha256"]


def test_txt_file_input(tmp_path: Path) -> None:
    f = tmp_path / "paper.txt"
    f.write_text("We sampled harbour sediments in Reykjavík (64.15°N, 21.94°W).", encoding="utf-8")
    out = _json(["--file", str(f)])
    assert out["decision"] == "ineligible" and out["rule_ids"] == ["eligibility.south_of_arctic_circle"]


def test_human_output_names_every_site_and_the_decision() -> None:
    result = runner.invoke(app, ["eligibility", "explain", "--text", "CTD casts in Fram Strait at 79°N, 0°E."])
    assert result.exit_code == 0, result.output
    assert "Fram Strait" in result.output and "79°N, 0°E" in result.output
    assert "eligibility.site_in_arctic_region" in result.output
    assert "Decision: eligible" in result.output


@pytest.mark.parametrize(("args", "needle"), [
    ([], "exactly one of --text, --file or --paper"),
    (["--text", "x", "--paper", "p"], "got --text, --paper"),
    (["--file", "/nonexistent/paper.txt"], "/nonexistent/paper.txt: file not found"),
    (["--text", "x", "--site-rule", "most"], "--site-rule must be all, any or majority"),
    (["--text", "x", "--policy", "/nonexistent/p.toml"], "/nonexistent/p.toml: policy file not found"),
])
def test_bad_input_exits_2_with_a_clear_message(args: list[str], needle: str) -> None:
    result = runner.invoke(app, ["eligibility", "explain", *args])
    assert result.exit_code == 2
    assert needle in " ".join(result.output.split())


def test_paper_from_a_real_sqlite_store(tmp_path: Path) -> None:
    from arcticqa.store.store import Store

    db = tmp_path / "arcticqa.db"
    store = Store(f"sqlite:///{db}")
    store.add_papers([(PaperRecord(paperId="abc123", title="Permafrost carbon",
                                   abstract="Cores were taken at Samoylov Island in the Lena Delta."), {})])
    store.close()
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{db}"\n', encoding="utf-8")
    out = _json(["--paper", "abc123", "--config", str(config)])
    assert out["paper_id"] == "abc123" and out["decision"] == "eligible"
    assert {s["name"] for s in out["sites"]} >= {"Samoylov Island", "Lena Delta"}
    missing = runner.invoke(app, ["eligibility", "explain", "--paper", "nope", "--config", str(config)])
    assert missing.exit_code == 2 and "'nope' is not in the store" in " ".join(missing.output.split())


def test_installed_command_runs_in_a_subprocess() -> None:
    exe = Path(sys.executable).parent / "arcticqa"
    if not exe.exists():
        pytest.skip(f"the arcticqa console script is not installed next to {sys.executable}")
    proc = subprocess.run([str(exe), "eligibility", "explain", "--json", "--text", "Moorings at HAUSGARTEN."],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["decision"] == "eligible"


def test_pdf_file_is_judged_section_by_section(tmp_path: Path) -> None:
    render = pytest.importorskip("arcticqa.text.render")
    pytest.importorskip("arcticqa.text.extract")
    pdf = tmp_path / "paper.pdf"
    render.render_paper_pdf(render.PaperSource(
        title="Thaw pond carbon",
        abstract="We measured methane emission from thaw ponds.",
        sections=[("Introduction", ["Earlier work near McMurdo Station and Reykjavík motivated this study."]),
                  ("Study area", ["Ponds were sampled at Zackenberg (74.47°N, 20.57°W) in Northeast Greenland."]),
                  ("Methods", ["Chambers were closed for 30 minutes."])],
    ), pdf)
    out = _json(["--file", str(pdf)])
    assert out["decision"] == "eligible", out
    by_name = {s["name"]: s for s in out["sites"]}
    assert by_name["Zackenberg"]["eligible"] is True
    assert by_name["McMurdo Station"]["verdict"] == "background"
    assert by_name["McMurdo Station"]["section"] == "introduction"
