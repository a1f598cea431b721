"""Model providers: the openai error boundary through the loopback stand-in, the offline provider's
hand-in, and the layer rule that keeps ``llm/`` from importing the stand-ins, gates, geo or demo.
"""

from __future__ import annotations

import ast
import asyncio
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from instructor.v2.validation.async_validators import async_field_validator
from pydantic import BaseModel

from arcticqa.config import ModelConfig, Settings
from arcticqa.errors import ConfigError, LLMAuthError, LLMError, LLMRequestError, LLMTransportError
from arcticqa.llm.gateway import Gateway, MemoryRecorder
from arcticqa.llm.providers.openai import make_async_client
from arcticqa.llm.providers.openai_errors import map_openai_errors
from arcticqa.standins.offline.roles import OFFLINE_ROLES
from arcticqa.standins.replies import Fault, Hang, Response, json_reply
from arcticqa.standins.server import FakeOpenAIServer

REPO = Path(__file__).resolve().parent.parent
LLM = REPO / "arcticqa" / "llm"
#: packages above ``llm/`` (or beside it) that it must never import, at any depth, in any function
FORBIDDEN = ("arcticqa.standins", "arcticqa.gates", "arcticqa.geo", "arcticqa.demo")


class Word(BaseModel):
    word: str


def _cfg(base_url: str, **fields: Any) -> ModelConfig:
    return ModelConfig(base_url=base_url, model="stand-in-model", api_key_env=None, max_retries=1,
                       backoff_initial_s=0.001, backoff_max_s=0.01, timeout_s=0.3, **fields)


# (reply every time, the named error, a fragment of its message)
OPENAI_FAULTS: list[tuple[str, Response, type[LLMError], str]] = [
    ("rate_limit", Fault(429), LLMTransportError, "RateLimitError"),
    ("auth", Fault(401, body='{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}'),
     LLMAuthError, "HTTP 401"),
    ("permission", Fault(403), LLMAuthError, "HTTP 403"),
    ("timeout", Hang(1.0), LLMTransportError, "APITimeoutError"),
    ("server_error", Fault(500), LLMTransportError, "InternalServerError"),
    ("bad_gateway", Fault(502), LLMTransportError, "502"),
    ("bad_request", Fault(400, body='{"error": {"message": "max_tokens is too large", "type": "invalid_request_error"}}'),
     LLMRequestError, "HTTP 400"),
    ("unknown_model", Fault(404), LLMRequestError, "HTTP 404"),
]
IDS = [f[0] for f in OPENAI_FAULTS]


@pytest.mark.parametrize(("name", "reply", "error", "fragment"), OPENAI_FAULTS, ids=IDS)
def test_map_openai_errors_names_each_openai_error_class(name: str, reply: Response, error: type[LLMError],
                                                         fragment: str) -> None:
    """The raw SDK call (as the evaluator makes it) raises openai's class; the boundary ours."""
    async def go(base_url: str) -> None:
        cfg = _cfg(base_url)
        async with make_async_client(cfg) as client:
            with map_openai_errors("verifier", cfg.model):
                await client.chat.completions.create(model=cfg.model, messages=[{"role": "user", "content": "hi"}])

    with FakeOpenAIServer(lambda body, headers: reply) as srv:
        with pytest.raises(error, match=fragment) as info:
            asyncio.run(go(srv.base_url))
    assert type(info.value) is error
    assert type(info.value.__cause__).__module__.startswith("openai")  # what the SDK said stays chained


@pytest.mark.parametrize(("name", "reply", "error", "fragment"), OPENAI_FAULTS, ids=IDS)
def test_the_gateway_raises_the_named_error_after_instructor_and_the_retries(
        name: str, reply: Response, error: type[LLMError], fragment: str) -> None:
    """Through instructor, which wraps a 401 or a 400 as if validation had failed."""
    recorder = MemoryRecorder()

    async def go(base_url: str) -> None:
        settings = Settings(models={"m": _cfg(base_url)}, roles={"verifier": "m"})
        async with Gateway(settings, recorder) as gw:
            await gw.ask("verifier", "_selftest/v1", {"word": "ice"}, Word)

    with FakeOpenAIServer(lambda body, headers: reply) as srv:
        with pytest.raises(error, match=fragment) as info:
            asyncio.run(go(srv.base_url))
        sent = len(srv.requests)
    assert type(info.value) is error
    # only "no answer" is asked again; a refused key or request is not worth a second try
    assert sent == (2 if error is LLMTransportError else 1)
    assert len(recorder.records) == sent and all(r.error and r.parsed is None for r in recorder.records)


