"""CLI commands: build (filled in by its issue)."""
