"""``arcticqa estimate``: the arithmetic on a hand-computed case, the store's history read through
the CLI, and the budget gate of ``arcticqa build``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from arcticqa.cli import app
from arcticqa.config import ROLES, load_settings
from arcticqa.demo.run import SAMPLE_CORPUS
from arcticqa.llm.gateway import CallRecord
from arcticqa.pipeline.estimate import (
    DEFAULT_PROFILE,
    DOCUMENT_ROLES,
    REFERENCE_FUNNEL,
    Funnel,
    RoleProfile,
    estimate,
    estimate_for_settings,
    load_profile,
    lognormal_sd,
    measure_profile,
    structure_tokens,
    wilson,
)
from arcticqa.standins.scripted import ScriptedModel
from arcticqa.standins.server import FakeOpenAIServer
from arcticqa.store.store import Store
from tests.pipeline_fixtures import make_corpus, write_config

runner = CliRunner()

_MODEL = """
[models.m]
provider = "openai"
model = "gpt-x"
api_key_env = ""
price_in_per_mtok = 0.40
price_out_per_mtok = 1.60
max_concurrency = 4
requests_per_minute = 30
tokens_per_minute = 60000
"""


def _config(tmp_path: Path, extra: str = "") -> Path:
    roles = "\n".join(f'{r} = "m"' for r in ROLES)
    path = tmp_path / "arcticqa.toml"
    path.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "arcticqa.db"}"\n\n[build]\npaper_concurrency = 8\n'
                    f'batch_size = 50\n{extra}\n{_MODEL}\n[roles]\n{roles}\n', encoding="utf-8")
    return path


def test_the_arithmetic_on_a_hand_computed_case(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path))
    # 1,000 discovered → 10% full text (100) → half eligible (50); one finding_extractor call per
    # eligible paper, 1,000 tokens in and 200 out each (no spread), every other role never asked
    funnel = Funnel(source="hand", discovered=1000, fulltext=100, screened=50, eligible=25)
    profiles = {r: (RoleProfile(calls=0, units=10), "hand") for r in ROLES}
    profiles["finding_extractor"] = (RoleProfile(calls=10, units=10, answered=10, tokens_in=10_000,
                                                 tokens_in_sq=10 * 1000**2, tokens_out=2_000,
                                                 tokens_out_sq=10 * 200**2), "hand")
    est = estimate(settings, papers=1000, funnel=funnel, profiles=profiles, latency_s=2.0, s2_queries=2,
                   s2_rate=0.5)
    assert est.fulltext.mid == pytest.approx(100) and est.eligible.mid == pytest.approx(50)
    assert est.calls.mid == pytest.approx(50)
    assert est.tokens_in.mid == pytest.approx(50_000) and est.tokens_out.mid == pytest.approx(10_000)
    # 50,000 × 0.40 / 1e6 + 10,000 × 1.60 / 1e6 = 0.02 + 0.016; the Batch API halves it
    assert est.cost_usd.mid == pytest.approx(0.036) and est.cost_batch_usd.mid == pytest.approx(0.018)
    (wall,) = est.models
    assert wall.by_tokens is not None and wall.by_tokens.mid == pytest.approx(60.0)  # 60,000 tokens ÷ 60,000 TPM
    assert wall.by_requests is not None and wall.by_requests.mid == pytest.approx(100.0)  # 50 ÷ 30 RPM
    # slots: min(max_concurrency 4, paper_concurrency 8, batch_size 50); 50 × 2 s ÷ 4 + one chain of 1 call
    assert wall.concurrency == 4 and wall.by_latency.mid == pytest.approx(27.0)
    # 1,000 papers over 2 queries: one page each, 2 pages at 0.5/s
    assert est.s2_pages == 2 and est.discovery_s.mid == pytest.approx(4.0)
    # the stages start on each page's papers, so discovery (4 s, then one paper's 2 s chain) overlaps them
    assert est.wall_s.mid == pytest.approx(100.0) and est.binding == "m: requests ÷ RPM"
    # a pilot's pace: 10 ms of local stages per discovered paper, and 2% of calls timed out, so the
    # slowest paper waits the client's timeout (120 s) with probability 1 - e^-(50 × 0.02)
    paced = estimate(settings, papers=1000, funnel=funnel, profiles=profiles, latency_s=2.0, s2_queries=2,
                     s2_rate=0.5, local_s_per_paper=0.01, timeout_share=0.02)
    assert paced.local_s.mid == pytest.approx(10.0)
    # the local stages run beside the model stages and discovery: the longest counts
    assert paced.wall_s.mid == pytest.approx(max(4.0 + 2.0, 10.0, 100.0 + 120.0 * (1 - math.exp(-1.0))))
    # a slow Semantic Scholar binds: 400 s of pages, then the last page's paper's one-call chain
    slow = estimate(settings, papers=1000, funnel=funnel, profiles=profiles, latency_s=2.0, s2_queries=2,
                    s2_rate=0.005)
    assert slow.wall_s.mid == pytest.approx(400.0 + 2.0) and slow.binding == "S2 pages ÷ rate"
    # a call's latency spread of 1 s makes the slowest of 50 one-call chains longer by √(2 ln 50) s
    spread = estimate(settings, papers=1000, funnel=funnel, profiles=profiles, latency_s=2.0, s2_queries=2,
                      s2_rate=0.5, latency_sd=1.0)
    assert spread.models[0].by_latency.mid == pytest.approx(27.0 + math.sqrt(2 * math.log(50)))
    # the low end multiplies the low ends: both shares' Wilson intervals, ten calls over ten papers' Poisson one
    assert est.calls.low < est.calls.mid < est.calls.high
    per_paper_low = (10 - 1.96 * math.sqrt(10)) / 10
    assert est.calls.low == pytest.approx(1000 * wilson(100, 1000).low * wilson(25, 50).low * per_paper_low)


def test_roles_through_the_batch_api_are_priced_at_its_factor_and_not_timed(tmp_path: Path) -> None:
    settings = load_settings(_config(tmp_path, extra="batch = true\nbatch_roles = [\"finding_extractor\"]"))
    funnel = Funnel(source="hand", discovered=1000, fulltext=100, screened=50, eligible=25)
    profiles = {r: (RoleProfile(calls=0, units=10), "hand") for r in ROLES}
    profiles["finding_extractor"] = (RoleProfile(calls=10, units=10, answered=10, tokens_in=10_000,
                                                 tokens_in_sq=10 * 1000**2), "hand")
    est = estimate(settings, papers=1000, funnel=funnel, profiles=profiles, latency_s=2.0, s2_queries=None,
                   s2_rate=None)
    # 50,000 tokens in at 0.40 a million, half price
    assert est.cost_usd.mid == pytest.approx(0.01) == est.cost_batch_usd.mid
    assert est.wall_s.mid == 0.0 and any("Batch API" in a for a in est.assumptions)


def test_wilson_interval_and_the_reference_funnel() -> None:
    share = wilson(159, 276)
    assert share.mid == pytest.approx(159 / 276) and 0.51 < share.low < share.mid < share.high < 0.64
    assert REFERENCE_FUNNEL.fulltext_share.mid == pytest.approx(4420 / 84829)


def test_the_committed_table_loads_and_names_how_it_was_made() -> None:
    table = load_profile(DEFAULT_PROFILE)
    assert "--profile-out" in table.command and table.roles["finding_extractor"].answered > 0


def _store_with_history(tmp_path: Path, config: Path, *, eligible: int, calls: int) -> None:
    """A store whose history is ``eligible`` papers through eligibility and ``calls``
    finding_extractor calls of 1,000 tokens in and 100 out, written through the store's own paths."""
    store = Store(load_settings(config).store.url)
    try:
        for i in range(eligible):
            store.record_run(f"p{i}", "eligibility", "", input_hash="h", status="succeeded")
        store.record_calls([CallRecord(role="finding_extractor", provider="openai", model="gpt-x",
                                       prompt_version="v", request_hash=f"r{i}", attempt=1,
                                       request={"messages": []}, parsed={"findings": []}, tokens_in=1000,
                                       tokens_out=100, cost_usd=0.0, latency_s=3.0) for i in range(calls)])
    finally:
        store.close()


