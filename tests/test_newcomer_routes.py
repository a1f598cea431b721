"""The routes a new user meets first end the way they should.

Off the network or with a wrong endpoint, a build and ``evaluate run`` stop before they start, in
one line, within 30 s, with a non-zero exit and no store created ("no network" is a closed port on
127.0.0.1, or every proxy pointed at one); ``evaluate run`` shows its progress and a run in which
no call got an answer fails; a mistyped audit filter gets a did-you-mean; output to a pipe is not
cut at 80 columns; a reader's ``--db`` never creates a store. Real servers on 127.0.0.1 throughout
(the OpenAI-compatible stand-in, the Semantic Scholar stand-in), never a patched client.
"""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.evaluate.policies import gold_map, policy_responder
from arcticqa.standins.replies import Fault
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.fakes.s2_server import S2StandIn
from tests.release_factories import export, make_item

runner = CliRunner()
#: every proxy at a closed loopback port: a request for anything but 127.0.0.1 fails here
NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
              "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
ROLES = ("site_extractor", "finding_extractor", "question_writer", "reconstructor", "verifier",
         "distractor_writer", "option_verifier")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``arcticqa ARGS`` in a fresh process, output to pipes (not a terminal, no $COLUMNS)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ARCTICQA_", "COLUMNS"))}
    return subprocess.run([sys.executable, "-m", "arcticqa", *args], cwd=cwd, env={**clean, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _openai_config(folder: Path, base_url: str, *, source: str = "snapshot:data/sample_corpus/papers.jsonl",
                   more: str = "") -> Path:
    config = folder / "arcticqa.toml"
    config.write_text(
        f'[store]\nurl = "sqlite:///{folder / "arcticqa.db"}"\n'
        f'[build]\nsource = "{source}"\n{more}'
        f'[models.gpt]\nprovider = "openai"\nmodel = "gpt-4.1-mini"\nbase_url = "{base_url}"\napi_key_env = ""\n'
        "[roles]\n" + "".join(f'{role} = "gpt"\n' for role in ROLES), encoding="utf-8")
    return config


# -- a build off the network ------------------------------------------------------------------------

def test_a_build_whose_model_endpoint_is_down_stops_at_once(tmp_path: Path) -> None:
    config = _openai_config(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1")
    started = time.monotonic()
    done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local")
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stderr
    line = _one_line(done)
    assert "EndpointUnreachable" in line and "model config 'gpt'" in line and "nothing was started" in line
    assert not (tmp_path / "arcticqa.db").exists()


def test_a_build_from_s2_off_the_network_stops_at_once(tmp_path: Path) -> None:
    # the public API behind proxies that answer nothing: what a machine without network meets
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "arcticqa.db"}"\n[build]\nsource = "s2"\n',
                      encoding="utf-8")
    started = time.monotonic()
    done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local", env=NO_NETWORK)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stderr
    assert "the Semantic Scholar API https://api.semanticscholar.org/graph/v1 is unreachable" in _one_line(done)
    assert not (tmp_path / "arcticqa.db").exists()
    # a wrong [discovery] api_url too; the default keyword file is found from any folder
    config.write_text(config.read_text(encoding="utf-8")
                      + f'[discovery]\napi_url = "http://127.0.0.1:{_closed_port()}"\n', encoding="utf-8")
    done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local")
    assert done.returncode == 1 and "Semantic Scholar API http://127.0.0.1:" in _one_line(done)
    assert not (tmp_path / "arcticqa.db").exists()


def test_a_build_from_the_s2_stand_in_passes_the_check(tmp_path: Path) -> None:
    keywords = tmp_path / "q.txt"
    keywords.write_text("sea ice\n", encoding="utf-8")
    with S2StandIn([]) as s2:
        config = tmp_path / "arcticqa.toml"
        config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "arcticqa.db"}"\n'
                          f'[build]\nsource = "s2"\nkeywords_file = "{keywords}"\n'
                          f'[discovery]\napi_url = "{s2.url}"\nrate_per_s = 100\n', encoding="utf-8")
        done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "arcticqa.db").exists()


