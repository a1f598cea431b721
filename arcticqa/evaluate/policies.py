"""Reference policies served over the OpenAI-compatible HTTP path, for tests and the demo.

A policy reads the options from the user prompt (``A. text`` lines after ``OPTIONS``) and
replies with a letter, exactly like a model behind an endpoint. :func:`policy_responder`
dispatches on the request's ``model`` name, so one :class:`FakeOpenAIServer` serves them all:

- ``always-abstain``: the abstain option;
- ``first-option``: ``A``;
- ``random``: a uniformly random letter, seeded by the prompt text (repeatable);
- ``oracle``: the gold answer when shown, else abstain (needs the question -> gold mapping);
- ``gold-or-first-distractor``: the gold answer when shown, else the first distractor shown.

:func:`run_reference_policies` runs them through the real runner and writes the report.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arcticqa.config import EvalModel
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import load_items
from arcticqa.evaluate.arcticabstain.prompt import DEFAULT_PROMPT_PATH
from arcticqa.evaluate.arcticabstain.report import ReportPaths, StatsSettings, build_report, write_report
from arcticqa.evaluate.runner import run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.standins.replies import Fault, Reply, Response
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine

__all__ = ["REFERENCE_POLICIES", "parse_prompt", "policy_responder", "gold_map", "run_reference_policies"]

REFERENCE_POLICIES: tuple[str, ...] = ("always-abstain", "first-option", "random", "oracle")
ABSTAIN_TEXT = "I abstain from answering"

_OPTION_LINE = re.compile(r"^([A-Z1-5])\. (.*)$")  # letters, or the numbers of a prompt variant


def parse_prompt(user_text: str) -> tuple[str, list[tuple[str, str]]]:
    """(question, [(letter, text)]) from a rendered user turn."""
    question = ""
    blocks = user_text.split("\n\n")
    if blocks and blocks[0].startswith("QUESTION\n"):
        question = blocks[0].removeprefix("QUESTION\n")
    _, _, listing = user_text.rpartition("OPTIONS\n")
    options = [(m.group(1), m.group(2)) for line in listing.splitlines() if (m := _OPTION_LINE.match(line))]
    return question, options


def _user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


Policy = Callable[[str, list[tuple[str, str]], str], str]


def _abstain(options: list[tuple[str, str]]) -> str:
    return next(letter for letter, text in options if text == ABSTAIN_TEXT)


def _make_policies(gold: Mapping[str, str]) -> dict[str, Policy]:
    def always_abstain(question: str, options: list[tuple[str, str]], prompt: str) -> str:
        return _abstain(options)

    def first_option(question: str, options: list[tuple[str, str]], prompt: str) -> str:
        return options[0][0]

    def uniform(question: str, options: list[tuple[str, str]], prompt: str) -> str:
        rng = random.Random(hashlib.sha256(prompt.encode("utf-8")).digest())
        return rng.choice(options)[0]

    def _gold_letter(question: str, options: list[tuple[str, str]]) -> str | None:
        answer = gold.get(question)
        return next((letter for letter, text in options if answer is not None and text == answer), None)

    def oracle(question: str, options: list[tuple[str, str]], prompt: str) -> str:
        return _gold_letter(question, options) or _abstain(options)

    def gold_or_first_distractor(question: str, options: list[tuple[str, str]], prompt: str) -> str:
        found = _gold_letter(question, options)
        if found:
            return found
        return next(letter for letter, text in options if text != ABSTAIN_TEXT)

    return {"always-abstain": always_abstain, "first-option": first_option, "random": uniform,
            "oracle": oracle, "gold-or-first-distractor": gold_or_first_distractor}


def policy_responder(gold: Mapping[str, str] | None = None) -> Callable[[dict[str, Any], Mapping[str, str]], Response]:
    """A FakeOpenAIServer responder that answers as the policy named by ``body['model']``."""
    policies = _make_policies(gold or {})

    def responder(body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        policy = policies.get(str(body.get("model", "")))
        if policy is None:
            return Fault(404, body='{"error": {"message": "unknown reference policy", "type": "invalid_request_error"}}')
        prompt = _user_text(body)
        question, options = parse_prompt(prompt)
        if not options:
            return Reply(content="")
        return Reply(content=policy(question, options, prompt), completion_tokens=1)

    return responder


def gold_map(items_path: Path | str) -> dict[str, str]:
    """question text -> gold answer, for the oracle policies."""
    return {item.question: item.gold_answer for item in load_items(items_path)}


async def run_reference_policies(items_path: Path | str, out_dir: Path | str, *, db_url: str,
                                 trials: int = 3, policies: Sequence[str] = REFERENCE_POLICIES,
                                 eval_set: str = "arcticqa", resume: bool = True,
                                 concurrency: int = 16, settings: StatsSettings | None = None,
                                 prompt_path: Path | str = DEFAULT_PROMPT_PATH) -> ReportPaths:
    """Serve the reference policies on 127.0.0.1, run the evaluator on them, write the report."""
    items = load_items(items_path)
    live = ARCTICABSTAIN.live(RunOptions(trials=trials, eval_set=eval_set, prompt=Path(prompt_path)), items=items)
    engine = make_engine(db_url)
    responder = policy_responder({item.question: item.gold_answer for item in items})
    with FakeOpenAIServer(responder) as server:
        models = [EvalModel(label=name, model=name, base_url=server.base_url, api_key_env=None,
                            max_concurrency=concurrency, max_retries=2, backoff_initial_s=0.05,
                            backoff_max_s=0.5, timeout_s=30.0)
                  for name in policies]
        await run_protocol(live, models, engine, resume=resume)
    records = ARCTICABSTAIN.records_from_store(engine, models=list(policies))
    report = build_report(records, settings=settings, source=db_url, models=list(policies))
    return write_report(report, out_dir, source_name="the reference policies")
