"""The evaluator's one protocol shape, its layer, its settings section and its pacing.

Every bundled protocol is a subpackage with the same module names and an object that implements the
whole shape; the evaluator imports nothing above its layer and the store nothing of the evaluator;
``[evaluate]`` is a section of the one ``Settings`` with the build's pacing keys, which the runner
honours; a registered response reader feeds the same scoring path as JSONL.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel
from typer.testing import CliRunner

import arcticqa.evaluate
from arcticqa.cli.app import app
from arcticqa.config import EvalModel, load_settings
from arcticqa.errors import ConfigError
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.external import READERS
from arcticqa.evaluate.protocols import (
    BUNDLED,
    PROTOCOLS,
    EvalProtocol,
    ProtocolBase,
    ReportOptions,
    RunOptions,
)
from arcticqa.evaluate.runner import run_protocol
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine
from arcticqa.store.store import migrate_engine

REPO = Path(__file__).resolve().parent.parent
EVALUATE = REPO / "arcticqa" / "evaluate"
DATA = Path(__file__).parent / "data"
runner = CliRunner()


def _modules(package: Path) -> set[str]:
    return {p.stem for p in package.glob("*.py")}


# -- one shape -----------------------------------------------------------------------------------

def test_every_bundled_protocol_is_a_subpackage_with_the_same_module_names() -> None:
    packages = {p.name: p for p in (EVALUATE / p.name for p in BUNDLED)}
    assert set(packages) == {"arcticabstain", "abstainqa", "know2guess", "open"}
    names = {name: _modules(path) for name, path in packages.items()}
    expected = {"__init__", "items", "prompt", "parse", "records", "metrics", "report"}
    # beside the shape's modules a protocol may hold what is its own alone: ArcticAbstain's
    # prompt-robustness plan and report (variants), which its protocol object writes
    own = {"arcticabstain": {"variants"}}
    assert all(found == expected | own.get(name, set()) for name, found in names.items()), names
    # nothing protocol-specific is left in the package root beside the shared machinery
    # exposure: the training-exposure view (item dates, cutoffs) sits beside coverage, not in a
    # protocol subpackage, so every protocol keeps the same module names; itemaudit, itemsources,
    # keycheck and irt: the item audit (evaluate items), a view of the items across models, the
    # protocols' stored responses it reads, its moved-key score and its IRT fit
    # releaseitems, options and promptfile: the protocol-neutral pieces two protocols share (a release's
    # items, option texts and label parsers, prompt files and variants), so no protocol imports another
    assert _modules(EVALUATE) == {"__init__", "coverage", "exposure", "external", "irt", "itemaudit", "itemsources",
                                  "keycheck", "options", "policies", "promptfile", "protocols", "recorded", "releaseitems",
                                  "reportio", "runner", "shape", "stats"}


def test_the_protocols_are_independent_of_each_other_by_contract() -> None:
    # import-linter's independence contract (make lint) names every bundled protocol's subpackage, so
    # a fifth protocol is held to it too; what two protocols share lives beside them, not in one of them
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    independent = [c for c in contracts["contracts"] if c["type"] == "independence"
                   and any(m.startswith("arcticqa.evaluate.") for m in c["modules"])]
    assert len(independent) == 1
    assert set(independent[0]["modules"]) == {f"arcticqa.evaluate.{p.name}" for p in BUNDLED}
    for path in sorted(EVALUATE.rglob("*.py")):
        if path.parent == EVALUATE:
            continue
        own = f"arcticqa.evaluate.{path.relative_to(EVALUATE).parts[0]}"
        others = [m for m, _, _ in _imports(path) if m.startswith("arcticqa.evaluate.")
                  and m.split(".")[2] in {p.name for p in BUNDLED} and not m.startswith(own)]
        assert not others, f"{path.relative_to(REPO)} imports another protocol: {others}"


@pytest.mark.parametrize("protocol", BUNDLED, ids=lambda p: p.name)
def test_every_bundled_protocol_object_satisfies_the_shape(protocol: EvalProtocol) -> None:
    assert PROTOCOLS[protocol.name] is protocol
    assert isinstance(protocol, ProtocolBase) and not inspect.isabstract(type(protocol))
    package = sys.modules[f"arcticqa.evaluate.{protocol.name}"]
    assert type(protocol).__module__ == package.__name__  # the object lives in its own subpackage
    assert protocol.summary and protocol.question_id_fields and protocol.row_columns
    # every hook of the shape is the protocol's own, not an inherited stub
    hooks = [name for name, member in vars(ProtocolBase).items() if getattr(member, "__isabstractmethod__", False)]
    assert len(hooks) == 9
    assert all(name in vars(type(protocol)) for name in hooks), hooks


def _imports(path: Path) -> Iterable[tuple[str, ast.AST, bool]]:
    """(imported module, node, at module level) of every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node, id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node, id(node) in top


