"""The build's answer cache (arcticqa.pipeline.ledger.StoreLedger) on a real SQLite store: a stored
answer is found, a request without one costs no query, and an answer recorded through the ledger
is found by the next identical request."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import event

from arcticqa.llm.gateway import CallRecord
from arcticqa.pipeline.ledger import StoreLedger
from arcticqa.store.store import Store


def _answer(request_hash: str, *, parsed: dict[str, object] | None = None, error: str | None = None) -> CallRecord:
    return CallRecord(role="verifier", provider="openai", model="m", prompt_version="verifier/v1",
                      request_hash=request_hash, attempt=1, request={"messages": []}, parsed=parsed, error=error)


def _count_queries(store: Store) -> list[str]:
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, *rest: statements.append(statement))
    return statements


def test_stored_answers_are_found_and_new_requests_cost_no_query(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'arcticqa.db'}")
    store.record_calls([_answer("a" * 64, parsed={"ok": 1}), _answer("b" * 64, error="timeout"),
                        _answer("c" * 64, parsed={"ok": 3})])
    ledger = StoreLedger(store, "run-2")
    assert ledger.cached_output("a" * 64) == {"ok": 1}
    assert ledger.cached_output("c" * 64) == {"ok": 3}
    assert ledger.cached_output("b" * 64) is None  # a failed call is no answer

    queries = _count_queries(store)
    for i in range(50):
        assert ledger.cached_output(f"{i:064x}") is None
    assert queries == []

    ledger.record_calls([_answer("d" * 64, parsed={"ok": 4})])
    assert ledger.cached_output("d" * 64) == {"ok": 4}
    assert len(queries) >= 2  # the insert, then the look-up of an answer it now knows of


def test_answers_stored_by_another_process_after_the_first_look_up_are_asked_again(tmp_path: Path) -> None:
    """The documented trade: the hashes are read once per build; a later answer from another
    build process is a cache miss (the request is sent again), never a wrong answer."""
    store = Store(f"sqlite:///{tmp_path / 'arcticqa.db'}")
    ledger = StoreLedger(store, "run-1")
    assert ledger.cached_output("e" * 64) is None
    StoreLedger(Store(f"sqlite:///{tmp_path / 'arcticqa.db'}"), "run-2").record_calls(
        [_answer("e" * 64, parsed={"ok": 5})])
    assert ledger.cached_output("e" * 64) is None
    assert StoreLedger(store, "run-3").cached_output("e" * 64) == {"ok": 5}
