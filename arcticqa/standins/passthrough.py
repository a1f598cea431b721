"""The offline roles served over the OpenAI wire protocol: point any config's ``base_url`` here.

:class:`OfflineOverWire` is a responder for :class:`~arcticqa.standins.server.FakeOpenAIServer`.
It reads each chat-completions request as a model would — the role from the system prompt (or
the gateway's ``X-Arcticqa-Role`` header), the prompt's variables back out of the rendered user
message — and answers with what the offline provider would have returned. A build whose model
configs say ``provider = "openai"``, ``model = "offline-baseline"`` and this ``base_url`` goes
through the real openai + instructor path (HTTP, JSON, validation, retries, the ``llm_call``
rows) yet exports the offline build's items byte for byte (``tests/test_passthrough.py``): a
user checks their setup end to end without a key, and a test sees every defect of the wire.

A *tamper* hook (:data:`Tamper`) sees each call with its honest answer and may send something
else instead; the red team (:mod:`arcticqa.standins.redteam`) plants its defects through it.

Reading the variables back is exact for every field the offline roles use; the parsers follow
the templates of the prompt versions the build sends (``_PARSERS``) and a request for any other
version is answered with HTTP 400 naming it, never with a guess.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict

from arcticqa.config import ROLES
from arcticqa.llm.prompts import load_prompt
from arcticqa.llm.providers.offline import OfflineRole
from arcticqa.standins.offline.roles import OFFLINE_ROLES
from arcticqa.standins.replies import Fault, Reply, Response, role_of

__all__ = ["Call", "Tamper", "OfflineOverWire", "answer", "read_variables", "models_toml"]


@dataclass(frozen=True)
class Call:
    """One role call as the stand-in understood it, with the answer an honest model gives."""

    role: str
    #: the prompt reference, e.g. ``"question_writer/v1"``
    prompt: str
    variables: Mapping[str, Any]
    honest: dict[str, Any]
    body: Mapping[str, Any]


#: sees each call; returns what to send instead, or None to send the honest answer
Tamper = Callable[[Call], Response | None]


class _AnyOutput(BaseModel):
    """Takes whatever a role returns: the client's instructor validates it against the real model."""

    model_config = ConfigDict(extra="allow")


class OfflineOverWire:
    """``FakeOpenAIServer(OfflineOverWire())``: the offline roles behind a chat-completions endpoint."""

    def __init__(self, roles: Mapping[str, OfflineRole] = OFFLINE_ROLES, *, tamper: Tamper | None = None) -> None:
        self.roles = roles
        self.tamper = tamper

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        try:
            system, user = _prompt_messages(body)
            ref = _identify(system, role_of(headers))
            variables = read_variables(ref, system, user)
        except _Unreadable as exc:
            return _bad_request(str(exc))
        role = ref.partition("/")[0]
        fn = self.roles.get(role)
        if fn is None:
            return _bad_request(f"the offline roles have no {role!r}")
        output = fn(variables, _AnyOutput)
        if not isinstance(output, BaseModel):  # an async role: the server thread has no loop to run it
            return _bad_request(f"role {role!r} is asynchronous; the wire stand-in serves synchronous roles")
        honest = output.model_dump(mode="json")
        if self.tamper is not None:
            sent = self.tamper(Call(role, ref, variables, honest, body))
            if sent is not None:
                return sent
        return answer(body, honest)


