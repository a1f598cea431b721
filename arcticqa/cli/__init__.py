"""The ``arcticqa`` command line. Each module registers its commands on the shared app."""

from __future__ import annotations

from arcticqa.cli import build, demo, eligibility, evaluate, prefect, release, review, standin, text  # noqa: F401  (registers commands)
from arcticqa.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
