"""Benchmarks: run them all with ``python -m bench`` (``--quick`` for a smoke run).

Not run in CI: every figure depends on the machine. ``docs/performance.md`` records them.
"""
