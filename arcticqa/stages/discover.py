"""Stage ``discover``: find candidate papers and record every raw record with its provenance.

Sources (``--source``):

* ``s2`` — Semantic Scholar bulk search, one request per page, through the ``semanticscholar``
  package (see :mod:`arcticqa.sources.s2_api` for the client pitfalls handled);
* ``snapshot:PATH`` — a JSONL of S2-shaped paper records (the shipped sample corpus);
* ``s2-datasets:DIR`` — S2 Datasets ``papers``/``abstracts`` shards.

Every page goes through a :class:`DiscoveryCheckpoint` together with its continuation token, so
an interrupted discovery resumes from the last stored page. :func:`deduplicate` then collapses
the raw records to papers (by paperId, DOI, normalised title + year) and groups preprints with
their published versions into paper families. The stage never touches a database itself.
"""

from __future__ import annotations

import hashlib
import logging
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from arcticqa.config import DiscoverySettings
from arcticqa.errors import ConfigError, InputError, S2RequestError, S2TokenRejected
from arcticqa.papers import S2_FIELDS, PaperRecord
from arcticqa.sources.ratelimit import RateLimiter
from arcticqa.sources.records import RawRecord, SourcePage, parse_record
from arcticqa.sources.s2_api import (
    RetryPolicy,
    S2Client,
    ServerFilters,
)
from arcticqa.sources.s2_datasets import read_s2_dataset_pages
from arcticqa.sources.snapshot import read_snapshot_pages

__all__ = [
    "DEFAULT_KEYWORDS_PATH",
    "SourceSpec",
    "parse_source",
    "load_queries",
    "keywords_path",
    "DiscoveryOptions",
    "DiscoveryCheckpoint",
    "InMemoryCheckpoint",
    "QueryOutcome",
    "DiscoveryResult",
    "discover",
    "checkpoint_key",
    "Duplicate",
    "DedupResult",
    "Deduplicator",
    "deduplicate",
    "normalise_title",
    "is_preprint",
    "family_id_for",
    "ServerFilters",
]

log = logging.getLogger(__name__)

_REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_KEYWORDS_PATH = _REPO_ROOT / "data" / "keywords" / "arctic.txt"


# --------------------------------------------------------------------------- sources and queries


@dataclass(frozen=True)
class SourceSpec:
    kind: Literal["s2", "snapshot", "s2-datasets"]
    path: Path | None = None

    def __str__(self) -> str:
        return self.kind if self.path is None else f"{self.kind}:{self.path}"


def _resolve(path_text: str, base_dir: Path | None) -> Path:
    path = Path(path_text).expanduser()
    if path.is_absolute():
        return path
    candidate = (base_dir or Path.cwd()) / path
    if candidate.exists():
        return candidate.resolve()
    # The default source names a file shipped in the repo's data/; find it from any cwd.
    shipped = _REPO_ROOT / path
    return shipped.resolve() if shipped.exists() else candidate.resolve()


def parse_source(spec: str, *, base_dir: Path | None = None) -> SourceSpec:
    """Parse ``s2``, ``snapshot:PATH`` or ``s2-datasets:DIR``; relative paths resolve against ``base_dir``."""
    kind, sep, rest = spec.strip().partition(":")
    if kind == "s2" and not sep:
        return SourceSpec("s2")
    if kind in ("snapshot", "s2-datasets"):
        if not rest:
            raise ConfigError(f"source {spec!r}: '{kind}:' needs a path, e.g. '{kind}:data/x'")
        return SourceSpec(kind, _resolve(rest, base_dir))  # type: ignore[arg-type]
    raise ConfigError(f"unknown source {spec!r}: expected 's2', 'snapshot:PATH' or 's2-datasets:DIR'")


def _check_query(query: str, *, path: Path, line: int) -> None:
    if query.count('"') % 2:
        raise InputError("unbalanced double quote in query", path=str(path), line=line, field="query")
    depth = 0
    for char in query:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        raise InputError("unbalanced parentheses in query", path=str(path), line=line, field="query")


def keywords_path(path: Path | str | None = None) -> Path:
    """The keyword file :func:`load_queries` reads for ``path``: a relative path from the working
    folder, else from the shipped data/ (as a source's path is), so the default
    data/keywords/arctic.txt is found from any folder."""
    return _resolve(str(path), None) if path is not None else DEFAULT_KEYWORDS_PATH


