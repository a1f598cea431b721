"""CLI command ``standin``: the offline roles behind an OpenAI-compatible endpoint on this machine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from arcticqa.cli.app import app, console, handle_errors

__all__: list[str] = []


@app.command()
@handle_errors
def standin(
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0: any free port).")] = 8788,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    latency: Annotated[float, typer.Option("--latency", min=0.0, help="Seconds added to every answer.")] = 0.0,
    toml_out: Annotated[Path | None, typer.Option(
        "--toml-out", help="Also write the [models] and [roles] TOML pointing at this endpoint to this file.")] = None,
    red_team: Annotated[int | None, typer.Option(
        "--red-team", metavar="SEED", help="Plant one defect per candidate item, seeded (docs/red-team.md).")] = None,
    classes: Annotated[str | None, typer.Option(
        "--classes", help="With --red-team: only these defect classes, separated by commas.")] = None,
    plants: Annotated[Path | None, typer.Option(
        "--plants", help="With --red-team: write every plant as JSON lines to this file (rewritten as they come).")
    ] = None,
) -> None:
    """Serve the offline roles over the OpenAI chat-completions protocol until Ctrl-C.

    Point a config's base_url at it to run a build end to end through the real openai + instructor
    clients without a key; with model = "offline-baseline" the release's items equal the offline
    build's byte for byte. docs/offline-provider.md, "Over the wire".
    """
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.errors import ConfigError
    from arcticqa.standins.passthrough import Call, OfflineOverWire, Tamper, models_toml
    from arcticqa.standins.redteam import RedTeam
    from arcticqa.standins.replies import Response
    from arcticqa.standins.server import FakeOpenAIServer

    if red_team is None and (classes or plants):
        raise ConfigError("--classes and --plants go with --red-team SEED")
    tamper: Tamper | None = None
    if red_team is not None:
        try:
            team = RedTeam(red_team, [c.strip() for c in classes.split(",") if c.strip()] if classes else None)
        except ValueError as exc:
            raise ConfigError(f"--classes: {exc}") from None

        def tamper(call: Call) -> Response | None:
            sent = team(call)
            if plants is not None and sent is not None:
                team.write_log(plants)
            return sent

    with FakeOpenAIServer(OfflineOverWire(tamper=tamper), host=host, port=port, latency=latency,
                          keep_requests=False) as server:
        url = f"http://{host}:{server.port}/v1"
        snippet = models_toml(url)
        if toml_out is not None:
            tmp = toml_out.with_name(toml_out.name + ".tmp")
            tmp.write_text(snippet, encoding="utf-8")
            tmp.replace(toml_out)
        mode = f", red team seed {red_team}" if red_team is not None else ""
        console.print(f"serving the offline roles at {url}{mode} (Ctrl-C stops)\n")
        console.print("add to your config, in place of its [models] and [roles]:\n")
        console.print(snippet)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            planted = f", {len(team.plants)} defect(s) planted" if red_team is not None else ""
            console.print(f"stopped after {server.completions} completion(s){planted}")
