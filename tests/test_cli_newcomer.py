"""The command line as a newcomer meets it: reading never creates a store, every message is printed
whole (no Rich markup eats ``[models]``), the settings' cross-references are checked at load, and
the options are consistent (global ``-c``, ``--version``, help on every option, no ``<bool>``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from arcticqa import __version__
from arcticqa.cli import app
from arcticqa.config import load_settings
from arcticqa.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()

NO_STORE = "no store at arcticqa.db (run `arcticqa build`, or pass -c CONFIG)"


@pytest.fixture
def empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with no config and no store, and no settings coming from the environment."""
    for name in list(os.environ):
        if name.startswith("ARCTICQA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _commands() -> Iterator[tuple[list[str], Any]]:
    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    yield from walk(typer.main.get_command(app), [])


READ_ONLY = [
    ["status"],
    ["status", "--json"],
    ["audit"],
    ["audit", "--html", "audit.html"],
    ["funnel", "--out", "funnel.svg"],
    ["export", "--out", "release"],
    ["eligibility", "explain", "--paper", "abc"],
]


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a))
def test_a_command_that_reads_never_creates_a_store(empty_folder: Path, args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert NO_STORE in result.stderr
    assert sorted(p.name for p in empty_folder.iterdir()) == []  # no arcticqa.db, no output


def test_ingest_pdfs_without_a_store_copies_nothing(empty_folder: Path) -> None:
    (empty_folder / "pdfs").mkdir()
    (empty_folder / "pdfs" / "a.pdf").write_bytes(b"%PDF-1.4\n")
    (empty_folder / "map.csv").write_text("file,doi\na.pdf,10.1/x\n", encoding="utf-8")
    result = runner.invoke(app, ["ingest-pdfs", "pdfs", "--map", "map.csv"])
    assert result.exit_code == 2 and NO_STORE in result.stderr
    assert sorted(p.name for p in empty_folder.iterdir()) == ["map.csv", "pdfs"]


def test_doctor_says_there_is_no_store_yet_and_creates_none(empty_folder: Path) -> None:
    result = runner.invoke(app, ["doctor", "--offline"])
    assert result.exit_code == 0, result.output
    assert "store arcticqa.db: none yet" in result.stdout
    assert list(empty_folder.iterdir()) == []


def test_a_zero_byte_file_is_not_a_store(empty_folder: Path) -> None:
    (empty_folder / "arcticqa.db").write_bytes(b"")
    result = runner.invoke(app, ["status"])
    assert result.exit_code == 2 and NO_STORE in result.stderr
    assert (empty_folder / "arcticqa.db").stat().st_size == 0


# text Rich would read as markup tags; every one must come back verbatim
TAGGED = ["[models]", "[bold]x[/]", "[/]", "[red]", "[link=x]y[/link]", "a [b] c", "[[x]]", "[policies]"]


@pytest.mark.parametrize("name", TAGGED)
def test_errors_print_user_text_verbatim(empty_folder: Path, name: str) -> None:
    result = runner.invoke(app, ["status", "-c", f"{name}.toml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: ConfigError: {name}.toml: config file not found"


@pytest.mark.parametrize("name", TAGGED)
def test_a_model_name_with_brackets_is_named_whole(empty_folder: Path, name: str) -> None:
    (empty_folder / "a.toml").write_text(f'[roles]\nverifier = "{name}"\n', encoding="utf-8")
    result = runner.invoke(app, ["status", "-c", "a.toml"])
    assert result.exit_code == 2
    assert f"role 'verifier' names model {name!r}, which is not under [models]" in result.stderr


def test_a_role_naming_an_undefined_model_fails_at_load_with_a_suggestion(empty_folder: Path) -> None:
    (empty_folder / "a.toml").write_text('[models.gpt]\nmodel = "gpt-4.1-mini"\n[roles]\nquestion_writer = "gtp"\n',
                                         encoding="utf-8")
    result = runner.invoke(app, ["build", "-c", "a.toml", "--orchestrator", "local"])
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: ConfigError: a.toml: role 'question_writer' names model 'gtp', which "
                                     "is not under [models]; did you mean 'gpt'? (defined: gpt, offline)")
    assert list(empty_folder.iterdir()) == [empty_folder / "a.toml"]  # failed before any work


@pytest.mark.parametrize(("toml", "expected"), [
    ('[bild]\nx = 1\n', "setting 'bild': unknown setting; did you mean 'build'?"),
    ('[build]\nbudget_usb = 3\n', "setting 'build.budget_usb': unknown setting; did you mean 'budget_usd'?"),
    ('[models.m]\nprovder = "openai"\n', "setting 'models.m.provder': unknown setting; did you mean 'provider'?"),
    ('[roles]\nquestion_writter = "offline"\n', "unknown role 'question_writter'; did you mean 'question_writer'?"),
    ('[build]\nbatch_roles = ["verifer"]\n', "build.batch_roles names 'verifer', which is not a role; "
                                             "did you mean 'verifier'?"),
    ('[store]\nzzz = 1\n', "setting 'store.zzz': unknown setting"),
    ('[extraction]\nmax_page = 3\n', "setting 'extraction.max_page': unknown setting; did you mean 'max_pages'?"),
    ('[extraction]\nmax_pages = 0\n', "setting 'extraction.max_pages': Input should be greater than or equal to 1"),
])
def test_config_mistakes_are_one_line_with_did_you_mean(empty_folder: Path, toml: str, expected: str) -> None:
    (empty_folder / "a.toml").write_text(toml, encoding="utf-8")
    result = runner.invoke(app, ["status", "-c", "a.toml"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.strip().endswith(expected), result.stderr


def test_the_reference_config_of_the_docs_still_loads(empty_folder: Path) -> None:
    # the cross-reference checks must not reject what docs/configuration.md tells users to write
    text = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    (empty_folder / "a.toml").write_text(block, encoding="utf-8")
    (empty_folder / ".env").write_text("", encoding="utf-8")  # the block names one
    from arcticqa.config import load_settings

    settings = load_settings(empty_folder / "a.toml")
    assert all(settings.roles[role] in settings.models for role in settings.roles)


def test_help_keeps_square_brackets_and_shows_no_bool_placeholder() -> None:
    explain = runner.invoke(app, ["eligibility", "explain", "--help"]).stdout
    assert "(default: [policies] eligibility of the settings" in " ".join(explain.split())  # help wraps
    run = runner.invoke(app, ["evaluate", "run", "--help"]).stdout
    assert "(default: [evaluate] items)" in " ".join(run.split())
    for path, _cmd in _commands():
        shown = runner.invoke(app, [*path, "--help"])
        assert shown.exit_code == 0, path
        assert "<bool>" not in shown.stdout, path


def test_every_option_has_help_text() -> None:
    missing = [(" ".join(path), p.name) for path, cmd in _commands() for p in cmd.params
               if not getattr(p, "help", None) and p.param_type_name == "option"]
    assert missing == []


def test_demo_and_build_offer_the_same_orchestrator_choices() -> None:
    demo = runner.invoke(app, ["demo", "--help"]).stdout
    build = runner.invoke(app, ["build", "--help"]).stdout
    assert "--orchestrator <prefect|local>" in demo and "--orchestrator <prefect|local>" in build
    bad = runner.invoke(app, ["demo", "--orchestrator", "dask"])
    assert bad.exit_code == 2


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"arcticqa {__version__}\n"


def test_global_config_option_reaches_the_command(empty_folder: Path) -> None:
    (empty_folder / "a.toml").write_text('[store]\nurl = "sqlite:///elsewhere.db"\n', encoding="utf-8")
    before = runner.invoke(app, ["-c", "a.toml", "status"])
    after = runner.invoke(app, ["status", "-c", "a.toml"])
    assert before.exit_code == after.exit_code == 2
    assert "no store at elsewhere.db" in before.stderr and before.stderr == after.stderr
    assert "ARCTICQA_CONFIG" not in os.environ  # an in-process caller keeps its environment


def test_global_config_option_in_a_fresh_process(empty_folder: Path) -> None:
    (empty_folder / "a.toml").write_text('[bild]\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "arcticqa", "-c", "a.toml", "export", "--out", "r"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 2
    assert "a.toml: setting 'bild': unknown setting; did you mean 'build'?" in done.stderr


def test_extract_text_names_a_directory_and_a_missing_file(empty_folder: Path) -> None:
    (empty_folder / "pdfs").mkdir()
    folder = runner.invoke(app, ["extract-text", "pdfs"])
    assert folder.exit_code == 2 and "pdfs: is a directory; give one PDF file" in folder.stderr
    missing = runner.invoke(app, ["extract-text", "nope.pdf"])
    assert missing.exit_code == 2 and "nope.pdf: no such file" in missing.stderr


@pytest.mark.parametrize("value", ["0", "true", '"two"'])
def test_extraction_workers_is_checked_when_the_settings_load(tmp_path: Path, value: str) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text(f"[extraction]\nworkers = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"setting 'extraction\.workers': expected a whole number"):
        load_settings(cfg)


def test_extraction_workers_sits_beside_the_limits(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text("[extraction]\nworkers = 2\nmax_pages = 40\n", encoding="utf-8")
    extraction = load_settings(cfg).extraction
    assert (extraction.workers, extraction.max_pages) == (2, 40)
    assert "workers" not in extraction.limits().model_dump()  # the pool size is not a document limit