def answer(body: Mapping[str, Any], output: Mapping[str, Any]) -> Reply:
    """``output`` as the request's instructor mode expects it: a tool call or JSON text."""
    content = json.dumps(output, ensure_ascii=False)
    tools = body.get("tools") or []
    name = tools[0].get("function", {}).get("name") if tools else None
    # about four characters a token, so budgets and token limits see sizes of the right order
    prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
    return Reply(content=content, tool_call=name, prompt_tokens=max(1, prompt_chars // 4),
                 completion_tokens=max(1, len(content) // 4))


class _Unreadable(ValueError):
    pass


def _bad_request(message: str) -> Fault:
    return Fault(400, body=json.dumps({"error": {"message": f"offline stand-in: {message}",
                                                 "type": "invalid_request_error"}}))


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts: the text ones, in order
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content or "")


def _prompt_messages(body: Mapping[str, Any]) -> tuple[str, str]:
    """The first system and user messages: instructor's re-asks append after them."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, Mapping)]
    system = next((_text(m) for m in messages if m.get("role") in ("system", "developer")), None)
    user = next((_text(m) for m in messages if m.get("role") == "user"), None)
    if system is None or user is None:
        raise _Unreadable("a build role's request has a system and a user message")
    return system, user


def _identify(system: str, role: str | None) -> str:
    """The prompt reference whose system text opens ``system`` (instructor may append to it)."""
    candidates = [ref for ref in _PARSERS if role is None or ref.partition("/")[0] == role]
    best: tuple[int, str] | None = None
    for ref in candidates:
        for variant in _system_texts(ref):
            if system.startswith(variant) and (best is None or len(variant) > best[0]):
                best = (len(variant), ref)
    if best is None:
        known = ", ".join(sorted(_PARSERS))
        raise _Unreadable(f"no known prompt opens this system message{f' (role {role})' if role else ''}; "
                          f"the stand-in reads {known}")
    return best[1]


@functools.lru_cache(maxsize=64)
def _system_texts(ref: str) -> tuple[str, ...]:
    """The prompt's system text as the build renders it: the verifier's depends on one flag."""
    template = _LENIENT.from_string(load_prompt(ref).system)
    return tuple(template.render(judge_equivalence=flag).strip() for flag in (True, False))


# the system texts use no variable but that flag; lenient, so none of the user part's is needed
_LENIENT = jinja2.Environment(autoescape=False)


# ---- reading the variables back -----------------------------------------------------------------

_SPAN_LINE = re.compile(r"^\[([^\]\n]+)\] \(([^)\n]*)\)(?: (.*))?$", re.M)
_SPAN_HEAD = re.compile(r"^\[([^\]\n]+)\] \(([^)\n]*)\)$", re.M)


def _spans_inline(block: str) -> list[dict[str, str]]:
    return [{"id": m.group(1), "section": m.group(2), "text": m.group(3) or ""} for m in _SPAN_LINE.finditer(block)]


def _spans_stacked(block: str) -> list[dict[str, str]]:
    """``[id] (section)`` on a line of its own, the text on the lines below (site extractor)."""
    parts = _SPAN_HEAD.split(block)
    return [{"id": parts[i], "section": parts[i + 1], "text": parts[i + 2].strip("\n")}
            for i in range(1, len(parts) - 2, 3)]


def _scope(block: str) -> dict[str, str]:
    scope: dict[str, str] = {}
    for line in block.splitlines():
        if line.startswith("- ") and ": " in line:
            key, _, value = line[2:].partition(": ")
            scope[key] = value
    return scope


def _context(text: str) -> str:
    return "" if text == "(none)" else text


def _match(pattern: re.Pattern[str], user: str, ref: str) -> re.Match[str]:
    m = pattern.fullmatch(user)
    if m is None:
        raise _Unreadable(f"the user message does not follow {ref}")
    return m


_FINDING = re.compile(r"Paper: (?P<title>.*) \((?P<paper_id>[^()\n]*)\)\nReturn up to (?P<k>\d+) findings\.\n\n"
                      r"Evidence spans \(cite by id\):\n(?P<spans>.*)", re.S)
_SITES = re.compile(r"Paper (?P<paper_id>[^\n:]*)(?:: (?P<title>[^\n]*))?\n\nSpans \(id, section, text\):\n"
                    r"(?P<spans>.*)\n\nList the study sites, each with the id of the span that names it\.", re.S)
_QUESTION = re.compile(r"Finding: (?P<claim>.*?)\nClaim type: (?P<claim_type>[^\n]*)\n"
                       r"Answer type: (?P<answer_type>[^\n]*?)(?: \(unit: (?P<unit>[^\n]*)\))?\n"
                       r"Fixed answer \(must not appear in the question or context\): (?P<answer>.*?)\n"
                       r"Scope:\n(?P<scope>.*?)\nEvidence spans:\n(?P<spans>.*?)"
                       r"(?:\n+This is revision (?P<revision>\d+)\. Your previous draft was:\n"
                       r"Question: (?P<prev_q>.*?)\nContext: (?P<prev_c>.*?)\n"
                       r"It failed these checks — fix them:\n(?P<feedback>.*))?", re.S)
_RECONSTRUCT = re.compile(r"Question: (?P<question>.*?)\nContext: (?P<context>.*?)\n\nEvidence spans:\n(?P<spans>.*)",
                          re.S)
_VERIFY = re.compile(r"Question: (?P<question>.*?)\nContext: (?P<context>.*?)\nGold answer: (?P<answer>.*?)\n"
                     r"Finding: (?P<claim>.*) \(claim type: (?P<claim_type>[^\n()]*)\)\n"
                     r"Scope:\n(?P<scope>.*?)\n*Blind reconstruction: (?P<r_answer>.*) "
                     r"\(claim type: (?P<r_claim_type>[^;\n]*); alternatives: (?P<alternatives>[^\n]*)\)\n\n"
                     r"Evidence spans:\n(?P<spans>.*)", re.S)
_DISTRACT = re.compile(r"Question: (?P<question>.*?)\nContext: (?P<context>.*?)\n"
                       r"Answer: (?P<answer>[^\n]*) \(type: (?P<answer_type>[^,\n]*)(?:, unit: (?P<unit>[^\n]*))?\)\n"
                       r"Finding: (?P<claim>.*?)\n\nEvidence spans:\n(?P<spans>.*)", re.S)
_OPTION = re.compile(r"Question: (?P<question>.*?)\nContext: (?P<context>.*?)\nCorrect answer: (?P<answer>.*?)\n"
                     r"Option to check \((?P<option_type>[^)\n]*)\): (?P<option>[^\n]*)\n"
                     r"Scope:\n(?P<scope>.*?)\nEvidence spans:\n(?P<spans>.*)", re.S)
_OPTIONS = re.compile(r"Question: (?P<question>.*?)\nContext: (?P<context>.*?)\nCorrect answer: (?P<answer>.*?)\n"
                      r"Options to check:\n(?P<options>.*?)\nScope:\n(?P<scope>.*?)\nEvidence spans:\n(?P<spans>.*)",
                      re.S)
_OPTION_LINE = re.compile(r"^- option_id (\d+) \(([^)\n]*)\): (.*)$", re.M)


def _findings(m: re.Match[str], system: str) -> dict[str, Any]:
    return {"paper_id": m["paper_id"], "title": m["title"], "k": int(m["k"]), "spans": _spans_inline(m["spans"])}


def _sites(m: re.Match[str], system: str) -> dict[str, Any]:
    return {"paper_id": m["paper_id"], "title": m["title"] or "", "spans": _spans_stacked(m["spans"])}


def _question(m: re.Match[str], system: str) -> dict[str, Any]:
    revision = int(m["revision"] or 0)
    feedback = [line[2:] for line in (m["feedback"] or "").splitlines() if line.startswith("- ")]
    previous = ({"question": m["prev_q"], "question_context": m["prev_c"]} if m["revision"] else None)
    return {"finding": {"claim": m["claim"], "claim_type": m["claim_type"], "answer_type": m["answer_type"],
                        "unit": m["unit"], "scope": _scope(m["scope"])},
            "answer": m["answer"], "spans": _spans_inline(m["spans"]), "revision": revision,
            "feedback": feedback, "previous": previous}


def _reconstruct(m: re.Match[str], system: str) -> dict[str, Any]:
    return {"question": m["question"], "question_context": _context(m["context"]), "spans": _spans_inline(m["spans"])}


def _verify(m: re.Match[str], system: str) -> dict[str, Any]:
    alternatives = [] if m["alternatives"] == "none" else m["alternatives"].split("; ")
    return {"question": m["question"], "question_context": _context(m["context"]), "answer": m["answer"],
            "finding": {"claim": m["claim"], "claim_type": m["claim_type"], "scope": _scope(m["scope"])},
            "reconstruction": {"answer": m["r_answer"], "claim_type": m["r_claim_type"],
                               "alternatives": alternatives},
            "spans": _spans_inline(m["spans"]),
            "judge_equivalence": "`answers_equivalent`" in system}


def _distract(m: re.Match[str], system: str) -> dict[str, Any]:
    return {"question": m["question"], "question_context": _context(m["context"]), "answer": m["answer"],
            "finding": {"claim": m["claim"], "answer_type": m["answer_type"], "unit": m["unit"]},
            "spans": _spans_inline(m["spans"])}


def _option(m: re.Match[str], system: str) -> dict[str, Any]:
    return {"question": m["question"], "question_context": _context(m["context"]), "answer": m["answer"],
            "option": m["option"], "option_type": m["option_type"], "scope": _scope(m["scope"]),
            "spans": _spans_inline(m["spans"])}


def _options(m: re.Match[str], system: str) -> dict[str, Any]:
    options = [{"id": int(i), "type": t, "text": text} for i, t, text in _OPTION_LINE.findall(m["options"])]
    return {"question": m["question"], "question_context": _context(m["context"]), "answer": m["answer"],
            "options": options, "scope": _scope(m["scope"]), "spans": _spans_inline(m["spans"])}


_Parser = Callable[[re.Match[str], str], dict[str, Any]]
#: the prompt versions the build sends, each with the template it follows and how to read it back
_PARSERS: dict[str, tuple[re.Pattern[str], _Parser]] = {
    "site_extractor/v1": (_SITES, _sites),
    "finding_extractor/v1": (_FINDING, _findings),
    "question_writer/v1": (_QUESTION, _question),
    "reconstructor/v1": (_RECONSTRUCT, _reconstruct),
    "verifier/v1": (_VERIFY, _verify),
    "distractor_writer/v2": (_DISTRACT, _distract),
    "option_verifier/v1": (_OPTION, _option),
    "option_verifier/multi-v1": (_OPTIONS, _options),
}


def read_variables(ref: str, system: str, user: str) -> dict[str, Any]:
    """The variables ``ref`` was rendered from, read back out of its system and user text."""
    if ref not in _PARSERS:
        raise _Unreadable(f"the stand-in cannot read prompt {ref}")
    pattern, parse = _PARSERS[ref]
    return parse(_match(pattern, user, ref), system)



def models_toml(base_url: str, *, name: str = "standin", model: str = "offline-baseline") -> str:
    """The ``[models]`` and ``[roles]`` TOML that sends every build role to the stand-in at ``base_url``.

    ``model`` names what the release records as the writer and verifier models; the offline
    build records ``offline-baseline``, so the items of the two builds are the same bytes.
    """
    roles = "\n".join(f'{role} = "{name}"' for role in ROLES)
    return (f'[models.{name}]\nprovider = "openai"\nbase_url = "{base_url}"\nmodel = "{model}"\n'
            f'api_key_env = ""\n\n[roles]\n{roles}\n')
