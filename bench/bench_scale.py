"""A rehearsal of the reference's build at scale, against stand-ins that enforce real limits.

The reference built ArcticQA from ~85,000 discovered records and ~4,400 full texts. This bench
runs that funnel at ``--scale F`` (1.0 = the reference's; ``--quick`` = 0.02):

* ``85,000 × F`` records served by the Semantic Scholar stand-in (:mod:`arcticqa.standins.s2`)
  at ``--s2-rate`` requests a second (429 beyond), in bulk-search pages of 1,000, over
  ``records / 5,000`` queries; most fail the metadata prefilter as real records do (no Arctic
  keyword, reviews, no abstract, errata), some are duplicates across queries;
* ``4,400 × F`` of them have a generated PDF (a synthetic mooring paper padded to a length drawn
  from a lognormal, so prompts and extraction vary), served over HTTP; a share
  (``--eligible-share``) report an Arctic site, the rest a mid-latitude one, which eligibility
  rejects;
* the model stages on the eligible ones, against the model stand-in
  (:class:`arcticqa.standins.limits.LimitedResponder` around the prompt-reading
  :class:`arcticqa.standins.scripted.ScriptedModel`) with an RPM and a TPM limit answered with
  429 + Retry-After, lognormal latency and a share of 5xx answers and timeouts.

The build is ``arcticqa.pipeline.build.build(settings)`` in a process of its own (so its peak
RSS and CPU are the build's alone), configured as a user would be: the model config names the
same limits (client pacing), ``[discovery]`` the S2 rate. The stand-ins run in another process.

It prints, side by side: the build's wall time against the **floor** the limits imply (tokens
charged ÷ TPM, requests ÷ RPM, S2 pages ÷ rate: whichever binds) as a ratio; the 429s received;
the retries; peak RSS; the store's size; our CPU per paper; and the ``llm_call`` rows that hold
an answer against the requests the endpoint answered (no call lost or sent twice).

    .venv/bin/python -m bench.bench_scale [--scale 1.0 | --quick] [--rpm 5000] [--tpm 2000000]
        [--latency-median 1.5] [--latency-p99 8] [--error-rate 0.02] [--timeout-rate 0.01]
        [--s2-rate 1] [--eligible-share 0.58] [--batch-size 200] [--paper-concurrency 128]
        [--model-concurrency 64] [--no-client-pacing] [--keep DIR] [--seed 1]
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import functools
import hashlib
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["Funnel", "main", "make_corpus", "floor_seconds"]

#: the reference's funnel (docs/performance.md): records discovered, full texts
REFERENCE_RECORDS = 85_000
REFERENCE_PDFS = 4_400
QUICK_SCALE = 0.02
#: records per query: bulk-search pages of 1,000, five a query, as a keyword file of a dozen or two
RECORDS_PER_QUERY = 5_000
PAGE_SIZE = 1_000
#: the records without a usable full text, by why the prefilter (or deduplication) leaves them out
REJECT_MIX = (("not_arctic", 0.78), ("review", 0.08), ("no_abstract", 0.06), ("erratum", 0.04),
              ("duplicate", 0.04))
PDF_BASE = "PDFBASE"  # replaced with the PDF server's address when the S2 stand-in loads the records
ARCTIC_SITES = [("Nansen Basin", 84.0, 30.0), ("Fram Strait", 79.0, 2.0), ("Kongsfjorden", 78.95, 11.9),
                ("Laptev Sea shelf", 76.5, 125.0)]
#: mooring_paper writes "{lon}°E": east longitudes only
SOUTHERN_SITES = [("Sea of Japan", 40.0, 135.0), ("Bohai Sea", 39.0, 120.5), ("Yellow Sea", 36.0, 123.0)]
_FILLER = [
    "Moorings of this kind have been maintained by several national programmes over the past decades.",
    "The instruments were serviced during the summer cruises and recalibrated against reference sensors.",
    "Earlier studies of the region relied on shipborne surveys and satellite altimetry.",
    "Ice draft was converted to thickness with a constant density ratio for first-year and multiyear ice.",
    "Gaps in the record occurred when instruments were lost or their batteries failed before recovery.",
    "The processing chain removed spikes, corrected for sound speed and averaged the data to daily means.",
    "Uncertainties were assessed by comparing overlapping deployments at neighbouring sites.",
    "Ocean heat transport into the basin is thought to influence the ice cover from below.",
    "Wind forcing and ice export through the straits also shape the regional ice budget.",
    "Comparable records elsewhere show a similar response of the ice pack to atmospheric warming.",
    "The deployment strategy balanced the need for long records against the risk of instrument loss.",
    "Snow on the ice affects both the acoustic return and the interpretation of the draft measurements.",
    "Tidal currents at the site were weak compared with the wind-driven drift of the pack.",
    "Future work will combine the mooring data with airborne electromagnetic surveys of the region.",
]


@dataclass(frozen=True)
class Funnel:
    """How many records, PDFs and eligible papers a run at ``scale`` has, and over how many queries."""

    scale: float
    records: int
    pdfs: int
    eligible: int
    queries: int

    @classmethod
    def at(cls, scale: float, eligible_share: float) -> Funnel:
        records = max(20, round(REFERENCE_RECORDS * scale))
        pdfs = max(2, round(REFERENCE_PDFS * scale))
        return cls(scale=scale, records=records, pdfs=pdfs, eligible=max(1, round(pdfs * eligible_share)),
                   queries=max(1, math.ceil(records / RECORDS_PER_QUERY)))


# -- the corpus -------------------------------------------------------------------------------------

def _paper_id(i: int) -> str:
    return hashlib.sha1(f"scale-{i}".encode()).hexdigest()


def _pdf_paper(i: int, eligible: bool, paragraphs: int, rng: random.Random) -> tuple[dict[str, Any], Any]:
    """Paper ``i`` with a PDF: a synthetic mooring paper (arcticqa.standins.synthetic) at an
    Arctic or a mid-latitude site, its introduction and discussion padded to ``paragraphs``."""
    from arcticqa.standins.synthetic import mooring_paper

    region, lat, lon = (ARCTIC_SITES if eligible else SOUTHERN_SITES)[i % (4 if eligible else 3)]
    record, source = mooring_paper(i, site=f"{region} M{i:05d}", region=region, lat=lat, lon=lon,
                                   pct=10 + i % 40, kind="scale")
    if not eligible:  # nothing Arctic but the keyword the prefilter wants ("sea ice")
        intro = source.sections[0].model_copy(update={"paragraphs": [
            "Seasonal sea ice in marginal seas has thinned over recent decades."]})
        abstract = (source.abstract or "").replace("of the Arctic Ocean", "of the western Pacific")
        source = source.model_copy(update={"abstract": abstract, "sections": [intro, *source.sections[1:]]})
        record["abstract"] = abstract

    def filler(n: int) -> list[str]:
        return [" ".join(rng.choice(_FILLER) for _ in range(rng.randint(4, 7))) for _ in range(n)]

    sections = list(source.sections)
    intro, discussion = sections[0], sections[-1]
    half = paragraphs // 2
    sections[0] = intro.model_copy(update={"paragraphs": [*intro.paragraphs, *filler(half)]})
    sections[-1] = discussion.model_copy(update={"paragraphs": [*discussion.paragraphs, *filler(paragraphs - half)]})
    source = source.model_copy(update={"sections": sections})
    record = {k: v for k, v in record.items() if k != "localPdf"}
    record.update(paperId=_paper_id(i), openAccessPdf={"url": f"{PDF_BASE}/paper-{i:06d}.pdf", "license": "CC-BY"})
    return record, source


def _other_record(i: int, kind: str, pdf_records: list[dict[str, Any]], rng: random.Random) -> dict[str, Any]:
    """A discovered record without a usable full text, left out by the prefilter for ``kind``."""
    if kind == "duplicate" and pdf_records:
        original = rng.choice(pdf_records)  # the same paper found by another query: same DOI, own id
        return {**original, "paperId": _paper_id(i)}
    arctic = kind != "not_arctic"
    title = {"not_arctic": f"Soil respiration under grazing in temperate grassland plot {i}",
             "review": f"Sea ice in a changing Arctic: a review of observations, part {i}",
             "no_abstract": f"Permafrost thaw at an Arctic monitoring site, record {i}",
             "erratum": f"Erratum: Sea-ice thinning at an Arctic mooring (paper {i})"}[kind]
    abstract = None if kind == "no_abstract" else (
        f"We summarise observations of sea ice and permafrost across the Arctic in record {i}, "
        "with a synthesis of regional trends from moorings, satellites and field campaigns." if arctic else
        f"We measured soil respiration, root biomass and nitrogen mineralisation in grazed and ungrazed "
        f"temperate grassland plots over three growing seasons (record {i}).")
    return {"paperId": _paper_id(i), "corpusId": 500_000 + i, "externalIds": {"DOI": f"10.5555/arcticqa-scale.{i}"},
            "title": title, "abstract": abstract, "year": 2000 + i % 25,
            "publicationTypes": ["Review"] if kind == "review" else ["JournalArticle"],
            "fieldsOfStudy": ["Environmental Science"], "isOpenAccess": True,
            "openAccessPdf": {"url": f"{PDF_BASE}/none-{i}.pdf", "license": "CC-BY"}}


def make_corpus(directory: Path, funnel: Funnel, seed: int) -> dict[str, Any]:
    """Render the funnel's PDFs into ``directory/pdf``, write its records by query
    (``records.json``) and its keyword file; returns figures about it."""
    from arcticqa.text.render import render_paper_pdf

    stamp = directory / "corpus.json"
    key = {"funnel": funnel.__dict__, "seed": seed, "version": 1}
    if stamp.exists():  # --keep: the same funnel and seed were generated there before
        made = json.loads(stamp.read_text(encoding="utf-8"))
        if made.get("key") == key:
            return dict(made["figures"], reused=True)
    rng = random.Random(seed)
    (directory / "pdf").mkdir(parents=True, exist_ok=True)
    eligible = set(rng.sample(range(funnel.pdfs), funnel.eligible))
    pdf_records, paragraphs = [], []
    for i in range(funnel.pdfs):
        # padding paragraphs: lognormal, median 24 (a PDF of ~4-5 pages), 1-160
        n = min(160, max(1, round(24 * math.exp(0.7 * rng.gauss(0, 1)))))
        record, source = _pdf_paper(i, i in eligible, n, rng)
        render_paper_pdf(source, directory / "pdf" / f"paper-{i:06d}.pdf")
        pdf_records.append(record)
        paragraphs.append(n)
    kinds = [k for k, _ in REJECT_MIX]
    weights = [w for _, w in REJECT_MIX]
    others = [_other_record(funnel.pdfs + j, rng.choices(kinds, weights)[0], pdf_records, rng)
              for j in range(funnel.records - funnel.pdfs)]
    records = pdf_records + others
    rng.shuffle(records)
    queries = [f'"sea ice" + (Arctic | mooring) + topic{q:02d}' for q in range(funnel.queries)]
    by_query: dict[str, list[dict[str, Any]]] = {q: [] for q in queries}
    for n, record in enumerate(records):
        by_query[queries[n % len(queries)]].append(record)
    (directory / "records.json").write_text(json.dumps(by_query), encoding="utf-8")
    (directory / "keywords.txt").write_text("\n".join(queries) + "\n", encoding="utf-8")
    sizes = sorted(p.stat().st_size for p in (directory / "pdf").iterdir())
    figures = {"records": len(records), "pdfs": funnel.pdfs, "eligible": len(eligible),
               "paragraphs_median": sorted(paragraphs)[len(paragraphs) // 2], "paragraphs_max": max(paragraphs),
               "pdf_kb_median": sizes[len(sizes) // 2] / 1024, "pdf_mb": sum(sizes) / 2**20}
    stamp.write_text(json.dumps({"key": key, "figures": figures}), encoding="utf-8")
    return figures


# -- the stand-ins, in a process of their own ---------------------------------------------------------

@dataclass(frozen=True)
class StandInOptions:
    rpm: float | None
    tpm: float | None
    charge: str
    latency_median_s: float
    latency_p99_s: float
    latency_cap_s: float
    error_rate: float
    timeout_rate: float
    hang_s: float
    seed: int
    s2_rate: float


class _QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass


def serve_corpus(corpus: Path) -> tuple[ThreadingHTTPServer, dict[str, Any]]:
    """Serve the corpus's PDFs on a loopback port (a thread of this process) and return the server
    and the S2 records by query, their PDF links pointing at it."""
    files = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietFiles, directory=str(corpus / "pdf")))
    files.daemon_threads = True
    threading.Thread(target=files.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    pdf_base = f"http://127.0.0.1:{files.server_address[1]}"
    return files, json.loads((corpus / "records.json").read_text(encoding="utf-8").replace(PDF_BASE, pdf_base))


def _serve(corpus: Path, options: StandInOptions, conn: Connection) -> None:
    from arcticqa.standins.limits import LimitedResponder, ProviderLimits
    from arcticqa.standins.s2 import S2StandIn
    from arcticqa.standins.scripted import ScriptedModel
    from arcticqa.standins.server import FakeOpenAIServer

    files, by_query = serve_corpus(corpus)
    limits = ProviderLimits(requests_per_minute=options.rpm, tokens_per_minute=options.tpm,
                            charge=options.charge,  # type: ignore[arg-type]
                            latency_median_s=options.latency_median_s, latency_p99_s=options.latency_p99_s,
                            latency_cap_s=options.latency_cap_s, error_rate=options.error_rate,
                            timeout_rate=options.timeout_rate, hang_s=options.hang_s, seed=options.seed)
    limited = LimitedResponder(ScriptedModel(), limits)
    with FakeOpenAIServer(limited, keep_requests=False) as model, \
            S2StandIn(by_query, page_size=PAGE_SIZE, rate_per_s=options.s2_rate, keep_requests=False) as s2:
        conn.send((model.base_url, s2.url))
        conn.recv()  # until the build is done
        conn.send({"model": limited.stats.summary(), "s2": s2.counts(), "cpu_s": time.process_time()})
    files.shutdown()


@contextlib.contextmanager
def _stand_ins(corpus: Path, options: StandInOptions) -> Iterator[tuple[str, str, list[dict[str, Any]]]]:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_serve, args=(corpus, options, child), daemon=True)
    process.start()
    model_url, s2_url = parent.recv()
    seen: list[dict[str, Any]] = []
    try:
        yield model_url, s2_url, seen
    finally:
        parent.send("stop")
        seen.append(parent.recv())
        process.join(10)


# -- the build, in a process of its own ----------------------------------------------------------------

def write_config(directory: Path, *, model_url: str, s2_url: str, corpus: Path, args: argparse.Namespace) -> Path:
    """The arcticqa.toml a user with these limits would write (every role on the stand-in)."""
    from arcticqa.config import ROLES

    pacing = "" if args.no_client_pacing else (
        (f"requests_per_minute = {args.rpm}\n" if args.rpm else "") +
        (f"tokens_per_minute = {args.tpm}\n" if args.tpm and not args.no_tpm else ""))
    roles = "\n".join(f'{r} = "stand-in"' for r in ROLES)
    text = f'''
[store]
url = "sqlite:///{directory / 'arcticqa.db'}"

[build]
data_dir = "{directory / 'data'}"
source = "s2"
keywords_file = "{corpus / 'keywords.txt'}"
batch_size = {args.batch_size}
paper_concurrency = {args.paper_concurrency}

[discovery]
api_url = "{s2_url}"
api_key_env = ""
rate_per_s = {args.s2_rate}

[fetch]
require_https = false

[models.stand-in]
provider = "openai"
base_url = "{model_url}"
model = "stand-in-model"
api_key_env = ""
price_in_per_mtok = {args.price_in}
price_out_per_mtok = {args.price_out}
max_concurrency = {args.model_concurrency}
timeout_s = {args.client_timeout}
max_retries = 6
backoff_initial_s = 1.0
backoff_max_s = 60.0
{pacing}
[roles]
{roles}
'''
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "arcticqa.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _build_child(config: Path, conn: Connection) -> None:
    """Run the build (the public entry point) and report wall, CPU, peak RSS and CPU samples."""
    from arcticqa.config import load_settings
    from arcticqa.pipeline.build import build

    samples: list[tuple[float, float, int]] = []  # (epoch s, CPU s, RSS kB)
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.5):
            samples.append((time.time(), _cpu(), _status_kb("VmRSS")))

    threading.Thread(target=sample, daemon=True).start()
    settings = load_settings(config)
    started, cpu0, epoch0 = time.perf_counter(), _cpu(), time.time()
    samples.append((epoch0, cpu0, _status_kb("VmRSS")))
    error = None
    try:
        summary: Any = build(settings).model_dump(mode="json")
    except Exception as exc:  # noqa: BLE001 - reported by the parent with what was measured
        summary, error = None, f"{type(exc).__name__}: {exc}"
    wall, cpu = time.perf_counter() - started, _cpu() - cpu0
    done.set()
    samples.append((time.time(), _cpu(), _status_kb("VmRSS")))
    conn.send({"summary": summary, "error": error, "wall_s": wall, "cpu_s": cpu, "epoch0": epoch0,
               "peak_rss_mb": _status_kb("VmHWM") / 1024,
               "samples": samples})


def run_build(config: Path) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: its peak RSS is the build's own
    parent, child = ctx.Pipe()
    process = ctx.Process(target=_build_child, args=(config, child))
    process.start()
    result: dict[str, Any] = parent.recv()
    process.join(60)
    return result


# -- what the store says ----------------------------------------------------------------------------------

def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    when = datetime.fromisoformat(text)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def read_store(db: Path) -> dict[str, Any]:
    """Counts from the build's store (read-only): model calls, stage windows, items."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows, answered, calls, retries, failed, t_in, t_out, cost = con.execute(
            "SELECT count(*), coalesce(sum(json_extract(raw_response, '$.choices') IS NOT NULL), 0), "
            "coalesce(sum(attempt = 1), 0), "
            "coalesce(sum(attempt > 1), 0), coalesce(sum(error IS NOT NULL), 0), coalesce(sum(tokens_in), 0), "
            "coalesce(sum(tokens_out), 0), coalesce(sum(cost_usd), 0) FROM llm_call WHERE NOT cache_hit").fetchone()
        distinct = con.execute("SELECT count(DISTINCT request_hash) FROM llm_call WHERE NOT cache_hit").fetchone()[0]
        errors = dict(con.execute(
            "SELECT CASE WHEN error LIKE '%429%' OR error LIKE '%RateLimit%' THEN '429' "
            "WHEN error LIKE '%imeout%' THEN 'timeout' "
            "WHEN error LIKE '%50_%' OR error LIKE '%InternalServer%' OR error LIKE '%ServiceUnavailable%' "
            "OR error LIKE '%BadGateway%' THEN '5xx' ELSE 'other' END AS kind, count(*) FROM llm_call "
            "WHERE NOT cache_hit AND error IS NOT NULL GROUP BY kind").fetchall())
        stages: dict[str, dict[str, Any]] = {}
        for stage, status, n, first, last in con.execute(
                "SELECT stage, status, count(*), min(started_at), max(finished_at) FROM stage_run "
                "WHERE subject = '' GROUP BY stage, status"):
            entry = stages.setdefault(stage, {"counts": {}, "start": None, "end": None})
            entry["counts"][status] = n
            for key, value, pick in (("start", _epoch(first), min), ("end", _epoch(last), max)):
                if value is not None:
                    entry[key] = value if entry[key] is None else pick(entry[key], value)
        by_role = {role: {"calls": c, "rows": r, "tokens_in": ti, "tokens_out": to} for role, c, r, ti, to in con.execute(
            "SELECT role, sum(attempt = 1), count(*), sum(tokens_in), sum(tokens_out) FROM llm_call "
            "WHERE NOT cache_hit GROUP BY role ORDER BY role")}
        items = con.execute("SELECT count(*) FROM item").fetchone()[0]
        papers = con.execute("SELECT count(*), coalesce(sum(duplicate_of IS NOT NULL), 0) FROM paper").fetchone()
        raw = con.execute("SELECT count(*) FROM raw_record").fetchone()[0]
    finally:
        con.close()
    return {"rows": rows, "answered_rows": answered, "calls": calls, "retries": retries, "failed_rows": failed,
            "distinct_requests": distinct, "tokens_in": t_in, "tokens_out": t_out, "cost_usd": cost,
            "errors": errors, "stages": stages, "by_role": by_role, "items": items, "papers": papers[0], "duplicates": papers[1],
            "raw_records": raw}


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def floor_seconds(*, tokens: int, requests: int, pages: int, tpm: float | None, rpm: float | None,
                  s2_rate: float) -> dict[str, float]:
    """What each limit alone makes the build take: tokens ÷ TPM, requests ÷ RPM, S2 pages ÷ rate."""
    out = {"s2": pages / s2_rate}
    if tpm:
        out["tokens"] = 60.0 * tokens / tpm
    if rpm:
        out["requests"] = 60.0 * requests / rpm
    return out


