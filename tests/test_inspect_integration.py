"""The ArcticAbstain inspect_ai task and ``evaluate score --from-inspect-log``, end to end.

inspect runs the model (its ``mockllm`` provider, in process, or its ``openai`` provider against our
loopback OpenAI-compatible server, from inspect's own command line); our evaluator scores the logs.
The acceptance check: the report of the logs is the report of ``arcticqa evaluate run`` on the same
scripted answers, table for table. The answers come from the reference policies
(:mod:`arcticqa.evaluate.policies`), which read the options from the prompt as a model would, so
both paths get the same answer only if they showed the same prompt in the same option order.

inspect_ai is an optional dependency (the ``inspect`` extra, also in ``dev``): without it these tests
skip. Any proxy is pointed at a dead loopback port, so nothing here can reach a non-loopback address
(inspect's mockllm counts tokens with tiktoken, which downloads its tables, unless a reply carries its
usage — ours do).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.evaluate.arcticabstain.items import load_items
from arcticqa.evaluate.arcticabstain.prompt import build_call, load_prompt
from arcticqa.evaluate.policies import gold_map, policy_responder
from arcticqa.standins.replies import Fault, Reply
from arcticqa.standins.server import FakeOpenAIServer
from tests.release_factories import export, make_item

pytest.importorskip("inspect_ai", reason="inspect_ai is not installed (pip install -e '.[inspect]')")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ChatMessage, GenerateConfig, ModelOutput, ModelUsage, get_model  # noqa: E402

from arcticqa.errors import InputError  # noqa: E402
from arcticqa.integrations.inspect_task import arcticabstain, release_items_path  # noqa: E402

# inspect's own retry helper warns about a tenacity argument on import
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:inspect_ai.*")

REPO = Path(__file__).resolve().parent.parent
TASK_FILE = "arcticqa/integrations/inspect_task.py"  # inspect's loader wants a relative path
INSPECT = Path(sys.executable).parent / "inspect"
runner = CliRunner()
#: proxies at a closed loopback port: a request that is not for 127.0.0.1 fails here, never leaves
NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
              "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
#: the report files that must agree between ``evaluate run`` and ``score --from-inspect-log``
SAME_FILES = ("outcome-counts.csv", "metrics.csv", "trial-metrics.csv", "condition-shifts.csv",
              "coverage-summary.csv", "lambda-sweep.csv")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key, value in NO_NETWORK.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("INSPECT_LOG_DIR", str(tmp_path / "inspect-default-logs"))


def _text(output: str) -> str:
    return " ".join(output.split())


def _user_text(messages: list[ChatMessage]) -> str:
    return next(m.text for m in reversed(messages) if m.role == "user")


def scripted(policy: str, items: Path) -> Callable[..., ModelOutput]:
    """mockllm's outputs: the reference policy's letter for the prompt it is shown (with usage given,
    so mockllm does not count tokens)."""
    answer = policy_responder(gold_map(items))

    def output(messages: list[ChatMessage], tools: Any, tool_choice: Any, config: GenerateConfig) -> ModelOutput:
        body = {"model": policy, "messages": [{"role": "user", "content": _user_text(messages)}]}
        reply = answer(body, {})
        assert isinstance(reply, Reply)
        out = ModelOutput.from_content(model="mockllm", content=reply.content or "")
        out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
        return out

    return output


def mockllm_log(release: Path, policy: str, log_dir: Path, *, trials: int = 3) -> Path:
    """Run the task in process on mockllm scripted as ``policy`` (the model label); the log's path."""
    [log] = inspect_eval(arcticabstain(release=str(release), trials=trials, model_label=policy),
                         model=get_model("mockllm/model", custom_outputs=scripted(policy, release / "items.jsonl")),
                         log_dir=str(log_dir), display="none")
    assert log.status == "success", log.error
    return Path(log.location)


