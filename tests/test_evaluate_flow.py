"""The ``evaluate-arcticabstain`` Prefect flow (slow: ephemeral Prefect API): reference policies
served over the loopback stand-in, one task per model, every cell stored once, the report written,
and a resumed run asks nothing again."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from arcticqa.evaluate.arcticabstain.items import load_items
from arcticqa.evaluate.policies import policy_responder
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine, read_session
from arcticqa.store.tables import EvalResponseRow

pytestmark = pytest.mark.slow


def test_flow_runs_models_and_writes_the_report(arcticqa_v1: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.evaluate_arcticabstain import evaluate_arcticabstain

    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    items_path = tmp_path / "items.jsonl"
    lines = (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()[:6]
    items_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    items = load_items(items_path)
    db = f"sqlite:///{tmp_path / 'eval.db'}"
    with FakeOpenAIServer(policy_responder({i.question: i.gold_answer for i in items})) as srv:
        config = tmp_path / "eval.toml"
        config.write_text("[evaluate]\ntrials = 2\n" + "".join(
            f'[[evaluate.models]]\nlabel = "{p}"\nmodel = "{p}"\nbase_url = "{srv.base_url}"\napi_key_env = ""\n'
            for p in ("always-abstain", "oracle")), encoding="utf-8")

        def run(resume: bool) -> dict[str, Any]:
            return asyncio.run(evaluate_arcticabstain(str(config), items_path=str(items_path), db_url=db,
                                                      resume=resume, out_dir=str(tmp_path / "report")))

        first = run(False)
        sent = len(srv.requests)
        assert sent == len(items) * 2 * 2 * 2  # items × conditions × trials × models
        run(True)
        assert len(srv.requests) == sent  # resumed: every cell was done
    with read_session(make_engine(db)) as s:
        rows = s.exec(select(EvalResponseRow)).all()
    assert len(rows) == sent and first
    summary = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    assert summary
    tables = (tmp_path / "report" / "TABLES.md").read_text(encoding="utf-8")
    assert "always-abstain" in tables and "oracle" in tables
