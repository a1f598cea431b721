"""Full text: PDF acquisition (fetch, ingest), extraction into evidence spans, and a fixture PDF writer."""
