"""Store write throughput under concurrent tasks, and lock errors.

Each worker repeats the build's write path for one paper stage: open an attempt
(``start_run``), record one model call (``record_calls``), close the attempt with a screening
decision as evidence (``finish_run``): three write transactions. Workers are threads in
several processes, all on one SQLite file (WAL, ``BEGIN IMMEDIATE``, busy timeout), the way
concurrent Prefect tasks and several build processes share a store. Prints transactions/s
and how many writes failed with ``database is locked`` (target: none).

    .venv/bin/python -m bench.bench_store [--processes 2] [--threads 4] [--attempts 250] [--url URL]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import threading
import time
from pathlib import Path

from arcticqa.llm.gateway import CallRecord
from arcticqa.papers import PaperRecord
from arcticqa.store.store import Store
from arcticqa.store.tables import ScreeningDecision

__all__ = ["main"]


def _work(url: str, proc: int, threads: int, attempts: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = Store(url, migrate=False)
    errors: list[str] = []
    done = [0]
    lock = threading.Lock()

    def one(t: int) -> None:
        for i in range(attempts):
            pid = f"paper-{proc}-{t}-{i % 50}"
            try:
                run = store.start_run(pid, "prefilter", f"s{i}", input_hash=f"h{i}", run_id=f"bench-{proc}")
                store.record_calls([CallRecord(role="verifier", provider="openai", model="m", prompt_version="v",
                                               request_hash=f"{proc}-{t}-{i}", attempt=1,
                                               request={"messages": [{"role": "user", "content": "x" * 200}]},
                                               parsed={"ok": True}, tokens_in=20, tokens_out=5, subject=pid)])
                store.finish_run(run, status="succeeded", output={"ok": True}, evidence=[ScreeningDecision(
                    stage="prefilter", decision="pass", rule_ids=[], payload={"i": i}, stage_run_id=0,
                    paper_id=pid)])
                with lock:
                    done[0] += 3
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    pool = [threading.Thread(target=one, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    store.close()
    out.put((done[0], errors))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--attempts", type=int, default=250, help="paper-stage attempts per thread")
    parser.add_argument("--url", help="store URL (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="arcticqa-bench-store-") as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'store.db'}"
        store = Store(url)  # migrate once, before the workers start
        store.add_papers([(PaperRecord(paperId=f"paper-{p}-{t}-{i}", title=f"Paper {p}-{t}-{i}"), {})
                          for p in range(args.processes) for t in range(args.threads) for i in range(50)])
        store.close()
        ctx = multiprocessing.get_context("spawn")
        out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
        procs = [ctx.Process(target=_work, args=(url, p, args.threads, args.attempts, out))
                 for p in range(args.processes)]
        started = time.perf_counter()
        for p in procs:
            p.start()
        results = [out.get() for _ in procs]
        elapsed = time.perf_counter() - started
        for p in procs:
            p.join()
    txns = sum(r[0] for r in results)
    errors = [e for r in results for e in r[1]]
    locked = sum(1 for e in errors if "database is locked" in e)
    workers = args.processes * args.threads
    print(f"\n== 6. store: {args.processes} processes x {args.threads} threads = {workers} concurrent writers, "
          f"{args.attempts} paper-stage attempts each (3 write transactions per attempt) ==")
    print(f"committed {txns} write transactions in {elapsed:.2f} s (process start-up included): "
          f"{txns / elapsed:.0f} txn/s, {txns / 3 / elapsed:.0f} paper-stage attempts/s")
    print(f"errors: {len(errors)} ({locked} 'database is locked'); target 0 -> {'met' if not errors else 'NOT met'}")
    for e in errors[:5]:
        print(f"  {e}")


if __name__ == "__main__":
    main()
