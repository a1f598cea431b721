"""The evidence store: SQLModel tables, migrations, and the one write path."""

from arcticqa.store.store import Store, open_existing_store, open_store

__all__ = ["Store", "open_store", "open_existing_store"]
