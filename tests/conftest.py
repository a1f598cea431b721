"""Shared pytest fixtures. Fake servers live in tests/fakes/ and speak real HTTP on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import flows  # noqa: F401  # before any test imports Prefect: analytics off, PREFECT_HOME, start-up wait

# Prefect logs "Stopping temporary server" at exit, after pytest has closed its capture streams
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# each test's PREFECT_HOME is a temporary folder: a shared server (the default, which outlives
# the build) would outlive the test too; tests/test_prefect_shared_server.py tests that one
os.environ.setdefault("ARCTICQA_PREFECT__SERVER", "temporary")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED = REPO_ROOT.parent / "shared"
ARCTICQA_V1 = SHARED / "arcticqa-v1"


@pytest.fixture
def arcticqa_v1() -> Path:
    """The published ArcticQA v1 release, or a skip with the reason."""
    if not (ARCTICQA_V1 / "items.jsonl").exists():
        pytest.skip(f"published ArcticQA v1 data not found at {ARCTICQA_V1} (CI has ../shared/)")
    return ARCTICQA_V1