def load_queries(path: Path | str | None = None) -> list[str]:
    """Read a keyword file: one S2 bulk-search query per line, ``#`` comments and blank lines ignored.

    Duplicate queries are dropped (first kept). Raises :class:`InputError` naming file and line.
    """
    file = keywords_path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise InputError("keyword file not found", path=str(path if path is not None else file)) from None
    except OSError as exc:
        raise InputError(f"cannot read keyword file: {exc.strerror}", path=str(file)) from exc
    queries: list[str] = []
    for lineno, raw in enumerate(data.splitlines(), start=1):
        try:
            text = raw.decode("utf-8").lstrip("\ufeff").strip()
        except UnicodeDecodeError as exc:
            raise InputError(f"not valid UTF-8 (byte {exc.start} of the line)", path=str(file),
                             line=lineno) from None
        if not text or text.startswith("#"):
            continue
        _check_query(text, path=file, line=lineno)
        if text not in queries:
            queries.append(text)
    if not queries:
        raise InputError("keyword file has no queries (only blank or '#' lines)", path=str(file))
    return queries


# --------------------------------------------------------------------------- options and checkpoint


class DiscoveryOptions(BaseModel):
    """Everything ``discover`` needs besides the queries; defaults are the production values."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    api_url: str | None = None  # None: the library's default (https://api.semanticscholar.org)
    #: the key itself, read from the environment by the settings (:meth:`DiscoverySettings.api_key`)
    api_key: SecretStr | None = None
    #: requests per second; None means 1/s with an API key and 1 every 3 s without
    rate_per_s: float | None = None
    timeout_s: float = 30.0
    max_attempts: int = Field(6, ge=1)
    backoff_initial_s: float = Field(2.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    retry_after_cap_s: float = Field(300.0, ge=0)
    #: how many times a query restarts from page 1 when the server rejects its stored token
    max_token_restarts: int = Field(1, ge=0)
    #: lines per page for file sources (the live API decides its own page size, up to 1,000)
    page_size: int = Field(500, ge=1)
    server_filters: ServerFilters = Field(default_factory=ServerFilters)
    fields: tuple[str, ...] = S2_FIELDS
    base_dir: Path | None = None  # where relative source paths resolve (default: cwd, then repo)
    #: stop after this many pages in this call (None: no limit) — for batching and tests
    max_pages: int | None = Field(None, ge=1)
    #: keep this call's records in :attr:`DiscoveryResult.records`; a caller whose checkpoint
    #: stores them (the build) says False, so discovery holds one page at a time
    keep_records: bool = True

    @classmethod
    def from_settings(cls, settings: DiscoverySettings, **more: Any) -> DiscoveryOptions:
        """The options ``[discovery]`` sets (``more``: the rest, e.g. the server filters)."""
        key = settings.api_key()
        return cls(api_url=settings.api_url, api_key=SecretStr(key) if key else None,
                   rate_per_s=settings.rate_per_s, timeout_s=settings.timeout_s,
                   max_attempts=settings.max_attempts, page_size=settings.page_size, **more)

    def effective_rate(self) -> float:
        if self.rate_per_s is not None:
            return self.rate_per_s
        return 1.0 if self.api_key else 1.0 / 3.0


class DiscoveryCheckpoint(Protocol):
    """Where discovery persists pages and finds its resume point. The store implements this.

    ``key`` identifies one resumable stream (see :func:`checkpoint_key`). ``record_page`` must
    store the records and the page's tokens atomically: a page is either fully recorded (and
    its ``token_out`` is the new resume point) or not at all. ``token_out=None`` marks the
    stream done.
    """

    def resume_token(self, key: str) -> str | None:
        """``token_out`` of the last recorded page, or None (not started, or done)."""
        ...

    def pages_recorded(self, key: str) -> int:
        """How many pages of ``key`` are recorded (the next page is numbered this + 1)."""
        ...

    def is_done(self, key: str) -> bool:
        ...

    def record_page(self, key: str, page_no: int, token_in: str | None, token_out: str | None,
                    records: list[RawRecord], fetched_at: datetime) -> None:
        ...


@dataclass
class _Stream:
    pages: list[tuple[int, str | None, str | None, datetime]] = field(default_factory=list)
    records: list[RawRecord] = field(default_factory=list)
    done: bool = False


class InMemoryCheckpoint:
    """A :class:`DiscoveryCheckpoint` in a dict: for tests and one-shot runs."""

    def __init__(self) -> None:
        self.streams: dict[str, _Stream] = {}

    def resume_token(self, key: str) -> str | None:
        stream = self.streams.get(key)
        if stream is None or stream.done or not stream.pages:
            return None
        return stream.pages[-1][2]

    def pages_recorded(self, key: str) -> int:
        stream = self.streams.get(key)
        return len(stream.pages) if stream else 0

    def is_done(self, key: str) -> bool:
        stream = self.streams.get(key)
        return bool(stream and stream.done)

    def record_page(self, key: str, page_no: int, token_in: str | None, token_out: str | None,
                    records: list[RawRecord], fetched_at: datetime) -> None:
        stream = self.streams.setdefault(key, _Stream())
        stream.pages.append((page_no, token_in, token_out, fetched_at))
        stream.records.extend(records)
        stream.done = token_out is None

    def all_records(self) -> list[RawRecord]:
        return [r for s in self.streams.values() for r in s.records]


def checkpoint_key(source: SourceSpec, query: str | None, filters: ServerFilters | None = None) -> str:
    """The resumable-stream key: the source plus, for search, the query and a digest of its filters.

    Filters are part of the key because a continuation token is only valid for the request it
    came from; changing the policy starts the query afresh instead of resuming a wrong stream.
    """
    if source.kind != "s2":
        return str(source)
    filters = filters or ServerFilters()
    digest = hashlib.sha256(repr(filters).encode()).hexdigest()[:10]
    return f"s2:{query} #filters={digest}"


# --------------------------------------------------------------------------- running discovery


class QueryOutcome(BaseModel):
    key: str
    query: str
    status: Literal["done", "already_done", "paused", "failed"]
    pages: int = 0  # pages recorded in this call
    records: int = 0
    invalid: int = 0
    total: int | None = None  # the source's estimate, if it gave one
    token_restarts: int = 0
    error: str | None = None


class DiscoveryResult(BaseModel):
    source: str
    outcomes: list[QueryOutcome]
    records: list[RawRecord]  # recorded in this call only (if ``keep_records``); earlier pages are in the checkpoint
    requests: int = 0  # HTTP attempts, retries included (0 for file sources)

    @property
    def complete(self) -> bool:
        return all(o.status in ("done", "already_done") for o in self.outcomes)

    @property
    def failed(self) -> list[QueryOutcome]:
        return [o for o in self.outcomes if o.status == "failed"]

    @property
    def recorded(self) -> int:
        """Records recorded in this call, invalid ones included (kept in :attr:`records` or not)."""
        return sum(o.records + o.invalid for o in self.outcomes)


def _now() -> datetime:
    return datetime.now(UTC)


async def discover(queries: list[str], *, source: str, checkpoint: DiscoveryCheckpoint,
                   options: DiscoveryOptions | None = None,
                   clock: Callable[[], datetime] = _now) -> DiscoveryResult:
    """Fetch (or read) every page not yet recorded, recording each through ``checkpoint``.

    For ``s2`` each query is a stream; a query that still fails after the retries is reported
    as ``failed`` (and resumes from its last good page next time) while the others go on. File
    sources ignore ``queries``: the whole file is the candidate set and the prefilter's
    Arctic-relevance rule does the keyword work. Bad records are recorded as rejected raw
    records, never raised. Raises :class:`ConfigError` for a bad source spec or refused key,
    :class:`InputError` for a missing or unreadable source file.
    """
    options = options or DiscoveryOptions()
    spec = parse_source(source, base_dir=options.base_dir)
    if spec.kind == "s2":
        return await _discover_s2(queries, spec, checkpoint, options, clock)
    return _discover_file(spec, checkpoint, options, clock)


def _discover_file(spec: SourceSpec, checkpoint: DiscoveryCheckpoint, options: DiscoveryOptions,
                   clock: Callable[[], datetime]) -> DiscoveryResult:
    key = checkpoint_key(spec, None)
    outcome = QueryOutcome(key=key, query=str(spec), status="done")
    recorded: list[RawRecord] = []
    if checkpoint.is_done(key):
        outcome.status = "already_done"
        return DiscoveryResult(source=str(spec), outcomes=[outcome], records=recorded)
    assert spec.path is not None
    start_page = checkpoint.pages_recorded(key) + 1
    start_token = checkpoint.resume_token(key) if start_page > 1 else None
    reader: Iterator[SourcePage]
    if spec.kind == "snapshot":
        reader = read_snapshot_pages(spec.path, query=str(spec), start_token=start_token,
                                     start_page=start_page, page_size=options.page_size, clock=clock)
    else:
        reader = read_s2_dataset_pages(spec.path, query=str(spec), start_token=start_token,
                                       start_page=start_page, page_size=options.page_size, clock=clock)
    for page in reader:
        fetched_at = page.records[0].fetched_at if page.records else clock()
        checkpoint.record_page(key, page.page, page.token_in, page.token_out, page.records, fetched_at)
        _count(outcome, page)
        if options.keep_records:
            recorded.extend(page.records)
        if page.token_out is not None and options.max_pages is not None \
                and outcome.pages >= options.max_pages:
            outcome.status = "paused"
            break
    return DiscoveryResult(source=str(spec), outcomes=[outcome], records=recorded)


def _count(outcome: QueryOutcome, page: SourcePage) -> None:
    outcome.pages += 1
    outcome.records += sum(1 for r in page.records if r.paper is not None)
    outcome.invalid += sum(1 for r in page.records if r.paper is None)


async def _discover_s2(queries: list[str], spec: SourceSpec, checkpoint: DiscoveryCheckpoint,
                       options: DiscoveryOptions, clock: Callable[[], datetime]) -> DiscoveryResult:
    if not queries:
        raise ConfigError("discovery from 's2' needs at least one query")
    client = S2Client(
        api_url=options.api_url, api_key=options.api_key.get_secret_value() if options.api_key else None, timeout_s=options.timeout_s,
        limiter=RateLimiter(options.effective_rate()),
        retry=RetryPolicy(max_attempts=options.max_attempts,
                          backoff_initial_s=options.backoff_initial_s,
                          backoff_max_s=options.backoff_max_s,
                          retry_after_cap_s=options.retry_after_cap_s))
    outcomes: list[QueryOutcome] = []
    recorded: list[RawRecord] = []
    pages_left = options.max_pages
    for query in queries:
        key = checkpoint_key(spec, query, options.server_filters)
        outcome = QueryOutcome(key=key, query=query, status="done")
        outcomes.append(outcome)
        if checkpoint.is_done(key):
            outcome.status = "already_done"
            continue
        if pages_left is not None and pages_left <= 0:
            outcome.status = "paused"
            continue
        page_no = checkpoint.pages_recorded(key) + 1
        token = checkpoint.resume_token(key) if page_no > 1 else None
        while True:
            try:
                bulk = await client.bulk_page(query, token, fields=options.fields,
                                              filters=options.server_filters)
            except S2TokenRejected as exc:
                if outcome.token_restarts >= options.max_token_restarts:
                    outcome.status, outcome.error = "failed", str(exc)
                    break
                # An expired token cannot be repaired; restarting the query re-fetches pages we
                # already hold, which deduplication absorbs.
                log.warning("query %r: continuation token rejected, restarting from page 1", query)
                outcome.token_restarts += 1
                token = None
                continue
            except S2RequestError as exc:
                outcome.status, outcome.error = "failed", str(exc)
                break
            fetched_at = clock()
            records = [parse_record(raw, query=query, page=page_no, fetched_at=fetched_at, origin="s2")
                       for raw in bulk.data]
            page = SourcePage(page=page_no, token_in=token, token_out=bulk.token, records=records,
                              total=bulk.total)
            checkpoint.record_page(key, page_no, token, bulk.token, records, fetched_at)
            _count(outcome, page)
            outcome.total = bulk.total if bulk.total is not None else outcome.total
            if options.keep_records:
                recorded.extend(records)
            if pages_left is not None:
                pages_left -= 1
            if bulk.token is None:
                break
            token, page_no = bulk.token, page_no + 1
            if pages_left is not None and pages_left <= 0:
                outcome.status = "paused"
                break
    return DiscoveryResult(source=str(spec), outcomes=outcomes, records=recorded,
                           requests=client.requests)


# --------------------------------------------------------------------------- dedup and families

_PREPRINT_VENUES = re.compile(
    r"arxiv|biorxiv|medrxiv|eartharxiv|ess open archive|essoar|research square|ssrn|preprints\.org"
    r"|egusphere|\bdiscussions\b|\bpreprint",
    re.IGNORECASE,
)
# arXiv, EarthArXiv, ESS Open Archive, Research Square, SSRN, EGUsphere and Copernicus discussion
# papers (10.5194/tc-2020-123 is the discussion; 10.5194/tc-15-1-2021 the final paper).
_PREPRINT_DOI = re.compile(
    r"^10\.(48550|31223|21203|2139|22541)/|^10\.1002/essoar|^10\.5194/egusphere|^10\.5194/[a-z]+-\d{4}-\d+$",
    re.IGNORECASE,
)
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_MIN_TITLE_KEY_CHARS = 20  # shorter titles ("Introduction", "Editorial") collide across papers
_FAMILY_MAX_YEAR_GAP = 4


def normalise_title(title: str | None) -> str:
    """Case-, accent- and punctuation-insensitive title key ('' for no title)."""
    if not title:
        return ""
    text = unicodedata.normalize("NFKD", title)
    text = "".join(c for c in text if not unicodedata.combining(c))
    return _NON_WORD.sub(" ", text.casefold()).strip()


def is_preprint(paper: PaperRecord) -> bool:
    """Whether a record is a preprint-server version (venue/journal name, DOI prefix, arXiv-only ids)."""
    names = [paper.venue or "", str((paper.journal or {}).get("name") or "")]
    if any(_PREPRINT_VENUES.search(n) for n in names if n):
        return True
    doi = paper.doi
    if doi and _PREPRINT_DOI.search(doi):
        return True
    ids = paper.externalIds or {}
    return bool(ids.get("ArXiv")) and not doi


def family_id_for(anchor_paper_id: str) -> str:
    """Stable family id, derived from the family's anchor (the published version if any)."""
    return "fam-" + hashlib.sha256(f"family:{anchor_paper_id}".encode()).hexdigest()[:16]