class AsyncChecked(BaseModel):
    """A response model carrying instructor's async validator, which instructor refuses to run."""

    word: str

    @async_field_validator("word")
    async def _word(self, value: str) -> str:
        return value


def test_instructor_still_refuses_an_async_validator_model_on_every_call_once_passes_are_remembered() -> None:
    """The per-class memory of instructor's async-validator check (arcticqa.llm.providers.openai)
    keeps passes only: a refused class is refused again, a plain class keeps working, and no
    request leaves for a refused one."""
    import instructor.v2.core.patch as patch
    import instructor.v2.validation.async_validators as validators

    from arcticqa.llm.providers import openai as provider

    # the names instructor calls are the memo: an instructor upgrade that moves them fails here
    assert validators.reject_async_validators is provider._reject_async_validators
    assert patch.reject_async_validators is provider._reject_async_validators

    async def go(base_url: str) -> list[str]:
        outcomes = []
        settings = Settings(models={"m": _cfg(base_url)}, roles={"verifier": "m"})
        async with Gateway(settings, MemoryRecorder()) as gw:
            for i, model in enumerate([AsyncChecked, Word, AsyncChecked, Word, AsyncChecked]):
                try:
                    reply = await gw.ask("verifier", "_selftest/v1", {"word": f"ice{i}"}, model)
                    outcomes.append(f"ok {reply.output.word}")
                except Exception as exc:  # noqa: BLE001 - the refusal is what is asserted
                    outcomes.append(f"refused {'async validators are not supported' in str(exc)}")
        return outcomes

    with FakeOpenAIServer(lambda body, headers: json_reply({"word": "ice"})) as srv:
        outcomes = asyncio.run(go(srv.base_url))
        sent = len(srv.requests)
    assert outcomes == ["refused True", "ok ice", "refused True", "ok ice", "refused True"]
    assert sent == 2  # the refused calls never reached the endpoint


def test_an_offline_role_needs_the_roles_handed_to_the_gateway() -> None:
    variables = {"spans": [], "word": "ice"}

    async def ask(gateway: Gateway) -> Any:
        async with gateway as gw:
            return await gw.ask("verifier", "_selftest/v1", variables, Word)

    with pytest.raises(ConfigError, match="no implementation for role 'verifier'"):
        asyncio.run(ask(Gateway(Settings())))

    def verifier(variables: Any, response_model: type[BaseModel]) -> BaseModel:
        return response_model.model_validate({"word": variables["word"]})

    recorder = MemoryRecorder()
    reply = asyncio.run(ask(Gateway(Settings(), recorder, offline_roles={"verifier": verifier})))
    assert (reply.output, reply.provider) == (Word(word="ice"), "offline")
    assert [(r.attempt, r.cost_usd, r.request["variables"]) for r in recorder.records] == [(1, 0.0, variables)]


def test_the_build_hands_every_role_an_offline_implementation() -> None:
    assert set(OFFLINE_ROLES) == set(Settings().roles)


def test_an_all_offline_gateway_does_not_import_the_openai_sdk() -> None:
    code = ("import sys, asyncio\n"
            "from arcticqa.config import Settings\n"
            "from arcticqa.llm.gateway import Gateway\n"
            "asyncio.run(Gateway(Settings()).__aenter__())\n"
            "print(sorted(m for m in ('openai', 'instructor') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- the layer rule ------------------------------------------------------------------------------

def forbidden_imports(source: str, forbidden: tuple[str, ...] = FORBIDDEN) -> list[str]:
    """Every import in ``source`` (module level or in a function) that reaches a forbidden package,
    and every ``importlib`` use (which would hide one)."""
    found: list[str] = []

    def hits(name: str) -> bool:
        return any(name == f or name.startswith(f + ".") for f in forbidden)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if hits(a.name) or a.name == "importlib"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if hits(node.module) or node.module == "importlib":
                found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if hits(f"{node.module}.{a.name}")]
    return found