def test_the_evaluator_imports_only_down_and_the_store_nothing_of_it() -> None:
    above = ("arcticqa.pipeline", "arcticqa.cli", "arcticqa.demo", "flows")
    for path in sorted(EVALUATE.rglob("*.py")):
        for module, node, at_top in _imports(path):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            assert not module.startswith(above), f"{where} imports {module}, a higher layer"
            if module.startswith("arcticqa") and not at_top:
                line = path.read_text(encoding="utf-8").splitlines()[node.lineno - 1]  # type: ignore[attr-defined]
                assert "#" in line, f"{where}: function-level import of {module} without a comment saying why"
    for path in sorted((REPO / "arcticqa" / "store").rglob("*.py")):
        assert not [m for m, _, _ in _imports(path) if m.startswith("arcticqa.evaluate")], path


def test_the_store_registers_the_evaluator_table_without_the_evaluator() -> None:
    code = ("import sys, arcticqa.store.tables as t; from sqlmodel import SQLModel; "
            "assert 'eval_response' in SQLModel.metadata.tables; "
            "assert not [m for m in sys.modules if m.startswith('arcticqa.evaluate')]")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_a_migrated_store_matches_the_evaluator_table_model(tmp_path: Path) -> None:
    # the table moved to store/tables.py; the migrations are unchanged: autogenerate sees no difference
    engine = make_engine(f"sqlite:///{tmp_path / 's.db'}")
    migrate_engine(engine)
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), SQLModel.metadata)
    about_eval = [d for d in diff if "eval_response" in repr(d)]
    assert about_eval == []


# -- settings ------------------------------------------------------------------------------------

def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "conf" / "eval.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def test_evaluate_is_a_section_of_the_one_settings(tmp_path: Path) -> None:
    path = _config(tmp_path, '[build]\nbatch_size = 7\n\n[evaluate]\ntrials = 2\nitems = "items.jsonl"\n\n'
                             '[[evaluate.models]]\nlabel = "m1"\nmodel = "m"\nrequests_per_minute = 90\n'
                             'tokens_per_minute = 5000\n')
    settings = load_settings(path)
    assert settings.build.batch_size == 7 and settings.evaluate.trials == 2
    model = settings.evaluate.models[0]
    assert isinstance(model, EvalModel) and (model.requests_per_minute, model.tokens_per_minute) == (90, 5000)
    resolved = settings.evaluate.resolved(path)
    assert resolved.items == path.parent.resolve() / "items.jsonl" and resolved.prompt is None


@pytest.mark.parametrize("rps,hint", [(2, "requests_per_minute = 120"), (0.5, "requests_per_minute = 30")])
def test_the_old_per_second_key_is_refused_with_its_replacement(tmp_path: Path, rps: float, hint: str) -> None:
    path = _config(tmp_path, f'[evaluate]\n[[evaluate.models]]\nlabel = "m1"\nrequests_per_second = {rps}\n')
    with pytest.raises(ConfigError, match="requests_per_second was replaced by requests_per_minute") as err:
        load_settings(path)
    assert hint in str(err.value) and "evaluate.models.0" in str(err.value)
    result = runner.invoke(app, ["evaluate", "run", "-c", str(path), "--items", str(path)])
    assert result.exit_code == 2 and "requests_per_minute" in result.output