class Duplicate(BaseModel):
    record: RawRecord
    duplicate_of: str  # paperId of the kept record
    matched_on: Literal["paper_id", "doi", "title_year"]


class DedupResult(BaseModel):
    kept: list[RawRecord]  # first record seen of each paper, input order
    duplicates: list[Duplicate]
    invalid: list[RawRecord]  # records that never became a PaperRecord
    family_of: dict[str, str]  # kept paperId -> family id

    def families(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for paper_id, fam in self.family_of.items():
            groups.setdefault(fam, []).append(paper_id)
        return groups


def _title_year_key(paper: PaperRecord) -> str | None:
    title = normalise_title(paper.title)
    if len(title) < _MIN_TITLE_KEY_CHARS or paper.year is None:
        return None
    # A preprint and its journal version often share title and year; they are one *family*,
    # not duplicates, so the preprint flag is part of the key.
    return f"{title}|{paper.year}|{'preprint' if is_preprint(paper) else 'version'}"


@dataclass(frozen=True)
class _FamilyKey:
    """What family grouping reads of a kept paper (so a streaming dedup holds this, not the record)."""

    paperId: str  # noqa: N815 - the S2 field name, as :func:`_nearest` reads it from a PaperRecord too
    title: str  # normalised
    year: int | None
    preprint: bool


class Deduplicator:
    """:func:`deduplicate` one record at a time, holding only keys: paper ids, DOIs, title keys and
    what family grouping needs of each kept paper, never the records (discovery streams ~85,000
    of them from the store)."""

    def __init__(self) -> None:
        self.by_id: dict[str, str] = {}
        self.by_doi: dict[str, str] = {}
        self.by_title_year: dict[str, str] = {}
        self._kept: list[_FamilyKey] = []
        self.kept = self.duplicates = self.invalid = 0

    def add(self, record: RawRecord) -> tuple[str, Literal["paper_id", "doi", "title_year"]] | None:
        """Take the next record in arrival order: the kept paper id it duplicates and on what it
        matched, or None (kept, or invalid: ``record.paper`` is None)."""
        paper = record.paper
        if paper is None:
            self.invalid += 1
            return None
        doi, ty = paper.doi, _title_year_key(paper)
        match: tuple[str, Literal["paper_id", "doi", "title_year"]] | None = None
        if paper.paperId in self.by_id:
            match = (self.by_id[paper.paperId], "paper_id")
        elif doi and doi in self.by_doi:
            match = (self.by_doi[doi], "doi")
        elif ty and ty in self.by_title_year:
            match = (self.by_title_year[ty], "title_year")
        owner = match[0] if match else paper.paperId
        self.by_id.setdefault(paper.paperId, owner)
        if doi:
            self.by_doi.setdefault(doi, owner)
        if ty:
            self.by_title_year.setdefault(ty, owner)
        if match:
            self.duplicates += 1
        else:
            self.kept += 1
            title = normalise_title(paper.title)
            self._kept.append(_FamilyKey(paper.paperId, title if len(title) >= _MIN_TITLE_KEY_CHARS else "",
                                         paper.year, is_preprint(paper) if title else False))
        return match

    def families(self) -> dict[str, str]:
        """Kept paper id → family id, once every record is added."""
        return _families(self._kept)

    def settled_family(self) -> str | None:
        """The family of the paper the last :meth:`add` kept, if no later record can change it;
        None for a preprint with a title key (a published version found later takes it in). A
        paper that is not a preprint anchors its own family, which preprints join."""
        last = self._kept[-1]
        return None if last.title and last.preprint else family_id_for(last.paperId)


def deduplicate(records: list[RawRecord]) -> DedupResult:
    """Collapse raw records to papers, then group preprint/published pairs into families.

    A record is a duplicate of an earlier kept one if it shares its paperId, else its DOI
    (case-insensitive), else its normalised title and year (preprints only match preprints,
    others only others); the keys of a duplicate also point
    at the kept record, so matching is transitive. Families are formed among kept papers with
    the same normalised title where at least one is a preprint: each preprint joins the
    non-preprint with the nearest year (within 4 years), preprints without such a partner share
    one family; every other paper is its own family. (:class:`Deduplicator` does the same one
    record at a time.)
    """
    kept: list[RawRecord] = []
    duplicates: list[Duplicate] = []
    invalid: list[RawRecord] = []
    dedup = Deduplicator()
    for record in records:
        match = dedup.add(record)
        if record.paper is None:
            invalid.append(record)
        elif match:
            duplicates.append(Duplicate(record=record, duplicate_of=match[0], matched_on=match[1]))
        else:
            kept.append(record)
    return DedupResult(kept=kept, duplicates=duplicates, invalid=invalid, family_of=dedup.families())


def _families(papers: list[_FamilyKey]) -> dict[str, str]:
    family_of = {p.paperId: family_id_for(p.paperId) for p in papers}
    by_title: dict[str, list[_FamilyKey]] = {}
    for paper in papers:
        if paper.title:
            by_title.setdefault(paper.title, []).append(paper)
    for group in by_title.values():
        preprints = [p for p in group if p.preprint]
        if not preprints or len(group) < 2:
            continue
        published = [p for p in group if not p.preprint]
        orphans: list[_FamilyKey] = []
        for pre in preprints:
            partner = _nearest(pre, published)
            if partner is None:
                orphans.append(pre)
            else:
                family_of[pre.paperId] = family_of[partner.paperId]
        if len(orphans) > 1:
            anchor = min(p.paperId for p in orphans)
            for pre in orphans:
                family_of[pre.paperId] = family_id_for(anchor)
    return family_of


def _nearest(preprint: _FamilyKey, published: list[_FamilyKey]) -> _FamilyKey | None:
    best: tuple[int, str, _FamilyKey] | None = None
    for pub in published:
        if preprint.year is not None and pub.year is not None:
            gap = abs(pub.year - preprint.year)
            if gap > _FAMILY_MAX_YEAR_GAP:
                continue
        else:
            gap = _FAMILY_MAX_YEAR_GAP  # unknown year: acceptable, but any dated match wins
        candidate = (gap, pub.paperId, pub)
        if best is None or candidate[:2] < best[:2]:
            best = candidate
    return best[2] if best else None
