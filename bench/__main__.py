"""Run every benchmark in one go: ``python -m bench [--quick] [--only NAME ...]``.

Each benchmark runs in its own process (one at a time: the machine has 2 cores and the figures
are throughput), prints its figures and its ratio to the ideal or target, and this prints a
closing table of exit codes and wall times. ``--quick`` shrinks every workload to a smoke run
(a minute or so in all); its figures are not the ones to quote.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

__all__ = ["BENCHES", "main"]

#: name → (module, full arguments, quick arguments): the build, the evaluator, then the parts
BENCHES: dict[str, tuple[str, list[str], list[str]]] = {
    "pipeline": ("bench.bench_pipeline", ["--papers", "200", "--prefect", "--compare-extraction"],
                 ["--papers", "30", "--compare-extraction"]),
    "pipeline-2": ("bench.bench_pipeline", ["--papers", "200", "--mode", "saturation", "--workers", "2",
                                            "--paper-concurrency", "100"],
                   ["--papers", "30", "--mode", "saturation", "--workers", "2"]),
    "evaluator": ("bench.bench_evaluator", [], ["--models", "2", "--items", "50", "--trials", "1"]),
    "stats": ("bench.bench_stats", [], ["--resamples", "1000", "--draws", "2000", "--repeat", "1",
                                        "--skip-reference"]),
    "eligibility": ("bench.bench_eligibility", [], ["100000", "5000"]),
    "store": ("bench.bench_store", [], ["--attempts", "40"]),
    # planted defects against the gates (0 may reach the release), and the pass-through
    "gates": ("bench.bench_gates", [], ["--seeds", "1", "2", "3", "--min-plants", "60"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small workloads: a smoke run, not figures")
    parser.add_argument("--only", action="append", choices=sorted(BENCHES), help="run only these (repeatable)")
    args = parser.parse_args(argv)
    results: list[tuple[str, int, float]] = []
    for name, (module, full, quick) in BENCHES.items():
        if args.only and name not in args.only:
            continue
        command = [sys.executable, "-m", module, *(quick if args.quick else full)]
        print(f"\n### {name}: {' '.join(command[1:])}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(command)
        results.append((name, code, time.perf_counter() - started))
    print("\n### summary")
    for name, code, wall in results:
        print(f"{name:<12} {'ok' if code == 0 else f'exit {code}':<8} {wall:7.1f} s")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
