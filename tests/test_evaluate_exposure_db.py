"""Training exposure from the store (``--db``) and its Know2Guess-style zones, on a case small enough
to know analytically.

A small dated release is evaluated through the real runner against the loopback
OpenAI-compatible server, with a scripted policy whose behaviour per item is fixed in advance.
The ``--db`` report must equal the ``--responses`` report on an export of the same rows (written
here with sqlite3 and json, not with our reader), and its zone numbers must equal the values
worked out by hand below, including the bootstrap CIs, which for k successes out of n equally
weighted questions are the binomial quantiles of k/n (every question is answered twice, the same
way, so a resample's rate is the share of drawn questions that succeeded). On random designs, the
zones must tie out with the side reports of the published ``build_report`` and stay the same
under equivalent rewrites (shuffled responses, a calendar shifted with its cutoff).
"""

from __future__ import annotations

import asyncio
import csv
import json
import re
import sqlite3
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from arcticqa.cli.app import app
from arcticqa.config import EvalModel
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.arcticabstain.items import load_items
from arcticqa.evaluate.policies import ABSTAIN_TEXT, parse_prompt
from arcticqa.evaluate.runner import run_protocol
from arcticqa.evaluate.shape import RunOptions
from arcticqa.release.models import PaperRef
from arcticqa.standins.replies import Reply
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.db import make_engine
from tests.release_factories import export, make_item

CUTOFF = date(2021, 1, 1)
SEEN, UNSEEN, UNDATED = range(0, 10), range(10, 15), 15
# What the "exposed" model does per item (by station number): answer-present / answer-absent.
PRESENT_GOLD = {0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14}  # else: seen -> first distractor, unseen -> abstain
ABSENT_ABSTAIN = {0, 1, 2, 3, 4, 10, 11, 12, 13}  # else: the first distractor


def _published(n: int) -> str | None:
    if n in SEEN:
        return f"20{10 + n:02d}-03-15"  # 2010..2019: before the cutoff
    if n in UNSEEN:
        return f"2021-{n - 9:02d}-01" if n > 10 else CUTOFF.isoformat()  # on the cutoff day counts as after
    return None


def _release(tmp: Path) -> Path:
    items = []
    for n in range(UNDATED + 1):
        item = make_item(n)
        paper = PaperRef(**(item.paper.model_dump() | {"publication_date": _published(n)}))
        items.append(item.model_copy(update={"paper": paper}))
    return export(items, tmp / "release") / "items.jsonl"


def _responder(body: dict[str, Any], headers: object) -> Reply:
    user = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    question, options = parse_prompt(user)
    station = int(re.search(r"station S(\d+)", question).group(1))  # type: ignore[union-attr]
    gold = f"a decrease of {station + 10} cm"
    abstain = next(letter for letter, text in options if text == ABSTAIN_TEXT)
    first_distractor = next(letter for letter, text in options if text not in (gold, ABSTAIN_TEXT))
    shown_gold = next((letter for letter, text in options if text == gold), None)
    if body["model"] == "oracle":
        return Reply(content=shown_gold or abstain)
    if shown_gold is not None:
        if station in PRESENT_GOLD or station == UNDATED:
            return Reply(content=shown_gold)
        return Reply(content=first_distractor if station in SEEN else abstain)
    return Reply(content=abstain if station in ABSENT_ABSTAIN | {UNDATED} else first_distractor)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("exposure-db")
    items_path = _release(tmp)
    db = tmp / "eval.db"
    engine = make_engine(f"sqlite:///{db}")
    live = ARCTICABSTAIN.live(RunOptions(trials=2), items=load_items(items_path))
    with FakeOpenAIServer(_responder) as server:
        models = [EvalModel(label=label, model=label, base_url=server.base_url, api_key_env=None, max_concurrency=4,
                            max_retries=1, backoff_initial_s=0.01, backoff_max_s=0.02, timeout_s=10.0)
                  for label in ("exposed", "oracle")]
        result = asyncio.run(run_protocol(live, models, engine, resume=False))
    assert result.recorded == 2 * (UNDATED + 1) * 2 * 2
    engine.dispose()

    # The export a user could make of the store: plain sqlite3 + json, in the store's model order.
    connection = sqlite3.connect(db)
    connection.row_factory = sqlite3.Row
    rows = connection.execute("SELECT * FROM eval_response ORDER BY model_position, id").fetchall()
    connection.close()
    exported = tmp / "exported-responses.jsonl"
    keep = ("item_id", "model", "model_label", "condition", "trial", "raw_response_text", "finish_reason", "outcome")
    with exported.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({k: row[k] for k in keep} | {"options": json.loads(row["options"])}) + "\n")
    config = tmp / "eval.toml"
    config.write_text(f'[evaluate]\nitems = "{items_path.relative_to(tmp).as_posix()}"\n'
                      '[[evaluate.models]]\nlabel = "exposed"\nmodel = "exposed"\nknowledge_cutoff = 2021-01-01\n',
                      encoding="utf-8")
    return {"tmp": tmp, "items": items_path, "db": db, "exported": exported, "config": config}