# -- the report ------------------------------------------------------------------------------------------------

def _cpu_between(samples: list[tuple[float, float, int]], start: float, end: float) -> float:
    times = [s[0] for s in samples]

    def at(t: float) -> float:
        i = bisect.bisect_left(times, t)
        if i <= 0:
            return samples[0][1]
        if i >= len(samples):
            return samples[-1][1]
        (t0, c0, _), (t1, c1, _) = samples[i - 1], samples[i]
        return c0 + (c1 - c0) * ((t - t0) / (t1 - t0) if t1 > t0 else 0.0)

    return at(end) - at(start)


def report(args: argparse.Namespace, funnel: Funnel, corpus: dict[str, Any], built: dict[str, Any],
           seen: dict[str, Any], store: dict[str, Any], sizes: dict[str, int]) -> dict[str, Any]:
    model, s2 = seen["model"], seen["s2"]
    admitted = model["answered"] + model["errors"] + model["timeouts"] + model["inner_faults"]
    floors = floor_seconds(tokens=model["tokens_charged"], requests=admitted, pages=s2["pages"],
                           tpm=None if args.no_tpm else args.tpm, rpm=args.rpm, s2_rate=args.s2_rate)
    binding = max(floors, key=lambda k: floors[k])
    floor = floors[binding]
    model_floor = max([v for k, v in floors.items() if k != "s2"], default=0.0)
    wall = built["wall_s"]
    papers = store["papers"] - store["duplicates"]
    print(f"\n== rehearsal at scale {funnel.scale:g}: {corpus['records']:,} records over {funnel.queries} "
          f"queries -> {corpus['pdfs']:,} PDFs ({corpus['eligible']:,} at an Arctic site) ==")
    print(f"limits: model {_n(args.rpm)} rpm, {_n(None if args.no_tpm else args.tpm)} tpm (buckets of 1 s, "
          f"tokens charged as {args.charge}), latency median {args.latency_median:g} s / p99 {args.latency_p99:g} s "
          f"(cap {args.latency_cap:g}), {args.error_rate:.0%} 5xx, {args.timeout_rate:.0%} timeouts "
          f"(hang {args.hang:g} s, client timeout {args.client_timeout:g} s); S2 {args.s2_rate:g} request/s, pages "
          f"of {PAGE_SIZE:,}; client pacing {'off' if args.no_client_pacing else 'on (the same limits)'}; "
          f"batch_size {args.batch_size}, paper_concurrency {args.paper_concurrency}, model max_concurrency "
          f"{args.model_concurrency}")
    print(f"PDFs: median {corpus['paragraphs_median']} padding paragraphs (max {corpus['paragraphs_max']}), "
          f"median {corpus['pdf_kb_median']:.0f} KB, {corpus['pdf_mb']:.1f} MB in all")
    if built["error"]:
        print(f"THE BUILD FAILED: {built['error']}")
    parts = "; ".join(f"{k} {v:.1f} s" for k, v in sorted(floors.items(), key=lambda kv: -kv[1]))
    lost = model["answered"] - store["answered_rows"]
    rows = [
        ("build wall", f"{wall:.1f} s"),
        ("floor the limits imply (whichever binds)", f"{floor:.1f} s, {binding} ({parts})"),
        ("wall / floor", f"{wall / floor:.2f}" if floor else "-"),
        ("wall / (S2 floor + model floor)", f"{wall / (floors['s2'] + model_floor):.2f} (what it would be if no "
                                            f"model call started before discovery ended)"),
        ("429s received", f"model {model['refused']} ({model['refused_rpm']} rpm, {model['refused_tpm']} tpm); "
                          f"S2 {s2['refused']}"),
        ("retries", f"model {store['retries']} attempts after a call's first ({_errors(store['errors'])}); "
                    f"injected {model['errors']} 5xx, {model['timeouts']} timeouts; S2 "
                    f"{s2['received'] - s2['pages']} requests beyond the {s2['pages']} pages"),
        ("peak RSS, build process", f"{built['peak_rss_mb']:.0f} MB ({_peak_where(built, store)})"),
        ("store", f"database {sizes['db'] / 2**20:.1f} MB; PDF cache {sizes['pdf'] / 2**20:.1f} MB"),
        ("our CPU", f"{built['cpu_s']:.1f} s in the build process = {1000 * built['cpu_s'] / max(papers, 1):.2f} ms "
                    f"per discovered paper, {1000 * built['cpu_s'] / max(funnel.pdfs, 1):.0f} ms per PDF "
                    f"(PDF parsing runs in child processes, not counted)"),
        ("model calls", f"{store['calls']:,} calls, {store['rows']:,} llm_call rows, {store['tokens_in']:,} tokens in, "
                        f"{store['tokens_out']:,} out, USD {store['cost_usd']:.2f}"),
        ("llm_call rows answered vs endpoint answered",
         f"{store['answered_rows']:,} vs {model['answered']:,} ({model['distinct_answered']:,} distinct; "
         f"{model['answered_twice']} answered twice): "
         + ("no call lost or sent twice" if lost == 0 and model["answered_twice"] == 0 else
            f"{lost} answers not recorded, {model['answered_twice']} sent twice")),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    _report_stages(built, store, papers)
    print("by role (calls, tokens in/out per call; what an estimate needs): " + "; ".join(
        f"{role} {r['calls']:,} ({r['tokens_in'] / max(r['calls'], 1):,.0f}/{r['tokens_out'] / max(r['calls'], 1):,.0f})"
        for role, r in store["by_role"].items()))
    summary = built["summary"] or {}
    print(f"papers {store['papers']:,} ({store['duplicates']:,} duplicates) from {store['raw_records']:,} raw records; "
          f"items {store['items']:,}; build summary stages {summary.get('stages')}")
    if summary.get("errors"):
        print(f"build errors: {_clip(json.dumps(summary['errors']))}")
    return {"wall_s": wall, "floor_s": floor, "binding": binding, "floors": floors, "ratio": wall / floor if floor else None,
            "model": model, "s2": s2, "store": {k: v for k, v in store.items() if k != "stages"},
            "peak_rss_mb": built["peak_rss_mb"], "cpu_s": built["cpu_s"], "sizes": sizes}


def _report_stages(built: dict[str, Any], store: dict[str, Any], papers: int) -> None:
    samples = built["samples"]
    print(f"{'stage':<16}{'papers':>8}{'window s':>10}{'CPU s':>8}{'CPU ms/paper':>14}  outcomes")
    epoch0 = built["epoch0"]
    for stage, entry in sorted(store["stages"].items(), key=lambda kv: kv[1]["start"] or 0):
        n = sum(entry["counts"].values())
        start, end = entry["start"] or epoch0, entry["end"] or epoch0
        cpu = _cpu_between(samples, start, end) if samples else 0.0
        print(f"{stage:<16}{n:>8,}{end - start:>10.1f}{cpu:>8.1f}{1000 * cpu / max(n, 1):>14.2f}  {entry['counts']} "
              f"({start - epoch0:.1f}-{end - epoch0:.1f} s)")
    first = min((e["start"] for e in store["stages"].values() if e["start"]), default=epoch0)
    print(f"{'discovery':<16}{papers:>8,}{first - epoch0:>10.1f}{_cpu_between(samples, epoch0, first):>8.1f}"
          f"{'':>14}  (build start to the first stage attempt)")


def _peak_where(built: dict[str, Any], store: dict[str, Any]) -> str:
    """When the largest RSS sample (every 0.5 s) was taken, and in which stage's window."""
    samples = built["samples"]
    if not samples:
        return "no samples"
    when, _, kb = max(samples, key=lambda s: s[2])
    inside = [stage for stage, e in store["stages"].items() if e["start"] and e["end"] and e["start"] <= when <= e["end"]]
    first = min((e["start"] for e in store["stages"].values() if e["start"]), default=when + 1)
    where = ", ".join(inside) or ("discovery" if when < first else "after the stages")
    later = [s[2] for s in samples if s[0] >= first]
    after = f"; largest after discovery {max(later) / 1024:.0f} MB" if later else ""
    return f"largest 0.5 s sample {kb / 1024:.0f} MB at {when - built['epoch0']:.1f} s, in {where}{after}"


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(errors.items())) or "none failed"


