"""Paths cannot escape their folders: ingest maps, snapshot ``localPdf``, the PDF cache, exports.

Each case is tried with ``../``, an absolute path elsewhere and a symlink pointing out; the
victim files outside must be untouched and the refusal must name what was wrong.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from arcticqa.errors import ConfigError, InputError
from arcticqa.outputs import write_file
from arcticqa.sources.records import parse_record, resolve_local_pdf
from arcticqa.text.fetch import cached_pdf_path, store_pdf_bytes
from arcticqa.text.ingest import ingest_pdfs
from tests.release_factories import export, make_item

PDF = b"%PDF-1.7\n% a tiny stand-in; ingest checks only the header\n%%EOF\n"


def _tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(path.rglob("*"))}


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    """``inside/`` holds the user's PDFs; ``outside/`` is what must not be reached."""
    (tmp_path / "inside").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "inside" / "ok.pdf").write_bytes(PDF)
    (tmp_path / "outside" / "secret.pdf").write_bytes(PDF + b"% outside\n")
    (tmp_path / "inside" / "link.pdf").symlink_to(tmp_path / "outside" / "secret.pdf")
    return tmp_path


@pytest.mark.parametrize("name", ["../outside/secret.pdf", "ABS", "link.pdf", "sub/../../outside/secret.pdf"])
def test_ingest_map_entries_cannot_leave_the_pdf_folder(layout: Path, name: str) -> None:
    if name == "ABS":
        name = str(layout / "outside" / "secret.pdf")
    cache = layout / "cache"
    map_csv = layout / "map.csv"
    map_csv.write_text(f"file,doi\nok.pdf,10.1/ok\n{name},10.1/evil\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        ingest_pdfs(layout / "inside", map_csv, cache)
    assert (info.value.line, info.value.field) == (3, "file")
    assert "outside the PDF directory" in str(info.value)
    assert not cache.exists()  # the whole map is checked before anything is copied
    map_csv.write_text("file,doi\nok.pdf,10.1/ok\n", encoding="utf-8")
    assert [r.file for r in ingest_pdfs(layout / "inside", map_csv, cache)] == ["ok.pdf"]


def _record(local_pdf: str, origin: str) -> object:
    raw = {"paperId": "p" * 40, "title": "Arctic sea ice", "localPdf": local_pdf}
    return parse_record(raw, query="snapshot", page=1, fetched_at=datetime.now(UTC), origin=origin, line=7)


@pytest.mark.parametrize("local_pdf", ["../outside/secret.pdf", "ABS", "link.pdf"])
def test_snapshot_local_pdf_cannot_leave_the_snapshot_folder(layout: Path, local_pdf: str) -> None:
    if local_pdf == "ABS":
        local_pdf = str(layout / "outside" / "secret.pdf")
    origin = str(layout / "inside" / "papers.jsonl")
    record = _record(local_pdf, origin)
    assert record.paper is None and record.rejection is not None  # type: ignore[attr-defined]
    assert record.rejection.rule_id == "discover.invalid_record"  # type: ignore[attr-defined]
    assert record.rejection.evidence["field"] == "localPdf"  # type: ignore[attr-defined]
    assert resolve_local_pdf(record) is None  # type: ignore[arg-type]
    good = _record("ok.pdf", origin)
    assert resolve_local_pdf(good) == (layout / "inside" / "ok.pdf").resolve()  # type: ignore[arg-type]


def test_a_live_api_record_may_not_name_a_local_file() -> None:
    record = _record("/etc/passwd", "s2")
    assert record.paper is None and "live API" in record.rejection.message  # type: ignore[attr-defined]


@pytest.mark.parametrize("sha", ["../../etc/passwd", "/etc/passwd", "A" * 64, "a" * 63, "a" * 64 + "/x", ""])
def test_cache_paths_only_from_sha256_digests(tmp_path: Path, sha: str) -> None:
    with pytest.raises(InputError, match="SHA-256"):
        cached_pdf_path(tmp_path / "cache", sha)
    assert cached_pdf_path(tmp_path / "cache", "a" * 64) == tmp_path / "cache" / f"{'a' * 64}.pdf"
    digest, path = store_pdf_bytes(PDF, tmp_path / "cache")
    assert path.parent == tmp_path / "cache" and path.name == f"{digest}.pdf"


# --- export, audit: output paths ---------------------------------------------------------------

def test_export_to_a_dotdot_path_writes_exactly_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    path = export([make_item(1)], Path("../releases/r1"))
    assert path.resolve() == tmp_path / "releases" / "r1"
    assert sorted(p.name for p in (tmp_path / "releases").iterdir()) == ["r1"]  # no temp folders left
    assert list((tmp_path / "work").iterdir()) == []


def test_release_id_cannot_be_a_path(tmp_path: Path) -> None:
    for bad in ("../evil", "/abs", "a/b", ".hidden"):
        with pytest.raises(ConfigError):
            export([make_item(1)], tmp_path / "r", release_id=bad)
    assert not (tmp_path / "r").exists()


def test_export_over_a_symlinked_target_never_writes_through_it(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.txt").write_text("keep me\n")
    link = tmp_path / "out" / "release"
    link.parent.mkdir()
    link.symlink_to(victim, target_is_directory=True)
    with pytest.raises(InputError, match="not empty"):
        export([make_item(1)], link)
    export([make_item(1)], link, overwrite=True)
    assert not link.is_symlink() and (link / "items.jsonl").is_file()
    assert _tree(victim) == {"precious.txt": hashlib.sha256(b"keep me\n").hexdigest()}
    assert sorted(p.name for p in link.parent.iterdir()) == ["release"]  # the old link is gone too


def test_overwrite_does_not_follow_symlinks_inside_the_old_release(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    release = export([make_item(1)], tmp_path / "rel")
    (release / "items.jsonl").unlink()
    (release / "items.jsonl").symlink_to(victim)
    (release / "README.md").unlink()
    (release / "README.md").symlink_to(tmp_path, target_is_directory=True)
    export([make_item(2)], release, overwrite=True)
    assert victim.read_text() == "keep me\n" and sorted(tmp_path.iterdir()) == [release, victim]
    assert not (release / "items.jsonl").is_symlink() and not (release / "README.md").is_symlink()


def test_audit_html_over_a_symlink_replaces_the_link_not_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim.html"
    victim.write_text("keep me\n")
    link = tmp_path / "audit.html"
    link.symlink_to(victim)
    write_file(link, "<html></html>\n", overwrite=True)
    assert victim.read_text() == "keep me\n"
    assert not link.is_symlink() and link.read_text() == "<html></html>\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.html", "victim.html"]
