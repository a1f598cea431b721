"""CLI commands for the Prefect API server builds share: ``arcticqa prefect status|stop``."""

from __future__ import annotations

import typer

from arcticqa.cli.app import app, console, handle_errors

__all__: list[str] = []

prefect_app = typer.Typer(help="The Prefect API server `arcticqa build` starts and later builds reuse "
                          "([prefect] server = \"shared\").", no_args_is_help=True)
app.add_typer(prefect_app, name="prefect")


@prefect_app.command("status")
@handle_errors
def status() -> None:
    """Show the shared server of this PREFECT_HOME (exit 1 if none is running)."""
    # imported here: the other commands never need the flows package
    from flows.prefect_server import prefect_home, running_server

    server = running_server()
    if server is None:
        console.print(f"no shared Prefect server for PREFECT_HOME={prefect_home()}")
        raise typer.Exit(1)
    console.print(f"shared Prefect server: pid {server.pid}, PREFECT_API_URL={server.api_url}")


@prefect_app.command("stop")
@handle_errors
def stop() -> None:
    """Stop the shared server of this PREFECT_HOME (nothing to do if none is running)."""
    # imported here: the other commands never need the flows package
    from flows.prefect_server import prefect_home, stop_server

    server = stop_server()
    if server is None:
        console.print(f"no shared Prefect server was running for PREFECT_HOME={prefect_home()}")
    else:
        console.print(f"stopped the shared Prefect server (pid {server.pid}, {server.api_url})")
