"""The root Typer app and the error boundary every command shares."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console, ConsoleDimensions
from rich.text import Text

from arcticqa import __version__
from arcticqa.errors import ArcticQAError

if TYPE_CHECKING:
    from arcticqa.config import Settings

__all__ = ["app", "console", "err_console", "ConfigOption", "OverwriteOption", "handle_errors", "Text",
           "load_cli_settings", "config_flag"]

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


def _config_defaults(command: Any, config: Path) -> dict[str, Any]:
    """A click ``default_map`` that gives every command under ``command`` ``config`` as the default
    of its ``--config`` (a command without one ignores it)."""
    return {name: _config_defaults(sub, config) if getattr(sub, "commands", None) else {"config": config}
            for name, sub in getattr(command, "commands", {}).items()}


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="TOML settings file for every command (default: $ARCTICQA_CONFIG or ./arcticqa.toml; "
        "a command's own -c wins).")] = None,
    version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_print_version,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Build evidence-grounded science QA releases and evaluate abstention."""
    if config is not None:
        # the command's own -c defaults to this one: an argument of the command, not the environment
        ctx.default_map = {**(ctx.default_map or {}), **_config_defaults(ctx.command, config)}


def load_cli_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """The one way a command gets its settings: the file ``config`` (the command's ``-c``, or the
    global one before the command), else ``$ARCTICQA_CONFIG``, else ``./arcticqa.toml`` when
    present, else the defaults; then the ``ARCTICQA_*`` environment variables; then ``overrides``
    (the command's own options, e.g. ``build --source``).

    The only place under ``arcticqa/`` that reads ``os.environ`` for settings
    (``tests/test_house_rules.py``); the command hands the object down, and it reaches the Prefect
    flow and ``--workers`` helpers as that object.
    """
    # imported here, not at the top: `arcticqa --help` stays fast
    from arcticqa.config import find_config_file, load_settings

    return load_settings(find_config_file(config, os.environ), environ=os.environ, **overrides)


def config_flag(settings: Settings) -> str:
    """`` -c FILE`` naming the settings' config file as a user would type it (relative to the working
    folder when inside it), or ``""`` for ``./arcticqa.toml`` and the defaults, which need none."""
    import shlex

    path = settings.config_path
    if path is None:
        return ""
    try:
        shown = path.relative_to(Path.cwd().absolute())
    except ValueError:
        shown = path
    return "" if shown == Path("arcticqa.toml") else f" -c {shlex.quote(str(shown))}"


ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML settings file (default: the global -c, $ARCTICQA_CONFIG or "
                 "./arcticqa.toml)."),
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