def test_estimate_reads_the_stores_history(tmp_path: Path) -> None:
    config = _config(tmp_path)
    _store_with_history(tmp_path, config, eligible=10, calls=25)
    result = runner.invoke(app, ["estimate", "-c", str(config), "--papers", "84829", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    role = next(r for r in data["roles"] if r["role"] == "finding_extractor")
    assert role["source"] == "store"
    # the reference's funnel (the store has too few papers of its own): 4,420 × 159/276 eligible
    # papers, 2.5 calls each (25 calls over 10 eligible papers), 1,000 tokens in a call
    eligible = 4420 * 159 / 276
    assert role["calls"]["mid"] == pytest.approx(eligible * 2.5)
    assert role["tokens_in"]["mid"] == pytest.approx(eligible * 2.5 * 1000)
    assert role["tokens_out"]["mid"] == pytest.approx(eligible * 2.5 * 100)
    assert data["latency_s"] == pytest.approx(3.0)  # the store's answered calls
    other = next(r for r in data["roles"] if r["role"] == "reconstructor")
    assert other["source"] == "table"
    text = runner.invoke(app, ["estimate", "-c", str(config), "--papers", "84829"])
    assert text.exit_code == 0 and "finding_extractor" in text.stdout and "wall time" in text.stdout


def test_a_bad_config_names_the_file_and_field(tmp_path: Path) -> None:
    config = _config(tmp_path, extra="[estimate]\nconfirm_above_usd = -1\n")
    result = runner.invoke(app, ["estimate", "-c", str(config)])
    assert result.exit_code == 2
    assert str(config) in result.stderr and "estimate.confirm_above_usd" in result.stderr
    typo = _config(tmp_path, extra="[estimate]\nlatency = 1\n")
    result = runner.invoke(app, ["estimate", "-c", str(typo)])
    assert result.exit_code == 2 and "did you mean 'latency_s'" in result.stderr


def test_a_bad_profile_table_names_the_file_and_field(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["estimate", "-c", str(_config(tmp_path, extra='[estimate]\nprofile = "gone.json"\n'))])
    assert missing.exit_code == 2 and str(tmp_path / "gone.json") in missing.stderr
    (tmp_path / "bad.json").write_text('{"roles": {"question_writter": {"calls": 1, "units": 1}}}', encoding="utf-8")
    bad = runner.invoke(app, ["estimate", "-c", str(_config(tmp_path, extra='[estimate]\nprofile = "bad.json"\n'))])
    assert bad.exit_code == 2
    assert "bad.json" in bad.stderr and "roles.question_writter" in bad.stderr


def test_build_stops_above_the_budget_and_yes_starts_it(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "corpus", n=2)
    with FakeOpenAIServer(ScriptedModel()) as srv:
        # a price that makes even this tiny build's estimate cost more than the budget of 0
        config = write_config(tmp_path, base_url=srv.base_url, corpus=corpus, api_key_env="")
        text = config.read_text(encoding="utf-8").replace("price_in_per_mtok = 1.0", "price_in_per_mtok = 1000000.0")
        assert "1000000.0" in text
        config.write_text(text + "\n[estimate]\nconfirm_above_usd = 0.0\n", encoding="utf-8")
        stopped = runner.invoke(app, ["build", "-c", str(config), "--orchestrator", "local"])
        assert stopped.exit_code == 3, stopped.output
        assert "estimate:" in stopped.stdout
        (line,) = [x for x in stopped.stderr.splitlines() if x.strip()]
        assert line.startswith("not started:") and "--yes" in line and "estimate.confirm_above_usd" in line
        assert srv.requests == []  # no model call was sent
        started = runner.invoke(app, ["build", "-c", str(config), "--orchestrator", "local", "--yes"])
        assert started.exit_code == 0, started.output
        assert srv.requests


def test_an_offline_build_under_a_budget_is_not_stopped(tmp_path: Path) -> None:
    # the offline roles cost nothing, so the estimate never holds the demo's route back
    config = tmp_path / "offline.toml"
    config.write_text(f'[store]\nurl = "sqlite:///{tmp_path / "a.db"}"\n\n[build]\ndata_dir = "{tmp_path / "data"}"\n'
                      f'source = "snapshot:{SAMPLE_CORPUS}"\nbudget_usd = 0.0\n', encoding="utf-8")
    result = runner.invoke(app, ["build", "-c", str(config), "--orchestrator", "local"])
    assert result.exit_code == 0, result.output
    assert "estimate:" in result.stdout and "$0.00" in result.stdout
    # the table is measured from such a store: the offline roles report no usage, so tokens are
    # counted from the stored requests and answers (characters / 4)
    out = tmp_path / "profile.json"
    written = runner.invoke(app, ["estimate", "-c", str(config), "--profile-out", str(out)])
    assert written.exit_code == 0, written.output
    table = load_profile(out)
    writer = table.roles["finding_extractor"]
    assert writer.answered > 0 and writer.tokens_in > 0 and writer.tokens_out > 0
    assert table.document_tokens > 0 and table.settings["eligible"] == writer.units
    assert runner.invoke(app, ["estimate", "-c", str(config), "--profile-out", str(out)]).exit_code == 2  # no overwrite



def test_a_lognormal_through_a_mean_and_its_p99_has_that_spread() -> None:
    """``lognormal_sd``: the lognormal with median 1.5 s and p99 8 s (the rehearsal's stand-in) has
    mean 1.94 s; given that mean and p99 back, the spread is the distribution's own."""
    sigma = math.log(8.0 / 1.5) / 2.3263478740408408
    mean = 1.5 * math.exp(sigma * sigma / 2)
    assert lognormal_sd(mean, 8.0) == pytest.approx(mean * math.sqrt(math.expm1(sigma * sigma)), rel=1e-9)
    assert lognormal_sd(2.0, 2.0) == lognormal_sd(2.0, 1.0) == 0.0


def test_before_any_build_the_stated_latency_tail_and_timeouts_lengthen_the_wall_time(tmp_path: Path) -> None:
    """Without a store, ``estimate.latency_p99_s`` makes the slowest paper's chain longer than the
    mean one, and ``estimate.timeout_share`` makes it wait the client's timeout."""
    def walls(extra: str) -> tuple[float, float]:
        settings = load_settings(_config(tmp_path, f"[estimate]\nlatency_s = 2.0\n{extra}\n"))
        est = estimate_for_settings(settings, papers=20_000)[0]
        return est.models[0].by_latency.mid, est.wall_s.mid

    plain, tail, timeouts = walls(""), walls("latency_p99_s = 10.0"), walls("timeout_share = 0.01")
    assert plain[0] < tail[0]  # the slowest chain (the requests ÷ RPM term binds this config's wall)
    settings = load_settings(_config(tmp_path))
    assert 0 < timeouts[1] - plain[1] <= settings.models["m"].timeout_s


def test_the_tables_prompts_get_the_reply_schema_an_endpoint_is_sent(tmp_path: Path) -> None:
    """The table was measured on the offline roles, whose requests carry no reply schema: for a
    role on an OpenAI-compatible endpoint each call's input grows by the schema's tokens (json
    mode: instructor's instruction in the system message), and an offline role's does not."""
    settings = load_settings(_config(tmp_path))
    est, _ = estimate_for_settings(settings, papers=20_000)
    table = load_profile(DEFAULT_PROFILE)
    for r in est.roles:
        profile = table.roles[r.role]
        if not profile.calls or r.role in DOCUMENT_ROLES:
            continue
        per_call = r.tokens_in.mid / r.calls.mid
        assert per_call == pytest.approx(profile.per_call_in().mid + structure_tokens(r.role, "json"))
        assert structure_tokens(r.role, "json") > 100
    offline = load_settings(_config(tmp_path).parent / "arcticqa.toml",
                            models={"m": {"provider": "offline"}})
    est_off, _ = estimate_for_settings(offline, papers=20_000)
    verifier = next(r for r in est_off.roles if r.role == "verifier")
    assert verifier.tokens_in.mid / verifier.calls.mid == pytest.approx(table.roles["verifier"].per_call_in().mid)


def test_a_failed_attempt_is_not_counted_as_an_answer(tmp_path: Path) -> None:
    """A 429 or a timed-out attempt is stored with its parsed output as JSON null, no tokens and the
    time it took to fail: the per-call tokens and the latency are the answered attempts' alone."""
    config = _config(tmp_path)
    _store_with_history(tmp_path, config, eligible=10, calls=25)
    store = Store(load_settings(config).store.url)
    try:
        store.record_calls([CallRecord(role="finding_extractor", provider="openai", model="gpt-x",
                                       prompt_version="v", request_hash=f"f{i}", attempt=1,
                                       request={"messages": []}, parsed=None, latency_s=30.0,
                                       error="APITimeoutError: Request timed out.") for i in range(5)])
        profile = measure_profile(store, load_settings(config))
    finally:
        store.close()
    role = profile.roles["finding_extractor"]
    assert (role.calls, role.answered) == (30, 25)
    assert role.per_call_in().mid == pytest.approx(1000) and role.latency_s / role.answered == pytest.approx(3.0)
