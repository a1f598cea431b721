"""CLI commands: release (filled in by its issue)."""
