"""The root Typer app and the error boundary every command shares."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console, ConsoleDimensions
from rich.text import Text

from arcticqa import __version__
from arcticqa.errors import ArcticQAError

__all__ = ["app", "console", "err_console", "ConfigOption", "OverwriteOption", "handle_errors", "Text"]

app = typer.Typer(
    name="arcticqa",
    help="Build evidence-grounded science QA releases and evaluate abstention.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help (no Rich markup: "[policies]" in a help text stays), as wide as the terminal
    rich_markup_mode=None,
    context_settings={"max_content_width": 160},
)
#: the width of output that goes to a pipe or a file (no terminal, no $COLUMNS): wide enough that no
#: table cuts an id or a number, as Rich's 80-column default did (`succee…`, `always-abst…`)
PIPED_WIDTH = 1000


class _Console(Console):
    """Rich's console, except that output to a pipe or a file is not held to 80 columns: a log or
    ``| grep`` gets whole ids and numbers. A terminal keeps its width; ``$COLUMNS`` still wins."""

    @property
    def size(self) -> ConsoleDimensions:
        found = super().size
        if self._width is not None or self._environ.get("COLUMNS", "").isdigit():
            return found
        isatty = getattr(self.file, "isatty", None)
        try:
            piped = isatty is None or not isatty()
        except ValueError:  # a closed file
            piped = True
        return ConsoleDimensions(PIPED_WIDTH, found.height) if piped else found

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


# Markup is off: messages carry user and config text ("not under [models]", file names, quoted
# spans) that Rich would otherwise eat as tags. Colour is given with Text(..., style=...) instead.
console: Console = _Console(markup=False)
err_console: Console = _Console(stderr=True, markup=False)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"arcticqa {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="TOML settings file for every command (same as $ARCTICQA_CONFIG; a command's own "
        "-c wins).")] = None,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Build evidence-grounded science QA releases and evaluate abstention."""
    if config is not None:
        # the documented variable, so load_settings, the Prefect flow and --workers children all see it;
        # put back afterwards so an in-process caller (tests, notebooks) keeps its environment
        before = os.environ.get("ARCTICQA_CONFIG")
        os.environ["ARCTICQA_CONFIG"] = str(config)
        ctx.call_on_close(lambda: _restore_env("ARCTICQA_CONFIG", before))


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


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
            err_console.print(Text.assemble(("error:", "bold red"), f" {type(exc).__name__}: {exc}"),
                              highlight=False, soft_wrap=True)  # one line, however long the path in it
            sys.exit(exc.exit_code)
        except OSError as exc:
            if exc.filename is None:  # a network error, not a file the user named
                raise
            # the last net under every writer: a read-only folder, a name too long, a path under a file
            err_console.print(f"error: {exc.filename}: {exc.strerror or exc}", highlight=False,
                              soft_wrap=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]
