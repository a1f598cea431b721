"""The root Typer app and the error boundary every command shares."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from arcticqa.errors import ArcticQAError

__all__ = ["app", "console", "err_console", "ConfigOption", "handle_errors"]

app = typer.Typer(
    name="arcticqa",
    help="Build evidence-grounded science QA releases and evaluate abstention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML settings file (default: $ARCTICQA_CONFIG or ./arcticqa.toml)."),
]

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn arcticqa's named errors into one clear line on stderr and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ArcticQAError as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", highlight=False)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]