def test_the_layer_check_finds_what_it_looks_for() -> None:
    # the check must be able to fail: each way of writing the import is caught
    for source in ("import arcticqa.standins.server",
                   "from arcticqa.gates.numbers import parse_numbers",
                   "from arcticqa import geo",
                   "def f():\n    from arcticqa.demo.run import run_demo\n",
                   "import importlib\nimportlib.import_module('arcticqa.standins')"):
        assert forbidden_imports(source), source
    assert forbidden_imports("from arcticqa.evidence import Span\nimport arcticqa.geography_notes") == []


@pytest.mark.parametrize("path", sorted(LLM.rglob("*.py")), ids=lambda p: str(p.relative_to(LLM)))
def test_llm_imports_neither_stand_ins_nor_gates_geo_or_demo(path: Path) -> None:
    assert forbidden_imports(path.read_text(encoding="utf-8")) == []


def _v1_messages() -> list[list[dict[str, Any]]]:
    """Requests made of the published v1 items' own wording (numbers, units, Cyrillic, lists), or
    of two fixed ones when ../shared is not there; the comparison below holds for any text."""
    import json

    from tests.conftest import ARCTICQA_V1

    conversations = [[{"role": "system", "content": "Отвечай только JSON."},
                      {"role": "user", "content": "Mean July air temperature was 7.3 °C (range −1.2–14 °C)."}],
                     [{"role": "user", "content": "Which species? \"Cassiope\"\n- Silene\n- Dryas\t(≈ 0.5 m)"}]]
    path = ARCTICQA_V1 / "items.jsonl"
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines()[:12]:
            item = json.loads(line)
            options = "\n".join(f"- {d['text']}" for d in item["distractors"])
            conversations.append([{"role": "system", "content": item["question_context"]},
                                  {"role": "user", "content": f"{item['question']}\n{item['gold_answer']}\n{options}"}])
    return conversations


@pytest.mark.parametrize("mode", ["json", "md_json", "json_schema", "tools"])
def test_requests_skip_the_sdk_transform_but_leave_byte_for_byte_what_create_sends(mode: str) -> None:
    """The provider sends plain-JSON requests through the client's ``post`` instead of
    ``chat.completions.create`` (arcticqa.llm.providers.openai._direct_create): the endpoint must
    receive the same path, headers and body either way, re-asks included."""
    import instructor

    from arcticqa.llm.providers import openai as provider

    conversations = _v1_messages()

    async def send(base_url: str, direct: bool) -> list[str]:
        cfg = _cfg(base_url, mode=mode, max_reasks=1, extra_body={"seed": 7})
        answers = []
        async with make_async_client(cfg) as raw:
            client = provider._instructor_client(raw, provider._MODES[mode]) if direct else \
                instructor.from_openai(raw, mode=provider._MODES[mode])
            for messages in conversations:
                try:
                    out = await client.chat.completions.create(
                        response_model=Word, messages=messages, model=cfg.model, temperature=0.0, max_tokens=64,
                        max_retries=cfg.max_reasks + 1, extra_headers={"X-Arcticqa-Role": "verifier"},
                        extra_body=cfg.extra_body)
                    answers.append(out.word)
                except Exception as exc:  # noqa: BLE001 - tools mode gets no tool call: both paths fail alike
                    answers.append(type(exc).__name__)
        return answers

    seen = {}
    for direct in (False, True):
        with FakeOpenAIServer(lambda body, headers: json_reply({"word": "ice"})) as srv:
            answers = asyncio.run(send(srv.base_url, direct))
            # the two servers' ports differ, so does the Host header; all else must not
            seen[direct] = (answers, [(r.path, {k: v for k, v in r.headers.items() if k != "host"}, r.body)
                                      for r in srv.requests])
    assert len(seen[True][1]) >= len(conversations)
    assert seen[True] == seen[False]
    if mode != "tools":
        assert seen[True][0] == ["ice"] * len(conversations)
    assert all(r[1].get("authorization") == "Bearer " + _cfg("x").api_key() for r in seen[True][1])


