"""Generate the bundled sample corpus: ``data/sample_corpus/papers.jsonl`` and ``pdf/*.pdf``.

Every paper is a fictional study written for the project. Its text lives in one TOML file under
``data/sample_corpus/sources/`` (a ``[meta]`` table for the S2-shaped record and the funnel
branch the paper demonstrates, a ``[paper]`` table that is a :class:`~arcticqa.text.render.PaperSource`).
This module turns the sources into S2 Graph-API records (plus ``localPdf``) and PDFs typeset by
:func:`~arcticqa.text.render.render_paper_pdf`, or, for the two failure branches, a truncated
(corrupt) PDF and an image-only PDF with no text layer.

Everything is deterministic (ids are hashes of the slug, PDFs have fixed dates and no random
file id, the raster is drawn by MuPDF at a fixed resolution), so ``--check`` can regenerate into
a temporary directory and demand byte equality with the committed files::

    .venv/bin/python -m arcticqa.demo.corpus          # rewrite data/sample_corpus/
    .venv/bin/python -m arcticqa.demo.corpus --check  # exit 1 if anything differs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Literal

import pymupdf
from pydantic import BaseModel, ConfigDict, Field, model_validator

from arcticqa.papers import PaperRecord
from arcticqa.text.render import PaperSource, render_paper_pdf

__all__ = [
    "BRANCHES",
    "CORPUS_DIR",
    "SOURCES_DIR",
    "SampleMeta",
    "SampleSource",
    "load_sources",
    "paper_id_for",
    "record_for",
    "pdf_bytes_for",
    "build_corpus",
    "check_corpus",
    "main",
]

CORPUS_DIR = Path(__file__).resolve().parents[2] / "data" / "sample_corpus"
SOURCES_DIR = CORPUS_DIR / "sources"

VENUE = "arcticqa sample corpus (fictional)"
FICTION_NOTE = "Fictional study written for the arcticqa sample corpus; not real data."
DOI_PREFIX = "10.5555/arcticqa-sample"  # 10.5555 is the DOI handbook's example prefix
PDF_URL = "https://example.org/arcticqa-sample/{slug}.pdf"

#: the funnel branches the corpus demonstrates, with the stage that decides each one
BRANCHES: dict[str, str] = {
    "eligible_terrestrial": "accepted: a land site at or north of 66.56°N",
    "eligible_marine": "accepted: a marine site inside an eligible Arctic marine region",
    "eligible_russian": "accepted: a Russian-language paper on a Russian Arctic site",
    "subarctic": "eligibility: terrestrial site south of the Arctic Circle",
    "antarctic": "eligibility: southern-hemisphere (Antarctic) site",
    "review": "prefilter: publication type Review is excluded",
    "closed_access": "prefilter: no open-access PDF",
    "corrupt_pdf": "extract_text: corrupt (truncated) PDF",
    "image_only_pdf": "extract_text: no text layer (image-only scan)",
    "unverifiable": "verification: every finding is hedged or self-contradictory",
}

PdfKind = Literal["text", "corrupt", "image_only", "none"]

# The raster of the image-only paper: low enough to keep the file small, high enough that a
# person (or an OCR engine, which the pipeline deliberately does not run) could still read it.
_SCAN_DPI = 60
_FIXED_DATE = "D:20240101000000Z"


class SampleMeta(BaseModel):
    """The ``[meta]`` table of a source file: record fields that are not part of the text."""

    model_config = ConfigDict(extra="forbid")

    number: int = Field(ge=1, le=999)
    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    branch: str
    expected: str  # the outcome a newcomer should see, in words (shown in docs and tests)
    year: int = Field(ge=2015, le=2024)
    publication_date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    publication_types: list[str] = Field(default_factory=lambda: ["JournalArticle"])
    fields_of_study: list[str] = Field(default_factory=lambda: ["Environmental Science"])
    open_access: bool = True
    pdf: PdfKind = "text"
    columns: int = Field(default=1, ge=1, le=2)
    running_header: str
    footer: str | None = None
    abstract_heading: str = "Abstract"
    references_heading: str = "References"

    @model_validator(mode="after")
    def _consistent(self) -> SampleMeta:
        if self.branch not in BRANCHES:
            raise ValueError(f"unknown branch {self.branch!r}; expected one of {sorted(BRANCHES)}")
        if self.open_access != (self.pdf != "none"):
            raise ValueError("open-access papers need a PDF and closed-access papers must not have one")
        return self


class SampleSource(BaseModel):
    """One parsed source file."""

    meta: SampleMeta
    paper: PaperSource
    path: Path


def load_sources(sources_dir: Path = SOURCES_DIR) -> list[SampleSource]:
    """Every ``*.toml`` under ``sources_dir``, in ``meta.number`` order (numbers must be unique)."""
    out: list[SampleSource] = []
    for path in sorted(sources_dir.glob("*.toml")):
        with path.open("rb") as fh:
            data = tomllib.load(fh)
        out.append(SampleSource(meta=SampleMeta.model_validate(data.get("meta", {})),
                                paper=PaperSource.model_validate(data.get("paper", {})), path=path))
    out.sort(key=lambda s: s.meta.number)
    numbers = [s.meta.number for s in out]
    slugs = [s.meta.slug for s in out]
    if len(set(numbers)) != len(numbers) or len(set(slugs)) != len(slugs):
        raise ValueError("sample-corpus sources must have unique numbers and slugs")
    return out


def paper_id_for(slug: str) -> str:
    """A 40-hex S2-style paperId that depends only on the slug."""
    return hashlib.sha1(f"arcticqa-sample:{slug}".encode()).hexdigest()


def _corpus_id(slug: str) -> int:
    return 900_000_000 + int(hashlib.sha256(slug.encode()).hexdigest()[:8], 16) % 10_000_000


def _plain(text: str | None) -> str | None:
    """Metadata text without the typesetter's soft hyphens (S2 abstracts carry none)."""
    return text.replace("\u00ad", "") if text is not None else None