@pytest.mark.parametrize(("more", "message", "code"), [
    ('keywords_file = "missing.txt"\n', "missing.txt: keyword file not found", 2),
])
def test_a_build_with_a_bad_input_creates_no_store(tmp_path: Path, more: str, message: str, code: int) -> None:
    config = _openai_config(tmp_path, "http://127.0.0.1:9/v1", source="s2", more=more)
    done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local")
    assert done.returncode == code and message in _one_line(done)
    assert not (tmp_path / "arcticqa.db").exists()


def test_the_openai_config_without_its_key_creates_no_store(tmp_path: Path) -> None:
    config = _openai_config(tmp_path, "http://127.0.0.1:9/v1")
    config.write_text(config.read_text(encoding="utf-8").replace('api_key_env = ""', 'api_key_env = "NO_SUCH_KEY_36"'),
                      encoding="utf-8")
    done = _cli(tmp_path, "build", "-c", str(config), "--orchestrator", "local")
    assert done.returncode == 2 and "NO_SUCH_KEY_36" in _one_line(done)
    assert not (tmp_path / "arcticqa.db").exists()


# -- evaluate run -------------------------------------------------------------------------------------

def _release(folder: Path, n: int = 3) -> Path:
    return export([make_item(i) for i in range(n)], folder / "release") / "items.jsonl"


def _eval_config(folder: Path, base_url: str, label: str = "oracle") -> Path:
    config = folder / "eval.toml"
    config.write_text(f'[evaluate]\ntrials = 1\ndb_url = "sqlite:///{folder / "e.db"}"\n'
                      f'[[evaluate.models]]\nlabel = "{label}"\nmodel = "{label}"\nbase_url = "{base_url}"\n'
                      'api_key_env = ""\nmax_retries = 1\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.02\n',
                      encoding="utf-8")
    return config


def test_evaluate_run_with_an_unreachable_endpoint_stops_at_once(tmp_path: Path) -> None:
    items = _release(tmp_path)
    config = _eval_config(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1")
    started = time.monotonic()
    done = _cli(tmp_path, "evaluate", "run", "-c", str(config), "--items", str(items))
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    assert "the endpoint http://127.0.0.1:" in _one_line(done) and "of model oracle is unreachable" in done.stderr
    assert not (tmp_path / "e.db").exists()


def test_evaluate_run_shows_progress_and_a_run_with_no_answer_fails(tmp_path: Path) -> None:
    items = _release(tmp_path)
    with FakeOpenAIServer(policy_responder(gold_map(items))) as server:
        done = _cli(tmp_path, "evaluate", "run", "-c", str(_eval_config(tmp_path, server.base_url)), "--items",
                    str(items))
    assert done.returncode == 0, done.stderr
    # in a log: a line when the model starts and when it is done, with calls, failures and the rate
    assert "  oracle: 0/6 calls, 0 failed" in done.stdout and "  oracle: 6/6 calls, 0 failed, " in done.stdout
    assert "calls/s" in done.stdout

    (tmp_path / "e.db").unlink()
    with FakeOpenAIServer(lambda body, headers: Fault(503)) as server:  # answers /models, never a completion
        failed = _cli(tmp_path, "evaluate", "run", "-c", str(_eval_config(tmp_path, server.base_url)), "--items",
                      str(items))
        again = _cli(tmp_path, "evaluate", "run", "-c", str(_eval_config(tmp_path, server.base_url)), "--items",
                     str(items))
    assert failed.returncode == 1
    assert "6/6 calls, 6 failed" in failed.stdout
    line = _one_line(failed)
    assert "none of the 6 calls of this run got an answer (model oracle: InternalServerError" in line
    assert "nothing was recorded" in line
    # nothing kept, so running it again asks again (not "already recorded, pass --resume")
    assert again.returncode == 1 and "none of the 6 calls" in again.stderr


def test_variants_is_the_one_option_and_variant_a_deprecated_alias(tmp_path: Path) -> None:
    from arcticqa.evaluate.abstainqa.items import load_abstainqa_items
    from tests.test_abstainqa import DATA, _gold, _responder

    items = DATA / "items.jsonl"
    with FakeOpenAIServer(_responder(_gold(load_abstainqa_items(items)))) as server:
        config = _eval_config(tmp_path, server.base_url, label="always-abstain")
        new = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--items", str(items), "--protocol",
                                  "abstainqa", "--variants", "standard,abstain"])
        (tmp_path / "e.db").unlink()
        old = runner.invoke(app, ["evaluate", "run", "-c", str(config), "--items", str(items), "--protocol",
                                  "abstainqa", "--variant", "standard", "--variant", "abstain"])
    assert new.exit_code == 0, new.output
    assert old.exit_code == 0, old.output
    assert "--variant is deprecated; use --variants standard,abstain" in old.output
    assert new.stdout.splitlines()[-1] == old.stdout.splitlines()[-1]  # the same cells, the same outcomes
    shown = runner.invoke(app, ["evaluate", "run", "--help"]).stdout
    assert "--variants" in shown and "--variant " not in shown


