"""CLI commands: evaluate (filled in by its issue)."""
