"""Evaluator throughput against the local OpenAI-compatible server.

The published shape by default: 8 models x 194 questions x 2 conditions x 3 trials = 9,312
calls. The server adds 200 ms to every call and serves at most ``--concurrency`` (64) at once,
so the ideal is 64 / 0.2 = 320 calls/s; the client splits the same 64 across the models (each
model's ``max_concurrency`` is 64 / 8 = 8). Target: >= 80% of ideal, every call stored in SQLite.

    .venv/bin/python -m bench.bench_evaluator [--models 8] [--items 194] [--trials 3] [--latency 0.2]
        [--concurrency 64]
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

from arcticqa.config import EvalModel
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.policies import policy_responder
from arcticqa.evaluate.runner import run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins import server as stand_in_server
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine


def _serve(latency: float, conn: Connection, nodelay: bool, cap: int | None = None) -> None:
    if nodelay:
        _enable_nodelay()
    with FakeOpenAIServer(policy_responder(), latency=latency, max_concurrency=cap) as server:
        conn.send(server.base_url)
        conn.recv()  # block until the parent is done


def _enable_nodelay() -> None:
    stand_in_server._Handler.disable_nagle_algorithm = True  # socketserver's own switch for TCP_NODELAY


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--items", type=int, default=194)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=64,
                        help="the endpoint's cap, split evenly over the models on the client side")
    parser.add_argument("--nodelay", action="store_true",
                        help="set TCP_NODELAY on the server's sockets: the proposed one-line fix to "
                             "arcticqa/standins/server.py (its header and body writes otherwise meet "
                             "delayed ACK, ~45 ms per call)")
    parser.add_argument("--same-process", action="store_true",
                        help="serve from this process (its threads then compete with the client for the GIL)")
    args = parser.parse_args()
    items = [EvalItem(f"q-{i:04d}", f"Question {i}?", "", f"gold {i}", (f"a{i}", f"b{i}", f"c{i}", f"d{i}"))
             for i in range(args.items)]
    calls = args.models * args.items * 2 * args.trials
    per_model = max(1, -(-args.concurrency // args.models))
    ideal = args.concurrency / args.latency
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory())
        if args.same_process:
            if args.nodelay:
                _enable_nodelay()
            base_url = stack.enter_context(FakeOpenAIServer(policy_responder(), latency=args.latency,
                                                            max_concurrency=args.concurrency)).base_url
        else:
            # The server stands in for a remote endpoint: give it its own process (fork keeps the responder).
            parent, child = multiprocessing.get_context("fork").Pipe()
            process = multiprocessing.get_context("fork").Process(target=_serve,
                                                           args=(args.latency, child, args.nodelay, args.concurrency))
            process.start()
            base_url = parent.recv()
            stack.callback(process.join, 10)
            stack.callback(parent.send, "stop")
        engine = make_engine(f"sqlite:///{Path(tmp) / 'bench.db'}")
        models = [EvalModel(label=f"random-{m}", model="random", base_url=base_url, api_key_env=None,
                            max_concurrency=per_model, timeout_s=60.0) for m in range(args.models)]
        started = time.perf_counter()
        live = ARCTICABSTAIN.live(RunOptions(trials=args.trials), items=items)
        result = asyncio.run(run_protocol(live, models, engine))
        elapsed = time.perf_counter() - started
        stored = len(ARCTICABSTAIN.records_from_store(engine))
    rate = calls / elapsed
    where = "same process" if args.same_process else "separate process"
    print(f"\n== 3. evaluator: {args.models} models x {args.items} questions x 2 conditions x {args.trials} "
          f"trials, {per_model} in flight per model ==")
    print(f"server: {where}, latency {args.latency:g} s, TCP_NODELAY {'on' if args.nodelay else 'off'}")
    print(f"calls: {calls}, recorded {result.recorded}, stored {stored}, elapsed {elapsed:.2f} s")
    print(f"throughput: {rate:.1f} calls/s; ideal {ideal:.0f} calls/s (concurrency {args.concurrency} / "
          f"latency {args.latency:g} s); ratio {rate / ideal:.2f} (target >= 0.80)")


if __name__ == "__main__":
    main()