def record_for(source: SampleSource) -> dict[str, Any]:
    """The papers.jsonl record: S2 Graph-API fields, ``localPdf`` and the ``arcticqa_sample`` key."""
    meta, paper = source.meta, source.paper
    doi = f"{DOI_PREFIX}.{meta.number:03d}"
    record: dict[str, Any] = {
        "paperId": paper_id_for(meta.slug),
        "corpusId": _corpus_id(meta.slug),
        "externalIds": {"DOI": doi, "CorpusId": _corpus_id(meta.slug)},
        "title": _plain(paper.title),
        "abstract": _plain(paper.abstract),
        "year": meta.year,
        "publicationDate": meta.publication_date,
        "venue": VENUE,
        "journal": {"name": VENUE, "volume": "1", "pages": f"{meta.number}"},
        "publicationTypes": meta.publication_types,
        "fieldsOfStudy": meta.fields_of_study,
        "s2FieldsOfStudy": [{"category": f, "source": "external"} for f in meta.fields_of_study],
        "authors": [{"authorId": None, "name": name} for name in paper.authors],
        "isOpenAccess": meta.open_access,
        "openAccessPdf": ({"url": PDF_URL.format(slug=meta.slug), "status": "GOLD", "license": "CC-BY"}
                          if meta.open_access else None),
    }
    if meta.pdf != "none":
        record["localPdf"] = f"pdf/{meta.slug}.pdf"
    record["arcticqa_sample"] = {
        "fictional": True,
        "number": meta.number,
        "slug": meta.slug,
        "branch": meta.branch,
        "expected": meta.expected,
        "pdf": meta.pdf,
        "columns": meta.columns,
        "source": f"sources/{source.path.name}",
    }
    PaperRecord.model_validate(record)  # fail here, not in discovery, if the shape drifts
    return record


def _typeset(source: SampleSource) -> bytes:
    meta = source.meta
    paper = source.paper
    if paper.venue is None:
        footer = meta.footer or (f"{VENUE} · no. {meta.number} · {meta.year} · "
                                 f"doi:{DOI_PREFIX}.{meta.number:03d}")
        paper = paper.model_copy(update={"venue": footer})
    return render_paper_pdf(paper, columns=meta.columns, running_header=meta.running_header,
                            abstract_heading=meta.abstract_heading,
                            references_heading=meta.references_heading)


