"""CLI commands: eligibility (filled in by its issue)."""