def evaluate_run(release: Path, policies: list[str], server: FakeOpenAIServer, tmp: Path, *, trials: int = 3) -> Path:
    """``arcticqa evaluate run --out`` on the policies served by ``server``; the report folder."""
    config = tmp / "eval.toml"
    config.write_text(
        f'[evaluate]\ntrials = {trials}\nitems = "{release / "items.jsonl"}"\ndb_url = "sqlite:///{tmp / "e.db"}"\n'
        + "".join(f'[[evaluate.models]]\nlabel = "{p}"\nmodel = "{p}"\nbase_url = "{server.base_url}"\n'
                  'api_key_env = ""\nmax_retries = 1\n' for p in policies), encoding="utf-8")
    out = tmp / "run-report"
    result = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def score_logs(logs: list[Path], out: Path, *extra: str) -> Any:
    args = ["evaluate", "score"]
    for log in logs:
        args += ["--from-inspect-log", str(log)]
    return runner.invoke(app, [*args, "--out", str(out), *extra])


def assert_same_report(run_report: Path, inspect_report: Path) -> None:
    for name in SAME_FILES:
        assert (inspect_report / name).read_text() == (run_report / name).read_text(), name
    # summary.json and TABLES.md name their source; everything else in them is the same
    run_summary, inspect_summary = (json.loads((d / "summary.json").read_text()) for d in (run_report, inspect_report))
    assert run_summary.pop("source") != inspect_summary.pop("source")
    assert inspect_summary == run_summary
    tables = [(d / "TABLES.md").read_text().splitlines() for d in (run_report, inspect_report)]
    assert [line for line in tables[0] if not line.startswith("Generated by")] == \
        [line for line in tables[1] if not line.startswith("Generated by")]


def _counts(report: Path) -> dict[str, dict[str, str]]:
    return {r["model_id"]: r for r in csv.DictReader((report / "outcome-counts.csv").open())}


# -- a small hand-built release: fast checks of the task and the importer --------------------------

@pytest.fixture(scope="module")
def small_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export([make_item(n) for n in range(3)], tmp_path_factory.mktemp("rel") / "release")


