"""``python -m arcticqa`` runs the command line."""

from arcticqa.cli import main

__all__: list[str] = []

main()
