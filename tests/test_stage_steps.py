"""The orchestrator's StepRunner contract: every step goes through the runner with a pydantic
inputs model, and a memoising runner makes a resumed construction re-run nothing."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from arcticqa.llm.types import RoleReply
from arcticqa.stages.accept import AcceptResult
from arcticqa.stages.construct import STAGES, ConstructionOptions, ConstructionResult, construct_items
from arcticqa.stages.findings import FindingsResult
from arcticqa.stages.option_check import OptionCheckResult
from arcticqa.stages.results import StepResult
from tests.test_construct import (
    DOC,
    GOOD_QUESTION,
    GOOD_RECONSTRUCTION,
    GOOD_VERDICT,
    NUMERIC_DISTRACTORS,
    NUMERIC_FINDING,
    PAPER,
)

R = TypeVar("R", bound=BaseModel)
OutT = TypeVar("OutT", bound=BaseModel)

_OUTPUTS = {"finding_extractor": {"findings": [NUMERIC_FINDING]}, "question_writer": GOOD_QUESTION,
            "reconstructor": GOOD_RECONSTRUCTION, "verifier": GOOD_VERDICT,
            "distractor_writer": NUMERIC_DISTRACTORS}


class _ScriptedRoles:
    """A tiny in-test RoleClient: fixed outputs per role, every call counted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None]] = []

    async def ask(self, role: str, prompt: str, variables: Mapping[str, Any], response_model: type[OutT], *,
                  subject: str | None = None) -> RoleReply[OutT]:
        self.calls.append((role, subject))
        return RoleReply(output=response_model.model_validate(_OUTPUTS[role]), role=role, provider="test",
                         model="scripted", prompt_version=f"{prompt}#test", request_hash=f"h-{role}",
                         cached=False)


class _MemoRunner:
    """What the lead's runner does, minus the store: memoise by (stage, subject, inputs hash)."""

    def __init__(self) -> None:
        self.done: dict[tuple[str, str, str], str] = {}
        self.seen: list[tuple[str, str, type[BaseModel]]] = []

    async def __call__(self, stage: str, subject: str, inputs: BaseModel, fn: Callable[[], Awaitable[R]],
                       result_type: type[R]) -> R:
        self.seen.append((stage, subject, type(inputs)))
        key = (stage, subject, hashlib.sha256(inputs.model_dump_json().encode()).hexdigest())
        if key in self.done:
            return result_type.model_validate_json(self.done[key])
        result = await fn()
        assert isinstance(result, result_type)
        self.done[key] = result.model_dump_json()
        return result


def _construct(llm: _ScriptedRoles, runner: _MemoRunner) -> ConstructionResult:
    return asyncio.run(construct_items(PAPER, DOC, llm, ConstructionOptions(), runner))


def test_every_step_goes_through_the_runner_and_resume_reruns_nothing() -> None:
    runner = _MemoRunner()
    first_llm = _ScriptedRoles()
    first = _construct(first_llm, runner)
    assert len(first.items) == 1
    assert [s for s, _, _ in runner.seen] == list(STAGES)
    assert runner.seen[0][1] == PAPER.paperId and runner.seen[1][1].endswith("/r0")
    assert {r for r, _ in first_llm.calls} == set(_OUTPUTS)  # numeric options need no option_verifier

    resumed_llm = _ScriptedRoles()
    resumed = _construct(resumed_llm, runner)
    assert resumed_llm.calls == []
    assert resumed.items[0].model_dump() == first.items[0].model_dump()
    assert resumed.items[0].prompt_versions["verifier"] == "verifier/v1#test"


def test_every_step_result_says_when_it_is_ok() -> None:
    """The runner records a step ``succeeded`` exactly when its result is ``ok``: every step of a
    construction that yields an item is ok, and each result type's empty outcome is not."""
    class _Recording(_MemoRunner):
        def __init__(self) -> None:
            super().__init__()
            self.results: list[tuple[str, StepResult]] = []

        async def __call__(self, stage: str, subject: str, inputs: BaseModel, fn: Callable[[], Awaitable[R]],
                           result_type: type[R]) -> R:
            result = await super().__call__(stage, subject, inputs, fn, result_type)
            assert isinstance(result, StepResult), stage
            self.results.append((stage, result))
            return result

    runner = _Recording()
    assert len(_construct(_ScriptedRoles(), runner).items) == 1
    assert [stage for stage, _ in runner.results] == list(STAGES)
    assert all(result.ok for _, result in runner.results), [s for s, r in runner.results if not r.ok]
    assert not FindingsResult(paper_id="p").ok  # no finding survived its gates
    assert not OptionCheckResult(subject="s").ok  # no option admitted
    assert not AcceptResult(subject="s").ok  # no item
