"""Group commit of attempt outcomes (arcticqa.pipeline.outcomes) on a real SQLite store:
outcomes ready in one turn of the event loop share a transaction, each caller goes on only once
its own row is committed, and one outcome that cannot be written fails only its own caller."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from arcticqa.llm.gateway import CallRecord
from arcticqa.pipeline.outcomes import OutcomeWriter
from arcticqa.store.runs import FinishedStep
from arcticqa.store.store import Store


def _call(tag: str) -> CallRecord:
    return CallRecord(role="verifier", provider="openai", model="m", prompt_version="verifier/v1",
                      request_hash=f"hash-{tag}", attempt=1, request={"messages": [{"role": "user", "content": tag}]},
                      parsed={"ok": True})


def _step(i: int, *, status: str = "succeeded") -> FinishedStep:
    return FinishedStep(f"p{i}", "verify", "fd-1/r0", input_hash=f"h{i}", status=status,
                        output={"n": i}, run_id="run-1", calls=[_call(str(i))])


def _committed(db: Path, sql: str) -> list[tuple[object, ...]]:
    """What another connection sees: only committed rows."""
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'arcticqa.db'}")


def test_steps_finishing_together_share_one_transaction(store: Store, tmp_path: Path) -> None:
    writes = OutcomeWriter(store)
    seen_at_return: dict[int, list[tuple[object, ...]]] = {}

    async def one(i: int) -> int:
        row_id = await writes.write(_step(i))
        seen_at_return[i] = _committed(tmp_path / "arcticqa.db",
                                       f"SELECT paper_id, status FROM stage_run WHERE id = {row_id}")
        return row_id

    async def main() -> list[int]:
        return list(await asyncio.gather(*(one(i) for i in range(12))))

    ids = asyncio.run(main())
    assert len(set(ids)) == 12
    assert (writes.outcomes, writes.transactions) == (12, 1)
    # every caller's row was committed (visible to another connection) when its await returned
    assert all(seen_at_return[i] == [(f"p{i}", "succeeded")] for i in range(12))
    calls = _committed(tmp_path / "arcticqa.db", "SELECT request_hash, run_id FROM llm_call ORDER BY id")
    assert sorted(calls) == sorted((f"hash-{i}", "run-1") for i in range(12))


def test_a_step_that_cannot_be_written_fails_only_its_caller(store: Store, tmp_path: Path) -> None:
    writes = OutcomeWriter(store)

    async def main() -> list[int | BaseException]:
        steps = [_step(0), _step(1, status="bogus"), _step(2)]
        return list(await asyncio.gather(*(writes.write(s) for s in steps), return_exceptions=True))

    first, bad, third = asyncio.run(main())
    assert isinstance(bad, ValueError) and "bad final status" in str(bad)
    assert isinstance(first, int) and isinstance(third, int)
    rows = _committed(tmp_path / "arcticqa.db", "SELECT paper_id FROM stage_run ORDER BY paper_id")
    assert rows == [("p0",), ("p2",)]
    # the failed step's model call is kept all the same (it was paid for)
    calls = _committed(tmp_path / "arcticqa.db", "SELECT request_hash FROM llm_call ORDER BY request_hash")
    assert calls == [("hash-0",), ("hash-1",), ("hash-2",)]


def test_a_cancelled_caller_still_has_its_step_written(store: Store, tmp_path: Path) -> None:
    writes = OutcomeWriter(store)

    async def main() -> None:
        task = asyncio.ensure_future(writes.write(_step(7)))
        await asyncio.sleep(0)  # the step is queued for this turn's transaction
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)

    asyncio.run(main())
    assert _committed(tmp_path / "arcticqa.db", "SELECT paper_id, attempt FROM stage_run") == [("p7", 1)]


def test_attempts_of_one_step_in_one_batch_are_numbered_in_order(store: Store) -> None:
    writes = OutcomeWriter(store)

    async def main() -> None:
        await asyncio.gather(writes.write(_step(3, status="failed")), writes.write(_step(3)))

    asyncio.run(main())
    runs = store.runs(stage="verify")
    assert [(r.paper_id, r.attempt, r.status) for r in runs] == [("p3", 2, "succeeded")]


def test_steps_of_every_shape_share_the_transaction(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    """Failed, rejected and succeeded steps, with and without a prompt version, rejections or
    evidence, in one group: one transaction, and each row as its own step would have it."""
    from arcticqa.rules import Rejection
    from arcticqa.store.runs import EvidenceValues
    from arcticqa.store.tables import EVIDENCE_TABLES

    question = EVIDENCE_TABLES["question"]
    steps = [
        _step(0),
        FinishedStep("p1", "verify", "fd-1/r0", input_hash="h1", status="failed", error=RuntimeError("endpoint down"),
                     calls=[_call("1")]),
        FinishedStep("p2", "question", "fd-1/r0", input_hash="h2", status="rejected", output={"q": None},
                     prompt_version="question_writer/v3",
                     rejections=[Rejection(stage="question", rule_id="question.answer_leak", message="leak")]),
        FinishedStep("p3", "question", "fd-1/r0", input_hash="h3", status="succeeded", output={"q": "?"},
                     evidence=[EvidenceValues(question, {"paper_id": "p3", "payload": {"q": "?"}})]),
    ]
    writes = OutcomeWriter(store)

    async def main() -> list[int]:
        return list(await asyncio.gather(*(writes.write(s) for s in steps)))

    ids = asyncio.run(main())
    assert (writes.outcomes, writes.transactions) == (4, 1)
    assert "writing each alone" not in caplog.text
    runs = {r.paper_id: r for r in store.runs()}
    assert [runs[f"p{i}"].id for i in range(4)] == ids
    assert (runs["p1"].status, runs["p1"].error_class, runs["p1"].error_message) == ("failed", "RuntimeError",
                                                                                     "endpoint down")
    assert runs["p2"].prompt_version == "question_writer/v3" and runs["p0"].prompt_version is None
    assert [(r.paper_id, r.rule_id, r.stage_run_id) for r in store.rejections()] == [
        ("p2", "question.answer_leak", ids[2])]


def test_closed_attempts_and_steps_share_the_transaction(store: Store) -> None:
    """The runner's closes of claimed attempts go in the same group as construction steps."""
    from arcticqa.store.runs import ClosedAttempt

    claims = [store.claim_run(f"p{i}", "construct", "", input_hash="h", worker_id=None, run_id="run-1",
                              done=lambda run: False) for i in range(3)]
    writes = OutcomeWriter(store)

    async def main() -> list[int]:
        return list(await asyncio.gather(
            writes.write(ClosedAttempt(claims[0].run, status="succeeded", output={"items": []})),  # type: ignore[arg-type]
            writes.write(_step(5)),
            writes.write(ClosedAttempt(claims[1].run, status="failed", error=RuntimeError("x"),  # type: ignore[arg-type]
                                       calls=[_call("c1")])),
            writes.write(ClosedAttempt(claims[2].run, status="rejected", output={"items": []}))))  # type: ignore[arg-type]

    ids = asyncio.run(main())
    assert (writes.outcomes, writes.transactions) == (4, 1)
    assert [ids[0], ids[2], ids[3]] == [c.run.id for c in claims]  # type: ignore[union-attr]
    runs = {(r.paper_id, r.stage): r for r in store.runs()}
    assert [runs[(f"p{i}", "construct")].status for i in range(3)] == ["succeeded", "failed", "rejected"]
    assert runs[("p5", "verify")].id == ids[1]
    assert {c.request_hash for c in store.llm_calls()} == {"hash-5", "hash-c1"}
