"""Benchmark: all ArcticAbstain tables for 8 models x 194 questions x 2 conditions x 3 trials.

Compares the numpy implementation (arcticqa.evaluate.arcticabstain.report.build_report) with a straightforward
pure-Python run of the same published procedure (random.Random(7) draws, per-resample sums), and
checks that both give identical numbers. The published script takes ~15 s; the target is <= 1 s.

    .venv/bin/python bench/bench_stats.py [--resamples 10000] [--draws 20000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import math
import random
import time

from arcticqa.evaluate import stats
from arcticqa.evaluate.arcticabstain.records import ResponseRecord
from arcticqa.evaluate.arcticabstain.report import StatsSettings, build_report

PUBLISHED_SCRIPT_S = 15.0
TARGET_S = 1.0


def synthetic(models: int = 8, questions: int = 194, trials: int = 3, seed: int = 1) -> list[ResponseRecord]:
    """Responses with the published shape: per-model abstention propensities, ~1% invalid."""
    rng = random.Random(seed)
    out = []
    for m in range(models):
        p_abstain = rng.uniform(0.0, 0.6)
        for q in range(questions):
            for condition in ("answer_present", "answer_absent"):
                for t in range(1, trials + 1):
                    u = rng.random()
                    if u < 0.01:
                        outcome = "N0"
                    elif condition == "answer_present":
                        outcome = "N3" if u < p_abstain else ("N1" if rng.random() < 0.55 else "N2")
                    else:
                        outcome = "N5" if u < p_abstain + 0.05 else "N4"
                    out.append(ResponseRecord(f"model-{m}", f"Model {m}", f"q-{q:04d}", condition, t, outcome,
                                              outcome))
    return out


def straightforward(records: list[ResponseRecord], resamples: int, draws: int, seed: int) -> dict[str, tuple]:
    """The published procedure written plainly with random.Random (no numpy)."""
    models = list(dict.fromkeys(r.model for r in records))
    result = {}
    boot_cache: dict[int, list[list[int]]] = {}
    sign_cache: dict[int, list[list[int]]] = {}
    for model in models:
        counts: dict[str, list[int]] = {}
        for r in records:
            if r.model == model and r.outcome != "N0":
                counts.setdefault(r.item_id, [0] * 6)[int(r.outcome[1])] += 1
        qids = sorted(counts)
        n = len(qids)
        if n not in boot_cache:
            rng = random.Random(seed)
            boot_cache[n] = [[rng.choice(range(n)) for _ in range(n)] for _ in range(resamples)]
        shifts = []
        for idx in boot_cache[n]:
            s = [0] * 6
            for i in idx:
                c = counts[qids[i]]
                for k in range(1, 6):
                    s[k] += c[k]
            shifts.append(s[5] / (s[4] + s[5]) - s[3] / (s[1] + s[2] + s[3]))
        shifts.sort()
        ci = (shifts[int(0.025 * (len(shifts) - 1))], shifts[int(0.975 * (len(shifts) - 1))])
        d = []
        for q in qids:
            c = counts[q]
            if c[1] + c[2] + c[3] and c[4] + c[5]:
                d.append(c[5] / (c[4] + c[5]) - c[3] / (c[1] + c[2] + c[3]))
        m = len(d)
        if m not in sign_cache:
            rng = random.Random(seed)
            sign_cache[m] = [[1 if rng.random() < 0.5 else -1 for _ in range(m)] for _ in range(draws)]
        observed = math.fsum(d) / m
        extreme = sum(1 for signs in sign_cache[m]
                      if abs(sum(s * x for s, x in zip(signs, d, strict=True)) / m) >= abs(observed) - 1e-12)
        result[model] = (ci, (extreme + 1) / (draws + 1))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-reference", action="store_true", help="skip the slow pure-Python run")
    args = parser.parse_args()
    records = synthetic()
    settings = StatsSettings(resamples=args.resamples, draws=args.draws)
    timings = []
    report = None
    for _ in range(args.repeat):
        stats._cached_multiplicities.cache_clear()
        stats._cached_negative.cache_clear()
        started = time.perf_counter()
        report = build_report(records, settings=settings)
        timings.append(time.perf_counter() - started)
    assert report is not None
    best = min(timings)
    print(f"responses: {len(records)} (8 models x 194 questions x 2 conditions x 3 trials)")
    print(f"numpy build_report (cold caches): best {best:.3f} s, runs {', '.join(f'{t:.3f}' for t in timings)}")
    print(f"  target <= {TARGET_S:.1f} s: ratio {best / TARGET_S:.2f} of target; "
          f"published script ~{PUBLISHED_SCRIPT_S:.0f} s -> {PUBLISHED_SCRIPT_S / best:.0f}x faster")
    if args.skip_reference:
        return
    started = time.perf_counter()
    reference = straightforward(records, args.resamples, args.draws, 7)
    plain = time.perf_counter() - started
    identical = all(
        (r.shift_ci, r.test.p_value) == reference[r.model] for r in report.models)
    print(f"straightforward pure-Python procedure: {plain:.2f} s ({plain / best:.0f}x the numpy time)")
    print(f"identical shift CIs and permutation p-values for all models: {identical}")
    if not identical:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
