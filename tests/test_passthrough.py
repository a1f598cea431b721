"""The offline roles over the OpenAI wire protocol (:mod:`arcticqa.standins.passthrough`).

A build of the sample corpus through the real openai + instructor clients and a loopback server
must export the offline build's items byte for byte; every variable the stand-in reads back from
a rendered prompt must be the one the stage rendered — over every call of that build and over
generated variables written to break the reading (brackets, colons, semicolons, line breaks).
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import ModelConfig, Settings, load_settings
from arcticqa.llm.gateway import Gateway, MemoryRecorder
from arcticqa.llm.prompts import load_prompt
from arcticqa.pipeline.build import build
from arcticqa.pipeline.export import export_from_store
from arcticqa.stages.reconstruct import Reconstruction
from arcticqa.standins.passthrough import Call, OfflineOverWire, models_toml, read_variables
from arcticqa.standins.replies import Reply, Response
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store import open_store

SAMPLE_CORPUS = Path(__file__).resolve().parents[1] / "data" / "sample_corpus" / "papers.jsonl"


def _build(folder: Path, models: str = "") -> tuple[Path, Path]:
    """Build and export the sample corpus in ``folder``; (items.jsonl, the store's SQLite file)."""
    folder.mkdir(parents=True)
    db = folder / "arcticqa.db"
    config = folder / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{db}"\n\n[build]\ndata_dir = "{folder / "data"}"\n'
                      f'source = "snapshot:{SAMPLE_CORPUS}"\n\n{models}', encoding="utf-8")
    settings = load_settings(config)
    build(settings)
    store = open_store(settings)
    try:
        export_from_store(store, settings, folder / "release", release_id="passthrough", overwrite=True)
    finally:
        store.close()
    return folder / "release" / "items.jsonl", db


@pytest.fixture(scope="module")
def offline_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _build(tmp_path_factory.mktemp("offline") / "build")


def test_a_build_through_the_wire_exports_the_offline_builds_items_byte_for_byte(
        offline_build: tuple[Path, Path], tmp_path: Path) -> None:
    seen: list[str] = []

    def watch(call: Call) -> Response | None:
        seen.append(call.role)
        return None

    with FakeOpenAIServer(OfflineOverWire(tamper=watch)) as server:
        items, db = _build(tmp_path / "wire", models_toml(server.base_url))
        requests = server.completions
    offline_items, _ = offline_build
    assert offline_items.read_text(encoding="utf-8").count("\n") >= 5  # the corpus gives items
    assert items.read_bytes() == offline_items.read_bytes()
    # every role the corpus needs answered over HTTP (the rules prove each of its distractors false,
    # so the option verifier is never asked), and the build recorded the calls as an openai provider's
    assert {"finding_extractor", "question_writer", "reconstructor", "verifier", "distractor_writer"} <= set(seen)
    with sqlite3.connect(db) as con:
        providers = {p for (p,) in con.execute("select distinct provider from llm_call")}
        calls = con.execute("select count(*) from llm_call where cache_hit = 0").fetchone()[0]
    assert providers == {"openai"}
    assert calls == requests == len(seen)


def _expected(variables: dict[str, Any], read: dict[str, Any]) -> dict[str, Any]:
    """What the stand-in should read back: the rendered variables as the roles see them."""
    out: dict[str, Any] = {}
    for key, got in read.items():
        value = variables.get(key)
        if key == "spans":
            value = [{"id": s["id"], "section": s["section"], "text": " ".join(s["text"].split())} for s in value]
        elif key in ("question_context", "title"):
            value = value or ""
        elif isinstance(got, dict) and isinstance(value, dict):
            value = {k: value.get(k) for k in got}
        out[key] = value
    return out


def _read(ref: str, variables: dict[str, Any]) -> dict[str, Any]:
    system, user = (m["content"] for m in load_prompt(ref).render(variables))
    read = read_variables(ref, system, user)
    if "spans" in read:  # the roles read span texts with their whitespace folded
        read["spans"] = [{**s, "text": " ".join(s["text"].split())} for s in read["spans"]]
    return read