def test_a_misspelt_model_key_names_the_key_it_meant(tmp_path: Path) -> None:
    path = _config(tmp_path, '[evaluate]\n[[evaluate.models]]\nlabel = "m1"\nrequests_per_minut = 60\n')
    with pytest.raises(ConfigError, match=r"evaluate\.models\.0\.requests_per_minut.*did you mean 'requests_per_minute'"):
        load_settings(path)


# -- pacing: the build's unit, honoured by the one runner --------------------------------------------

def test_requests_per_minute_paces_the_evaluator(tmp_path: Path) -> None:
    # 120 rpm: a burst of 2 (one second's worth), then one call every 0.5 s — as in the gateway
    items = [EvalItem(f"q-{i}", f"Question {i}?", "", f"gold {i}", (f"a {i}", f"b {i}", f"c {i}", f"d {i}"))
             for i in range(3)]
    with FakeOpenAIServer(lambda body, headers: Reply(content="A")) as srv:
        model = EvalModel(label="paced", model="paced", base_url=srv.base_url, api_key_env=None,
                          max_concurrency=8, requests_per_minute=120)
        live = arcticqa.evaluate.ARCTICABSTAIN.live(RunOptions(trials=1), items=items)
        engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
        migrate_engine(engine)
        started = time.monotonic()  # the server stamps requests with the same clock
        result = asyncio.run(run_protocol(live, [model], engine))
        at = sorted(r.at for r in srv.requests)
    assert result.recorded == len(at) == 6
    # The sixth call may not start before (6 - 2) / 2 s. Counted from the start, and no window check at
    # the server: under load the first connections open late and the paced calls then arrive bunched.
    assert at[-1] - started >= (6 - 2) / 2.0 * 0.9


# -- the external-response reader is an extension point ----------------------------------------------

def test_a_registered_reader_scores_exactly_like_jsonl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    items = DATA / "know2guess" / "items.jsonl"
    ids = [json.loads(x)["question_id"] for x in items.read_text(encoding="utf-8").splitlines() if x.strip()]
    replies = ['{"decision": "ANSWER", "answer": "Oslo", "confidence": 0.8}', '{"decision": "ABSTAIN"}',
               "I don't know", None, "I can't help with that.", '{"decision": "ANSWER", "answer": "x"}']
    plain = [{"question_id": qid, "model": model, "raw_response_text": replies[(i + m) % len(replies)]}
             for m, model in enumerate(("m1", "m2")) for i, qid in enumerate(ids)]

    def tab_separated(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
        # a different file format carrying the same fields: question, model, reply
        for n, row in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            qid, model, raw = row.split("\t")
            yield n, {"question_id": qid, "model": model, "raw_response_text": json.loads(raw)}

    monkeypatch.setitem(READERS, "tsv", tab_separated)
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in plain), encoding="utf-8")
    tsv = tmp_path / "r.tsv"
    tsv.write_text("".join(f"{r['question_id']}\t{r['model']}\t{json.dumps(r['raw_response_text'])}\n"
                           for r in plain), encoding="utf-8")
    k2g = PROTOCOLS["know2guess"]
    options = ReportOptions(figure=False)
    k2g.score_external(items, jsonl, tmp_path / "a", options)
    k2g.score_external(items, tsv, tmp_path / "b", options, reader="tsv")
    a = json.loads((tmp_path / "a" / "summary.json").read_text())
    b = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert a["responses"] == len(plain) > 0
    assert {**a, "source": ""} == {**b, "source": ""}
    with pytest.raises(ConfigError, match="unknown response reader 'tvs'.*did you mean 'tsv'"):
        k2g.score_external(items, tsv, tmp_path / "c", options, reader="tvs")
