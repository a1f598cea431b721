"""The ``arcticqa`` command line. Each module registers its commands on the shared app."""

from __future__ import annotations

from arcticqa.cli import (  # noqa: F401  (registers commands)
    build,
    demo,
    eligibility,
    estimate,
    evaluate,
    evaluate_items,
    prefect,
    release,
    review,
    standin,
    text,
)
from arcticqa.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    app()