# -- evaluate policies ----------------------------------------------------------------------------------

def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_policies_keep_nothing_by_default_and_report_only_this_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                    ) -> None:
    monkeypatch.chdir(tmp_path)
    items = _release(tmp_path, 4)
    first = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", "a", "--trials", "1"])
    assert first.exit_code == 0, first.output
    assert "eval set arcticqa, 1 trial; responses not kept" in first.stdout
    assert not (tmp_path / ".arcticqa").exists()  # no shared default store any more
    assert "from the reference policies (eval set arcticqa, 1 trial)" in (tmp_path / "a" / "TABLES.md").read_text(
        encoding="utf-8")
    # a store that holds 3 trials adds nothing to a 1-trial run's report
    for out, trials in (("b", "3"), ("c", "1")):
        done = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", out, "--trials", trials,
                                   "--db", "kept.db"])
        assert done.exit_code == 0, done.output
    assert _rows(tmp_path / "a" / "outcome-counts.csv") == _rows(tmp_path / "c" / "outcome-counts.csv")
    # the eval set seeds the option order: first-option's numbers depend on it, and --eval-set says which
    other = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", "d", "--trials", "1",
                                "--eval-set", "arcticqa-demo"])
    assert other.exit_code == 0 and "eval set arcticqa-demo" in other.stdout


def test_policies_answer_the_open_protocol_too(tmp_path: Path) -> None:
    items = _release(tmp_path, 4)
    done = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", str(tmp_path / "open"),
                               "--protocol", "open", "--trials", "1"])
    assert done.exit_code == 0, done.output
    assert "oracle [answer_or_abstain]: accuracy 1.000" in done.stdout
    assert "paired with MC: 4 cells" in done.stdout  # the MC answers were asked too, to pair with
    wrong = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", str(tmp_path / "x"),
                                "--protocol", "abstainqa"])
    assert wrong.exit_code == 2 and "the reference policies answer arcticabstain and open" in wrong.output


# -- readers never create a store; a typo is not "0 rows" ----------------------------------------------

def test_evaluate_report_on_a_missing_db_creates_nothing(tmp_path: Path) -> None:
    done = runner.invoke(app, ["evaluate", "report", "--db", str(tmp_path / "nope.db"), "--out", str(tmp_path / "r")])
    assert done.exit_code == 2 and "nope.db: store not found" in done.output
    assert not (tmp_path / "nope.db").exists()


@pytest.fixture
def empty_store(tmp_path: Path) -> Path:
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "arcticqa.db"}"\n', encoding="utf-8")
    Store(f"sqlite:///{tmp_path / 'arcticqa.db'}").close()
    return config


@pytest.mark.parametrize(("args", "message"), [
    (["--rule", "verify.not_entaled"], "--rule verify.not_entaled: no such rule id; did you mean 'verify.not_entailed'?"),
    (["--rule", "verfy."], "did you mean 'verify.'?"),
    (["--stage", "verfy"], "--stage verfy: no such stage; did you mean 'verify'?"),
])
def test_an_unknown_audit_filter_gets_a_did_you_mean(empty_store: Path, args: list[str], message: str) -> None:
    done = runner.invoke(app, ["audit", "-c", str(empty_store), *args])
    assert done.exit_code == 2 and message in done.output