def _corrupt(pdf: bytes, slug: str) -> bytes:
    """A download cut off part-way, with junk where the rest should be: header intact, no xref.

    The junk is a SHA-256 chain of the slug, so it is the same on every run.
    """
    junk = bytearray()
    block = hashlib.sha256(f"corrupt:{slug}".encode()).digest()
    while len(junk) < 2048:
        junk += block
        block = hashlib.sha256(block).digest()
    return pdf[: len(pdf) // 3] + bytes(junk)


def _image_only(pdf: bytes) -> bytes:
    """Each page rasterised (grey, ``_SCAN_DPI``) and placed as the only content of a new page."""
    src = pymupdf.open(stream=pdf, filetype="pdf")
    out = pymupdf.open()
    for index in range(src.page_count):
        page = src[index]
        pix = page.get_pixmap(dpi=_SCAN_DPI, colorspace=pymupdf.csGRAY, alpha=False)
        target = out.new_page(width=page.rect.width, height=page.rect.height)
        target.insert_image(target.rect, pixmap=pix)
    src.close()
    out.set_metadata({"creationDate": _FIXED_DATE, "modDate": _FIXED_DATE,
                      "producer": "arcticqa", "creator": "arcticqa (simulated scan)"})
    data: bytes = out.tobytes(garbage=3, deflate=True, no_new_id=True)
    out.close()
    return data


def pdf_bytes_for(source: SampleSource) -> bytes | None:
    """The PDF for one source (``None`` for a closed-access paper)."""
    kind = source.meta.pdf
    if kind == "none":
        return None
    pdf = _typeset(source)
    if kind == "corrupt":
        return _corrupt(pdf, source.meta.slug)
    if kind == "image_only":
        return _image_only(pdf)
    return pdf


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def build_corpus(out_dir: Path = CORPUS_DIR, sources_dir: Path = SOURCES_DIR) -> list[dict[str, Any]]:
    """Write ``papers.jsonl`` and ``pdf/*.pdf`` under ``out_dir``; return the records.

    PDFs in ``out_dir/pdf`` that no source produces any more are removed, so a renamed slug
    does not leave a stale file behind.
    """
    sources = load_sources(sources_dir)
    records: list[dict[str, Any]] = []
    produced: set[str] = set()
    for source in sources:
        record = record_for(source)
        records.append(record)
        data = pdf_bytes_for(source)
        if data is not None:
            name = f"{source.meta.slug}.pdf"
            produced.add(name)
            _write(out_dir / "pdf" / name, data)
    pdf_dir = out_dir / "pdf"
    if pdf_dir.is_dir():
        for stale in pdf_dir.glob("*.pdf"):
            if stale.name not in produced:
                stale.unlink()
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    _write(out_dir / "papers.jsonl", lines.encode("utf-8"))
    return records


def _generated_files(root: Path) -> dict[str, bytes]:
    """The files the generator owns under ``root`` (relative name -> bytes)."""
    files: dict[str, Path] = {}
    if (root / "papers.jsonl").is_file():
        files["papers.jsonl"] = root / "papers.jsonl"
    for pdf in sorted((root / "pdf").glob("*.pdf")):
        files[f"pdf/{pdf.name}"] = pdf
    return {name: path.read_bytes() for name, path in files.items()}


def check_corpus(corpus_dir: Path = CORPUS_DIR, sources_dir: Path = SOURCES_DIR) -> list[str]:
    """Regenerate into a temporary directory; return one line per file that differs (empty = ok)."""
    with tempfile.TemporaryDirectory(prefix="arcticqa-sample-") as tmp:
        build_corpus(Path(tmp), sources_dir)
        fresh = _generated_files(Path(tmp))
    committed = _generated_files(corpus_dir)
    problems: list[str] = []
    for name in sorted(set(fresh) | set(committed)):
        if name not in committed:
            problems.append(f"{name}: missing (the generator produces it)")
        elif name not in fresh:
            problems.append(f"{name}: stale (no source produces it)")
        elif fresh[name] != committed[name]:
            problems.append(f"{name}: differs from a fresh build ({len(committed[name])} vs "
                            f"{len(fresh[name])} bytes)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arcticqa.demo.corpus",
                                     description="Regenerate the fictional sample corpus.")
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temporary directory and fail if anything differs")
    parser.add_argument("--out", type=Path, default=CORPUS_DIR, help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check_corpus(args.out)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("sample corpus is out of date: run `python -m arcticqa.demo.corpus`", file=sys.stderr)
            return 1
        print(f"sample corpus in {args.out} is up to date")
        return 0
    records = build_corpus(args.out)
    total = sum(p.stat().st_size for p in (args.out / "pdf").glob("*.pdf"))
    print(f"wrote {len(records)} records and {total / 1024:.0f} kB of PDFs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
