"""Alembic environment: runs against the connection the store hands over (no alembic.ini)."""

from __future__ import annotations

from alembic import context
from sqlmodel import SQLModel

import arcticqa.store.tables  # noqa: F401  (registers every table on SQLModel.metadata)

target_metadata = SQLModel.metadata
connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("arcticqa migrations run through arcticqa.store.Store.migrate()")
context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
