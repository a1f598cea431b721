"""Offline source ``s2-datasets:DIR``: Semantic Scholar Datasets bulk files, mapped to Graph-API shape.

For users who outgrow the search API. ``DIR`` holds ``papers*.jsonl[.gz]`` and
``abstracts*.jsonl[.gz]`` shards as downloaded from the S2 Datasets API. The two are joined on
``corpusid``; Datasets field names (all lower case) are mapped to the Graph API names that
:class:`~arcticqa.papers.PaperRecord` uses, so the records follow the same downstream path as
search results. Abstracts are indexed in memory: pre-filter huge shards before pointing this at
them.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any, cast

from arcticqa.errors import InputError
from arcticqa.sources.records import INVALID_RECORD, RawRecord, SourcePage, parse_record

__all__ = ["read_s2_dataset_pages", "map_dataset_paper", "dataset_files"]

_PAPER_URL = re.compile(r"semanticscholar\.org/paper/(?:[^/]+/)?([0-9a-f]{40})")


def _open(path: Path) -> IO[bytes]:
    if path.name.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "rb"))
    return path.open("rb")


def dataset_files(directory: Path, kind: str) -> list[Path]:
    """The ``kind`` shards (``papers`` or ``abstracts``) of a Datasets directory, sorted by name."""
    return sorted(p for p in directory.iterdir()
                  if p.is_file() and p.name.startswith(kind)
                  and (p.name.endswith(".jsonl") or p.name.endswith(".jsonl.gz")))


def _load_abstracts(files: list[Path]) -> dict[int, dict[str, Any]]:
    index: dict[int, dict[str, Any]] = {}
    for path in files:
        try:
            with _open(path) as fh:
                for raw in fh:
                    try:
                        obj = json.loads(raw.decode("utf-8"))
                    except (UnicodeDecodeError, json.JSONDecodeError):
                        # An unreadable abstract only costs that paper its abstract; the prefilter
                        # then says "no abstract" rather than the whole source failing.
                        continue
                    if isinstance(obj, dict) and isinstance(obj.get("corpusid"), int):
                        index[obj["corpusid"]] = obj
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read abstracts shard: {exc}", path=str(path)) from exc
    return index


def map_dataset_paper(paper: dict[str, Any], abstract: dict[str, Any] | None) -> dict[str, Any]:
    """One Datasets ``papers`` row (+ its ``abstracts`` row) in Graph-API field names."""
    corpus_id = paper.get("corpusid")
    url = paper.get("url") or ""
    match = _PAPER_URL.search(url) if isinstance(url, str) else None
    paper_id = match.group(1) if match else (f"CorpusId:{corpus_id}" if corpus_id is not None else None)
    external = paper.get("externalids") or {}
    external_ids = {k: v for k, v in external.items() if v is not None} if isinstance(external, dict) else None
    s2fos = paper.get("s2fieldsofstudy") or []
    fields_of_study = sorted({str(f["category"]) for f in s2fos
                              if isinstance(f, dict) and f.get("source") == "external"
                              and f.get("category")}) if isinstance(s2fos, list) else []
    oa_info = (abstract or {}).get("openaccessinfo") or {}
    oa_pdf = None
    if isinstance(oa_info, dict) and oa_info.get("url"):
        oa_pdf = {"url": oa_info.get("url"), "status": oa_info.get("status"),
                  "license": oa_info.get("license")}
    mapped: dict[str, Any] = {
        "paperId": paper_id,
        "corpusId": corpus_id,
        "externalIds": external_ids,
        "title": paper.get("title"),
        "abstract": (abstract or {}).get("abstract"),
        "year": paper.get("year"),
        "publicationDate": paper.get("publicationdate"),
        "venue": paper.get("venue"),
        "journal": paper.get("journal"),
        "publicationTypes": paper.get("publicationtypes"),
        "fieldsOfStudy": fields_of_study or None,
        "s2FieldsOfStudy": s2fos or None,
        "isOpenAccess": paper.get("isopenaccess"),
        "openAccessPdf": oa_pdf,
    }
    return mapped


def _parse_token(token: str | None, files: list[Path], directory: Path) -> tuple[int, int]:
    """(file index, first line) of a ``file:NAME:line:N`` token."""
    if token is None:
        return 0, 1
    parts = token.split(":")
    names = [p.name for p in files]
    if len(parts) != 4 or parts[0] != "file" or parts[2] != "line" or not parts[3].isdigit() \
            or parts[1] not in names:
        raise InputError(f"stored resume token {token!r} does not match the Datasets shards here",
                         path=str(directory))
    return names.index(parts[1]), int(parts[3])


def read_s2_dataset_pages(directory: Path, *, query: str, start_token: str | None, start_page: int,
                          page_size: int, clock: Callable[[], datetime]) -> Iterator[SourcePage]:
    """Yield pages of mapped records, ``page_size`` papers lines per page, resumable by token."""
    if not directory.is_dir():
        raise InputError("S2 Datasets directory not found", path=str(directory))
    papers = dataset_files(directory, "papers")
    if not papers:
        raise InputError("no papers*.jsonl[.gz] shards in the S2 Datasets directory",
                         path=str(directory))
    abstracts = _load_abstracts(dataset_files(directory, "abstracts"))
    file_index, first_line = _parse_token(start_token, papers, directory)
    page_no, token_in = start_page, start_token
    records: list[RawRecord] = []
    lines_in_page = 0
    fetched_at = clock()
    for index in range(file_index, len(papers)):
        path = papers[index]
        origin = str(path.resolve())
        skip_until = first_line if index == file_index else 1
        try:
            with _open(path) as fh:
                for lineno, raw in enumerate(fh, start=1):
                    if lineno < skip_until:
                        continue
                    record = _dataset_record(raw, abstracts, query=query, page=page_no,
                                             fetched_at=fetched_at, origin=origin, line=lineno)
                    if record is not None:
                        records.append(record)
                    lines_in_page += 1
                    if lines_in_page >= page_size:
                        token_out = f"file:{path.name}:line:{lineno + 1}"
                        yield SourcePage(page=page_no, token_in=token_in, token_out=token_out,
                                         records=records)
                        page_no, token_in, records, lines_in_page = page_no + 1, token_out, [], 0
                        fetched_at = clock()
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read papers shard: {exc}", path=str(path)) from exc
    yield SourcePage(page=page_no, token_in=token_in, token_out=None, records=records)


def _dataset_record(raw: bytes, abstracts: dict[int, dict[str, Any]], *, query: str, page: int,
                    fetched_at: datetime, origin: str, line: int) -> RawRecord | None:
    def rejected(message: str, field: str | None = None) -> RawRecord:
        return RawRecord(query=query, page=page, fetched_at=fetched_at, origin=origin, line=line,
                         rejection=INVALID_RECORD.reject(f"{origin}:{line}: {message}", origin=origin,
                                                         line=line, field=field))

    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        return rejected(f"not valid UTF-8 (byte {exc.start} of the line)")
    if not text:
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return rejected(f"invalid JSON: {exc.msg} (column {exc.colno})")
    if not isinstance(obj, dict):
        return rejected(f"record is a JSON {type(obj).__name__}, not an object")
    if not isinstance(obj.get("corpusid"), int):
        return rejected("missing or non-integer corpusid", field="corpusid")
    mapped = map_dataset_paper(obj, abstracts.get(obj["corpusid"]))
    record = parse_record(mapped, query=query, page=page, fetched_at=fetched_at, origin=origin,
                          line=line)
    # Keep the row as the Datasets file had it, not our mapping, so provenance is exact.
    return record.model_copy(update={"raw": obj})
