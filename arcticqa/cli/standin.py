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
) -> None:
    """Serve the offline roles over the OpenAI chat-completions protocol until Ctrl-C.

    Point a config's base_url at it to run a build end to end through the real openai + instructor
    clients without a key; with model = "offline-baseline" the release's items equal the offline
    build's byte for byte. docs/offline-provider.md, "Over the wire".
    """
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.standins.passthrough import OfflineOverWire, models_toml
    from arcticqa.standins.server import FakeOpenAIServer

    with FakeOpenAIServer(OfflineOverWire(), host=host, port=port, latency=latency, keep_requests=False) as server:
        url = f"http://{host}:{server.port}/v1"
        snippet = models_toml(url)
        if toml_out is not None:
            tmp = toml_out.with_name(toml_out.name + ".tmp")
            tmp.write_text(snippet, encoding="utf-8")
            tmp.replace(toml_out)
        console.print(f"serving the offline roles at {url} (Ctrl-C stops)\n")
        console.print("add to your config, in place of its [models] and [roles]:\n")
        console.print(snippet)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            console.print(f"stopped after {server.completions} completion(s)")