@pytest.mark.parametrize("args", [["--rule", "verify.not_entailed"], ["--rule", "verify."], ["--stage", "verify"]])
def test_a_known_audit_filter_with_no_rows_is_zero_rows(empty_store: Path, args: list[str]) -> None:
    done = runner.invoke(app, ["audit", "-c", str(empty_store), *args])
    assert done.exit_code == 0 and "0 row(s)" in done.stdout


def test_output_to_a_pipe_is_not_cut_at_80_columns(tmp_path: Path) -> None:
    long = "a-model-name-much-longer-than-eighty-columns-would-leave-room-for-in-a-table-row-of-doctor"
    config = _openai_config(tmp_path, "http://127.0.0.1:9/v1")
    config.write_text(config.read_text(encoding="utf-8").replace('"gpt-4.1-mini"', f'"{long}"'), encoding="utf-8")
    done = _cli(tmp_path, "doctor", "--offline", "-c", str(config))
    assert long in done.stdout and "…" not in done.stdout
    narrow = _cli(tmp_path, "doctor", "--offline", "-c", str(config), env={"COLUMNS": "80"})
    assert long not in narrow.stdout  # $COLUMNS still sets the width


# -- make demo's Prefect server -------------------------------------------------------------------------

@pytest.mark.slow
def test_prefect_status_and_stop_find_the_server_of_make_demo(tmp_path: Path) -> None:
    from flows.prefect_server import ensure_server, running_server, stop_server

    # the Makefile's PREFECT_HOME, in a project folder; the user's shell has no PREFECT_HOME
    project_home = tmp_path / ".arcticqa" / "prefect"
    project_home.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "PREFECT_HOME": ""}  # so ~/.prefect holds no server
    (tmp_path / "home").mkdir()
    server = ensure_server(idle_shutdown_s=120, timeout_s=120, home=project_home)
    try:
        shown = _cli(tmp_path, "prefect", "status", env=env)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert f"pid {server.pid}" in shown.stdout and f"PREFECT_HOME={project_home}" in shown.stdout
        stopped = _cli(tmp_path, "prefect", "stop", env=env)
        assert stopped.returncode == 0 and f"pid {server.pid}" in stopped.stdout
        assert running_server(project_home) is None
        again = _cli(tmp_path, "prefect", "status", env=env)
        assert again.returncode == 1 and f"PREFECT_HOME={project_home}" in again.stdout
    finally:
        stop_server(project_home)


# -- a build stopped by Ctrl-C or SIGTERM ----------------------------------------------------------------