def test_every_variable_of_every_offline_call_is_read_back(offline_build: tuple[Path, Path]) -> None:
    _, db = offline_build
    with sqlite3.connect(db) as con:
        rows = con.execute("select prompt_version, request from llm_call").fetchall()
    refs = set()
    for version, request in rows:
        ref = version.split("#")[0].replace("@", "/")
        variables = json.loads(request)["variables"]
        read = _read(ref, variables)
        assert read == _expected(variables, read), ref
        refs.add(ref)
    assert {"finding_extractor/v1", "question_writer/v1", "reconstructor/v1", "verifier/v1",
            "distractor_writer/v2"} <= refs


_AWKWARD = ["(none)", "a (b) c", "x: y", "p; q", "[sp-1] (results) t", "Question: q", "- k: v", "none",
            "0,6 °C", "между 2008 и 2017 гг.", "  padded  ", "Scope:", "(unit: m)", "a)\nb"]


def _text(rng: random.Random, *, lines: bool = False) -> str:
    words = [rng.choice(_AWKWARD) if rng.random() < 0.4 else rng.choice(["ice", "18%", "Svalbard", "2012"])
             for _ in range(rng.randint(1, 5))]
    text = " ".join(words)
    return text if lines else " ".join(text.split())


def _spans(rng: random.Random) -> list[dict[str, str]]:
    return [{"id": f"sp-{i:04x}", "section": rng.choice(["results", "methods", "abstract"]), "text": _text(rng)}
            for i in range(rng.randint(1, 4))]


def _variables(ref: str, rng: random.Random) -> dict[str, Any]:
    q, ctx = _text(rng, lines=True).strip() or "q", rng.choice(["", _text(rng, lines=True).strip()])
    # the one ambiguity of the templates: a context of "(none)" is rendered as an empty one is
    ctx = "" if ctx == "(none)" else ctx
    scope = {k: _text(rng) for k in rng.sample(["location", "period", "method"], rng.randint(0, 3))}
    finding = {"claim": _text(rng, lines=True).strip() or "c", "claim_type": "observation", "answer_type": "numeric",
               "unit": rng.choice([None, "%", "°C"]), "scope": scope}
    answer = _text(rng).strip() or "18%"
    common = {"question": q, "question_context": ctx, "answer": answer, "spans": _spans(rng)}
    if ref == "question_writer/v1":
        revision = rng.choice([0, 1])
        return {"finding": finding, "answer": answer, "spans": common["spans"], "revision": revision,
                "feedback": ["question.answer_leak: the question states 18%"] if revision else [],
                "previous": {"question": q, "question_context": ctx} if revision else None}
    if ref == "reconstructor/v1":
        return {"question": q, "question_context": ctx, "spans": common["spans"]}
    if ref == "verifier/v1":
        return {**common, "finding": {k: finding[k] for k in ("claim", "claim_type", "scope")},
                "reconstruction": {"answer": _text(rng), "claim_type": "observation",
                                   "alternatives": [_text(rng).replace("; ", " ") for _ in range(rng.randint(0, 2))]},
                "judge_equivalence": rng.random() < 0.5}
    if ref == "distractor_writer/v2":
        return {**common, "finding": {k: finding[k] for k in ("claim", "answer_type", "unit")}}
    if ref == "option_verifier/v1":
        return {**common, "scope": scope, "option": _text(rng), "option_type": "numeric"}
    if ref == "option_verifier/multi-v1":
        return {**common, "scope": scope,
                "options": [{"id": i, "type": "numeric", "text": _text(rng)} for i in range(rng.randint(1, 4))]}
    if ref == "finding_extractor/v1":
        return {"paper_id": "p-1", "title": _text(rng).replace("(", "[").replace(")", "]"), "k": 3,
                "spans": common["spans"]}
    return {"paper_id": "p-1", "title": rng.choice(["", "Ice at 79°N"]),
            "spans": [{**s, "text": _text(rng, lines=True).strip() or "t"} for s in common["spans"]]}


