"""Reference policies served over the OpenAI-compatible HTTP path, for tests and the demo.

A policy reads the options from the user prompt (``A. text`` lines after ``OPTIONS``) and
replies with a letter, exactly like a model behind an endpoint. :func:`policy_responder`
dispatches on the request's ``model`` name, so one :class:`FakeOpenAIServer` serves them all:

- ``always-abstain``: the abstain option;
- ``first-option``: ``A``;
- ``random``: a uniformly random letter, seeded by the prompt text (repeatable);
- ``oracle``: the gold answer when shown, else abstain (needs the question -> gold mapping);
- ``gold-or-first-distractor``: the gold answer when shown, else the first distractor shown.

A prompt without options is the open protocol's (``CONTEXT`` … ``QUESTION`` …): each policy then
answers in words, deterministically, from the question -> (gold answer, rank-0 distractor) mapping
(:func:`open_answers`): ``always-abstain`` says "I don't know."; ``first-option`` gives the rank-0
distractor; ``random`` one of gold, distractor and "I don't know.", seeded by the prompt text (an
open prompt is the same in every trial, so is the reply);
``oracle`` the gold answer (or "I don't know." for a question it has no answer for);
``gold-or-first-distractor`` the gold answer, else the distractor.

:func:`run_reference_policies` runs them through the real runner and writes the report;
:func:`run_open_reference_policies` does the same with the open protocol, and
:func:`run_policy_variants` with ArcticAbstain's prompt variants (the variants report);
:func:`run_policies` picks one of them for ``arcticqa evaluate policies``.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from arcticqa.config import EvalModel, VariantPlanSettings, did_you_mean
from arcticqa.errors import ConfigError
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import EvalItem, load_items
from arcticqa.evaluate.arcticabstain.prompt import DEFAULT_PROMPT_PATH
from arcticqa.evaluate.arcticabstain.report import ReportPaths, StatsSettings, build_report, write_report
from arcticqa.evaluate.arcticabstain.variants import (
    VariantReport,
    build_variant_report,
    resolve_variants,
    variant_summary_lines,
    write_variant_report,
)
from arcticqa.evaluate.open import OPEN
from arcticqa.evaluate.open.report import build_open_report
from arcticqa.evaluate.recorded import load_protocol_rows
from arcticqa.evaluate.runner import LiveProtocol, run_protocol
from arcticqa.evaluate.shape import ProtocolBase, ReportOptions, ReportSummary, RunOptions, ScoredRecord
from arcticqa.standins.replies import Fault, Reply, Response
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

__all__ = ["REFERENCE_POLICIES", "OPEN_ABSTENTION", "parse_prompt", "open_question", "policy_responder", "gold_map",
           "open_answers", "design_records", "run_reference_policies", "run_open_reference_policies",
           "run_policy_variants", "POLICY_PROTOCOLS", "check_policy_run", "run_policies"]

REFERENCE_POLICIES: tuple[str, ...] = ("always-abstain", "first-option", "random", "oracle")
#: the protocols the reference policies answer (``evaluate policies --protocol``)
POLICY_PROTOCOLS: tuple[str, ...] = ("arcticabstain", "open")
ABSTAIN_TEXT = "I abstain from answering"
#: what every policy says when it abstains in its own words (the open protocol)
OPEN_ABSTENTION = "I don't know."

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


def open_question(user_text: str) -> str | None:
    """The question of an open-protocol user turn (``CONTEXT`` … ``QUESTION`` …), else None."""
    if not user_text.startswith("CONTEXT\n"):
        return None
    _, found, question = user_text.rpartition("\n\nQUESTION\n")
    return question if found else None


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


OpenPolicy = Callable[[tuple[str, str] | None, str], str]


def _open_policies() -> dict[str, OpenPolicy]:
    """Each policy's reply in words to an open question with (gold, rank-0 distractor) when known."""
    def uniform(known: tuple[str, str] | None, prompt: str) -> str:
        rng = random.Random(hashlib.sha256(prompt.encode("utf-8")).digest())
        choices: list[str] = [*(known or ()), OPEN_ABSTENTION]
        return rng.choice(choices)

    return {"always-abstain": lambda known, prompt: OPEN_ABSTENTION,
            "first-option": lambda known, prompt: known[1] if known else "",
            "random": uniform,
            "oracle": lambda known, prompt: known[0] if known else OPEN_ABSTENTION,
            "gold-or-first-distractor": lambda known, prompt: known[0] if known else ""}