def _reply_models() -> list[type[BaseModel]]:
    """The response models the build and the evaluator ask for."""
    from arcticqa.evaluate.open.parse import VerifierVerdict
    from arcticqa.stages.distractors import DistractorWriterOutput
    from arcticqa.stages.eligibility import SiteExtractorReply
    from arcticqa.stages.findings import FindingExtractorOutput
    from arcticqa.stages.option_check import OptionVerdict, OptionVerdicts
    from arcticqa.stages.question import QuestionDraft
    from arcticqa.stages.reconstruct import Reconstruction
    from arcticqa.stages.verify import Verdict

    return [FindingExtractorOutput, QuestionDraft, Reconstruction, Verdict, DistractorWriterOutput, OptionVerdict,
            OptionVerdicts, SiteExtractorReply, VerifierVerdict, Word]


def test_json_mode_writes_each_models_schema_instruction_once_and_sends_what_instructor_would() -> None:
    """instructor's JSON-mode request handler, as the provider installs it
    (``_instruction_once``), gives the same request as instructor's own handler for every reply
    model and every request shape (the build's, a conversation with re-asks, and the shapes it
    leaves to instructor), and leaves the caller's messages as they were."""
    import instructor
    from instructor.v2.core.registry import mode_registry
    from instructor.v2.providers.openai.handlers import OpenAIJSONHandler

    from arcticqa.llm.providers import openai as provider

    async def build_client() -> None:
        async with make_async_client(_cfg("http://127.0.0.1:9/v1")) as raw:
            provider._instructor_client(raw, instructor.Mode.JSON)

    asyncio.run(build_client())
    installed = mode_registry.get_handlers(instructor.Provider.OPENAI, instructor.Mode.JSON).request_handler
    assert getattr(installed, "__wrapped__", None) is not None  # an instructor that moved it fails here
    original = OpenAIJSONHandler().prepare_request
    shapes = list(_v1_messages())
    first = shapes[0]
    shapes += [
        [*first, {"role": "assistant", "content": '{"word": 3}'}, {"role": "user", "content": "Fix the errors."}],
        [{**first[0], "name": "arcticqa"}, first[1]],
        [first[0], first[0], first[1]],
        first[1:],  # no system message: instructor's own path
        [{"role": "system", "content": [{"type": "text", "text": first[0]["content"]}]}, first[1]],
        [],
    ]
    for model in _reply_models():
        wired = provider._wired(model)
        for messages in shapes:
            before = copy.deepcopy(messages)
            kwargs = {"messages": messages, "model": "m", "temperature": 0.0, "max_tokens": 64}
            ours = installed(wired, dict(kwargs))
            assert messages == before
            theirs = original(wired, copy.deepcopy(kwargs))
            assert ours[0] is theirs[0] is wired
            assert ours[1] == theirs[1], (model.__name__, messages[:1])


