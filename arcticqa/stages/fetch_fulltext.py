"""Stage ``fetch_fulltext``: a paper record → its PDF in the content-addressed cache.

A plain async function with no store and no Prefect; the runner records the returned
:class:`~arcticqa.text.fetch.FetchResult` (URL, final URL, sha256, bytes, licence, status).
Candidates are tried in order: the paper's ``localPdf`` (resolved against ``base_dir``; copied,
never downloaded), then ``openAccessPdf.url``, then the policy's DOI fallback templates. The
first ``ok`` wins; otherwise the last failure is returned.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from arcticqa.config import FetchPolicy
from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection, rule
from arcticqa.text.fetch import (
    FetchResult,
    HostLimiter,
    download_pdf,
    is_redistributable,
    store_pdf_file,
)

__all__ = ["STAGE", "FetchPolicy", "FetchResult", "fetch_fulltext", "candidate_urls", "rejection_for",
           "NO_FULLTEXT", "LICENSE_BLOCKED"]

STAGE = "fetch_fulltext"

NO_FULLTEXT = rule("fetch_fulltext.unavailable", "no open-access PDF could be fetched for the paper")
LICENSE_BLOCKED = rule("fetch_fulltext.license_blocked",
                       "the policy requires a redistributable licence and the PDF has none")


def candidate_urls(paper: PaperRecord, policy: FetchPolicy) -> list[str]:
    """Download URLs to try, in order, without duplicates."""
    urls: list[str] = []
    if paper.openAccessPdf and paper.openAccessPdf.url:
        urls.append(paper.openAccessPdf.url.strip())
    if paper.doi:
        urls.extend(template.format(doi=paper.doi) for template in policy.doi_fallback_urls)
    return list(dict.fromkeys(u for u in urls if u))


def _local(paper: PaperRecord, cache_dir: Path, base_dir: Path | None, license_name: str | None) -> FetchResult:
    assert paper.localPdf is not None
    source = Path(paper.localPdf)
    if not source.is_absolute() and base_dir is not None:
        source = base_dir / source
    try:
        with source.open("rb") as fh:
            head = fh.read(1024)
    except OSError as exc:
        return FetchResult(status="http_error", url=str(source), license=license_name,
                           message=f"local PDF {source}: {exc.strerror or exc}")
    if b"%PDF-" not in head:
        return FetchResult(status="not_pdf", url=str(source), license=license_name,
                           message=f"local file {source} has no %PDF- header")
    sha, size, path = store_pdf_file(source, cache_dir)
    return FetchResult(status="ok", url=source.as_uri() if source.is_absolute() else str(source),
                       final_url=str(path), sha256=sha, bytes=size, license=license_name, path=str(path))


async def fetch_fulltext(paper: PaperRecord, *, client: httpx.AsyncClient, cache_dir: Path,
                         policy: FetchPolicy | None = None, base_dir: Path | None = None,
                         limiter: HostLimiter | None = None) -> FetchResult:
    """Acquire ``paper``'s full-text PDF into ``cache_dir`` (pass ``<data_dir>/pdf``)."""
    policy = policy or FetchPolicy()
    license_name = paper.openAccessPdf.license if paper.openAccessPdf else None
    if paper.localPdf:
        # a user's own (institutional) copy: the licence policy is about what we redistribute,
        # and local PDFs are never redistributed, so it does not apply here
        return await asyncio.to_thread(_local, paper, cache_dir, base_dir, license_name)
    urls = candidate_urls(paper, policy)
    if not urls:
        return FetchResult(status="no_url", license=license_name, message="no open-access PDF URL")
    if policy.require_redistributable_license and not is_redistributable(license_name, policy):
        return FetchResult(status="license_blocked", url=urls[0], license=license_name,
                           message=f"licence {license_name or 'unknown'!s} is not redistributable")
    result = FetchResult(status="no_url")
    for url in urls:
        result = await download_pdf(url, client=client, cache_dir=cache_dir, policy=policy, limiter=limiter)
        result.license = license_name
        if result.status == "ok":
            break
    return result


def rejection_for(result: FetchResult) -> Rejection | None:
    """The rejection to record for a failed fetch, or ``None`` when the PDF is in the cache."""
    if result.status == "ok":
        return None
    rule_ = LICENSE_BLOCKED if result.status == "license_blocked" else NO_FULLTEXT
    return rule_.reject(f"{result.status}: {result.message or ''}".strip(), status=result.status,
                        url=result.url, http_status=result.http_status)
