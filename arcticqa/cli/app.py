"""The root Typer app and the error boundary every command shares."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from arcticqa.errors import ArcticQAError

__all__ = ["app", "console", "err_console", "ConfigOption", "OverwriteOption", "handle_errors"]

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

OverwriteOption = Annotated[
    bool,
    typer.Option("--overwrite", help="Replace this command's own earlier outputs at the target (never "
                 "anything it did not write; docs/reliability.md)."),
]

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(fn: F) -> F:
    """Turn arcticqa's named errors into one clear line on stderr and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ArcticQAError as exc:
            err_console.print(f"[bold red]error:[/] {type(exc).__name__}: {escape(str(exc))}", highlight=False,
                              soft_wrap=True)  # one line, however long the path in it
            sys.exit(exc.exit_code)
        except OSError as exc:
            if exc.filename is None:  # a network error, not a file the user named
                raise
            # the last net under every writer: a read-only folder, a name too long, a path under a file
            err_console.print(f"error: {exc.filename}: {exc.strerror or exc}", highlight=False, markup=False,
                              soft_wrap=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
