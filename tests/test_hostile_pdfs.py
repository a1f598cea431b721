"""Hostile and malformed PDFs: every one ends as a status with bounded time and memory.

The PDFs are built here: encrypted, a broken xref, zero bytes, 10,000 pages, a huge embedded
image, JavaScript and an embedded file, and a decompression bomb (a 0.5 MB content stream that
inflates to 512 MiB, which MuPDF's lexer buffers whole: 13 GB of RSS and 80 s in-process).
Extraction runs in a child process with a hard memory cap, forked from the extraction pool's
zygote (``arcticqa.text.pool``); the bomb tests read the child's own peak RSS as the zygote
measured it (``wait4``), and the driver's own ``VmHWM``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pymupdf
import pytest

from arcticqa.stages.extract_text import ExtractionLimits, extract_document, rejection_for
from arcticqa.text import isolate
from arcticqa.text.render import render_paper_pdf
from tests.pipeline_fixtures import _paper

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def good() -> bytes:
    return render_paper_pdf(_paper(0)[1])


def _bomb_stream(n_mib: int) -> bytes:
    """A deflate stream of ``BT (AAAA…) Tj ET`` whose string is ``n_mib`` MiB, built in
    milliseconds: after a full flush every identical MiB compresses to identical bytes."""
    co = zlib.compressobj(9)
    head = co.compress(b"BT /F1 12 Tf 72 720 Td (") + co.flush(zlib.Z_FULL_FLUSH)
    block = co.compress(b"A" * (1 << 20)) + co.flush(zlib.Z_FULL_FLUSH)
    return head + block * n_mib + co.compress(b") Tj ET\n") + co.flush()


def bomb_pdf(n_mib: int = 512) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "A page whose content stream is a decompression bomb.")
    xref = page.get_contents()[0]
    doc.update_stream(xref, _bomb_stream(n_mib), compress=False)
    doc.xref_set_key(xref, "Filter", "/FlateDecode")
    return doc.tobytes(garbage=0, deflate=False)


def many_pages_pdf(n: int) -> bytes:
    """An ``n``-page PDF written by hand (PyMuPDF's new_page takes ~7 s for 10,000)."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % (i + 3) for i in range(n))
               + b"] /Count %d >>" % n]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>"] * n
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def huge_image_pdf() -> bytes:
    """Readable text plus a 20,000 × 20,000 RGB image (1.2 GB decoded, ~1 MB stored)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Results. Mean sea-ice thickness at the mooring decreased by 18% between 2010 "
                               "and 2020.", fontsize=9)
    page.insert_text((72, 90), "The thinning is consistent with regional warming at the site.", fontsize=9)
    xref = doc.get_new_xref()
    width = height = 20_000
    row = b"\x00" * (width * 3)
    co = zlib.compressobj(9)
    header = co.flush(zlib.Z_FULL_FLUSH)
    first = co.compress(row) + co.flush(zlib.Z_FULL_FLUSH)
    second = co.compress(row) + co.flush(zlib.Z_FULL_FLUSH)
    assert first == second
    pixels = header + first * height + co.flush()
    doc.update_object(xref, f"<< /Type /XObject /Subtype /Image /Width {width} /Height {height} "
                            "/ColorSpace /DeviceRGB /BitsPerComponent 8 /Filter /FlateDecode >>")
    doc.update_stream(xref, pixels, compress=False)
    doc.xref_set_key(xref, "Filter", "/FlateDecode")
    kind, value = doc.xref_get_key(page.xref, "Resources")
    if kind == "xref":  # an indirect resource dictionary: add the image there
        doc.xref_set_key(int(value.split()[0]), "XObject", f"<< /Im0 {xref} 0 R >>")
    else:
        doc.xref_set_key(page.xref, "Resources/XObject", f"<< /Im0 {xref} 0 R >>")
    contents = page.get_contents()[0]
    doc.update_stream(contents, doc.xref_stream(contents) + b"\nq 400 0 0 400 100 300 cm /Im0 Do Q\n")
    return doc.tobytes(garbage=0, deflate=False)


def scripted_pdf(good: bytes) -> bytes:
    """The fixture paper plus an OpenAction JavaScript and an embedded executable."""
    doc = pymupdf.open(stream=good, filetype="pdf")
    doc.embfile_add("payload.sh", b"#!/bin/sh\necho EMBEDDED-PAYLOAD > /tmp/arcticqa-pwned\n",
                    filename="payload.sh")
    js = doc.get_new_xref()
    doc.update_object(js, "<< /S /JavaScript /JS (app.alert('JS-PAYLOAD'); this.exportDataObject({cName: "
                          "'payload.sh', nLaunch: 2});) >>")
    doc.xref_set_key(doc.pdf_catalog(), "OpenAction", f"{js} 0 R")
    return doc.tobytes()


def _measure(pdf: Path, limits: ExtractionLimits) -> dict[str, object]:
    """Extract through the pool in a driver subprocess; the pool reports the extraction child's
    own peak RSS and CPU from ``wait4`` (the child is the zygote's, not the driver's, so the
    driver's ``RUSAGE_CHILDREN`` would not see it)."""
    code = (
        "import json, sys, time\n"
        # this process's own peak: ru_maxrss would start at the peak of the process it was
        # forked from (Linux keeps the replaced mm's high-water mark across exec), i.e. pytest's
        "def hwm_kb():\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith('VmHWM:'):\n"
        "            return int(line.split()[1])\n"
        "    raise RuntimeError('no VmHWM')\n"
        "from arcticqa.stages.extract_text import ExtractionLimits\n"
        "from arcticqa.text.pool import shared_pool\n"
        "limits = ExtractionLimits.model_validate_json(sys.argv[2])\n"
        "t = time.perf_counter()\n"
        "doc, usage = shared_pool().extract_measured(open(sys.argv[1], 'rb').read(), limits)\n"
        "print(json.dumps({'status': doc.status, 'message': doc.message, 'seconds': time.perf_counter() - t,\n"
        "  'child_rss_mb': usage.maxrss_kb / 1024, 'child_exit': usage.exit,\n"
        "  'self_rss_mb': hwm_kb() / 1024}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(pdf), limits.model_dump_json()], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_encrypted_zero_length_and_broken_xref(good: bytes) -> None:
    encrypted = pymupdf.open(stream=good, filetype="pdf").tobytes(
        encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    assert extract_document(encrypted).status == "encrypted"  # through the child process
    in_process = ExtractionLimits(isolate=False)
    assert extract_document(b"", in_process).status == "empty"
    # startxref points nowhere: MuPDF rebuilds the table; the text is still usable and the
    # document says it was repaired
    cut = good.rfind(b"startxref")
    broken = good[:cut] + b"startxref\n999999\n%%EOF\n"
    doc = extract_document(broken, in_process)
    assert doc.status == "ok" and doc.spans
    assert any("repaired" in w for w in doc.warnings)
    # xref offsets scrambled and the file truncated after the body
    garbage = good.replace(b" 00000 n ", b" 99999 n ")[: good.find(b"\nxref")]
    doc = extract_document(garbage, in_process)
    assert doc.status in ("ok", "corrupt") and (doc.status == "corrupt" or doc.warnings)


def test_ten_thousand_pages_are_refused_before_any_page_is_read() -> None:
    data = many_pages_pdf(10_000)
    assert len(data) < 2_000_000
    started = time.perf_counter()
    doc = extract_document(data, ExtractionLimits(isolate=False))
    assert time.perf_counter() - started < 2.0
    assert doc.status == "too_many_pages" and doc.pages == 10_000
    assert "cap of 600" in (doc.message or "")
    assert rejection_for(doc) is not None
    assert extract_document(data).status == "too_many_pages"  # the same through the child process


def test_huge_embedded_image_is_never_decoded() -> None:
    data = huge_image_pdf()
    assert len(data) < 3_000_000
    started = time.perf_counter()
    doc = extract_document(data, ExtractionLimits(isolate=False))
    assert time.perf_counter() - started < 5.0
    assert doc.status == "ok", doc.message
    assert doc.stats["images"] == 1 and "decreased by 18%" in doc.text


def test_javascript_and_embedded_files_are_inert(good: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    data = scripted_pdf(good)
    with pymupdf.open(stream=data, filetype="pdf") as check:  # the hostile parts are really there
        assert check.embfile_count() == 1
        assert "JavaScript" in check.xref_object(int(check.xref_get_key(check.pdf_catalog(), "OpenAction")[1]
                                                     .split()[0]))
    monkeypatch.chdir(tmp_path)
    marker = Path("/tmp/arcticqa-pwned")
    marker.unlink(missing_ok=True)
    doc = extract_document(data)
    assert doc.status == "ok" and doc.spans
    # neither the script nor the attachment ran, was written out, or leaked into evidence text
    assert not marker.exists() and list(tmp_path.iterdir()) == []
    assert "JS-PAYLOAD" not in doc.text and "EMBEDDED-PAYLOAD" not in doc.text
    assert doc.text == extract_document(good).text


def test_decompression_bomb_is_too_large_within_the_memory_cap(tmp_path: Path) -> None:
    pdf = tmp_path / "bomb.pdf"
    pdf.write_bytes(bomb_pdf(512))
    assert pdf.stat().st_size < 1_000_000
    limits = ExtractionLimits(memory_limit_mb=1024)
    result = _measure(pdf, limits)
    assert result["status"] == "too_large", result
    assert "memory" in str(result["message"])
    # the child really grew (the zygote alone is ~0.1 GB) and the cap stopped it
    assert 400 < float(result["child_rss_mb"]) < 1024  # type: ignore[arg-type]
    assert float(result["self_rss_mb"]) < 400  # the parent never holds the inflated stream
    assert float(result["seconds"]) < 30  # type: ignore[arg-type]


def test_a_child_that_overruns_the_wall_clock_is_killed(good: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    # the one-interpreter-per-PDF path (isolate = true where the pool is unsupported): a limit
    # shorter than the child's own start-up; the parent must kill it and say so
    monkeypatch.setattr(isolate, "STARTUP_GRACE_S", 0.05)
    started = time.perf_counter()
    doc = isolate.extract_isolated(good, ExtractionLimits(time_limit_s=0.05))
    assert time.perf_counter() - started < 5
    assert doc.status == "timeout" and "killed" in (doc.message or "")


def test_a_pool_child_that_overruns_the_wall_clock_is_killed_and_replaced(good: bytes,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from arcticqa.text import pool as pool_module

    # a bomb needs seconds to reach even a generous memory cap; 0.1 s of wall clock is far less
    # than its CPU cap (2 s): only the parent's kill can end it this soon
    monkeypatch.setattr(pool_module, "KILL_GRACE_S", 0.05)
    pool = pool_module.ExtractionPool(1)
    try:
        started = time.perf_counter()
        doc, usage = pool.extract_measured(bomb_pdf(512), ExtractionLimits(time_limit_s=0.05, memory_limit_mb=4096))
        assert time.perf_counter() - started < 10
        assert doc.status == "timeout" and "killed" in (doc.message or "")
        assert usage is not None and usage.exit == -9
        zygote = pool.zygote_pid
        # the next document gets a fresh child from the same zygote and is extracted in full
        assert pool.extract(good, ExtractionLimits()).text == extract_document(good, ExtractionLimits(isolate=False)).text
        assert pool.zygote_pid == zygote
    finally:
        pool.close()


def test_the_extractor_child_sees_no_api_keys(good: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    from arcticqa.text.pool import ExtractionPool

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-child-env")
    env = isolate._child_env()
    assert "OPENAI_API_KEY" not in env and all("SECRET" not in v for v in env.values())
    # the pool's zygote (and so every child it forks) was started with that environment
    pool = ExtractionPool(1)
    try:
        assert pool.extract(good, ExtractionLimits()).status == "ok"
        environ = Path(f"/proc/{pool.zygote_pid}/environ").read_bytes()
        assert b"PATH=" in environ and b"SECRET" not in environ and b"OPENAI_API_KEY" not in environ
    finally:
        pool.close()


@pytest.mark.slow
def test_a_bomb_in_the_corpus_costs_one_paper_not_the_build(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from arcticqa.config import load_settings
    from arcticqa.standins.server import FakeOpenAIServer
    from arcticqa.store.store import Store
    from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config
    from tests.test_build_pipeline import _items

    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-bomb")
    corpus = make_corpus(tmp_path / "corpus", n=2)
    (tmp_path / "corpus" / "pdf" / "bomb.pdf").write_bytes(bomb_pdf(512))
    record, _ = _paper(2)
    record |= {"localPdf": "pdf/bomb.pdf"}
    with corpus.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    with FakeOpenAIServer(ScriptedModel()) as srv:
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus)
        config.write_text(config.read_text(encoding="utf-8") + "\n[extraction]\nmemory_limit_mb = 1024\n",
                          encoding="utf-8")
        summary = build_in_process(config)
    assert summary["stages"]["extract_text"] == {"succeeded": 2, "rejected": 1}
    store = Store(load_settings(config).store.url)
    rejected = store.runs(stage="extract_text", status="rejected")
    assert len(rejected) == 1 and rejected[0].paper_id == record["paperId"]
    assert [r.rule_id for r in store.rejections(stage="extract_text")] == ["extract_text.not_extracted"]
    assert len(_items(store)) == 2
