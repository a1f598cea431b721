"""The README cannot drift from the code: every ``arcticqa`` command and option it shows exists, and
the shell blocks marked ``<!-- docs-test: run -->`` run as written, offline, in a fresh folder
(slow: the first block is ``make demo``; the inspect_ai route's OpenAI is the loopback stand-in)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import typer.main

from arcticqa.cli import app
from arcticqa.evaluate.policies import gold_map, policy_responder
from arcticqa.standins.server import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
RUN_MARK = "<!-- docs-test: run -->"


def _runnable_blocks(text: str) -> list[str]:
    """The bash blocks right after a ``docs-test: run`` marker."""
    return re.findall(re.escape(RUN_MARK) + r"\s*```bash\n(.*?)```", text, flags=re.S)


def _arcticqa_commands(text: str) -> list[list[str]]:
    """Every ``arcticqa ...`` command the README shows, in code spans or shell blocks, as words."""
    found: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        found += [line.split("#", 1)[0] for line in block.splitlines() if line.strip().startswith("arcticqa ")]
    found += re.findall(r"`(arcticqa [^`]+)`", text)
    return [_words(c) for c in found]


def _words(command: str) -> list[str]:
    # table cells escape "|" and show alternatives (a|b) and optional parts ([--x]); keep the words
    return shlex.split(command.replace("\\|", " ").replace("[", " ").replace("]", " ").replace("(", " ")
                       .replace(")", " ").replace("|", " "))


def _command_tree() -> dict[tuple[str, ...], set[str]]:
    """(command path) -> the option names it accepts."""
    tree: dict[tuple[str, ...], set[str]] = {}

    def walk(cmd: object, path: tuple[str, ...]) -> None:
        tree[path] = {o for p in getattr(cmd, "params", []) for o in (*p.opts, *p.secondary_opts)}
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return tree


def test_the_readme_names_only_commands_and_options_that_exist() -> None:
    tree = _command_tree()
    commands = _arcticqa_commands(README.read_text(encoding="utf-8"))
    assert len(commands) > 20  # the table and the blocks were found
    wrong = []
    for words in commands:
        path: tuple[str, ...] = ()
        for word in words[1:]:
            if (*path, word) in tree:
                path = (*path, word)
            elif not word.startswith("-"):
                continue
        # no command word: only the root's own options (--version)
        assert path or all(w in tree[()] for w in words[1:]), words
        # options may sit before the command (global -c) or after it; either set accepts them
        accepted = tree[path] | tree[()]
        wrong += [(" ".join(words), w) for w in words[1:] if w.startswith("-") and w.split("=")[0] not in accepted]
    assert wrong == []


def test_runnable_blocks_are_found() -> None:
    blocks = _runnable_blocks(README.read_text(encoding="utf-8"))
    assert blocks and blocks[0].splitlines()[0] == "make demo"


def _any_model_is_the_oracle(release: Path) -> Callable[[dict[str, Any], Mapping[str, str]], Any]:
    """A stand-in responder that answers every model (``gpt-4.1-mini`` of the README's inspect
    route) as the oracle reference policy, on the items ``make demo`` writes (read on first use)."""
    answer: list[Callable[[dict[str, Any], Mapping[str, str]], Any]] = []

    def responder(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        if not answer:
            answer.append(policy_responder(gold_map(release / "items.jsonl")))
        return answer[0]({**body, "model": "oracle"}, headers)

    return responder


@pytest.mark.slow
def test_the_readme_runnable_blocks_run_as_written(tmp_path: Path) -> None:
    # a fresh folder that has what a fresh clone has at its root (the Makefile, the package folder
    # inspect's task file is in, and the installed venv, linked), so `make demo` and the follow-on
    # commands write there, not into the repo
    for name in ("Makefile", "pyproject.toml", "constraints.txt", ".venv", "arcticqa"):
        (tmp_path / name).symlink_to(REPO / name)
    # Bring the venv's install stamp up to date here, in the repository: were pyproject.toml newer
    # than the stamp, `make demo` in the fresh folder would reinstall the editable package from
    # that folder, which holds no package, and leave the developer's venv unable to import it.
    subprocess.run(["make", "-s", "install"], cwd=REPO, check=True, capture_output=True, timeout=540)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ARCTICQA_", "PREFECT_", "INSPECT_", "OPENAI_"))},
           "PATH": f"{REPO / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "PREFECT_HOME": str(tmp_path / ".prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "COLUMNS": "160",
           # nothing leaves the machine: every proxy is a closed loopback port
           "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9", "ALL_PROXY": "http://127.0.0.1:9",
           "NO_PROXY": "127.0.0.1,localhost"}
    # the inspect route's "OpenAI" is the loopback stand-in (the README's commands, as written)
    with FakeOpenAIServer(_any_model_is_the_oracle(tmp_path / "out" / "demo" / "release")) as openai:
        env |= {"OPENAI_BASE_URL": openai.base_url, "OPENAI_API_KEY": "loopback-no-key"}
        try:
            for block in _runnable_blocks(README.read_text(encoding="utf-8")):
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                                      capture_output=True, text=True, timeout=540)
                assert done.returncode == 0, \
                    f"{block}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
                assert "no store at" not in done.stdout + done.stderr
        finally:
            # `make demo` leaves the Prefect server builds share running (README): not past the test
            subprocess.run(["arcticqa", "prefect", "stop"], cwd=tmp_path, env=env, capture_output=True, timeout=60)
        asked = sum(1 for r in openai.requests if r.path.rstrip("/").endswith("/chat/completions"))
    assert not (tmp_path / "arcticqa.db").exists()  # nothing read the default store into being
    assert (tmp_path / "funnel.svg").read_text(encoding="utf-8").lstrip().startswith("<?xml")
    # the inspect route ran on the demo's release over HTTP, and its logs were scored
    items = len((tmp_path / "out" / "demo" / "release" / "items.jsonl").read_text(encoding="utf-8").splitlines())
    assert asked == items * 2 * 3
    assert (tmp_path / "out" / "inspect-report" / "TABLES.md").exists()
