"""CLI commands: text (filled in by its issue)."""
