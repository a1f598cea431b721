"""The item audit (`evaluate items --db`) on a store holding Abstain-QA, Know2Guess and ArcticAbstain
responses, recorded by `evaluate run` / `evaluate policies` over HTTP from the local server (about
2,000 calls: marked slow)."""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.evaluate.abstainqa.items import IDK_TEXT
from arcticqa.evaluate.policies import parse_prompt
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer

runner = CliRunner()
K2G = Path(__file__).parent / "data" / "know2guess" / "items.jsonl"
AQA_IMPORT = Path(__file__).parent / "data" / "abstainqa" / "items.jsonl"
N_ITEMS, MODELS, PLANTED = 30, 8, "r07"
SKILL = dict(zip((f"m{k}" for k in range(MODELS)), np.linspace(0.15, 0.95, MODELS), strict=True))
ABSTAINS = dict(zip((f"m{k}" for k in range(MODELS)), np.linspace(0.05, 0.8, MODELS), strict=True))


def _release(path: Path) -> Path:
    rows = [{"item_id": f"r{i:02d}", "question": f"Release question {i}?", "question_context": "",
             "gold_answer": f"gold {i}", "distractors": [{"rank": r, "text": f"d{r} {i}"} for r in range(4)]}
            for i in range(N_ITEMS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _planted(release: Path, path: Path, item_id: str) -> Path:
    """The release with ``item_id``'s key exchanged with its rank-0 distractor."""
    rows = [json.loads(line) for line in release.read_text(encoding="utf-8").splitlines()]
    row = next(r for r in rows if r["item_id"] == item_id)
    row["gold_answer"], row["distractors"][0]["text"] = row["distractors"][0]["text"], row["gold_answer"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _u(*parts: str) -> float:
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:12], 16) / 16 ** 12


def _responder(gold: Mapping[str, str]) -> Callable[[dict[str, Any], Mapping[str, str]], Any]:
    """Models m0..m7 of graded skill: the gold option when shown with probability SKILL, else a
    distractor; with the gold not shown IDK/NOTA with probability ABSTAINS (1 under the abstain
    variant), else a distractor. A question without options (Know2Guess) is abstained on. The n-th
    ask of the same prompt draws anew (the trials differ; which trial gets which draw does not
    change a statistic or a flag)."""
    asked: Counter[tuple[str, ...]] = Counter()
    lock = threading.Lock()

    def reply(body: dict[str, Any], headers: Mapping[str, str]) -> Any:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        system = next(m["content"] for m in body["messages"] if m["role"] == "system")
        question, options = parse_prompt(user)
        if not options:
            return Reply(content='{"decision": "ABSTAIN", "answer": "", "confidence": 0.2}')
        model = body["model"]
        with lock:
            asked[(model, system, user)] += 1
            draw = str(asked[(model, system, user)])
        idk = next(letter for letter, text in options if text == IDK_TEXT)
        content = [letter for letter, text in options if text != IDK_TEXT]
        right = next((letter for letter, text in options if text == gold.get(question)), None)
        wrong = [x for x in content if x != right]
        other = wrong[int(_u(model, user, draw, "d") * len(wrong))]
        if right is not None:
            return Reply(content=right if _u(model, user, draw) < SKILL[model] else other)
        abstains = "I Don't Know" in system or _u(model, user, draw) < ABSTAINS[model]
        return Reply(content=idk if abstains else other)

    return reply


def _config(folder: Path, base_url: str, *, eval_set: str = "arcticqa", models: int = MODELS) -> Path:
    entries = "".join(f'[[evaluate.models]]\nlabel = "m{k}"\nmodel = "m{k}"\nbase_url = "{base_url}"\n'
                      'api_key_env = ""\nmax_retries = 1\nbackoff_initial_s = 0.01\nbackoff_max_s = 0.02\n'
                      for k in range(models))
    config = folder / f"eval-{eval_set}.toml"
    config.write_text(f'[evaluate]\ntrials = 2\neval_set = "{eval_set}"\ndb_url = "sqlite:///{folder / "e.db"}"\n'
                      f"{entries}", encoding="utf-8")
    return config


def _copy_store(source: Path, target: Path) -> None:
    """A copy of a SQLite store with what its write-ahead log still holds."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)


def _invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``aqa``: Abstain-QA (standard and abstain, 1 trial, 8 models, 30 release items) and Know2Guess
    responses; ``both``: the same plus ArcticAbstain's reference policies; ``sets``: ``aqa`` plus
    one model's Abstain-QA responses under a second eval set; ``imported``: Abstain-QA responses to
    the questions of an import file."""
    folder = tmp_path_factory.mktemp("stores")
    release = _release(folder / "items.jsonl")
    gold = {f"Release question {i}?": f"gold {i}" for i in range(N_ITEMS)}
    with FakeOpenAIServer(_responder(gold)) as server:
        config = _config(folder, server.base_url)
        done = _invoke("evaluate", "run", "-c", str(config), "--items", str(release), "--protocol", "abstainqa",
                       "--variants", "standard")
        assert done.exit_code == 0, done.output
        done = _invoke("evaluate", "run", "-c", str(config), "--items", str(release), "--protocol", "abstainqa",
                       "--variants", "abstain", "--model", "m0", "--model", "m7")
        assert done.exit_code == 0, done.output
        done = _invoke("evaluate", "run", "-c", str(config), "--items", str(K2G), "--protocol", "know2guess",
                       "--model", "m0", "--model", "m1")
        assert done.exit_code == 0, done.output
        _copy_store(folder / "e.db", folder / "sets.db")
        other = _config(folder, server.base_url, eval_set="other", models=1)
        done = _invoke("evaluate", "run", "-c", str(other), "--db", str(folder / "sets.db"), "--items", str(release),
                       "--protocol", "abstainqa", "--variants", "standard")
        assert done.exit_code == 0, done.output
        done = _invoke("evaluate", "run", "-c", str(config), "--db", str(folder / "imported.db"), "--items",
                       str(AQA_IMPORT), "--protocol", "abstainqa", "--variants", "standard", "--model", "m0")
        assert done.exit_code == 0, done.output
    _copy_store(folder / "e.db", folder / "both.db")
    done = _invoke("evaluate", "policies", "--items", str(release), "--db", str(folder / "both.db"), "--trials", "1",
                   "--out", str(folder / "policies"))
    assert done.exit_code == 0, done.output
    return {"release": release, "planted": _planted(release, folder / "planted.jsonl", PLANTED),
            "aqa": folder / "e.db", "both": folder / "both.db", "sets": folder / "sets.db",
            "imported": folder / "imported.db"}


def _items(out: Path, *args: str) -> Any:
    return _invoke("evaluate", "items", "--out", str(out), "--no-figure", "--resamples", "20", *args)


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_abstainqa_responses_map_onto_the_release_conditions(stores: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "aqa"
    done = _items(out, "--db", str(stores["aqa"]), "--items", str(stores["release"]))
    assert done.exit_code == 0, done.output
    # the default: the one mappable protocol the store holds, its reference variant; Know2Guess is named
    assert "not audited: 32 know2guess responses (its questions have no answer options" in done.output
    assert "abstainqa responses, prompt variant standard, eval set abstainqa:arcticqa:" in done.output
    # 30 items x 2 questions x 8 models x 2 trials of the standard variant
    assert f"960 responses of 8 models on {N_ITEMS} items" in done.output
    stats = _csv(out / "item-stats.csv")
    assert len(stats) == 2 * N_ITEMS
    for condition in ("answer_present", "answer_absent"):
        rows = [r for r in stats if r["condition"] == condition]
        assert sum(int(r["valid"]) for r in rows) == N_ITEMS * MODELS * 2
    present = [r for r in stats if r["condition"] == "answer_present"]
    absent = [r for r in stats if r["condition"] == "answer_absent"]
    # answerable questions: the models never chose IDK/NOTA; unanswerable: IDK/NOTA is the abstain option
    assert sum(int(r["abstained"]) for r in present) == 0
    assert 0 < sum(int(r["abstained"]) for r in absent) < N_ITEMS * MODELS * 2
    assert "(abstainqa, standard, abstainqa:arcticqa)" in (out / "ITEMS.md").read_text(encoding="utf-8")
    # under the abstain variant (asked of m0 and m7) every unanswerable question is answered IDK/NOTA
    again = _items(tmp_path / "abstain", "--db", str(stores["aqa"]), "--items", str(stores["release"]),
                   "--variant", "abstain")
    assert again.exit_code == 0, again.output
    assert f"240 responses of 2 models on {N_ITEMS} items" in again.output
    absent = [r for r in _csv(tmp_path / "abstain" / "item-stats.csv") if r["condition"] == "answer_absent"]
    assert sum(int(r["abstained"]) for r in absent) == N_ITEMS * 2 * 2


@pytest.mark.slow
def test_a_planted_key_swap_is_flagged_from_abstainqa_responses(stores: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "planted"
    done = _items(out, "--db", str(stores["aqa"]), "--items", str(stores["planted"]), "--protocol", "abstainqa")
    assert done.exit_code == 0, done.output
    suspects = _csv(out / "suspects.csv")
    rules = {(r["item_id"], r["rule_id"]) for r in suspects}
    assert (PLANTED, "items.strong_models_converge") in rules
    assert (PLANTED, "items.low_discrimination") in rules
    assert {r["item_id"] for r in suspects} == {PLANTED}
    converge = next(r for r in suspects if r["rule_id"] == "items.strong_models_converge")
    assert converge["option"] == "distractor 1" and converge["option_text"] == "gold 7"
    # the planted key was shown in its 16 unanswerable responses: counted, never a signal
    assert "16 answer-absent response(s) on 1 item(s) showed the items file's key" in " ".join(done.output.split())
    stats = {(r["item_id"], r["condition"]): r for r in _csv(out / "item-stats.csv")}
    assert stats[(PLANTED, "answer_absent")]["key_shown_absent"] == "16"
    assert float(stats[(PLANTED, "answer_present")]["irt_a"]) < 0


@pytest.mark.slow
def test_a_store_with_two_mappable_protocols_needs_protocol(stores: dict[str, Path], tmp_path: Path) -> None:
    done = _items(tmp_path / "x", "--db", str(stores["both"]), "--items", str(stores["release"]))
    assert done.exit_code == 2
    said = " ".join(done.output.split())
    assert "holds responses of arcticabstain (" in said and "abstainqa (1200)" in said
    assert "give --protocol arcticabstain or --protocol abstainqa" in said
    assert not (tmp_path / "x" / "ITEMS.md").exists()
    mc = _items(tmp_path / "mc", "--db", str(stores["both"]), "--items", str(stores["release"]),
                "--protocol", "arcticabstain")
    assert mc.exit_code == 0, mc.output
    # four reference policies, 30 items, both conditions, 1 trial
    assert f"240 responses of 4 models on {N_ITEMS} items" in mc.output
    aqa = _items(tmp_path / "aqa", "--db", str(stores["both"]), "--items", str(stores["release"]),
                 "--protocol", "abstainqa")
    assert aqa.exit_code == 0, aqa.output
    assert f"960 responses of 8 models on {N_ITEMS} items" in aqa.output


@pytest.mark.slow
@pytest.mark.parametrize(("args", "said"), [
    (["--protocol", "know2guess"], ["--protocol know2guess: the item audit cannot read know2guess responses",
                                    "no answer options"]),
    (["--protocol", "open"], ["--protocol open: the item audit cannot read open responses",
                              "a wrong answer names no distractor"]),
    (["--protocol", "arcticabstain"], ["the store holds no arcticabstain responses",
                                       "abstainqa (1200), know2guess (32)"]),
    (["--variant", "extreme_abstain"], ["--variant extreme_abstain: the store holds no abstainqa responses",
                                        "abstain (240), standard (960)"]),
])
def test_what_cannot_be_audited_is_refused_with_the_reason(stores: dict[str, Path], tmp_path: Path,
                                                           args: list[str], said: list[str]) -> None:
    done = _items(tmp_path / "x", "--db", str(stores["aqa"]), "--items", str(stores["release"]), *args)
    assert done.exit_code == 2
    text = " ".join(done.output.split())
    for part in said:
        assert part in text


@pytest.mark.slow
def test_several_eval_sets_need_eval_set(stores: dict[str, Path], tmp_path: Path) -> None:
    done = _items(tmp_path / "x", "--db", str(stores["sets"]), "--items", str(stores["release"]))
    assert done.exit_code == 2
    assert ("several eval sets (abstainqa:arcticqa (1200), abstainqa:other (120)): give --eval-set"
            in " ".join(done.output.split()))
    one = _items(tmp_path / "other", "--db", str(stores["sets"]), "--items", str(stores["release"]), "--eval-set",
                 "abstainqa:other")
    assert one.exit_code == 0, one.output
    assert f"120 responses of 1 models on {N_ITEMS} items" in one.output


@pytest.mark.slow
def test_imported_abstainqa_questions_have_no_release_item(stores: dict[str, Path], tmp_path: Path) -> None:
    done = _items(tmp_path / "x", "--db", str(stores["imported"]), "--items", str(stores["release"]))
    assert done.exit_code == 2
    assert re.search(r"Abstain-QA question 'aqa-\d+' is not one of a release item's questions \(<item_id>#present "
                     r"or <item_id>#absent\): questions of an import file have no release item to audit",
                     " ".join(done.output.split()))


def test_published_responses_take_no_store_options(tmp_path: Path) -> None:
    responses = tmp_path / "responses.csv"
    responses.write_text("x\n", encoding="utf-8")
    (tmp_path / "items.jsonl").write_text("", encoding="utf-8")
    done = _items(tmp_path / "x", "--responses", str(responses), "--items", str(_release(tmp_path / "r.jsonl")),
                  "--protocol", "abstainqa")
    assert done.exit_code == 2
    assert "--protocol, --variant and --eval-set go with --db" in " ".join(done.output.split())
