"""Early work that runs on into the model stages until the flow takes the build over.

On the Prefect route, the first build of a session starts the shared server and works while it
starts (``arcticqa.pipeline.build.run_early``): discovery and the stages that call no model, then
the later stages until the server answers. From then on no paper starts a stage early; the flow
run reports what was done and runs the rest (:func:`run_batch_after_early`), with the budget
going on from what the early work spent. These tests run both halves without Prefect (the flow's
batches as its tasks run them), against the stand-in model on loopback and real SQLite stores,
with the hand-over put between two papers the test chooses (one paper at a time, two a batch:
the first batch is split between the halves), so which paper ran where is deterministic:

1. The two halves together make the same attempts (none twice), summary and spend as the same
   build run in one go; each attempt carries the run id of the half that made it.
2. A server that answers before the first model stage: the early work runs no model stage.
3. The budget cap holds across the two halves: the flow's budget starts from the early spend.
4. In batch mode the early work stops before the model stages (they wait for the provider's jobs).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from arcticqa.config import Settings, load_settings
from arcticqa.pipeline.build import (
    BatchPlan,
    BuildOptions,
    BuildSummary,
    EarlyWork,
    execute,
    run_batch_after_early,
    run_early,
)
from arcticqa.pipeline.runner import BatchReport, BuildContext, StageSpec
from arcticqa.pipeline.stages import stages_without_model
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import ScriptedModel, build_in_process, make_corpus, write_config

MODEL_STAGES = ("eligibility", "construct")  # build.site_extractor is "when_undecided"


@dataclass
class _FlowAfterEarly:
    """The flow's route without Prefect: each batch as its ``stage-batch`` task runs it after
    early work, discovery as its ``discover`` task (the early discovery)."""

    early: EarlyWork
    done_early: dict[str, int] = field(default_factory=Counter)

    @contextmanager
    def bind(self, ctx: BuildContext) -> Iterator[BatchPlan]:
        async def dispatch(spec: StageSpec, batch_no: int, ids: list[str]) -> BatchReport:
            report, done = await run_batch_after_early(ctx, spec, ids, self.early)
            if done is not None:
                self.done_early[spec.name] += len(done.statuses)
            return report

        async def discover(c: BuildContext) -> dict[str, Any] | None:
            return self.early.discovered

        yield BatchPlan(dispatch=dispatch, discover=discover)


def _settings(config: Path, **build: Any) -> Settings:
    # one paper at a time (write_config puts two in a batch): the hand-over falls between papers
    return load_settings(config, build={"paper_concurrency": 1, **build})


@contextmanager
def _once_finished(settings: Settings, stage: str) -> Iterator[Callable[[], bool]]:
    """A ``until`` that is true once a paper has finished ``stage`` (read from the store)."""
    store = Store(settings.store.url)
    try:
        yield lambda: any(r.status in ("succeeded", "rejected") for r in store.runs(stage=stage) if not r.subject)
    finally:
        store.close()


def _in_two_halves(settings: Settings, until: Callable[[], bool] | None) -> tuple[EarlyWork, BuildSummary,
                                                                               _FlowAfterEarly]:
    early = asyncio.run(run_early(settings, BuildOptions(), stages_without_model(settings), until=until))
    route = _FlowAfterEarly(early)
    summary = asyncio.run(execute(settings, BuildOptions(), route, budget=early.budget(settings)))
    return early, summary, route


def _attempts(settings: Settings) -> list[Any]:
    store = Store(settings.store.url)
    try:
        return store.runs()
    finally:
        store.close()


def _spent(settings: Settings) -> float:
    store = Store(settings.store.url)
    try:
        return sum(c.cost_usd for c in store.llm_calls())
    finally:
        store.close()


@pytest.fixture
def endpoint() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(ScriptedModel()) as server:
        yield server


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-early-work")


def test_hand_over_after_one_paper_equals_the_build_in_one_go(endpoint: FakeOpenAIServer, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    whole = _settings(write_config(tmp_path / "whole", base_url=endpoint.base_url, corpus=corpus))
    direct = build_in_process(whole)
    halves = _settings(write_config(tmp_path / "halves", base_url=endpoint.base_url, corpus=corpus))

    # the server "answers" once the first paper has finished construct
    with _once_finished(halves, "construct") as until:
        early, summary, route = _in_two_halves(halves, until)

    flow = summary.model_dump(mode="json")
    assert {k: v for k, v in flow.items() if k not in ("run_id", "llm_spent_usd")} == \
        {k: v for k, v in direct.items() if k not in ("run_id", "llm_spent_usd")}
    assert direct["stages"]["construct"] == {"succeeded": 3}
    # the flow's summary counts the early work's spend too (its budget went on from it)
    assert 0 < early.spent_usd < flow["llm_spent_usd"]
    assert flow["llm_spent_usd"] == pytest.approx(direct["llm_spent_usd"]) == pytest.approx(_spent(halves))
    assert sum(early.paper_spent_usd.values()) == pytest.approx(early.spent_usd)

    def key(r: Any) -> tuple[str, str, str, int, str]:
        return r.paper_id, r.stage, r.subject, r.attempt, r.status

    # the same attempts, none made twice (a second try of a paper stage would be attempt 2)
    assert Counter(map(key, _attempts(halves))) == Counter(map(key, _attempts(whole)))
    runs: dict[str, Counter[str]] = {}
    for r in _attempts(halves):
        if not r.subject:
            runs.setdefault(r.stage, Counter())[
                "early" if r.run_id == early.run_id else "flow" if r.run_id == summary.run_id else r.run_id] += 1
    assert {s: dict(c) for s, c in runs.items()} == {
        "prefilter": {"early": 3}, "fetch_fulltext": {"early": 3}, "extract_text": {"early": 3},
        "eligibility": {"early": 3}, "construct": {"early": 1, "flow": 2}}
    # the flow's tasks reported what was done early, and ran only the rest
    assert dict(route.done_early) == {"prefilter": 3, "fetch_fulltext": 3, "extract_text": 3, "eligibility": 3,
                                      "construct": 1}


def test_a_server_answering_before_the_model_stages_leaves_them_to_the_flow(endpoint: FakeOpenAIServer,
                                                                             tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus")
    settings = _settings(write_config(tmp_path / "b", base_url=endpoint.base_url, corpus=corpus))

    early, summary, route = _in_two_halves(settings, lambda: True)

    assert early.spent_usd == 0 and early.paper_spent_usd == {}
    assert summary.stages["construct"] == {"succeeded": 3}
    assert {r.stage for r in _attempts(settings) if r.run_id == early.run_id} == \
        {"prefilter", "fetch_fulltext", "extract_text"}
    assert all(r.run_id == summary.run_id for r in _attempts(settings) if r.stage in MODEL_STAGES)
    assert route.done_early["construct"] == route.done_early["eligibility"] == 0


def test_the_budget_cap_holds_across_the_early_work_and_the_flow(endpoint: FakeOpenAIServer, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=4)
    whole = _settings(write_config(tmp_path / "whole", base_url=endpoint.base_url, corpus=corpus))
    full = build_in_process(whole)["llm_spent_usd"]
    assert full > 0
    cap = full * 0.4
    settings = _settings(write_config(tmp_path / "capped", base_url=endpoint.base_url, corpus=corpus),
                         budget_usd=cap)

    # the flow takes over after the first paper's construction: without the early spend counted,
    # its own budget would let it spend another 40% and build more papers
    with _once_finished(settings, "construct") as until:
        early, summary, _ = _in_two_halves(settings, until)

    assert 0 < early.spent_usd
    assert summary.stopped is not None and "budget cap" in summary.stopped
    spent = _spent(settings)
    assert spent == pytest.approx(summary.llm_spent_usd)
    # a cap stops new calls only: one call per concurrent slot may overshoot it (one paper at a time)
    store = Store(settings.store.url)
    try:
        per_call = max(c.cost_usd for c in store.llm_calls())
    finally:
        store.close()
    assert spent <= cap + per_call, (spent, cap)
    assert summary.stages["construct"].get("succeeded", 0) < 4


def test_in_batch_mode_the_early_work_leaves_the_model_stages_to_the_flow(tmp_path: Path) -> None:
    from flows.build_arcticqa import _early_until

    settings = load_settings(write_config(tmp_path, base_url="http://127.0.0.1:9/v1", corpus=tmp_path / "c.jsonl"))
    answering = threading.Event()
    until = _early_until(settings, answering)
    assert until is not None and not until()
    answering.set()
    assert until()
    batched = settings.model_copy(update={"build": settings.build.model_copy(update={"batch": True})})
    assert _early_until(batched, answering) is None