def _exposure(*args: str) -> None:
    result = CliRunner().invoke(app, ["evaluate", "exposure", "--no-figure", "--resamples", "10000", "--draws",
                                      "2000", *args])
    assert result.exit_code == 0, result.output


def _zones(folder: Path) -> dict[str, dict[str, str]]:
    rows = list(csv.DictReader((folder / "exposure-zones.csv").open(encoding="utf-8")))
    assert all(r["model"] == "exposed" for r in rows)  # the oracle has no cutoff: no zones
    return {r["zone"]: r for r in rows}


def test_db_report_equals_the_report_of_an_exported_responses_file(evaluated: dict[str, Path]) -> None:
    tmp = evaluated["tmp"]
    # --db with --config: the cutoff and the evaluated release's items come from the config.
    _exposure("--db", str(evaluated["db"]), "--config", str(evaluated["config"]), "--out", str(tmp / "from-db"))
    _exposure("--responses", str(evaluated["exported"]), "--items", str(evaluated["items"]),
              "--cutoff", f"exposed={CUTOFF}", "--out", str(tmp / "from-file"))
    for name in ("EXPOSURE.md", "exposure.csv", "exposure-tests.csv", "exposure-zones.csv", "undated-items.csv"):
        assert (tmp / "from-db" / name).read_text(encoding="utf-8") == \
            (tmp / "from-file" / name).read_text(encoding="utf-8"), name
    undated = (tmp / "from-db" / "undated-items.csv").read_text(encoding="utf-8").split()
    assert undated == ["item_id", f"aqa-{UNDATED:020x}"]
    md = (tmp / "from-db" / "EXPOSURE.md").read_text(encoding="utf-8")
    assert "Item dates: 15 from paper.publication_date in items.jsonl; 1 undated (in no side)." in md
    assert "- oracle: no knowledge_cutoff declared; reported unsplit." in md
    assert "## ZONES" in md