@pytest.mark.parametrize("ref", ["question_writer/v1", "reconstructor/v1", "verifier/v1", "distractor_writer/v2",
                                 "option_verifier/v1", "option_verifier/multi-v1", "finding_extractor/v1",
                                 "site_extractor/v1"])
def test_generated_variables_survive_rendering_and_reading(ref: str) -> None:
    rng = random.Random(f"passthrough:{ref}")
    for _ in range(200):
        variables = _variables(ref, rng)
        read = _read(ref, variables)
        assert read == _expected(variables, read), (ref, variables)


@pytest.fixture
def wire() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(OfflineOverWire()) as server:
        yield server


def _reconstruct(server: FakeOpenAIServer, **model: Any) -> Any:
    settings = Settings(models={"standin": ModelConfig(provider="openai", base_url=server.base_url,
                                                       model="offline-baseline", api_key_env="", **model)},
                        roles={"reconstructor": "standin"})
    variables = {"question": "By what percentage did ice thickness decrease between 2010 and 2020?",
                 "question_context": "",
                 "spans": [{"id": "sp-1", "section": "results",
                            "text": "Ice thickness decreased by 18% between 2010 and 2020."}]}

    async def go() -> Any:
        async with Gateway(settings, MemoryRecorder()) as gateway:
            return await gateway.ask("reconstructor", "reconstructor/v1", variables, Reconstruction, subject="t")
    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["json", "tools", "json_schema", "md_json"])
def test_each_instructor_mode_gets_the_offline_answer(wire: FakeOpenAIServer, mode: str) -> None:
    reply = _reconstruct(wire, mode=mode)
    assert reply.provider == "openai"
    assert reply.output.answer == "18%" and reply.output.span_ids == ["sp-1"]


def test_a_prompt_the_stand_in_cannot_read_is_refused_by_name(wire: FakeOpenAIServer) -> None:
    answer = OfflineOverWire()({"messages": [{"role": "system", "content": "You are helpful."},
                                             {"role": "user", "content": "hi"}]}, {})
    assert not isinstance(answer, Reply)
    assert answer.status == 400 and "no known prompt opens this system message" in answer.body
    answer = OfflineOverWire()({"messages": [{"role": "system", "content": load_prompt("reconstructor/v1").system},
                                             {"role": "user", "content": "Question: q"}]}, {})
    assert answer.status == 400 and "does not follow reconstructor/v1" in answer.body  # type: ignore[union-attr]


def _serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "arcticqa", "standin", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), proc.communicate(timeout=5)[0] if proc.poll() is not None else f"no {path} after 60 s"


def test_the_standin_command_serves_until_interrupted(tmp_path: Path) -> None:
    toml = tmp_path / "standin.toml"
    proc = _serve("--toml-out", str(toml))
    try:
        _wait_for(toml, proc)
        config = tomllib.loads(toml.read_text(encoding="utf-8"))
        base_url = config["models"]["standin"]["base_url"]
        assert set(config["roles"].values()) == {"standin"}
        server = type("Endpoint", (), {"base_url": base_url})()
        assert _reconstruct(server).output.answer == "18%"  # type: ignore[arg-type]
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    assert f"serving the offline roles at {base_url}" in out
    assert "stopped after 1 completion(s)" in out


def test_the_standin_command_plants_defects_and_logs_them(tmp_path: Path) -> None:
    toml, plants = tmp_path / "standin.toml", tmp_path / "plants.jsonl"
    proc = _serve("--toml-out", str(toml), "--red-team", "3", "--plants", str(plants))
    try:
        _wait_for(toml, proc)
        items, _ = _build(tmp_path / "build", toml.read_text(encoding="utf-8"))
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    logged = [json.loads(line) for line in plants.read_text(encoding="utf-8").splitlines()]
    assert logged and all(p["seed"] == 3 and p["defect"] for p in logged)
    assert f"{len(logged)} defect(s) planted" in out and "red team seed 3" in out
    assert items.exists()


def test_the_standin_command_refuses_an_unknown_defect_class() -> None:
    result = subprocess.run([sys.executable, "-m", "arcticqa", "standin", "--red-team", "1", "--classes", "nope"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "nope" in result.stderr
