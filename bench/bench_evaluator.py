"""Benchmark: runner throughput against the local OpenAI-compatible server.

200 ms server latency and concurrency 32 bound the throughput at 32 / 0.2 = 160 calls/s; the
target is >= 80% of that (128 calls/s), every call stored in SQLite.

    .venv/bin/python bench/bench_evaluator.py [--items 100] [--nodelay] [--trials 3] [--latency 0.2] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from arcticqa.evaluate.conditions import EvalItem
from arcticqa.evaluate.policies import policy_responder
from arcticqa.evaluate.records import load_store_responses
from arcticqa.evaluate.runner import run_evaluation
from arcticqa.evaluate.settings import EvalModel
from arcticqa.llm.local_server import FakeOpenAIServer
from arcticqa.store.db import make_engine


def _serve(latency: float, conn: Connection, nodelay: bool) -> None:
    if nodelay:
        _enable_nodelay()
    with FakeOpenAIServer(policy_responder(), latency=latency) as server:
        conn.send(server.base_url)
        conn.recv()  # block until the parent is done


def _enable_nodelay() -> None:
    from arcticqa.llm import local_server

    local_server._Handler.disable_nagle_algorithm = True  # socketserver's own switch for TCP_NODELAY


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--nodelay", action="store_true",
                        help="set TCP_NODELAY on the server's sockets: the proposed one-line fix to "
                             "arcticqa/llm/local_server.py (its header and body writes otherwise meet "
                             "delayed ACK, ~45 ms per call)")
    parser.add_argument("--same-process", action="store_true",
                        help="serve from this process (its threads then compete with the client for the GIL)")
    args = parser.parse_args()
    items = [EvalItem(f"q-{i:04d}", f"Question {i}?", "", f"gold {i}", (f"a{i}", f"b{i}", f"c{i}", f"d{i}"))
             for i in range(args.items)]
    calls = args.items * 2 * args.trials
    ideal = args.concurrency / args.latency
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        if args.same_process:
            if args.nodelay:
                _enable_nodelay()
            base_url = stack.enter_context(FakeOpenAIServer(policy_responder(), latency=args.latency)).base_url
        else:
            # The server stands in for a remote endpoint: give it its own process (fork keeps the responder).
            parent, child = multiprocessing.get_context("fork").Pipe()
            process = multiprocessing.get_context("fork").Process(target=_serve, args=(args.latency, child, args.nodelay))
            process.start()
            base_url = parent.recv()
            stack.callback(process.join, 10)
            stack.callback(parent.send, "stop")
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        model = EvalModel(label="random", model="random", base_url=base_url, api_key_env=None,
                          max_concurrency=args.concurrency, timeout_s=30.0)
        started = time.perf_counter()
        result = asyncio.run(run_evaluation(items, [model], engine, trials=args.trials))
        elapsed = time.perf_counter() - started
        stored = len(load_store_responses(engine))
    rate = calls / elapsed
    where = "same process" if args.same_process else "separate process"
    print(f"server: {where}, latency {args.latency:g} s, TCP_NODELAY {'on' if args.nodelay else 'off'}")
    print(f"calls: {calls}, recorded {result.recorded}, stored {stored}, elapsed {elapsed:.2f} s")
    print(f"throughput: {rate:.1f} calls/s; ideal {ideal:.0f} calls/s (concurrency {args.concurrency} / "
          f"latency {args.latency:g} s); ratio {rate / ideal:.2f} (target >= 0.80)")


if __name__ == "__main__":
    main()
