"""``python -m arcticqa`` runs the command line."""

from arcticqa.cli import main

main()
