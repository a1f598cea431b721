"""Full text: PDF acquisition (fetch, ingest), extraction into evidence spans, and a fixture PDF writer."""

__all__: list[str] = []  # nothing re-exported: import the submodule by name