def _n(value: float | None) -> str:
    return "no" if not value else f"{value:,.0f}"


def _clip(text: str, n: int = 400) -> str:
    return text if len(text) <= n else text[:n] + "…"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="share of the reference's funnel (1.0: 85,000 "
                                                                  "records, 4,400 PDFs)")
    parser.add_argument("--quick", action="store_true", help=f"--scale {QUICK_SCALE}")
    parser.add_argument("--rpm", type=float, default=5_000.0, help="model requests per minute (0: none)")
    parser.add_argument("--tpm", type=float, default=2_000_000.0, help="model tokens per minute")
    parser.add_argument("--no-tpm", action="store_true", help="no token limit")
    parser.add_argument("--charge", choices=("usage", "max_tokens"), default="usage",
                        help="how the endpoint counts a request's tokens (arcticqa.standins.limits)")
    parser.add_argument("--latency-median", type=float, default=1.5)
    parser.add_argument("--latency-p99", type=float, default=8.0)
    parser.add_argument("--latency-cap", type=float, default=20.0)
    parser.add_argument("--error-rate", type=float, default=0.02, help="share of 5xx answers")
    parser.add_argument("--timeout-rate", type=float, default=0.01, help="share of requests left hanging")
    parser.add_argument("--hang", type=float, default=35.0, help="seconds a hanging request is held")
    parser.add_argument("--client-timeout", type=float, default=30.0, help="the model config's timeout_s")
    parser.add_argument("--s2-rate", type=float, default=1.0, help="S2 requests per second (stand-in and client)")
    parser.add_argument("--eligible-share", type=float, default=0.58,
                        help="share of the PDFs at an Arctic site (the reference's run r3: 159 of 276)")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--paper-concurrency", type=int, default=128)
    parser.add_argument("--model-concurrency", type=int, default=64)
    parser.add_argument("--price-in", type=float, default=0.40, help="USD per million input tokens")
    parser.add_argument("--price-out", type=float, default=1.60, help="USD per million output tokens")
    parser.add_argument("--no-client-pacing", action="store_true",
                        help="leave requests_per_minute/tokens_per_minute out of the model config")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="work here and keep the corpus and the store")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    scale = QUICK_SCALE if args.quick else args.scale
    if not 0 < scale <= 10:
        parser.error("--scale must lie in (0, 10]")
    funnel = Funnel.at(scale, args.eligible_share)
    with contextlib.ExitStack() as stack:
        work = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="arcticqa-scale-")))
        work.mkdir(parents=True, exist_ok=True)
        if (work / "build").exists():  # --keep: the corpus is reused, the build starts afresh
            shutil.rmtree(work / "build")
        started = time.perf_counter()
        corpus = make_corpus(work / "corpus", funnel, args.seed)
        print(f"{'reused' if corpus.get('reused') else 'generated'} {corpus['records']:,} records and "
              f"{corpus['pdfs']:,} PDFs in "
              f"{time.perf_counter() - started:.1f} s (load average {os.getloadavg()[0]:.1f})", flush=True)
        options = StandInOptions(rpm=args.rpm or None, tpm=None if args.no_tpm else args.tpm, charge=args.charge,
                                 latency_median_s=args.latency_median, latency_p99_s=args.latency_p99,
                                 latency_cap_s=args.latency_cap, error_rate=args.error_rate,
                                 timeout_rate=args.timeout_rate, hang_s=args.hang, seed=args.seed,
                                 s2_rate=args.s2_rate)
        load_before = os.getloadavg()
        with _stand_ins(work / "corpus", options) as (model_url, s2_url, seen):
            config = write_config(work / "build", model_url=model_url, s2_url=s2_url, corpus=work / "corpus",
                                  args=args)
            built = run_build(config)
        load_after = os.getloadavg()
        build_dir = work / "build"
        sizes = {"db": sum(_size(p) for p in build_dir.glob("arcticqa.db*")), "pdf": _size(build_dir / "data")}
        store = read_store(build_dir / "arcticqa.db")
        figures = report(args, funnel, corpus, built, seen[0], store, sizes)
        print(f"load average {load_before[0]:.1f} before the build, {load_after[0]:.1f} after; "
              f"stand-ins' CPU {seen[0]['cpu_s']:.1f} s (another process, not ours)")
        if args.json:
            args.json.write_text(json.dumps({"scale": scale, "funnel": funnel.__dict__, "corpus": corpus,
                                             **figures}, indent=2, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