def policy_responder(gold: Mapping[str, str] | None = None, *, open_answers: Mapping[str, tuple[str, str]] | None = None
                     ) -> Callable[[dict[str, Any], Mapping[str, str]], Response]:
    """A FakeOpenAIServer responder that answers as the policy named by ``body['model']``: a letter
    when the prompt lists options, words for an open question (``open_answers``: question ->
    (gold answer, rank-0 distractor)), and an empty reply for any other prompt."""
    policies = _make_policies(gold or {})
    open_policies = _open_policies()
    answers = open_answers or {}

    def responder(body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        name = str(body.get("model", ""))
        policy = policies.get(name)
        if policy is None:
            return Fault(404, body='{"error": {"message": "unknown reference policy", "type": "invalid_request_error"}}')
        prompt = _user_text(body)
        question, options = parse_prompt(prompt)
        if options:
            return Reply(content=policy(question, options, prompt), completion_tokens=1)
        asked = open_question(prompt)
        if asked is None:
            return Reply(content="")
        text = open_policies[name](answers.get(asked), prompt)
        return Reply(content=text, completion_tokens=max(1, len(text.split())))

    return responder


def gold_map(items_path: Path | str) -> dict[str, str]:
    """question text -> gold answer, for the oracle policies."""
    return {item.question: item.gold_answer for item in load_items(items_path)}


def open_answers(items: Sequence[EvalItem]) -> dict[str, tuple[str, str]]:
    """question text -> (gold answer, rank-0 distractor), for the policies' open replies."""
    return {item.question: (item.gold_answer, item.distractors[0]) for item in items}


def _policy_models(policies: Sequence[str], base_url: str, concurrency: int) -> list[EvalModel]:
    return [EvalModel(label=name, model=name, base_url=base_url, api_key_env=None, max_concurrency=concurrency,
                      max_retries=2, backoff_initial_s=0.05, backoff_max_s=0.5, timeout_s=30.0)
            for name in policies]


_Record = TypeVar("_Record", bound=ScoredRecord)


def design_records(protocol: ProtocolBase[Any, Any, _Record, Any], live: LiveProtocol, models: Sequence[EvalModel],
                   engine: Engine) -> list[_Record]:
    """The store's records of exactly the cells ``live`` plans for ``models`` (model, eval set, item,
    condition or variant, trial): a store that also holds other runs (more trials, another eval
    set, other items) adds nothing to the report of this one."""
    planned = {(m.label, *call.cell) for m in models for call in live.plan(m)}
    columns = tuple(dict.fromkeys((*protocol.row_columns, "model", "eval_set", "item_id", "condition", "trial")))
    rows = load_protocol_rows(engine, protocol.name, columns, models=[m.label for m in models])
    return [protocol.record_from_row(r) for r in rows
            if (r["model"], r["eval_set"], r["item_id"], r["condition"], r["trial"]) in planned]


async def _ask(live: LiveProtocol, policies: Sequence[str], engine: Engine, responder: Any, *, resume: bool,
               concurrency: int) -> list[EvalModel]:
    """Serve the policies on 127.0.0.1 and run ``live`` on them; the models as they were asked."""
    with FakeOpenAIServer(responder) as server:
        models = _policy_models(policies, server.base_url, concurrency)
        await run_protocol(live, models, engine, resume=resume)
    return models


async def run_reference_policies(items_path: Path | str, out_dir: Path | str, *, db_url: str,
                                 trials: int = 3, policies: Sequence[str] = REFERENCE_POLICIES,
                                 eval_set: str = "arcticqa", resume: bool = True,
                                 concurrency: int = 16, settings: StatsSettings | None = None,
                                 prompt_path: Path | str = DEFAULT_PROMPT_PATH) -> ReportPaths:
    """Serve the reference policies on 127.0.0.1, run the evaluator on them, write the report of
    this run's cells (``eval_set``, ``trials``, these items), whatever else the store holds."""
    items = load_items(items_path)
    live = ARCTICABSTAIN.live(RunOptions(trials=trials, eval_set=eval_set, prompt=Path(prompt_path)), items=items)
    engine = make_engine(db_url)
    responder = policy_responder({item.question: item.gold_answer for item in items})
    models = await _ask(live, policies, engine, responder, resume=resume, concurrency=concurrency)
    records = design_records(ARCTICABSTAIN, live, models, engine)
    report = build_report(records, settings=settings, source=db_url, models=list(policies))
    return write_report(report, out_dir, source_name=f"the reference policies (eval set {eval_set}, {trials} "
                                                     f"trial{'s' if trials != 1 else ''})")


async def run_open_reference_policies(items_path: Path | str, out_dir: Path | str, *, db_url: str,
                                      trials: int = 3, policies: Sequence[str] = REFERENCE_POLICIES,
                                      eval_set: str = "arcticqa", resume: bool = True,
                                      concurrency: int = 16, ask_mc: bool = False) -> ReportSummary:
    """The reference policies through the open protocol (served on 127.0.0.1, the real runner);
    the report pairs them with their multiple-choice responses of the same eval set, trials and
    items in the store (``ask_mc``: ask those first, when the store may not hold them yet)."""
    items = load_items(items_path)
    engine = make_engine(db_url)
    mc_live = ARCTICABSTAIN.live(RunOptions(trials=trials, eval_set=eval_set), items=items)
    if ask_mc:
        await _ask(mc_live, policies, engine, policy_responder({item.question: item.gold_answer for item in items}),
                   resume=True, concurrency=concurrency)
    live = OPEN.live(RunOptions(trials=trials, eval_set=eval_set), items=items)
    models = await _ask(live, policies, engine, policy_responder(open_answers=open_answers(items)), resume=resume,
                        concurrency=concurrency)
    # the MC records of the same design (the models are matched by label)
    mc = design_records(ARCTICABSTAIN, mc_live, models, engine)
    opened = build_open_report(design_records(OPEN, live, models, engine), source=db_url, mc_records=mc)
    return OPEN.report_summary(opened, OPEN.write_report(opened, Path(out_dir), ReportOptions()))


async def run_policy_variants(items_path: Path | str, out_dir: Path | str, *, db_url: str, variants: Sequence[str],
                              trials: int = 1, policies: Sequence[str] = REFERENCE_POLICIES,
                              concurrency: int = 16, eval_set: str = "arcticqa") -> VariantReport:
    """Serve the reference policies on 127.0.0.1, ask them every variant (resuming recorded cells)
    and write the variants report of this run's cells (its variants, trials, eval set and items,
    whatever else the store holds): the docs figure, and a check of the report on known behaviour."""
    items = load_items(items_path)
    live = ARCTICABSTAIN.live(RunOptions(trials=trials, variants=tuple(variants), eval_set=eval_set), items=items)
    engine = make_engine(db_url)
    with FakeOpenAIServer(policy_responder({item.question: item.gold_answer for item in items})) as server:
        models = [EvalModel(label=name, model=name, base_url=server.base_url, api_key_env=None,
                            max_concurrency=concurrency) for name in policies]
        await run_protocol(live, models, engine, resume=True)
    records = design_records(ARCTICABSTAIN, live, models, engine)
    report = build_variant_report(records, source="the reference policies", models=list(policies))
    write_variant_report(report, out_dir)
    return report


def check_policy_run(protocol: str, *, variants: str | None = None) -> None:
    """Refuse, before anything is read, a run the reference policies cannot answer: another protocol,
    or prompt variants of the open protocol (exit 2)."""
    if protocol not in POLICY_PROTOCOLS:
        raise ConfigError(f"--protocol {protocol}: the reference policies answer {' and '.join(POLICY_PROTOCOLS)}"
                          f"{did_you_mean(protocol, POLICY_PROTOCOLS)}")
    if variants is not None and protocol != "arcticabstain":
        raise ConfigError("--variants asks ArcticAbstain prompt variants: leave out --protocol open")


async def run_policies(protocol: str, items_path: Path | str, out_dir: Path | str, *, db_url: str, trials: int = 3,
                       eval_set: str = "arcticqa", variants: str | None = None) -> ReportSummary:
    """``arcticqa evaluate policies``: the reference policies through ``protocol`` (ArcticAbstain's
    paper tables; with ``variants`` its prompt-variants report; the open protocol paired with the
    ArcticAbstain answers it asks too), and the report's console summary."""
    check_policy_run(protocol, variants=variants)
    if variants is not None:
        ids = resolve_variants(variants, VariantPlanSettings())
        report = await run_policy_variants(items_path, out_dir, db_url=db_url, variants=ids, trials=trials,
                                           eval_set=eval_set)
        return ReportSummary(Path(out_dir), variant_summary_lines(report))
    if protocol == "open":
        return await run_open_reference_policies(items_path, out_dir, db_url=db_url, trials=trials, eval_set=eval_set,
                                                 ask_mc=True)
    paths = await run_reference_policies(items_path, out_dir, db_url=db_url, trials=trials, eval_set=eval_set)
    return ReportSummary(paths.out_dir, [])
