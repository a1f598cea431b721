"""Shared pytest fixtures. Fake servers live in tests/fakes/ and speak real HTTP on 127.0.0.1.

The suite's environment is set here, before anything imports Prefect or loads settings:

- no ``ARCTICQA_*`` variable of the developer's shell reaches a test (a stray
  ``ARCTICQA_BUILD__BATCH_SIZE`` would change what the CLI's loader gives the tests): they are
  removed when the suite starts and again before every test (``_suite_environment``); the one
  the suite sets itself, ``ARCTICQA_PREFECT__SERVER=temporary``, is for the ``arcticqa`` commands
  the tests run (in-process or as a child process): each test's PREFECT_HOME is a temporary
  folder, and a shared server (the default, which outlives the build) would outlive the test too
  (tests/test_prefect_shared_server.py tests that one);
- under pytest-xdist each worker gets a PREFECT_HOME of its own (``<PREFECT_HOME>/xdist/gwN``), so
  two workers' temporary Prefect servers never share one SQLite database.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the ARCTICQA_* variables the suite sets; every other one is cleared
SUITE_ENV = {"ARCTICQA_PREFECT__SERVER": "temporary"}

for _name in [n for n in os.environ if n.startswith("ARCTICQA_")]:
    del os.environ[_name]
os.environ.update(SUITE_ENV)
if os.environ.get("PYTEST_XDIST_WORKER"):
    _home = Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    os.environ["PREFECT_HOME"] = str(_home / "xdist" / os.environ["PYTEST_XDIST_WORKER"])
# A shell without job control starts `make test &` with SIGINT ignored, and an ignored signal stays
# ignored across exec: the processes the tests interrupt with SIGINT (a build, the stand-in, the
# extraction pool) would not hear it. A handler (unlike SIG_IGN) is reset to the default on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Prefect logs "Stopping temporary server" at exit, after pytest has closed its capture streams
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")

import flows  # noqa: E402, F401  # before any test imports Prefect: analytics off, PREFECT_HOME, start-up wait

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
ARCTICQA_V1 = SHARED / "arcticqa-v1"


@pytest.fixture(autouse=True)
def _suite_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts with no ``ARCTICQA_*`` variable but the suite's own (:data:`SUITE_ENV`),
    whatever the shell or an earlier test set; a test that needs one sets it with monkeypatch."""
    for name in [n for n in os.environ if n.startswith("ARCTICQA_") and n not in SUITE_ENV]:
        monkeypatch.delenv(name)
    for name, value in SUITE_ENV.items():
        monkeypatch.setenv(name, value)
    yield


@pytest.fixture
def arcticqa_v1() -> Path:
    """The published ArcticQA v1 release, or a skip with the reason."""
    if not (ARCTICQA_V1 / "items.jsonl").exists():
        pytest.skip(f"published ArcticQA v1 data not found at {ARCTICQA_V1} (CI has ../shared/)")
    return ARCTICQA_V1
