"""CLI commands for the Prefect API server builds share: ``arcticqa prefect status|stop``.

A server belongs to a ``PREFECT_HOME``. With ``PREFECT_HOME`` set, the commands look there only.
Without it they look in Prefect's default (``~/.prefect``) and in ``./.arcticqa/prefect``, the
``PREFECT_HOME`` the Makefile gives ``make demo`` (so the demo's Prefect database stays in the
project and ``make clean`` removes it): after ``make demo``, ``arcticqa prefect status`` run in the
same folder finds the demo's server.
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from arcticqa.cli.app import app, console, handle_errors

__all__ = ["prefect_homes", "MAKE_PREFECT_HOME"]

#: the PREFECT_HOME the Makefile sets (relative to the project folder `make` runs in)
MAKE_PREFECT_HOME = Path(".arcticqa") / "prefect"

prefect_app = typer.Typer(help="The Prefect API server `arcticqa build` starts and later builds reuse "
                          "([prefect] server = \"shared\").", no_args_is_help=True)
app.add_typer(prefect_app, name="prefect")


def prefect_homes() -> list[Path]:
    """Where to look for a shared server: ``$PREFECT_HOME`` when set; else ``~/.prefect`` and, when it
    exists, ``./.arcticqa/prefect`` (``make demo``'s)."""
    # imported here: the other commands never need the flows package
    from flows.prefect_server import prefect_home

    homes = [prefect_home()]
    project = (Path.cwd() / MAKE_PREFECT_HOME).resolve()
    if not os.environ.get("PREFECT_HOME") and project.is_dir() and project not in homes:
        homes.append(project)
    return homes


def _where(homes: list[Path]) -> str:
    return " or ".join(f"PREFECT_HOME={h}" for h in homes)


@prefect_app.command("status")
@handle_errors
def status() -> None:
    """Show the shared server of this PREFECT_HOME (without one set: of ~/.prefect and of
    ./.arcticqa/prefect, make demo's); exit 1 if none is running."""
    # imported here: the other commands never need the flows package
    from flows.prefect_server import running_server

    homes = prefect_homes()
    found = [(home, server) for home in homes if (server := running_server(home)) is not None]
    if not found:
        console.print(f"no shared Prefect server for {_where(homes)}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    for home, server in found:
        console.print(f"shared Prefect server: pid {server.pid}, PREFECT_API_URL={server.api_url} "
                      f"(PREFECT_HOME={home})", highlight=False, soft_wrap=True)


@prefect_app.command("stop")
@handle_errors
def stop() -> None:
    """Stop the shared server of this PREFECT_HOME (without one set: of ~/.prefect and of
    ./.arcticqa/prefect, make demo's); nothing to do if none is running."""
    # imported here: the other commands never need the flows package
    from flows.prefect_server import stop_server

    homes = prefect_homes()
    stopped = [(home, server) for home in homes if (server := stop_server(home)) is not None]
    if not stopped:
        console.print(f"no shared Prefect server was running for {_where(homes)}", highlight=False, soft_wrap=True)
    for home, server in stopped:
        console.print(f"stopped the shared Prefect server (pid {server.pid}, {server.api_url}, PREFECT_HOME={home})",
                      highlight=False, soft_wrap=True)
