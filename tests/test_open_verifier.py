"""The open protocol's verifier role: only the replies the matcher leaves undecided are sent to it,
its verdicts grade them with lower confidence, a failure leaves the reply undecided (recorded), and
its model calls land in the evaluator's store — through `evaluate run` and the loopback server."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.evaluate.open import OPEN
from arcticqa.evaluate.open.parse import VERIFIER_CAUSE, VerifierVerdict, grade_from_verdict
from arcticqa.standins.replies import Reply, Response, json_reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine
from arcticqa.store.store import Store

runner = CliRunner()

# (item id, question, gold answer, the model's reply, what the scripted verifier says of it); v3 abstains
# in words no abstention rule reads
CASES = [
    ("v1", "Which plant flowered first?", "Cassiope", "Silene", "wrong"),
    ("v2", "How thick was the active layer?", "0.5 m", "about half a metre", "correct"),
    ("v3", "How did the PLFA concentration change?", "increased by 31%", "The passage leaves that open",
     "abstained"),
    ("v4", "What mean temperature was measured?", "-4.2 °C", "-4 °C", "unclear"),
    ("v5", "Which genus dominated the plots?", "Dryas", "Dryas", None),  # matcher: exact
    ("v6", "How long was the snow-free season?", "12 days", "I don't know.", None),  # rule: dont_know
    ("v7", "How deep was the core?", "3.1 m", "8 m", None),  # matcher: numbers disagree
    ("v8", "Which shrub expanded?", "Salix", "Papaver", "broken"),  # the verifier answers no JSON
]
REPLY_TO_GRADE = re.compile(r"^Reply to grade: (.*)$", re.MULTILINE)


def _items(tmp_path: Path) -> Path:
    rows = [{"item_id": i, "question": q, "question_context": f"Context of {i}.", "gold_answer": g,
             "distractors": [{"rank": r, "text": f"{g} alt {r}"} for r in range(4)]} for i, q, g, _, _ in CASES]
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


class Scripted:
    """The model under test answers each question with its scripted reply; the verifier model
    ("judge") gives the scripted verdict of the reply it is shown, and remembers what it was shown."""

    def __init__(self) -> None:
        self.replies = {q: reply for _, q, _, reply, _ in CASES}
        self.verdicts = {reply: verdict for *_, reply, verdict in CASES}
        self.judged: list[str] = []

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Response:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if body["model"] != "judge":
            return Reply(content=self.replies[user.rsplit("QUESTION\n", 1)[1]])
        assert headers.get("x-arcticqa-role") == "open_verifier"
        match = REPLY_TO_GRADE.search(user)
        assert match is not None and "Reference answer:" in user
        shown = match.group(1)
        self.judged.append(shown)
        verdict = self.verdicts[shown]
        if verdict == "broken":
            return Reply(content="{not json")
        return json_reply({"verdict": verdict, "reason": f"scripted: {verdict}"})


def _config(tmp_path: Path, base_url: str, *, verifier: str | None = "judge", provider: str = "openai") -> Path:
    config = tmp_path / "eval.toml"
    setting = f'open_verifier = "{verifier}"\n' if verifier else ""
    config.write_text(
        f'[models.judge]\nprovider = "{provider}"\nbase_url = "{base_url}"\nmodel = "judge"\napi_key_env = ""\n'
        f'max_reasks = 0\nmax_retries = 0\nprice_in_per_mtok = 1.0\n\n'
        f'[evaluate]\ntrials = 1\nitems = "{_items(tmp_path)}"\ndb_url = "sqlite:///{tmp_path / "e.db"}"\n{setting}\n'
        f'[[evaluate.models]]\nlabel = "m"\nmodel = "m"\nbase_url = "{base_url}"\napi_key_env = ""\nmax_retries = 0\n',
        encoding="utf-8")
    return config


def _by_item(tmp_path: Path) -> dict[str, Any]:
    engine = make_engine(f"sqlite:///{tmp_path / 'e.db'}")
    return {r.item_id: r for r in OPEN.records_from_store(engine)}


def test_the_verifier_grades_only_undecided_replies(tmp_path: Path) -> None:
    scripted = Scripted()
    with FakeOpenAIServer(scripted) as server:
        config = _config(tmp_path, server.base_url)
        result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--protocol", "open",
                                     "--out", str(tmp_path / "report")])
    assert result.exit_code == 0, result.output

    # the rules and the matcher decided v5-v7: never sent; every undecided reply was, once
    undecided = [reply for *_, reply, verdict in CASES if verdict is not None]
    assert sorted(scripted.judged) == sorted(undecided)
    got = {i: (r.outcome, r.rule, r.grade_confidence) for i, r in _by_item(tmp_path).items()}
    assert got == {
        "v1": ("wrong", VERIFIER_CAUSE, "low"), "v2": ("correct", VERIFIER_CAUSE, "low"),
        "v3": ("abstained", VERIFIER_CAUSE, "low"), "v4": ("undecided", None, None),
        "v5": ("correct", "exact", "high"), "v6": ("abstained", "open.abstain.dont_know", "high"),
        "v7": ("wrong", "numbers", "high"), "v8": ("undecided", None, None),
    }
    records = _by_item(tmp_path)
    assert records["v4"].verifier is not None and records["v4"].verifier["verdict"] == "unclear"
    assert records["v1"].verifier is not None and records["v1"].verifier["prompt_version"].startswith(
        "open@verifier-v1#")
    # a verifier failure is recorded on the row, not raised
    assert records["v8"].verifier is not None and "LLMOutputError" in records["v8"].verifier["error"]
    assert all(records[i].verifier is None for i in ("v5", "v6", "v7"))

    # the verifier's model calls are in the store, under the run's id, like every role call
    store = Store(f"sqlite:///{tmp_path / 'e.db'}")
    try:
        calls = store.llm_calls()
        run_ids = {r[0] for r in store.engine.connect().execute(text("select distinct run_id from eval_response"))}
    finally:
        store.close()
    assert {c.role for c in calls} == {"open_verifier"} and len(calls) == len(undecided)
    assert [c.error is None for c in calls].count(False) == 1
    assert {c.run_id for c in calls} == run_ids and len(run_ids) == 1

    summary = json.loads((tmp_path / "report" / "summary.json").read_text(encoding="utf-8"))
    group = summary["groups"][0]
    assert (group["verifier_graded"], group["correct"], group["wrong"], group["abstained"], group["undecided"]) == \
        (3, 2, 2, 2, 2)
    assert group["r_acc"] == pytest.approx(2 / 6)


def test_without_a_verifier_undecided_replies_stay_undecided(tmp_path: Path) -> None:
    scripted = Scripted()
    with FakeOpenAIServer(scripted) as server:
        result = runner.invoke(app, ["evaluate", "run", "-c", str(_config(tmp_path, server.base_url, verifier=None)),
                                     "--protocol", "open"])
    assert result.exit_code == 0, result.output
    assert scripted.judged == []
    outcomes = {i: r.outcome for i, r in _by_item(tmp_path).items()}
    assert [i for i, o in sorted(outcomes.items()) if o == "undecided"] == ["v1", "v2", "v3", "v4", "v8"]


def test_the_cli_flag_names_the_verifier_and_bad_names_are_refused(tmp_path: Path) -> None:
    scripted = Scripted()
    with FakeOpenAIServer(scripted) as server:
        config = _config(tmp_path, server.base_url, verifier=None)
        unknown = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--protocol", "open",
                                      "--open-verifier", "judeg"])
        assert unknown.exit_code == 2 and "did you mean 'judge'" in unknown.output
        assert scripted.judged == [] and _by_item(tmp_path) == {}  # refused before any call
        flagged = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--protocol", "open",
                                      "--open-verifier", "judge"])
    assert flagged.exit_code == 0, flagged.output
    assert len(scripted.judged) == 5

    (tmp_path / "e.db").unlink()
    offline = _config(tmp_path, "http://127.0.0.1:9", provider="offline")
    refused = runner.invoke(app, ["evaluate", "run", "-c", str(offline), "--protocol", "open"])
    assert refused.exit_code == 2 and "offline provider has no open verifier" in refused.output
    misnamed = tmp_path / "bad.toml"
    misnamed.write_text(offline.read_text(encoding="utf-8").replace('open_verifier = "judge"', 'open_verifier = "jduge"'),
                        encoding="utf-8")
    bad = runner.invoke(app, ["evaluate", "run", "-c", str(misnamed), "--protocol", "open"])
    assert bad.exit_code == 2 and "evaluate.open_verifier" in bad.output and "'jduge'" in bad.output


@pytest.mark.parametrize(("verdict", "outcome", "confidence"), [
    ("correct", "correct", "low"), ("wrong", "wrong", "low"), ("abstained", "abstained", "low"),
    ("unclear", "undecided", None)])
def test_a_verdict_grades_with_lower_confidence(verdict: str, outcome: str, confidence: str | None) -> None:
    grade = grade_from_verdict(VerifierVerdict.model_validate({"verdict": verdict, "reason": "r"}))
    assert (grade.outcome, grade.confidence) == (outcome, confidence)
