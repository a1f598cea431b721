"""PDF acquisition against a real (misbehaving) HTTP server on 127.0.0.1, and local ingest."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from arcticqa.config import FetchPolicy
from arcticqa.errors import InputError
from arcticqa.papers import PaperRecord
from arcticqa.stages.fetch_fulltext import fetch_fulltext, rejection_for
from arcticqa.text.fetch import FetchResult, HostLimiter, download_pdf
from arcticqa.text.ingest import ingest_pdfs
from arcticqa.text.render import PaperSource, render_paper_pdf
from tests.fakes.pdf_server import PdfServer, Reply, pdf_server

PDF = render_paper_pdf(PaperSource(title="A small paper", abstract="Short abstract text.",
                                   sections=[("1. Introduction", ["Body text of the paper."])]))
SHA = hashlib.sha256(PDF).hexdigest()
LOOPBACK = FetchPolicy(require_https=False, contact_email="tests@arcticqa.invalid", backoff_base_s=0.01,
                       backoff_max_s=0.05, max_retries=2, connect_timeout_s=2, read_timeout_s=2,
                       total_timeout_s=10)


@pytest.fixture
def server() -> Iterator[PdfServer]:
    with pdf_server() as srv:
        yield srv


def _fetch(url: str, cache: Path, policy: FetchPolicy = LOOPBACK) -> FetchResult:
    async def go() -> FetchResult:
        async with httpx.AsyncClient() as client:
            return await download_pdf(url, client=client, cache_dir=cache, policy=policy)
    return asyncio.run(go())


def _cache_files(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.exists() else []


def test_redirects_then_pdf_is_cached(server: PdfServer, tmp_path: Path) -> None:
    server.route("/paper.pdf", Reply(200, PDF, {"Content-Type": "application/pdf"}))
    server.route("/b", Reply(302, headers={"Location": "/paper.pdf"}))
    url = server.route("/a", Reply(301, headers={"Location": server.url("/b")}))
    result = _fetch(url, tmp_path)
    assert result.status == "ok", result.message
    assert result.final_url == server.url("/paper.pdf") and result.url == url
    assert result.sha256 == SHA and result.bytes == len(PDF)
    assert Path(result.path or "").read_bytes() == PDF and _cache_files(tmp_path) == [f"{SHA}.pdf"]
    agent = server.requests[0][1]["User-Agent"]
    assert "tests@arcticqa.invalid" in agent
    # the same content again is one cache entry
    assert _fetch(url, tmp_path).path == result.path and _cache_files(tmp_path) == [f"{SHA}.pdf"]


def test_redirect_loop_and_limit(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/loop", Reply(302, headers={"Location": "/loop"}))
    result = _fetch(url, tmp_path)
    assert result.status == "http_error" and "redirects" in (result.message or "")
    assert len(server.requests) == LOOPBACK.max_redirects + 1


def test_404_is_http_error_without_retry(server: PdfServer, tmp_path: Path) -> None:
    result = _fetch(server.url("/missing.pdf"), tmp_path)
    assert (result.status, result.http_status, result.attempts) == ("http_error", 404, 1)
    assert len(server.requests) == 1 and _cache_files(tmp_path) == []


def test_429_then_success(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/busy.pdf", Reply(429, b"slow down", {"Retry-After": "0"}), Reply(503), Reply(200, PDF))
    result = _fetch(url, tmp_path)
    assert result.status == "ok" and result.attempts == 3 and len(server.requests) == 3


def test_persistent_5xx_gives_up(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/down.pdf", Reply(503, b"down"))
    result = _fetch(url, tmp_path)
    assert result.status == "http_error" and result.http_status == 503
    assert len(server.requests) == LOOPBACK.max_retries + 1


def test_oversize_declared_is_refused(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/big.pdf", Reply(200, b"%PDF-1.7\n" + b"0" * 200_000))
    result = _fetch(url, tmp_path, LOOPBACK.model_copy(update={"max_bytes": 10_000}))
    assert result.status == "too_large" and "Content-Length" in (result.message or "")
    assert _cache_files(tmp_path) == []


def test_oversize_undeclared_stops_early(server: PdfServer, tmp_path: Path) -> None:
    body = b"%PDF-1.7\n" + b"0" * (40 * 1024 * 1024)
    url = server.route("/huge.pdf", Reply(200, body, send_length=False))
    result = _fetch(url, tmp_path, LOOPBACK.model_copy(update={"max_bytes": 64 * 1024}))
    assert result.status == "too_large" and (result.bytes or 0) < 1024 * 1024
    assert _cache_files(tmp_path) == []  # the temporary file is gone too
    server.stop()  # wait for the handler to notice the closed connection
    assert server.sent["/huge.pdf"] < len(body) // 2


def test_endless_body_is_too_large(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/endless.pdf", Reply(mode="endless"))
    result = _fetch(url, tmp_path, LOOPBACK.model_copy(update={"max_bytes": 1024 * 1024}))
    assert result.status == "too_large"


def test_html_landing_page_is_not_pdf(server: PdfServer, tmp_path: Path) -> None:
    html = b"<!DOCTYPE html><html><body>Sign in to read this article" + b" " * 5000 + b"</body></html>"
    url = server.route("/article", Reply(200, html, {"Content-Type": "text/html"}))
    result = _fetch(url, tmp_path)
    assert result.status == "not_pdf" and "text/html" in (result.message or "")
    assert _cache_files(tmp_path) == []


def test_slow_loris_hits_the_deadline(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/slow.pdf", Reply(200, PDF[:200], mode="trickle", interval=0.1))
    result = _fetch(url, tmp_path, LOOPBACK.model_copy(update={"total_timeout_s": 0.5}))
    assert result.status == "timeout"
    assert _cache_files(tmp_path) == []


def test_https_required_by_default(server: PdfServer, tmp_path: Path) -> None:
    url = server.route("/paper.pdf", Reply(200, PDF))
    result = _fetch(url, tmp_path, FetchPolicy())
    assert result.status == "http_error" and "non-HTTPS" in (result.message or "")
    assert server.requests == []


def test_host_limiter_serialises_one_host() -> None:
    async def go() -> int:
        limiter = HostLimiter(1)
        active = peak = 0

        async def worker() -> None:
            nonlocal active, peak
            async with limiter.for_host("example.org"):
                active += 1
                peak = max(peak, active)
                await asyncio.sleep(0.01)
                active -= 1
        await asyncio.gather(*(worker() for _ in range(4)))
        return peak
    assert asyncio.run(go()) == 1


def _run_stage(paper: PaperRecord, cache: Path, policy: FetchPolicy = LOOPBACK,
               base_dir: Path | None = None) -> FetchResult:
    async def go() -> FetchResult:
        async with httpx.AsyncClient() as client:
            return await fetch_fulltext(paper, client=client, cache_dir=cache, policy=policy, base_dir=base_dir)
    return asyncio.run(go())


def test_stage_local_pdf_short_circuits(tmp_path: Path) -> None:
    (tmp_path / "pdfs").mkdir()
    (tmp_path / "pdfs" / "p1.pdf").write_bytes(PDF)
    paper = PaperRecord(paperId="p1", localPdf="pdfs/p1.pdf",
                        openAccessPdf={"url": "http://127.0.0.1:9/never", "license": "CCBY"})
    result = _run_stage(paper, tmp_path / "cache", base_dir=tmp_path)
    assert result.status == "ok" and result.sha256 == SHA and result.license == "CCBY"
    assert (tmp_path / "cache" / f"{SHA}.pdf").read_bytes() == PDF
    missing = _run_stage(PaperRecord(paperId="p2", localPdf="nope.pdf"), tmp_path / "cache", base_dir=tmp_path)
    assert missing.status == "http_error" and rejection_for(missing) is not None


def test_stage_statuses_and_doi_fallback(server: PdfServer, tmp_path: Path) -> None:
    assert _run_stage(PaperRecord(paperId="x"), tmp_path).status == "no_url"
    blocked = _run_stage(PaperRecord(paperId="x", openAccessPdf={"url": server.url("/a.pdf"), "license": "other-oa"}),
                         tmp_path, LOOPBACK.model_copy(update={"require_redistributable_license": True}))
    assert blocked.status == "license_blocked" and server.requests == []
    assert rejection_for(blocked).rule_id == "fetch_fulltext.license_blocked"  # type: ignore[union-attr]
    server.route("/mirror/10.1234/abc", Reply(200, PDF))
    policy = LOOPBACK.model_copy(update={"doi_fallback_urls": [server.url("/mirror/{doi}")],
                                         "require_redistributable_license": True})
    paper = PaperRecord(paperId="x", externalIds={"DOI": "10.1234/ABC"},
                        openAccessPdf={"url": server.url("/gone.pdf"), "license": "CC-BY"})
    result = _run_stage(paper, tmp_path, policy)
    assert result.status == "ok" and result.url == server.url("/mirror/10.1234/abc")
    assert [p for p, _ in server.requests] == ["/gone.pdf", "/mirror/10.1234/abc"]


def _write_map(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_ingest_pdfs(tmp_path: Path) -> None:
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "a.pdf").write_bytes(PDF)
    (pdfs / "b.pdf").write_bytes(PDF + b"\n% another copy\n")
    (pdfs / "page.html").write_bytes(b"<html></html>")
    cache = tmp_path / "cache"
    rows = ingest_pdfs(pdfs, _write_map(tmp_path / "map.csv", "file,doi,paper_id\na.pdf,10.1/A,\nb.pdf,,S2ID\n"),
                       cache)
    assert [(r.doi, r.paper_id) for r in rows] == [("10.1/a", None), (None, "S2ID")]
    assert rows[0].sha256 == SHA and Path(rows[1].path).read_bytes().endswith(b"another copy\n")

    bad_cases = {
        "name,doi\na.pdf,10.1/x\n": (1, "file"),
        "file,title\na.pdf,x\n": (1, None),
        "file,doi\na.pdf,10.1/x\nmissing.pdf,10.1/y\n": (3, "file"),
        "file,doi\npage.html,10.1/x\n": (2, "file"),
        "file,doi\na.pdf,10.1/x\nb.pdf,10.1/X\n": (3, "doi"),
        "file,doi\na.pdf,not-a-doi\n": (2, "doi"),
        "file,doi,paper_id\na.pdf,,\n": (2, "doi"),
    }
    for text, (line, field) in bad_cases.items():
        empty_cache = tmp_path / f"cache-{line}-{field}"
        with pytest.raises(InputError) as info:
            ingest_pdfs(pdfs, _write_map(tmp_path / "bad.csv", text), empty_cache)
        assert (info.value.line, info.value.field) == (line, field), text
        assert "bad.csv" in str(info.value)
        assert not empty_cache.exists()  # validated before anything was copied


def test_cli_ingest_pdfs_bad_map_exits_2(tmp_path: Path) -> None:
    import arcticqa.cli.text  # noqa: F401  (registers the commands)
    from arcticqa.cli.app import app
    from arcticqa.store import Store

    Store(f"sqlite:///{tmp_path / 's.db'}").close()  # ingest-pdfs needs a built store (none is created)
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[build]\ndata_dir = "{tmp_path / "data"}"\n[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n',
                      encoding="utf-8")
    (tmp_path / "pdfs").mkdir()
    bad = _write_map(tmp_path / "map.csv", "file,doi\nmissing.pdf,10.1/x\n")
    result = CliRunner().invoke(app, ["ingest-pdfs", str(tmp_path / "pdfs"), "--map", str(bad),
                                      "--config", str(config)])
    assert result.exit_code == 2
    assert "map.csv:2" in result.output and not (tmp_path / "data").exists()
