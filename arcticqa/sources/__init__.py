"""Paper sources for discovery: the live Semantic Scholar API, a snapshot JSONL, S2 Datasets files.

Each source yields :class:`~arcticqa.sources.records.SourcePage` objects of
:class:`~arcticqa.sources.records.RawRecord`; the ``discover`` stage persists them through a
checkpoint and deduplicates them. See docs/discovery.md.
"""

from arcticqa.sources.records import INVALID_RECORD, RawRecord, SourcePage, parse_record, resolve_local_pdf

__all__ = ["INVALID_RECORD", "RawRecord", "SourcePage", "parse_record", "resolve_local_pdf"]
