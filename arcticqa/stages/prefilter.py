"""Stage ``prefilter``: a model-free gate on a paper's metadata, driven by a versioned policy file.

:func:`prefilter` applies ``data/policies/metadata.toml`` (or another file, see
:func:`load_metadata_policy`) to one :class:`~arcticqa.papers.PaperRecord` and returns a
:class:`PrefilterDecision`: ``pass`` or ``reject``, every rule that rejected it (all rules are
evaluated, so a record shows all its problems at once), and the policy version and hash.
Geography is not judged here: a keyword hit only says a paper is worth a closer look.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arcticqa.errors import InputError
from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection, rule
from arcticqa.sources.s2_api import ServerFilters

__all__ = [
    "DEFAULT_POLICY_PATH",
    "MetadataPolicy",
    "PrefilterDecision",
    "load_metadata_policy",
    "prefilter",
    "detect_language",
    "arctic_keyword_hits",
    "server_filters_from_policy",
    "MISSING_TITLE",
    "GARBLED_TEXT",
    "YEAR_MISSING",
    "YEAR_OUT_OF_RANGE",
    "PUBLICATION_TYPE_EXCLUDED",
    "NONRESEARCH_TITLE",
    "NO_ABSTRACT",
    "NO_OPEN_ACCESS_PDF",
    "LANGUAGE_NOT_ALLOWED",
    "NOT_ARCTIC_RELEVANT",
]

DEFAULT_POLICY_PATH = Path(__file__).resolve().parents[2] / "data" / "policies" / "metadata.toml"

MISSING_TITLE = rule("prefilter.missing_title", "The record has no title")
GARBLED_TEXT = rule("prefilter.garbled_text",
                    "Title or abstract contains replacement characters, control characters or mojibake")
YEAR_MISSING = rule("prefilter.year_missing", "The record has no publication year")
YEAR_OUT_OF_RANGE = rule("prefilter.year_out_of_range", "Publication year outside the policy's range")
PUBLICATION_TYPE_EXCLUDED = rule("prefilter.publication_type_excluded",
                                 "Not primary research: an excluded publication type")
NONRESEARCH_TITLE = rule("prefilter.nonresearch_title",
                         "Title marks an erratum, book review, reply, comment or editorial")
NO_ABSTRACT = rule("prefilter.no_abstract", "No abstract, or one too short to judge")
NO_OPEN_ACCESS_PDF = rule("prefilter.no_open_access_pdf", "No open-access PDF (and no local PDF)")
LANGUAGE_NOT_ALLOWED = rule("prefilter.language_not_allowed", "Title/abstract language not allowed")
NOT_ARCTIC_RELEVANT = rule("prefilter.not_arctic_relevant",
                           "No Arctic keyword in the title or abstract")


# --------------------------------------------------------------------------- the policy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class YearPolicy(_Strict):
    min: int = 1950
    max: int = 2027
    allow_missing: bool = False


class PublicationTypePolicy(_Strict):
    exclude: list[str] = Field(default_factory=list)
    allow_missing: bool = True
    nonresearch_title_patterns: list[str] = Field(default_factory=list)

    @field_validator("nonresearch_title_patterns")
    @classmethod
    def _compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        return value


class AbstractPolicy(_Strict):
    required: bool = True
    min_chars: int = Field(100, ge=0)


class OpenAccessPolicy(_Strict):
    require_pdf: bool = True
    accept_local_pdf: bool = True


class LanguagePolicy(_Strict):
    allowed: list[str] = Field(default_factory=lambda: ["en", "ru"])
    allow_unknown: bool = True


class ArcticRelevancePolicy(_Strict):
    required: bool = True
    keywords: list[str] = Field(default_factory=list)


class ServerFilterPolicy(_Strict):
    year: bool = True
    open_access_pdf: bool = True
    publication_types: list[str] = Field(default_factory=list)
    fields_of_study: list[str] = Field(default_factory=list)


class MetadataPolicy(_Strict):
    """The validated content of a metadata policy file."""

    schema_: Literal["arcticqa-metadata-policy"] = Field("arcticqa-metadata-policy", alias="schema")
    version: str
    years: YearPolicy = Field(default_factory=YearPolicy)
    publication_types: PublicationTypePolicy = Field(default_factory=PublicationTypePolicy)
    abstract: AbstractPolicy = Field(default_factory=AbstractPolicy)
    open_access: OpenAccessPolicy = Field(default_factory=OpenAccessPolicy)
    language: LanguagePolicy = Field(default_factory=LanguagePolicy)
    arctic_relevance: ArcticRelevancePolicy = Field(default_factory=ArcticRelevancePolicy)
    server_filters: ServerFilterPolicy = Field(default_factory=ServerFilterPolicy)
    source_path: str | None = Field(None, exclude=True)

    @property
    def sha256(self) -> str:
        """Hash of the canonical content (comments and layout of the file do not count).

        Computed on access, not cached: ``model_copy(update=...)`` copies cached attributes,
        and a stale hash on an overridden policy would misstate which policy decided.
        """
        payload = self.model_dump(mode="json", by_alias=True)
        return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@lru_cache(maxsize=16)
def _keyword_patterns(keywords: tuple[str, ...]) -> list[tuple[str, re.Pattern[str]]]:
    return [(kw, _keyword_regex(kw)) for kw in keywords if kw.strip()]


@lru_cache(maxsize=16)
def _title_patterns(patterns: tuple[str, ...]) -> list[re.Pattern[str]]:
    return [re.compile(p, re.IGNORECASE) for p in patterns]


_TOML_LINE = re.compile(r"at line (\d+)")


def load_metadata_policy(path: Path | str | None = None) -> MetadataPolicy:
    """Read and validate a policy file (default: the repo's ``data/policies/metadata.toml``).

    Raises :class:`InputError` naming the file, the line (TOML syntax) or the field.
    """
    file = Path(path) if path is not None else DEFAULT_POLICY_PATH
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("metadata policy file not found", path=str(file)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 (byte {exc.start})", path=str(file)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_LINE.search(str(exc))
        raise InputError(f"invalid TOML: {exc}", path=str(file),
                         line=int(found.group(1)) if found else None) from None
    try:
        policy = MetadataPolicy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(first["msg"], path=str(file), field=loc) from None
    if policy.years.min > policy.years.max:
        raise InputError(f"years.min ({policy.years.min}) is after years.max ({policy.years.max})",
                         path=str(file), field="years")
    return policy.model_copy(update={"source_path": str(file)})


def server_filters_from_policy(policy: MetadataPolicy) -> ServerFilters:
    """The bulk-search filters the policy allows pushing down to Semantic Scholar."""
    sf = policy.server_filters
    return ServerFilters(
        year=f"{policy.years.min}-{policy.years.max}" if sf.year and not policy.years.allow_missing else None,
        publication_types=tuple(sf.publication_types),
        open_access_pdf=sf.open_access_pdf and policy.open_access.require_pdf,
        fields_of_study=tuple(sf.fields_of_study),
    )


# --------------------------------------------------------------------------- text heuristics


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold().replace("ё", "е")


def _keyword_regex(keyword: str) -> re.Pattern[str]:
    words = _fold(keyword).split()
    body = r"[\s\-]+".join(re.escape(w) + r"\w*" for w in words)
    return re.compile(r"(?<!\w)" + body)


def arctic_keyword_hits(text: str, policy: MetadataPolicy) -> list[str]:
    """The policy keywords that occur in ``text`` (in policy order)."""
    folded = _fold(text)
    return [kw for kw, pattern in _keyword_patterns(tuple(policy.arctic_relevance.keywords)) if pattern.search(folded)]


_STOPWORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the of and in to is are was were for on with by from that this which we "
                    "our at as be has have been these than".split()),
    "ru": frozenset("и в во на с со по для что это как от из к не при о об или также был были "
                    "была который которые данных этой этих".split()),
    "de": frozenset("der die das und ist im mit den von zu für auf dem eine einer wird sich".split()),
    "fr": frozenset("le la les des et est dans une du pour sur au par que qui sont avec".split()),
    "es": frozenset("el la los las del y en es que por para con una se al como".split()),
    "no": frozenset("og av er til som på med det den fra ble har ved".split()),
}
_WORD = re.compile(r"\w+", re.UNICODE)
_MIN_LETTERS = 40


def detect_language(text: str) -> str:
    """A light script + stop-word guess: 'en', 'ru', 'uk', 'de', 'fr', 'es', 'no', 'other' or 'unknown'.

    Letters are counted by script; Cyrillic-dominant text is Russian unless Ukrainian-only
    letters (і ї є ґ) are frequent; Latin-dominant text gets the language whose stop-words occur
    most often (English wins ties, and wins outright if no stop-word at all occurs, since
    scientific English abstracts may be list-like). Fewer than 40 letters: 'unknown'.
    """
    latin = cyrillic = other = 0
    ukrainian = 0
    for char in text:
        if not char.isalpha():
            continue
        name = unicodedata.name(char, "")
        if name.startswith("LATIN"):
            latin += 1
        elif name.startswith("CYRILLIC"):
            cyrillic += 1
            if char in "іїєґІЇЄҐ":
                ukrainian += 1
        else:
            other += 1
    letters = latin + cyrillic + other
    if letters < _MIN_LETTERS:
        return "unknown"
    if cyrillic / letters >= 0.5:
        return "uk" if ukrainian / cyrillic > 0.02 else "ru"
    if latin / letters < 0.5:
        return "other"
    words = [w.casefold() for w in _WORD.findall(text)]
    scores = {lang: sum(1 for w in words if w in stop) for lang, stop in _STOPWORDS.items() if lang != "ru"}
    best = max(scores, key=lambda lang: (scores[lang], lang == "en"))
    if scores[best] == 0:
        return "en"
    return best


_MOJIBAKE = re.compile(r"[ÃÐÑ][\u0080-\u00bf]|â€")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _garbled(text: str) -> str | None:
    if "\ufffd" in text:
        return "U+FFFD replacement character"
    if _CONTROL.search(text):
        return "control character"
    if _MOJIBAKE.search(text):
        return "UTF-8 decoded as Latin-1 (mojibake)"
    return None


# --------------------------------------------------------------------------- the decision


class PrefilterDecision(BaseModel):
    paper_id: str
    disposition: Literal["pass", "reject"]
    rejections: list[Rejection] = Field(default_factory=list)
    policy_version: str
    policy_sha256: str
    language: str
    arctic_keywords: list[str] = Field(default_factory=list)

    @property
    def rule_ids(self) -> list[str]:
        return [r.rule_id for r in self.rejections]


def prefilter(paper: PaperRecord, policy: MetadataPolicy, *, policy_sha256: str | None = None) -> PrefilterDecision:
    """Apply every policy rule to ``paper``; ``reject`` if any rule fires. ``policy_sha256``:
    ``policy.sha256``, when the caller screens many papers with one policy (hashing it costs
    more than most papers' rules)."""
    rejections: list[Rejection] = []
    title = (paper.title or "").strip()
    abstract = (paper.abstract or "").strip()

    if not title:
        rejections.append(MISSING_TITLE.reject())
    for field_name, text in (("title", title), ("abstract", abstract)):
        problem = _garbled(text)
        if problem:
            rejections.append(GARBLED_TEXT.reject(f"{field_name} contains a {problem}", field=field_name))

    years = policy.years
    if paper.year is None:
        if not years.allow_missing:
            rejections.append(YEAR_MISSING.reject())
    elif not years.min <= paper.year <= years.max:
        rejections.append(YEAR_OUT_OF_RANGE.reject(
            f"year {paper.year} is outside {years.min}-{years.max}", year=paper.year,
            min=years.min, max=years.max))

    types = [t for t in (paper.publicationTypes or []) if t]
    excluded = sorted(set(types) & set(policy.publication_types.exclude))
    if excluded:
        rejections.append(PUBLICATION_TYPE_EXCLUDED.reject(
            f"publication type {', '.join(excluded)} is excluded", types=types, excluded=excluded))
    elif not types and not policy.publication_types.allow_missing:
        rejections.append(PUBLICATION_TYPE_EXCLUDED.reject(
            "publication type is missing and the policy requires one", types=[]))
    for pattern in _title_patterns(tuple(policy.publication_types.nonresearch_title_patterns)):
        if title and pattern.search(title):
            rejections.append(NONRESEARCH_TITLE.reject(
                f"title matches {pattern.pattern!r}", pattern=pattern.pattern))
            break

    if policy.abstract.required and len(abstract) < policy.abstract.min_chars:
        message = ("no abstract" if not abstract else
                   f"abstract has {len(abstract)} characters, fewer than {policy.abstract.min_chars}")
        rejections.append(NO_ABSTRACT.reject(message, chars=len(abstract)))

    if policy.open_access.require_pdf:
        has_url = bool(paper.openAccessPdf and paper.openAccessPdf.url)
        has_local = bool(paper.localPdf) and policy.open_access.accept_local_pdf
        if not (has_url or has_local):
            rejections.append(NO_OPEN_ACCESS_PDF.reject(is_open_access=paper.isOpenAccess))

    text = f"{title}\n{abstract}"
    language = detect_language(text)
    if language == "unknown":
        if not policy.language.allow_unknown:
            rejections.append(LANGUAGE_NOT_ALLOWED.reject(
                "too little text to detect the language", language=language))
    elif language not in policy.language.allowed:
        rejections.append(LANGUAGE_NOT_ALLOWED.reject(
            f"detected language {language!r} is not in {policy.language.allowed}", language=language))

    hits = arctic_keyword_hits(text, policy)
    if policy.arctic_relevance.required and not hits:
        rejections.append(NOT_ARCTIC_RELEVANT.reject())

    return PrefilterDecision(
        paper_id=paper.paperId, disposition="reject" if rejections else "pass",
        rejections=rejections, policy_version=policy.version, policy_sha256=policy_sha256 or policy.sha256,
        language=language, arctic_keywords=hits)