def test_settings_come_from_the_global_config_or_the_found_one_as_for_every_command(
        evaluated: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same settings three ways: the command's own --config, the global -c before `evaluate`, and
    # ./arcticqa.toml in the working folder (no -c at all); each gives the cutoff and the release's items.
    db = str(evaluated["db"])
    _exposure("--db", db, "--config", str(evaluated["config"]), "--out", str(tmp_path / "own"))
    global_c = CliRunner().invoke(app, ["-c", str(evaluated["config"]), "evaluate", "exposure", "--no-figure",
                                        "--resamples", "10000", "--draws", "2000", "--db", db,
                                        "--out", str(tmp_path / "global")])
    assert global_c.exit_code == 0, global_c.output
    here = tmp_path / "workdir"
    here.mkdir()
    (here / "arcticqa.toml").write_text(evaluated["config"].read_text(encoding="utf-8").replace(
        'items = "', f'items = "{evaluated["tmp"].as_posix()}/'), encoding="utf-8")
    monkeypatch.chdir(here)
    _exposure("--db", db, "--out", str(tmp_path / "found"))
    own = (tmp_path / "own" / "exposure.csv").read_text(encoding="utf-8")
    assert "exposed,2021-01-01,before" in own.replace('"', "")
    for other in ("global", "found"):
        assert (tmp_path / other / "exposure.csv").read_text(encoding="utf-8") == own, other
        assert (tmp_path / other / "undated-items.csv").read_text(encoding="utf-8") == \
            (tmp_path / "own" / "undated-items.csv").read_text(encoding="utf-8"), other

def test_zone_numbers_equal_the_hand_computed_ones(evaluated: dict[str, Path]) -> None:
    out = evaluated["tmp"] / "analytic"
    _exposure("--db", str(evaluated["db"]), "--items", str(evaluated["items"]), "--cutoff", f"exposed={CUTOFF}",
              "--out", str(out))
    zones = _zones(out)
    assert list(zones) == ["seen", "unseen", "boundary", "unknown"]

    def row(zone: str, *names: str) -> list[float | str]:
        return [float(zones[zone][n]) if zones[zone][n] else "" for n in names]

    counts = ("questions", "responses", "valid", "answered", "provider_answered")
    # seen: stations 0-9 answer-present; 8 of 10 answered with the gold option, 2 with a distractor.
    assert row("seen", *counts) == [10, 20, 20, 20, 20]
    assert row("seen", "reliability", "answered_accuracy", "abstention_rate") == [0.8, 0.8, 0.0]
    # k ~ Binomial(10, 0.8): P(k <= 4) = 0.006 < 0.025 < P(k <= 5) = 0.033, P(k <= 9) = 0.89 -> [0.5, 1.0]
    assert row("seen", "reliability_ci_low", "reliability_ci_high") == [0.5, 1.0]
    assert row("seen", "answered_accuracy_ci_low", "answered_accuracy_ci_high") == [0.5, 1.0]
    assert row("seen", "abstention_ci_low", "abstention_ci_high") == [0.0, 0.0]
    # boundary: stations 0-9 answer-absent; 5 of 10 abstain. Binomial(10, 0.5): 2.5% -> 2, 97.5% -> 8.
    assert row("boundary", *counts) == [10, 20, 20, 10, 20]
    assert row("boundary", "reliability", "answered_accuracy", "abstention_rate") == [0.5, 0.0, 0.5]
    assert row("boundary", "reliability_ci_low", "reliability_ci_high") == [0.2, 0.8]
    assert row("boundary", "abstention_ci_low", "abstention_ci_high") == [0.2, 0.8]
    assert zones["boundary"]["abstention_expected"] == "true" and zones["seen"]["abstention_expected"] == "false"
    # unseen: stations 10-14 answer-present; 10 and 11 abstain, 12-14 gold.
    assert row("unseen", *counts) == [5, 10, 10, 6, 10]
    assert row("unseen", "reliability", "answered_accuracy", "abstention_rate") == [0.6, 1.0, 0.4]
    # Binomial(5, 0.6): P(k <= 0) = 0.010, P(k <= 1) = 0.087 -> 0.2; P(k <= 4) = 0.92 -> 1.0.
    assert row("unseen", "reliability_ci_low", "reliability_ci_high") == [0.2, 1.0]
    # Every answer is correct: any resample with an answer has accuracy 1.
    assert row("unseen", "answered_accuracy_ci_low", "answered_accuracy_ci_high") == [1.0, 1.0]
    # unknown: stations 10-14 answer-absent; 10-13 abstain, 14 picks a distractor.
    assert row("unknown", *counts) == [5, 10, 10, 2, 10]
    assert row("unknown", "reliability", "answered_accuracy", "abstention_rate") == [0.8, 0.0, 0.8]
    # Binomial(5, 0.8): P(k <= 2) = 0.058 -> 0.4 (P(k <= 1) = 0.007); P(k <= 4) = 0.67 -> 1.0.
    assert row("unknown", "reliability_ci_low", "reliability_ci_high") == [0.4, 1.0]
    assert all(zones[z]["refusal_rate"] == zones[z]["invalid_rate"] == "0.000000" for z in zones)
    assert {zones[z]["side"] for z in ("seen", "boundary")} == {"before"}
    assert {zones[z]["side"] for z in ("unseen", "unknown")} == {"after"}

    # The zones are the split's sides seen by condition: the same numbers and the same CIs.
    sides = {r["side"]: r for r in csv.DictReader((out / "exposure.csv").open(encoding="utf-8"))
             if r["model"] == "exposed"}
    for zone, side in (("seen", "before"), ("unseen", "after")):
        assert zones[zone]["abstention_rate"] == sides[side]["present_abstention"]
        assert (zones[zone]["abstention_ci_low"], zones[zone]["abstention_ci_high"]) == \
            (sides[side]["present_ci_low"], sides[side]["present_ci_high"])
        assert (zones[zone]["answered_accuracy_ci_low"], zones[zone]["answered_accuracy_ci_high"]) == \
            (sides[side]["accuracy_ci_low"], sides[side]["accuracy_ci_high"])
    for zone, side in (("boundary", "before"), ("unknown", "after")):
        assert (zones[zone]["abstention_rate"], zones[zone]["abstention_ci_low"], zones[zone]["abstention_ci_high"]) \
            == (sides[side]["absent_abstention"], sides[side]["absent_ci_low"], sides[side]["absent_ci_high"])


def test_db_without_arcticabstain_responses_or_with_both_sources_exits_2(evaluated: dict[str, Path],
                                                                         tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["evaluate", "exposure", "--db", str(tmp_path / "typo.db"), "--out",
                                       str(tmp_path / "a")])
    assert missing.exit_code == 2 and "typo.db: store not found" in missing.output
    assert not (tmp_path / "typo.db").exists()
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    result = CliRunner().invoke(app, ["evaluate", "exposure", "--db", str(empty), "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "holds no arcticabstain responses" in result.output
    both = CliRunner().invoke(app, ["evaluate", "exposure", "--db", str(evaluated["db"]), "--responses",
                                    str(evaluated["exported"]), "--out", str(tmp_path / "b")])
    assert both.exit_code == 2 and "give exactly one of --responses FILE or --db URL" in both.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def _nan_free(value: object) -> object:
    """A zone as plain data, NaN (an interval nothing could be drawn for) as None, so equal zones compare equal."""
    if isinstance(value, float) and value != value:
        return None
    if isinstance(value, tuple | list):
        return [_nan_free(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _nan_free(getattr(value, k)) for k in value.__dataclass_fields__}
    return value


@pytest.mark.parametrize("seed", range(12))
def test_zones_are_the_sides_by_condition_whatever_the_order_or_calendar(seed: int) -> None:
    """Random designs (invalid replies of every cause included): the zones tie out with the side
    reports built by the published build_report, and do not change when the responses are
    shuffled or when every date and the cutoff move by the same number of days."""
    import random
    from datetime import timedelta

    from arcticqa.evaluate.arcticabstain.parse import CAUSE_FORMAT, CAUSE_INFRASTRUCTURE, CAUSE_REFUSAL
    from arcticqa.evaluate.arcticabstain.records import ResponseRecord
    from arcticqa.evaluate.arcticabstain.report import StatsSettings
    from arcticqa.evaluate.exposure import build_exposure

    rng = random.Random(seed)
    settings = StatsSettings(resamples=200, draws=50, seed=seed)
    items = [f"q-{i:02d}" for i in range(rng.randint(3, 14))]
    dates = {i: date(2015, 1, 1) + timedelta(days=rng.randint(0, 3000)) for i in items if rng.random() < 0.9}
    cutoff = date(2015, 1, 1) + timedelta(days=rng.randint(300, 2700))
    records = []
    for model in ("m1", "m2"):
        for item in items:
            for condition, outcomes in (("answer_present", "N1 N2 N3 N0"), ("answer_absent", "N4 N5 N0")):
                for trial in range(1, rng.randint(1, 3) + 1):
                    outcome = rng.choice(outcomes.split())
                    cause = rng.choice([CAUSE_FORMAT, CAUSE_INFRASTRUCTURE, CAUSE_REFUSAL]) if outcome == "N0" else None
                    records.append(ResponseRecord(model, model, item, condition, trial, outcome, outcome, cause))
    def exposures(rows: list[ResponseRecord], when: dict[str, date], cut: date) -> dict[str, Any]:
        return {e.model: e for e in build_exposure(rows, when, {"m1": cut}, settings=settings)}

    found = exposures(records, dates, cutoff)
    exposure = found["m1"]
    assert found["m2"].zones == []  # no cutoff, no zones

    shuffled = records[:]
    rng.shuffle(shuffled)
    moved = {i: d + timedelta(days=400) for i, d in dates.items()}
    for other in (exposures(shuffled, dates, cutoff), exposures(records, moved, cutoff + timedelta(days=400))):
        assert _nan_free(other["m1"].zones) == _nan_free(exposure.zones)

    zones = {z.zone: z for z in exposure.zones}
    for side, present_zone, absent_zone in (("before", "seen", "boundary"), ("after", "unseen", "unknown")):
        result = getattr(exposure, side)
        present, absent = zones[present_zone], zones[absent_zone]
        if result is None:  # no dated item on this side
            assert present.responses == absent.responses == 0 and present.reliability is None
            continue
        counts = result.counts
        assert present.valid + absent.valid == counts.valid
        assert present.responses + absent.responses == counts.responses
        if present.valid:
            assert present.abstention_rate == pytest.approx(counts.present_abstention)
            assert present.reliability == pytest.approx(counts["N1"] / counts.present_valid)
            assert _nan_free(present.abstention_ci) == _nan_free(result.present_ci)
        if present.answered:
            assert present.answered_accuracy == pytest.approx(counts.present_accuracy_when_answering)
            assert _nan_free(present.answered_accuracy_ci) == _nan_free(result.accuracy_ci)
        if absent.valid:
            assert absent.reliability == absent.abstention_rate == pytest.approx(counts.absent_abstention)
            assert _nan_free(absent.abstention_ci) == _nan_free(result.absent_ci)
