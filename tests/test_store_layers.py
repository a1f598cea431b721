"""The store sits below the pipeline: it imports nothing of ``llm``, ``sources``, ``release``,
``evaluate``, ``pipeline`` or ``stages``, and the call records the gateway hands it
fit the ``llm_call`` columns the store writes.

The import check reads every module's source with ``ast`` (module-level imports, imports inside
functions, relative imports and ``importlib.import_module("...")`` calls alike), so a lazy import
cannot hide an upward arrow from it.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from arcticqa.llm.batch import LineResult
from arcticqa.llm.gateway import CallRecord
from arcticqa.store.ledger import CALL_FIELDS, BatchLineFields, ModelCallFields
from arcticqa.store.tables import LLMCall

if TYPE_CHECKING:
    from arcticqa.store.store import Store

STORE = Path(__file__).resolve().parent.parent / "arcticqa" / "store"
FORBIDDEN = ("arcticqa.llm", "arcticqa.sources", "arcticqa.release", "arcticqa.evaluate", "arcticqa.pipeline",
             "arcticqa.stages")


def _module_name(path: Path) -> str:
    parts = path.relative_to(STORE.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module name ``source`` (the text of ``module``) imports, anywhere in the file."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            found.add(node.args[0].value)
    return found


def _upward(names: set[str]) -> list[str]:
    return sorted(n for n in names if any(n == f or n.startswith(f + ".") for f in FORBIDDEN))


def test_the_store_imports_nothing_from_the_layers_above_or_beside_it() -> None:
    files = sorted(STORE.rglob("*.py"))
    assert {STORE / "store.py", STORE / "ledger.py", STORE / "migrations" / "env.py"} <= set(files)  # the walk sees the store
    offences = {}
    for path in files:
        names = imported_modules(path.read_text(encoding="utf-8"), _module_name(path),
                                 is_package=path.name == "__init__.py")
        if bad := _upward(names):
            offences[str(path.relative_to(STORE))] = bad
    assert not offences, f"store modules importing from llm/sources/release/evaluate/pipeline/stages: {offences}"


@pytest.mark.parametrize("source", [
    "from arcticqa.llm.gateway import CallRecord",
    "import arcticqa.release.models",
    "def f():\n    from arcticqa.pipeline import export\n",
    "from ..sources import RawRecord",
    "from .. import evaluate",
    "import importlib\nimportlib.import_module('arcticqa.stages.discover')",
])
def test_the_import_check_finds_every_way_of_importing(source: str) -> None:
    # the check above must be able to fail: each spelling of an upward import is caught
    assert _upward(imported_modules(source, "arcticqa.store.store"))


@pytest.mark.parametrize("source", [
    "from arcticqa.store.db import write_session",
    "from .tables import LLMCall",
    "from arcticqa.config import Settings\nfrom arcticqa.errors import StoreError",
    "import sqlalchemy.engine",
])
def test_the_import_check_lets_the_store_use_its_own_layer_and_below(source: str) -> None:
    assert not _upward(imported_modules(source, "arcticqa.store.store"))


def test_a_call_record_carries_every_column_the_ledger_writes() -> None:
    columns = {c.name for c in LLMCall.__table__.columns} - {"id", "run_id", "created_at"}  # type: ignore[attr-defined]
    assert set(CALL_FIELDS) == columns
    protocol = {name for name in vars(ModelCallFields) if not name.startswith("_")}
    assert protocol == set(CALL_FIELDS)
    assert set(CALL_FIELDS) <= {f.name for f in dataclasses.fields(CallRecord)}
    line = {name for name in vars(BatchLineFields) if not name.startswith("_")}
    assert line <= {f.name for f in dataclasses.fields(LineResult)}


def test_runs_scoped_to_papers_gives_their_newest_attempts_as_the_whole_listing_does(tmp_path: Path) -> None:
    """``Store.runs(paper_ids=...)`` (a batch's look-up) is the full listing filtered to those
    papers: the newest attempt of each (paper, stage, subject), never an older one."""
    from arcticqa.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    for pid in ("p1", "p2", "p3"):
        for status in ("failed", "succeeded"):  # two attempts each: only the second is the newest
            store.record_run(pid, "prefilter", "", input_hash="h", status=status)
        store.record_run(pid, "fetch_fulltext", "", input_hash="h", status="rejected")
    whole = [(r.paper_id, r.stage, r.attempt, r.status) for r in store.runs(stage="prefilter")]
    scoped = [(r.paper_id, r.stage, r.attempt, r.status) for r in store.runs(stage="prefilter", paper_ids=["p1", "p3"])]
    assert scoped == [row for row in whole if row[0] in ("p1", "p3")] == [("p1", "prefilter", 2, "succeeded"),
                                                                           ("p3", "prefilter", 2, "succeeded")]
    assert [r.paper_id for r in store.runs(paper_ids=["p2"])] == ["p2", "p2"]
    assert store.runs(stage="prefilter", paper_ids=[]) == []


def test_status_counts_counts_the_newest_attempts_as_the_listing_of_them_does(tmp_path: Path) -> None:
    from arcticqa.store.store import Store

    status_counts_round_trip(Store(f"sqlite:///{tmp_path / 's.db'}"))


def status_counts_round_trip(store: Store) -> None:
    """``Store.status_counts`` (one GROUP BY in the database) gives what counting the newest
    attempts of every (paper, stage, subject) row by row gives, on a store whose steps have
    several attempts, construct's steps a subject each, attempts interrupted and one running.
    Closes ``store``."""
    histories = {"prefilter": ("failed", "succeeded"), "eligibility": ("failed", "failed", "rejected"),
                 "construct": ("failed", "succeeded")}
    for n in range(7):
        pid = f"p{n}"
        for stage, statuses in histories.items():
            for status in statuses[: 1 + n % len(statuses)]:  # papers stop at different attempts
                store.record_run(pid, stage, "", input_hash="h", status=status)
        for k in range(n % 3):  # construct's steps: one row per subject
            store.record_run(pid, "question", f"f{k}", input_hash="h", status="failed")
            store.record_run(pid, "question", f"f{k}", input_hash="h", status="succeeded" if k else "rejected")
    worker = store.register_worker()
    for pid in ("p0", "p1"):  # a stopped build's attempts, then a new attempt of one of them running
        store.claim_run(pid, "fetch_fulltext", "", input_hash="h", run_id="r", worker_id=worker, done=lambda r: False)
    store.interrupt_runs(worker, "stopped")
    store.claim_run("p0", "fetch_fulltext", "", input_hash="h", run_id="r", worker_id=worker, done=lambda r: False)
    by_rows: dict[str, dict[str, int]] = {}
    for run in store.runs():  # what status_counts computed before: every newest attempt loaded
        by_rows.setdefault(run.stage, {}).setdefault(run.status, 0)
        by_rows[run.stage][run.status] += 1
    counts = store.status_counts()
    assert counts == by_rows
    assert counts["eligibility"] == {"failed": 5, "rejected": 2}
    assert counts["fetch_fulltext"] == {"running": 1, "interrupted": 1}
    store.close()
