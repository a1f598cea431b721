"""CLI commands for full text: ``extract-text`` (inspect one PDF) and ``ingest-pdfs``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from arcticqa.cli.app import ConfigOption, Text, app, console, handle_errors, load_cli_settings
from arcticqa.errors import InputError

__all__ = ["extract_text_command", "ingest_pdfs_command", "BAD_INPUT_STATUSES"]


#: the file itself is unusable (exit 2, like any bad input); other failures are a readable PDF that
#: gave no text within the limits (no_text_layer, timeout, too_many_pages: exit 1)
BAD_INPUT_STATUSES = frozenset({"not_pdf", "corrupt", "encrypted", "empty"})


@app.command("extract-text")
@handle_errors
def extract_text_command(
    file: Annotated[Path, typer.Argument(help="The PDF to extract.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the document as JSON.")] = False,
    max_pages: Annotated[int, typer.Option(help="Page cap.")] = 600,
    time_limit: Annotated[float, typer.Option(help="Time limit in seconds (checked between pages; the "
                                                    "extractor process is killed soon after).")] = 120.0,
    memory_limit: Annotated[int, typer.Option(min=768, help="Memory cap of the extractor process in MB.")] = 2048,
) -> None:
    """Extract one PDF exactly as the extract_text stage does and show the result."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.stages.extract_text import ExtractionLimits, extract_document

    if file.is_dir():
        raise InputError("is a directory; give one PDF file", path=str(file))
    if not file.exists():
        raise InputError("no such file", path=str(file))
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=str(file)) from exc
    document = extract_document(data, ExtractionLimits(max_pages=max_pages, time_limit_s=time_limit,
                                                       memory_limit_mb=memory_limit))
    if as_json:
        payload = {
            "status": document.status,
            "message": document.message,
            "pages": document.pages,
            "sections": [{"title": s.title, "kind": s.kind, "evidence": s.evidence, "start": s.start,
                          "end": s.end} for s in document.sections],
            "spans": [{"id": s.id, "section": s.section, "page": s.page, "start": s.start, "end": s.end,
                       "text": s.text} for s in document.spans],
            "warnings": document.warnings,
            "stats": document.stats,
            "text": document.text,
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=1))
    else:
        from rich.table import Table

        colour = "green" if document.status == "ok" else "red"
        console.print(Text.assemble((str(file), "bold"), ": ", (document.status, colour),
                                    (f" — {document.message}" if document.message else "")
                                    + f", {document.pages} pages"), highlight=False)
        if document.sections:
            table = Table("section", "kind", "evidence", "first words")
            for s in document.sections:
                body = document.text[s.start:s.end]
                if body.startswith(s.title):
                    body = body[len(s.title):]
                table.add_row(s.title[:60], s.kind, "yes" if s.evidence else "no",
                              " ".join(body.split()[:10]))
            console.print(table)
        console.print(f"{len(document.spans)} spans, {len(document.chunks)} chunks, "
                      f"{len(document.text)} characters", highlight=False)
        for warning in document.warnings:
            console.print(Text.assemble(("warning:", "yellow"), f" {warning}"), highlight=False)
    if document.status in BAD_INPUT_STATUSES:
        raise typer.Exit(2)
    if document.status != "ok":
        raise typer.Exit(1)


@app.command("ingest-pdfs")
@handle_errors
def ingest_pdfs_command(
    directory: Annotated[Path, typer.Argument(help="Directory holding the PDFs.")],
    map_csv: Annotated[Path, typer.Option("--map", help="CSV with columns file, and doi or paper_id.")],
    config: ConfigOption = None,
) -> None:
    """Attach local PDFs (from institutional access, say) to papers by DOI or paperId."""
    # imported in the command, not at the top: `arcticqa --help` stays fast
    from arcticqa.pipeline.ingest import attach_pdfs
    from arcticqa.store import open_existing_store
    from arcticqa.text.fetch import pdf_cache_dir
    from arcticqa.text.ingest import ingest_pdfs

    settings = load_cli_settings(config)
    # the papers must already be discovered, so a missing store is found before any PDF is copied
    store = open_existing_store(settings)
    try:
        ingested = ingest_pdfs(directory, map_csv, pdf_cache_dir(settings.build.data_dir))
        attach_pdfs(store, ingested)
    finally:
        store.close()
    console.print(f"attached {len(ingested)} PDFs", highlight=False)
