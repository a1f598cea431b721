"""CLI commands for the Prefect API server builds share: ``arcticqa prefect start|status|stop``.

``start`` is how its start-up leaves the build's critical path, as ``prefect server start`` does for
Prefect users: run it once (``make demo`` does, first), and every build after it finds the server
answering. A build that finds none starts one itself and waits for it.

A server belongs to a ``PREFECT_HOME``. With ``PREFECT_HOME`` set, the commands look there only.
Without it they look in Prefect's default (``~/.prefect``) and in ``./.arcticqa/prefect``, the
``PREFECT_HOME`` the Makefile gives ``make demo`` (so the demo's Prefect database stays in the
project and ``make clean`` removes it): after ``make demo``, ``arcticqa prefect status`` run in the
same folder finds the demo's server.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

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


@prefect_app.command("start")
@handle_errors
def start(
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until it answers (default), or return "
                                       "once it is starting: a build started meanwhile waits for it.")] = True,
    idle_shutdown: Annotated[float | None, typer.Option(
        "--idle-shutdown", min=1, help="Seconds without a request or a build after which it stops (default: "
        "[prefect] idle_shutdown_s's default, 900).")] = None,
) -> None:
    """Start the shared Prefect server of this PREFECT_HOME ahead of the builds that use it (nothing
    to do if one is running); it stops by itself when idle, or on `arcticqa prefect stop`."""
    import time

    # imported here: the other commands never need the flows package, and this one no Prefect
    from arcticqa.config import PrefectSettings
    from flows.prefect_server import (
        prefect_home,
        running_server,
        start_server,
        startup_timeout_s,
        wait_for_server,
        waiting_line,
    )

    api = os.environ.get("PREFECT_API_URL")
    if api:  # a server of the user's own: the builds report there and start none
        console.print(f"PREFECT_API_URL={api} is set: builds use that server, so there is none to start",
                      highlight=False, soft_wrap=True)
        return
    home = prefect_home()
    idle = idle_shutdown if idle_shutdown is not None else PrefectSettings().idle_shutdown_s
    found = running_server(home)
    if found is not None:
        console.print(f"shared Prefect server already running: pid {found.pid}, PREFECT_API_URL={found.api_url}, "
                      f"UI {found.ui_url} (PREFECT_HOME={home})", highlight=False, soft_wrap=True)
        return
    started = time.monotonic()
    server, new = start_server(idle, home)
    if not wait:
        console.print(f"shared Prefect server {'starting' if new else 'already starting'}: pid {server.pid}, "
                      f"PREFECT_API_URL={server.api_url} (PREFECT_HOME={home}); a build started now waits for it",
                      highlight=False, soft_wrap=True)
        return
    with waiting_line(server, advice=False) as waiting:
        server = wait_for_server(server, idle, timeout_s=startup_timeout_s(), home=home, waiting=waiting)
    console.print(f"shared Prefect server answering after {time.monotonic() - started:.1f} s: pid {server.pid}, "
                  f"PREFECT_API_URL={server.api_url}, UI {server.ui_url} (PREFECT_HOME={home}); builds with this "
                  f"PREFECT_HOME use it, until {idle:.0f} s without one, or `arcticqa prefect stop`",
                  highlight=False, soft_wrap=True)


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
        console.print(f"shared Prefect server: pid {server.pid}, PREFECT_API_URL={server.api_url}, UI {server.ui_url} "
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
