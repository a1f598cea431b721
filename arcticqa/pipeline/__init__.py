"""Wiring stages to the store: the runner, the stage adapters and the build plan.

Stage modules (``arcticqa/stages/``) are pure; this package loads their inputs from the store,
records their results, and decides what still needs to run. ``flows/`` adds Prefect on top.
"""

__all__: list[str] = []  # nothing re-exported: import the submodule by name