@pytest.fixture(scope="module")
def small_log(small_release: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as patch:  # module scope: the autouse fixture is not active yet
        for key, value in NO_NETWORK.items():
            patch.setenv(key, value)
        yield mockllm_log(small_release, "random", tmp_path_factory.mktemp("logs"), trials=2)


def test_samples_carry_the_cell_and_show_the_evaluate_run_call(small_release: Path, small_log: Path) -> None:
    log = read_eval_log(str(small_log))
    assert log.eval.task_args["release"] == str(small_release)
    items = {i.item_id: i for i in load_items(small_release / "items.jsonl")}
    prompt = load_prompt()
    samples = log.samples or []
    assert len(samples) == 3 * 2 * 2
    assert {(s.metadata["item_id"], s.metadata["condition"], s.metadata["trial"]) for s in samples} == {
        (i, c, t) for i in items for c in ("answer_present", "answer_absent") for t in (1, 2)}
    for sample in samples:
        meta = sample.metadata
        assert sample.epoch == meta["trial"] and meta["model_label"] == "random"
        call = build_call(items[meta["item_id"]], meta["condition"], meta["trial"], "random", prompt)
        assert meta["order_seed"] == call.order_seed and meta["prompt_sha256"] == call.prompt_sha256
        assert [(o["letter"], o["kind"], o["text"]) for o in meta["options"]] == \
            [(o.letter, o.kind, o.text) for o in call.options]
        assert [m.text for m in sample.messages[:2]] == [call.system_text, call.user_text]
        # inspect's scorer and our evaluator read the reply the same way
        assert sample.scores is not None
        assert sample.scores["arcticabstain_outcome"].answer == sample.output.completion.strip()


def test_score_from_inspect_log_uses_the_logged_release(small_log: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    result = score_logs([small_log.parent], out, "--no-figure", "--resamples", "100", "--draws", "100")
    assert result.exit_code == 0, result.output
    counts = _counts(out)["random"]
    assert int(counts["responses"]) == 12 and int(counts["N0"]) == 0
    log = read_eval_log(str(small_log))
    logged = sorted(s.scores["arcticabstain_outcome"].explanation for s in log.samples or [] if s.scores)
    assert sorted(n for n in ("N1", "N2", "N3", "N4", "N5") for _ in range(int(counts[n]))) == logged


def test_a_cell_answered_in_two_logs_is_refused(small_log: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.eval"
    shutil.copy(small_log, copy)
    result = score_logs([small_log, copy], tmp_path / "rep")
    assert result.exit_code == 2
    assert "answered again" in _text(result.output) and "copy.eval" in _text(result.output)
    assert not (tmp_path / "rep").exists()


def test_a_relative_release_is_the_users_not_the_task_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # inspect creates the task with the working folder changed to the task file's; the shell's
    # $PWD still says where the user typed the path (`-T release=out/demo/release` as the README types it)
    release = export([make_item(i) for i in range(2)], tmp_path / "user" / "out" / "release")
    (tmp_path / "taskdir").mkdir()
    monkeypatch.setenv("PWD", str(tmp_path / "user"))
    monkeypatch.chdir(tmp_path / "taskdir")
    task = arcticabstain(release="out/release", trials=1)
    assert len(task.dataset) == 4
    assert release_items_path("out/release") == release / "items.jsonl"
    # found in the working folder when $PWD does not have it; an absolute path as it is
    monkeypatch.setenv("PWD", str(tmp_path / "taskdir"))
    monkeypatch.chdir(tmp_path / "user")
    assert release_items_path("out/release") == tmp_path / "user" / "out" / "release" / "items.jsonl"
    assert release_items_path(release) == release / "items.jsonl"
    with pytest.raises(InputError, match=r"out/nope: not found \(looked in .*taskdir and .*user; give an absolute"):
        arcticabstain(release="out/nope")


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "missing.eval", "file not found"),
    (lambda d: (d / "notes.eval").write_text("not a log") and d / "notes.eval", "not an inspect log"),
    (lambda d: d, "no inspect logs"),
])
def test_bad_logs_are_one_line_and_exit_2(make: Callable[[Path], Path], message: str, tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    result = score_logs([make(folder)], tmp_path / "rep")
    assert result.exit_code == 2
    assert message in _text(result.output)
    assert not (tmp_path / "rep").exists()


def test_log_of_another_task_is_refused(tmp_path: Path) -> None:
    from inspect_ai import Task
    from inspect_ai.dataset import Sample

    [log] = inspect_eval(Task(dataset=[Sample(input="hi", id="x")], name="other"),
                         model=get_model("mockllm/model", custom_outputs=[
                             ModelOutput.from_content("mockllm", "hello").model_copy(
                                 update={"usage": ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)})]),
                         log_dir=str(tmp_path / "logs"), display="none")
    result = score_logs([Path(log.location)], tmp_path / "rep")
    assert result.exit_code == 2
    assert "not 'arcticabstain'" in _text(result.output)


@pytest.mark.parametrize("args, message", [
    (["--responses", "r.jsonl"], "exactly one of --responses"),
    (["--protocol", "abstainqa"], "--protocol abstainqa has none"),
])
def test_from_inspect_log_option_mistakes(args: list[str], message: str, small_log: Path, tmp_path: Path) -> None:
    result = score_logs([small_log], tmp_path / "rep", *args)
    assert result.exit_code == 2
    assert message in _text(result.output)


# -- the acceptance checks: same report as `evaluate run` on the same scripted answers --------------

@pytest.fixture(scope="module")
def demo_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's release (the real pipeline on the sample corpus, offline; ~30 s)."""
    from rich.console import Console

    from arcticqa.demo.run import run_demo

    out = tmp_path_factory.mktemp("demo") / "demo"
    run_demo(out, orchestrator="local", trials=1, console=Console(quiet=True))
    return out / "release"


def _compare_mockllm(release: Path, tmp_path: Path) -> None:
    policies = ["random", "first-option", "oracle"]
    logs = [mockllm_log(release, p, tmp_path / "logs" / p) for p in policies]
    with FakeOpenAIServer(policy_responder(gold_map(release / "items.jsonl"))) as server:
        run_report = evaluate_run(release, policies, server, tmp_path)
    result = score_logs([log.parent for log in logs], tmp_path / "inspect-report")
    assert result.exit_code == 0, result.output
    assert_same_report(run_report, tmp_path / "inspect-report")
    counts = _counts(run_report)
    # the scripted answers reach every outcome class, so equal tables are not equal zeros
    assert {n for row in counts.values() for n in ("N1", "N2", "N3", "N4", "N5") if int(row[n])} == \
        {"N1", "N2", "N3", "N4", "N5"}