def _answers() -> list[tuple[str, dict[str, Any]]]:
    """Chat completions as endpoints send them: the stand-in's, and the ways compatible servers
    differ from OpenAI's schema (each edit applied to a fresh copy of the stand-in's answer)."""
    from arcticqa.standins.replies import Reply, chat_completion

    def edited(edit: Any, reply: Reply | None = None) -> dict[str, Any]:
        answer = chat_completion(3, {"model": "m"}, reply or Reply(content='{"word": "ice"}'))
        edit(answer)
        return answer

    choice = lambda a: a["choices"][0]  # noqa: E731
    return [
        ("stand-in", edited(lambda a: None)),
        ("refusal", edited(lambda a: None, Reply(content=None, refusal="I can't help with that."))),
        ("length", edited(lambda a: None, Reply(content='{"word": "ic', finish_reason="length"))),
        ("cyrillic", edited(lambda a: None, Reply(content='{"word": "лёд −2 °C"}'))),
        ("extra fields", edited(lambda a: (a.update(system_fingerprint="fp_1", prompt_logprobs=None),
                                           choice(a).update(stop_reason=None)))),
        ("tool call", edited(lambda a: choice(a)["message"].update(content=None, tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "Word", "arguments": '{"word": "ice"}'}}]))),
        ("usage details", edited(lambda a: a["usage"].update(prompt_tokens_details={"cached_tokens": 12}))),
        # what does not validate as OpenAI's schema, which the SDK's lenient parse took
        ("unknown finish_reason", edited(lambda a: choice(a).update(finish_reason="eos"))),
        ("no created", edited(lambda a: a.pop("created"))),
        ("no usage, null id", edited(lambda a: (a.pop("usage"), a.update(id=None)))),
        ("string created", edited(lambda a: a.update(created="2026-12-03"))),
        ("no index", edited(lambda a: choice(a).pop("index"))),
    ]


# dumping an answer whose `created` is a string (the "string created" case, off OpenAI's schema on
# purpose) makes pydantic warn that the value is not the declared int; both parses carry it alike
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize(("name", "answer"), _answers(), ids=[a[0] for a in _answers()])
def test_answers_parse_as_the_sdks_lenient_parse_reads_them(name: str, answer: dict[str, Any]) -> None:
    """``_ChatCompletionAnswer`` validates an answer instead of the SDK's ``construct``; it must
    give the same ChatCompletion for every answer the SDK took, schema-conforming or not."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletion

    from arcticqa.llm.providers.openai import _ChatCompletionAnswer

    sdk = construct_type(type_=ChatCompletion, value=copy.deepcopy(answer))
    ours = _ChatCompletionAnswer.build(response=None, data=copy.deepcopy(answer))
    assert type(ours) is ChatCompletion is type(sdk)
    assert ours.model_dump(mode="json") == sdk.model_dump(mode="json")
    # the one difference: validation counts an answer's extra keys as set, construct does not
    declared = set(ChatCompletion.model_fields)
    assert ours.model_fields_set & declared == sdk.model_fields_set & declared
    assert ours.choices[0].message == sdk.choices[0].message


def test_an_answer_outside_openais_schema_still_reaches_the_caller() -> None:
    """Through the real client and instructor: an answer that fails validation as a
    ChatCompletion (a compatible server's own finish reason, no ``created``) is parsed leniently,
    as the SDK did, and its content becomes the reply."""
    from arcticqa.standins.replies import Reply

    def odd(body: dict[str, Any], headers: Any) -> Reply:
        return Reply(content='{"word": "ice"}', finish_reason="eos")

    async def go(base_url: str) -> str:
        settings = Settings(models={"m": _cfg(base_url)}, roles={"verifier": "m"})
        async with Gateway(settings, MemoryRecorder()) as gw:
            return (await gw.ask("verifier", "_selftest/v1", {"word": "ice"}, Word)).output.word

    with FakeOpenAIServer(odd) as srv:
        assert asyncio.run(go(srv.base_url)) == "ice"
        assert len(srv.requests) == 1


def test_only_plain_json_requests_take_the_direct_path() -> None:
    """What the SDK's transform would change (a pydantic object, a tuple or other iterable, a date,
    bytes, a non-string key) keeps the request on ``chat.completions.create``."""
    import datetime

    from arcticqa.llm.providers.openai import _plain

    plain = {"messages": [{"role": "user", "content": "Δ 7.3 °C"}], "model": "m", "temperature": 0.0,
             "max_tokens": 64, "response_format": {"type": "json_object"}, "seed": None, "stop": ["\n"]}
    assert _plain(plain)
    for odd in (Word(word="ice"), ("a", "b"), datetime.date(2020, 1, 1), b"bytes", {1: "x"}, iter(["a"])):
        assert not _plain({**plain, "messages": [{"role": "user", "content": odd}]}), odd
