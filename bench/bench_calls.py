"""Our CPU per model call, layer by layer: where the floor is.

The same reconstructor request (the real prompt file, twelve evidence spans, ~6 KB) is sent
``--calls`` times, ``--concurrency`` at a time, to the loopback stand-in in another process
(its CPU is not ours), through four ever-thicker layers; each line is this process's CPU over
the timed calls divided by their number (50 warm-up calls first, so imports and first-call
set-up are not in it):

1. ``openai``: the async openai client's ``chat.completions.create`` plus pydantic parsing of the
   answer: what any structured call costs with the SDK;
2. ``instructor``: the openai provider's ``generate`` (instructor over that client, our hooks);
3. ``gateway``: ``Gateway.ask`` with an in-memory recorder (prompt rendering, the request hash,
   transport retries, pacing, call records);
4. ``store``: ``Gateway.ask`` recording into a real SQLite store (cache look-up, ``llm_call`` rows).

    .venv/bin/python -m bench.bench_calls [--calls 1000] [--concurrency 32] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import tempfile
import time
from collections.abc import Awaitable, Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["LAYERS", "main"]

LAYERS = ("openai", "instructor", "gateway", "store")
_ANSWER = json.dumps({"answer": "12.5 m", "span_ids": ["s1", "s2"], "claim_type": "observation",
                      "alternatives": []})
_SPANS = [{"id": f"s{i}", "section": "Results",
           "text": (f"The mooring recorded a mean ice draft of {i}.5 m with a standard deviation of 0.4 m over "
                    "the winter, while the ocean heat flux stayed near 3 W m-2. ") * 3} for i in range(12)]


def _serve(conn: Connection) -> None:
    # the endpoint's process needs only the stand-in
    from arcticqa.standins.replies import Reply
    from arcticqa.standins.server import FakeOpenAIServer

    with FakeOpenAIServer(lambda body, headers: Reply(_ANSWER)) as server:
        conn.send(server.base_url)
        conn.recv()


def _variables(i: int) -> dict[str, Any]:
    # a different question each call: identical requests would be answered from the cache
    return {"question": f"What mean ice draft did mooring M{i:05d} record over the winter?",
            "question_context": None, "spans": _SPANS}


async def _caller(layer: str, base_url: str, work: Path, concurrency: int
                  ) -> tuple[Callable[[int], Awaitable[Any]], Callable[[], Awaitable[None]]]:
    """(one call, close) for ``layer``."""
    # imported after the fork, so the stand-in's process does not carry the client stack
    from arcticqa.config import ModelConfig, Settings
    from arcticqa.llm.batch import MemoryLedger
    from arcticqa.llm.gateway import Gateway, MemoryRecorder
    from arcticqa.llm.prompts import load_prompt
    from arcticqa.llm.providers.base import GenerateRequest
    from arcticqa.llm.providers.openai import OpenAIProvider, make_async_client
    from arcticqa.pipeline.ledger import StoreLedger
    from arcticqa.stages.reconstruct import Reconstruction
    from arcticqa.store.store import Store

    cfg = ModelConfig(provider="openai", base_url=base_url, model="stand-in-model", api_key_env="",
                      max_concurrency=concurrency)
    prompt = load_prompt("reconstructor/v1")
    if layer == "openai":
        client = make_async_client(cfg)

        async def raw(i: int) -> Any:
            completion = await client.chat.completions.create(
                model=cfg.model, messages=prompt.render(_variables(i)),  # type: ignore[arg-type]
                max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                extra_headers={"X-Arcticqa-Role": "reconstructor"})
            return Reconstruction.model_validate_json(completion.choices[0].message.content or "")
        return raw, client.close
    if layer == "instructor":
        provider = OpenAIProvider(ledger=MemoryLedger(), batch_dir=work)

        async def generate(i: int) -> Any:
            request = GenerateRequest(role="reconstructor", model_name="m", cfg=cfg,
                                      messages=prompt.render(_variables(i)), variables={},
                                      response_model=Reconstruction)
            return await provider.generate(request, [])
        return generate, provider.aclose

    class NoCache(MemoryRecorder):
        """Keeps records; no cache look-up (a linear scan here would grow with the run)."""

        def cached_output(self, request_hash: str) -> dict[str, Any] | None:
            return None

    recorder: Any = NoCache() if layer == "gateway" else StoreLedger(Store(f"sqlite:///{work / 's.db'}"), "bench")
    settings = Settings.model_validate({"models": {"m": cfg.model_dump()}, "roles": {"reconstructor": "m"}})
    gateway = await Gateway(settings, recorder).__aenter__()

    async def ask(i: int) -> Any:
        return await gateway.ask("reconstructor", "reconstructor/v1", _variables(i), Reconstruction)
    return ask, gateway.aclose


async def _measure(layer: str, base_url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(CPU s, wall s) of ``calls`` timed calls through ``layer``."""
    with tempfile.TemporaryDirectory(prefix="arcticqa-bench-calls-") as tmp:
        call, close = await _caller(layer, base_url, Path(tmp), concurrency)
        slots = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with slots:
                await call(i)

        await asyncio.gather(*(one(i) for i in range(50)))
        started, cpu0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(one(i) for i in range(1000, 1000 + calls)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - started
        await close()
    return cpu, wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=2, help="rounds over the layers (alternating)")
    parser.add_argument("--layer", action="append", choices=LAYERS, help="only these layers (repeatable)")
    args = parser.parse_args(argv)
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(child,), daemon=True)
    server.start()
    base_url = parent.recv()
    try:
        print(f"== our CPU per model call, layer by layer: {args.calls} calls, {args.concurrency} at a time ==")
        for round_no in range(1, args.repeat + 1):
            for layer in args.layer or LAYERS:
                cpu, wall = asyncio.run(_measure(layer, base_url, args.calls, args.concurrency))
                print(f"round {round_no} {layer:<11} {1000 * cpu / args.calls:6.2f} ms of our CPU per call "
                      f"({args.calls / wall:.0f} calls/s)", flush=True)
    finally:
        parent.send("stop")
        server.join(10)


if __name__ == "__main__":
    main()
