"""One module per pipeline stage: a plain typed function from pydantic inputs to a typed result,
with no database, no Prefect and no client construction (``arcticqa/pipeline/`` wires them).

Nothing is re-exported: callers import the stage module by name.
"""

__all__: list[str] = []