@pytest.mark.slow
def test_mockllm_logs_score_like_evaluate_run_on_the_demo_release(demo_release: Path, tmp_path: Path) -> None:
    _compare_mockllm(demo_release, tmp_path)


@pytest.mark.slow
@pytest.mark.shared
def test_mockllm_logs_score_like_evaluate_run_on_published_items(arcticqa_v1: Path, tmp_path: Path) -> None:
    # the published wording (one gold answer holds a zero-width space), first 10 items
    release = tmp_path / "v1-subset"
    release.mkdir()
    lines = (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:10]
    (release / "items.jsonl").write_text("".join(lines), encoding="utf-8")
    _compare_mockllm(release, tmp_path)


def _inspect_cli(release: Path, models: list[str], base_url: str, log_dir: Path, *extra: str) -> None:
    env = dict(os.environ, **NO_NETWORK, OPENAI_API_KEY="loopback-no-key", OPENAI_BASE_URL=base_url)
    # inspect's openai provider speaks the Responses API unless told otherwise; the stand-in
    # (like most OpenAI-compatible servers) speaks Chat Completions
    done = subprocess.run([str(INSPECT), "eval", TASK_FILE, "-T", f"release={release}", "--model", ",".join(models),
                           "-M", "responses_api=false", "--log-dir", str(log_dir), "--display", "plain", *extra],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_inspect_cli_on_the_loopback_server_scores_like_evaluate_run(demo_release: Path, tmp_path: Path) -> None:
    policies = ["always-abstain", "gold-or-first-distractor"]
    items = load_items(demo_release / "items.jsonl")
    with FakeOpenAIServer(policy_responder(gold_map(demo_release / "items.jsonl"))) as server:
        for policy in policies:  # one log per model, labelled as `evaluate run` labels it
            _inspect_cli(demo_release, [f"openai/{policy}"], server.base_url, tmp_path / "logs" / policy,
                         "-T", f"model_label={policy}")
        assert len(server.requests) == len(policies) * len(items) * 2 * 3  # every sample went over HTTP
        run_report = evaluate_run(demo_release, policies, server, tmp_path)
    logs = [tmp_path / "logs" / policy for policy in policies]  # the order of eval.toml
    result = score_logs(logs, tmp_path / "inspect-report")
    assert result.exit_code == 0, result.output
    assert_same_report(run_report, tmp_path / "inspect-report")
    counts = _counts(run_report)
    assert int(counts["always-abstain"]["N3"]) == int(counts["always-abstain"]["N5"]) == len(items) * 3
    assert int(counts["gold-or-first-distractor"]["N1"]) == int(counts["gold-or-first-distractor"]["N4"]) == \
        len(items) * 3


@pytest.mark.slow
def test_inspect_cli_default_label_and_a_failing_endpoint(demo_release: Path, tmp_path: Path) -> None:
    # Without model_label the design's model id is inspect's model name; a call that never gets
    # an answer is the protocol's N0 "no provider answer", not a dropped cell.
    items = load_items(demo_release / "items.jsonl")
    broken = items[0].question
    oracle = policy_responder(gold_map(demo_release / "items.jsonl"))

    def responder(body: dict[str, Any], headers: Any) -> Any:
        if broken in json.dumps(body, ensure_ascii=False):
            return Fault(400, body='{"error": {"message": "bad request", "type": "invalid_request_error"}}')
        return oracle(body, headers)

    with FakeOpenAIServer(responder) as server:
        _inspect_cli(demo_release, ["openai/oracle"], server.base_url, tmp_path / "logs", "-T", "trials=1",
                     "--max-retries", "0")
    result = score_logs([tmp_path / "logs"], tmp_path / "rep", "--no-figure", "--resamples", "100", "--draws", "100")
    assert result.exit_code == 0, result.output
    counts = _counts(tmp_path / "rep")["openai/oracle"]
    assert int(counts["N0"]) == 2  # both conditions of the broken item
    assert int(counts["N1"]) == int(counts["N5"]) == len(items) - 1
