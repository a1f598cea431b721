"""Every command that writes is walked through targets that already hold a user's work.

The commands are found in the CLI itself (every command with an ``--out`` or ``--html``
option), so a new writing command is covered without editing this file; it only needs a line
in ``_ARGS`` if it takes other required options. For each target the command must exit 2 with
one line on stderr naming the path, no traceback, and every pre-existing file byte-for-byte as
before — with and without ``--overwrite`` (which may replace only the command's own outputs).
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import arcticqa.cli  # noqa: F401  (registers every command)
from arcticqa.cli.app import app
from arcticqa.config import load_settings
from arcticqa.errors import OutputError
from arcticqa.evaluate.reportio import write_report_folder
from arcticqa.outputs import check_file_target, write_file, write_folder
from arcticqa.store import Store
from tests.pipeline_fixtures import write_config
from tests.release_factories import export, make_item

OUTPUT_OPTIONS = ("--out", "--html")
THESIS = b"\\documentclass{article} my thesis, three years of work\n"


def _writing_commands() -> list[tuple[tuple[str, ...], str]]:
    """(command path, its output option) for every command of ``arcticqa --help`` that writes."""
    found: list[tuple[tuple[str, ...], str]] = []

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is not None:
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
            return
        for param in getattr(command, "params", []):
            for opt in getattr(param, "opts", []):
                if opt in OUTPUT_OPTIONS:
                    found.append((path, opt))

    walk(typer.main.get_command(app), ())
    return found


WRITERS = _writing_commands()
FILE_WRITERS = {("audit",): "audit.html", ("funnel",): "funnel.svg",  # the rest write folders
                ("review", "report"): "review.html"}


def test_the_walk_finds_every_writer_and_each_has_overwrite() -> None:
    names = {" ".join(path) for path, _ in WRITERS}
    assert {"demo", "export", "audit", "funnel", "evaluate report", "evaluate score", "evaluate run",
            "evaluate policies"} <= names
    command = typer.main.get_command(app)
    for path, _ in WRITERS:
        sub = command
        for name in path:
            sub = sub.commands[name]  # type: ignore[attr-defined]
        assert any("--overwrite" in p.opts for p in sub.params), f"{' '.join(path)} has no --overwrite"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("inputs")
    release = export([make_item(1), make_item(2)], base / "release")
    responses = base / "responses.csv"
    responses.write_text("trial_id\n", encoding="utf-8")
    config = write_config(base / "cfg", base_url="http://127.0.0.1:9/v1", corpus=base / "none.jsonl")
    # an empty but migrated store: the reading commands refuse a missing one
    Store(load_settings(config).store.url).engine.dispose()
    return {"items": release / "items.jsonl", "responses": responses, "config": config}


def _args(path: tuple[str, ...], inputs: dict[str, Path]) -> list[str]:
    """The other options each writer needs to reach its output."""
    config = ["-c", str(inputs["config"])]
    return {
        ("export",): config,
        ("audit",): config,
        ("funnel",): config,
        ("review", "report"): config,
        ("evaluate", "report"): ["--responses", str(inputs["responses"])],
        ("evaluate", "exposure"): ["--responses", str(inputs["responses"])],
        ("evaluate", "score"): ["--protocol", "arcticabstain", "--items", str(inputs["items"]),
                                "--responses", str(inputs["responses"])],
        ("evaluate", "run"): [*config, "--items", str(inputs["items"])],
        ("evaluate", "policies"): ["--items", str(inputs["items"]), "--db", "sqlite:///:memory:"],
        ("demo",): ["--orchestrator", "local"],
    }.get(path, [])


def _snapshot(root: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(Path(folder) / name, root)] = "dir"
        for name in files:
            p = Path(folder) / name
            out[os.path.relpath(p, root)] = p.read_bytes()
    return out


def _user_folder(work: Path, name: str = "mine") -> Path:
    folder = work / name
    folder.mkdir()
    (folder / "thesis.tex").write_bytes(THESIS)
    return folder


def _ro_mount(work: Path) -> Iterator[Path]:
    where = work / "readonly"
    where.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here (needs root and CAP_SYS_ADMIN)")
    try:
        yield where / "out"
    finally:
        subprocess.run(["umount", str(where)], check=False)


#: target name -> builds it in the work folder and returns the path to give the command
TARGETS: dict[str, Callable[[Path, str], Path]] = {
    "a folder holding a user's file": lambda work, leaf: _user_folder(work),
    "an existing file": lambda work, leaf: _existing(work / f"thesis{Path(leaf).suffix}"),
    "the current folder": lambda work, leaf: (_existing(work / "thesis.tex"), Path("."))[1],
    "a folder named like the output file": lambda work, leaf: _user_folder(work, leaf),
    "a path under a file": lambda work, leaf: _existing(work / "thesis.tex") / leaf,
    "a 300-character name": lambda work, leaf: work / ("x" * 296 + Path(leaf).suffix),
}


def _existing(path: Path) -> Path:
    path.write_bytes(THESIS)
    return path


def _cases() -> list[tuple[tuple[str, ...], str, str, bool]]:
    return [(path, opt, target, overwrite) for path, opt in WRITERS for target in TARGETS
            for overwrite in (False, True)]


@pytest.mark.parametrize(("path", "opt", "target", "overwrite"), _cases(),
                         ids=lambda v: " ".join(v) if isinstance(v, tuple) else str(v))
def test_no_writer_loses_a_user_file_or_ends_in_a_traceback(
        path: tuple[str, ...], opt: str, target: str, overwrite: bool, inputs: dict[str, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    leaf = FILE_WRITERS.get(path, "report")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    out = TARGETS[target](work, leaf)
    if path in FILE_WRITERS and target == "an existing file" and overwrite:
        pytest.skip("--overwrite on an existing file the user named is the documented way to replace it")
    before = _snapshot(work)
    args = [*path, opt, str(out), *_args(path, inputs), *(["--overwrite"] if overwrite else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in message, message
    assert str(out) in message or out.name in message or "thesis.tex" in message, message
    assert _snapshot(work) == before  # nothing deleted, replaced or left behind


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root")
@pytest.mark.parametrize(("path", "opt"), WRITERS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v)
def test_a_read_only_target_is_one_line_and_exit_2(path: tuple[str, ...], opt: str, inputs: dict[str, Path],
                                                   tmp_path: Path) -> None:
    for out in _ro_mount(tmp_path):
        target = out.with_name(FILE_WRITERS.get(path, "report"))
        result = CliRunner().invoke(app, [*path, opt, str(target), *_args(path, inputs)])
        assert result.exit_code == 2, (result.output, result.exception)
        message = result.stderr.strip()
        assert "\n" not in message and "Read-only file system" in message and str(target.parent) in message, message


# --- the helper itself ------------------------------------------------------------------------

def test_overwrite_replaces_own_outputs_atomically_with_plain_modes(tmp_path: Path) -> None:
    report = tmp_path / "report"
    write_report_folder(report, {"TABLES.md": "one\n", "metrics.csv": "a\n"}, overwrite=False)
    with pytest.raises(OutputError, match="not empty; pass --overwrite"):
        write_report_folder(report, {"TABLES.md": "two\n"}, overwrite=False)
    write_report_folder(report, {"TABLES.md": "two\n"}, overwrite=True)
    assert sorted(p.name for p in report.iterdir()) == ["TABLES.md"]  # the whole report was replaced
    assert (report / "TABLES.md").read_text() == "two\n"
    mask = os.umask(0o022)
    os.umask(mask)
    assert stat.S_IMODE(report.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE((report / "TABLES.md").stat().st_mode) == 0o666 & ~mask
    page = write_file(tmp_path / "audit.html", "<p>x</p>", overwrite=False)
    assert stat.S_IMODE(page.stat().st_mode) == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.html", "report"]  # no temp file left


def test_overwrite_never_replaces_a_folder_holding_foreign_files(tmp_path: Path) -> None:
    report = write_report_folder(tmp_path / "report", {"TABLES.md": "one\n"})
    (report / "my-draft.md").write_text("mine\n")
    before = _snapshot(tmp_path)
    with pytest.raises(OutputError, match="'my-draft.md', which this command did not write"):
        write_report_folder(report, {"TABLES.md": "two\n"}, overwrite=True)
    with pytest.raises(OutputError, match="which this command did not write"):
        export([make_item(1)], report, overwrite=True)
    assert _snapshot(tmp_path) == before


def test_a_failed_fill_leaves_the_target_as_it_was(tmp_path: Path) -> None:
    report = write_report_folder(tmp_path / "report", {"TABLES.md": "one\n"})
    before = _snapshot(tmp_path)

    def full_disk(staging: Path) -> None:
        (staging / "TABLES.md").write_text("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(staging / "TABLES.md"))

    with pytest.raises(OutputError, match="No space left on device"):
        write_folder(report, full_disk, overwrite=True, own={"TABLES.md"})
    assert _snapshot(tmp_path) == before


def test_the_current_folder_is_filled_in_place_not_renamed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    write_report_folder(Path("."), {"TABLES.md": "one\n"}, overwrite=False)
    assert Path.cwd() == here and (here / "TABLES.md").read_text() == "one\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here"]


def test_a_file_target_that_is_a_folder_is_refused_even_with_overwrite(tmp_path: Path) -> None:
    (tmp_path / "audit.html").mkdir()
    with pytest.raises(OutputError, match="is a folder"):
        check_file_target(tmp_path / "audit.html", overwrite=True)


def test_audit_html_overwrite_replaces_only_the_named_file(inputs: dict[str, Path], tmp_path: Path) -> None:
    page = tmp_path / "audit.html"
    args = ["audit", "--html", str(page), "-c", str(inputs["config"])]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    page.write_text("edited by hand\n")
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2 and page.read_text() == "edited by hand\n"
    replaced = CliRunner().invoke(app, [*args, "--overwrite"])
    assert replaced.exit_code == 0 and "<html" in page.read_text()


def test_export_refuses_an_empty_release_unless_allow_empty(inputs: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "release"
    args = ["export", "--out", str(out), "-c", str(inputs["config"])]
    refused = CliRunner().invoke(app, args)
    assert refused.exit_code == 2, refused.output
    assert "no accepted items to export" in refused.stderr and "\n" not in refused.stderr.strip()
    assert not out.exists()
    allowed = CliRunner().invoke(app, [*args, "--allow-empty"])
    assert allowed.exit_code == 0, allowed.output
    assert (out / "items.jsonl").read_bytes() == b"" and (out / "MANIFEST.json").is_file()


@pytest.mark.parametrize("inside", ["release/my-notes.txt", "evaluation/my-draft.md", "my-notes.txt"])
def test_demo_rerun_refuses_a_user_file_in_its_folders(tmp_path: Path, inside: str) -> None:
    from arcticqa.demo.run import _config_text

    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "demo.toml").write_text(_config_text(demo), encoding="utf-8")  # an earlier demo run's folder
    (demo / inside).parent.mkdir(exist_ok=True)
    (demo / inside).write_text("mine\n", encoding="utf-8")
    before = _snapshot(tmp_path)
    for overwrite in ([], ["--overwrite"]):
        result = CliRunner().invoke(app, ["demo", "--out", str(demo), "--orchestrator", "local", *overwrite])
        assert result.exit_code == 2, result.output
        assert Path(inside).name in result.stderr and "did not write" in result.stderr
    assert _snapshot(tmp_path) == before