def _open_attempts(db: Path) -> dict[str, int]:
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT status, count(*) FROM stage_run s WHERE attempt = (SELECT max(attempt) FROM "
                            "stage_run o WHERE o.paper_id = s.paper_id AND o.stage = s.stage AND o.subject = "
                            "s.subject) GROUP BY status").fetchall()
    return {status: n for status, n in rows}


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_build_says_so_and_resume_finishes_it(tmp_path: Path, sig: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    from tests.pipeline_fixtures import ScriptedModel, make_corpus, write_config

    monkeypatch.setenv("ARCTICQA_TEST_KEY", "sk-test-interrupt-36")
    corpus = make_corpus(tmp_path / "corpus", n=3)
    with FakeOpenAIServer(ScriptedModel(), latency=3.0) as server:  # every model call takes 3 s
        config = write_config(tmp_path / "work", base_url=server.base_url, corpus=corpus)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("ARCTICQA_")},
               "ARCTICQA_TEST_KEY": "sk-test-interrupt-36"}
        proc = subprocess.Popen([sys.executable, "-m", "arcticqa", "build", "-c", str(config), "--orchestrator",
                                 "local"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline:  # a model call is in flight: stages run
            time.sleep(0.05)
        assert server.requests, "the build never called the model"
        proc.send_signal(getattr(signal, sig))
        _, err = proc.communicate(timeout=60)
        assert proc.returncode != 0
        db = tmp_path / "work" / "arcticqa.db"
        found = _open_attempts(db)
        assert found.get("interrupted", 0) >= 1 and "running" not in found, (found, err[-2000:])
        shown = _cli(tmp_path, "status", "-c", str(config))
        assert shown.returncode == 0 and "interrupted" in shown.stdout and "arcticqa resume" in shown.stdout
        server.latency = 0.0
        resumed = _cli(tmp_path, "resume", "-c", str(config), "--orchestrator", "local", env=env, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert set(_open_attempts(db)) <= {"succeeded", "rejected"}


# -- what export says -------------------------------------------------------------------------------------

def test_export_says_what_the_release_holds_and_what_it_left_out_and_why(tmp_path: Path) -> None:
    from arcticqa.review.items import load_review_items
    from arcticqa.review.plan import SamplingRequest, extend_plan
    from arcticqa.store.reviews import add_verdict, plan_assignments, save_plan
    from arcticqa.store.tables import ReviewVerdict
    from tests.review_fixtures import make_review_store

    store = make_review_store(tmp_path / "s.db", accepted=4, rejected=1)
    try:  # a reviewer rejects one item in the workbench, accepts the rest
        plan, rows = extend_plan(None, [], load_review_items(store.engine), SamplingRequest(reviewers=["ana"]))
        save_plan(store.engine, plan, rows)
        items = {i.key: i for i in load_review_items(store.engine)}
        assigned = [a for a in plan_assignments(store.engine, "main") if a.population == "accepted"]
        for n, a in enumerate(assigned):
            add_verdict(store.engine, ReviewVerdict(
                plan_id="main", item_key=a.item_key, reviewer=a.reviewer, verdict="reject" if n == 0 else "accept",
                failure_types=["review.distractor_true:3"] if n == 0 else [],
                content_hash=items[a.item_key].content_hash))
        rejected = assigned[0].item_key
    finally:
        store.close()
    config = tmp_path / "arcticqa.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n', encoding="utf-8")
    done = runner.invoke(app, ["export", "-c", str(config), "--out", str(tmp_path / "release")])
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())
    assert f"wrote {tmp_path / 'release'} (release arcticqa-release): 3 items, 6 conditions" in text
    assert "distractors: 12 model-verified" in text and "evidence text: left out" in text
    assert (f"left out: 1 accepted item (excluded-items.json) 1 × rejected by expert review (plan main): "
            f"review.distractor_true:3: {rejected}") in text
    assert f"`arcticqa audit -c {config}` lists them" in text


@pytest.mark.slow
def test_a_build_says_what_to_run_next(tmp_path: Path) -> None:
    config = tmp_path / "mine.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "arcticqa.db"}"\n', encoding="utf-8")  # offline roles
    done = _cli(tmp_path, "build", "-c", "mine.toml", "--orchestrator", "local", timeout=300)
    assert done.returncode == 0, done.stderr
    after = done.stdout.split("next:", 1)[1].split()
    assert " ".join(after).startswith("arcticqa status -c mine.toml the newest attempt")
    assert "arcticqa export -c mine.toml --out release" in " ".join(after)


@pytest.mark.slow
def test_policies_on_the_demos_eval_set_give_the_demos_tables(tmp_path: Path) -> None:
    from rich.console import Console

    from arcticqa.demo.run import run_demo

    demo = run_demo(tmp_path / "demo", orchestrator="local", trials=3, console=Console(quiet=True))
    items = demo.artifacts["release"] / "items.jsonl"
    same = runner.invoke(app, ["evaluate", "policies", "--items", str(items), "--out", str(tmp_path / "same"),
                               "--eval-set", "arcticqa-demo"])
    assert same.exit_code == 0, same.output
    for name in ("outcome-counts.csv", "metrics.csv", "condition-shifts.csv"):
        assert _rows(tmp_path / "same" / name) == _rows(demo.artifacts["evaluation"] / name), name
