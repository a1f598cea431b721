"""What a build will cost and how long it will take, before its first model call.

:func:`estimate` multiplies four things, each a low / mid / high range:

* **the funnel**: of ``papers`` discovered, the share that reach full text and the share of those
  that are eligible (the reference's by default: 84,829 discovered → 4,420 full texts, 159 of 276
  eligible in its run r3; the store's own once it holds :data:`MIN_STORE_PAPERS` papers). Ranges
  are 95% Wilson intervals of the observed counts;
* **calls per paper, per role**: model calls (first attempts, cache hits excluded) per paper that
  reaches the role's stage (``site_extractor``: per full text at eligibility; the construct roles:
  per eligible paper), with their Poisson interval;
* **tokens per call, per role**: mean input and output tokens with the 95% interval of the mean
  (a table measured on the offline roles, whose requests carry no reply schema, gets the schema an
  OpenAI-compatible request carries added to its input: :func:`structure_tokens`);
* **the settings**: which model answers each role, its prices, its ``requests_per_minute``,
  ``tokens_per_minute`` and concurrency, the Batch API roles, the Semantic Scholar rate.

The per-role figures come from the store's ``llm_call`` history (SQL aggregates, never row by row)
for every role with :data:`MIN_STORE_CALLS` answered calls, else from a :class:`Profile` table
measured on the sample corpus (``data/estimate/sample-corpus.json``; :func:`measure_profile`).

Wall time is the largest of: discovery (S2 pages ÷ rate) and then one eligible paper's chain of
calls (the stages start on each page's papers as it arrives, so only the last page's papers wait
for discovery to end); and, per model config, tokens ÷ TPM, requests ÷ RPM, and calls × latency ÷ concurrency plus
the slowest eligible paper's chain of calls (construct's calls for a paper run one after the
other). The spread of a call's latency makes the slowest chain longer, and a call left unanswered
makes its paper wait the client's timeout: a store that has built (a pilot) measured both, and
its stages' time before construct per discovered paper, which overlaps the model stages (the
longer of the two counts); before one, ``[estimate]`` states them (``latency_p99_s``: a lognormal
through the mean and that percentile; ``timeout_share``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError

from arcticqa.config import ROLES, Settings
from arcticqa.errors import InputError
from arcticqa.llm.ratelimit import CHARS_PER_TOKEN
from arcticqa.store.store import Store, sqlite_file

__all__ = [
    "Range",
    "Funnel",
    "RoleProfile",
    "Profile",
    "RoleEstimate",
    "ModelWall",
    "Estimate",
    "REFERENCE_FUNNEL",
    "DEFAULT_PROFILE",
    "MIN_STORE_PAPERS",
    "MIN_STORE_CALLS",
    "S2_PAGE",
    "estimate",
    "estimate_for_settings",
    "lognormal_sd",
    "structure_tokens",
    "funnel_of_store",
    "measure_profile",
    "measure_pace",
    "load_profile",
    "default_papers",
]

#: the table measured on the sample corpus (how it was made: its own ``command`` field)
DEFAULT_PROFILE = Path(__file__).resolve().parents[2] / "data" / "estimate" / "sample-corpus.json"
#: papers (discovered, not duplicates) the store needs before its own funnel replaces the reference's
MIN_STORE_PAPERS = 100
#: answered calls a role needs in the store before its own figures replace the table's
MIN_STORE_CALLS = 20
#: records per Semantic Scholar bulk-search page
S2_PAGE = 1000
#: construct's roles: asked per eligible paper, one after the other within a paper
CONSTRUCT_ROLES = tuple(r for r in ROLES if r != "site_extractor")
#: roles whose prompt carries the paper's whole text once: their input grows with the paper (the
#: others see spans and the item, whose size does not)
DOCUMENT_ROLES = ("finding_extractor",)
_Z = 1.96
#: the standard normal's 99th percentile
_Z99 = 2.3263478740408408


@dataclass(frozen=True)
class Range:
    """A figure with its low and high ends (``mid`` is the point estimate)."""

    low: float
    mid: float
    high: float

    @classmethod
    def point(cls, value: float) -> Range:
        return cls(value, value, value)

    def __mul__(self, other: Range | float) -> Range:
        o = other if isinstance(other, Range) else Range.point(other)
        return Range(self.low * o.low, self.mid * o.mid, self.high * o.high)

    __rmul__ = __mul__

    def __add__(self, other: Range | float) -> Range:
        o = other if isinstance(other, Range) else Range.point(other)
        return Range(self.low + o.low, self.mid + o.mid, self.high + o.high)

    __radd__ = __add__

    def __truediv__(self, divisor: float) -> Range:
        return Range(self.low / divisor, self.mid / divisor, self.high / divisor)

    @staticmethod
    def maximum(*ranges: Range) -> Range:
        return Range(max(r.low for r in ranges), max(r.mid for r in ranges), max(r.high for r in ranges))


def lognormal_sd(mean: float, p99: float) -> float:
    """The standard deviation of a lognormal latency with this mean and 99th percentile (0 when
    the percentile is not above the mean: no spread to speak of)."""
    # mean = median·e^(σ²/2) and p99 = median·e^(z·σ): σ²/2 − z·σ + ln(p99/mean) = 0, the smaller root
    ratio = math.log(p99 / mean) if mean > 0 and p99 > mean else 0.0
    if ratio <= 0:
        return 0.0
    sigma = _Z99 - math.sqrt(max(0.0, _Z99 * _Z99 - 2 * ratio))
    return mean * math.sqrt(math.expm1(sigma * sigma))


def structure_tokens(role: str, mode: str, *, options_per_call: int = 1) -> float:
    """Tokens an OpenAI-compatible request of ``role`` carries besides its prompt: the reply's
    schema (instructor's instruction in ``json`` mode), which a provider counts on every call."""
    # imported here: the provider loads instructor and openai, and the stages their gates, which an
    # estimate with no role on an OpenAI-compatible endpoint never needs
    from arcticqa.llm.providers.openai import structure_chars
    from arcticqa.stages.distractors import DistractorWriterOutput
    from arcticqa.stages.eligibility import SiteExtractorReply
    from arcticqa.stages.findings import FindingExtractorOutput
    from arcticqa.stages.option_check import OptionVerdict, OptionVerdicts
    from arcticqa.stages.question import QuestionDraft
    from arcticqa.stages.reconstruct import Reconstruction
    from arcticqa.stages.verify import Verdict

    replies: dict[str, type[BaseModel]] = {
        "site_extractor": SiteExtractorReply, "finding_extractor": FindingExtractorOutput,
        "question_writer": QuestionDraft, "reconstructor": Reconstruction, "verifier": Verdict,
        "distractor_writer": DistractorWriterOutput,
        # several options a call: one verdict each
        "option_verifier": OptionVerdicts if options_per_call > 1 else OptionVerdict,
    }
    return structure_chars(mode, replies[role]) / CHARS_PER_TOKEN


def wilson(successes: int, trials: int) -> Range:
    """The share ``successes / trials`` with its 95% Wilson interval."""
    if trials <= 0:
        return Range.point(0.0)
    p = successes / trials
    denom = 1 + _Z * _Z / trials
    centre = (p + _Z * _Z / (2 * trials)) / denom
    half = _Z * math.sqrt(p * (1 - p) / trials + _Z * _Z / (4 * trials * trials)) / denom
    return Range(max(0.0, centre - half), p, min(1.0, centre + half))


def poisson_rate(events: float, units: int) -> Range:
    """``events / units`` with a normal-approximation 95% interval on the count."""
    if units <= 0:
        return Range.point(0.0)
    spread = _Z * math.sqrt(max(events, 0.0))
    return Range(max(0.0, events - spread) / units, events / units, (events + spread) / units)


def mean_interval(total: float, squares: float, n: int) -> Range:
    """The mean of ``n`` values from their sum and sum of squares, with the 95% interval of the mean."""
    if n <= 0:
        return Range.point(0.0)
    mean = total / n
    var = max(0.0, squares / n - mean * mean)
    half = _Z * math.sqrt(var / n)
    return Range(max(0.0, mean - half), mean, mean + half)


@dataclass(frozen=True)
class Funnel:
    """Counts a funnel was observed with: discovered papers, full texts, eligible ones."""

    source: str
    discovered: int
    fulltext: int
    screened: int  # papers eligibility decided (the denominator of the eligible share)
    eligible: int

    @property
    def fulltext_share(self) -> Range:
        return wilson(self.fulltext, self.discovered)

    @property
    def eligible_share(self) -> Range:
        return wilson(self.eligible, self.screened)


#: the reference's funnel (docs/estimate.md): 84,829 discovered → 4,420 full texts frozen; its run
#: r3 found 159 of 276 screened papers eligible (117 stopped at eligibility)
REFERENCE_FUNNEL = Funnel(source="the reference's (84,829 discovered → 4,420 full texts; 159 of 276 eligible)",
                          discovered=84_829, fulltext=4_420, screened=276, eligible=159)


@dataclass(frozen=True)
class RoleProfile:
    """One role's measured figures: first-attempt calls over the papers that reached its stage,
    answered attempts' tokens (sum and sum of squares), retries, latency."""

    calls: int
    units: int  # papers the role's stage ran on (full texts at eligibility, or eligible papers)
    answered: int = 0
    tokens_in: float = 0.0
    tokens_in_sq: float = 0.0
    tokens_out: float = 0.0
    tokens_out_sq: float = 0.0
    retries: int = 0
    latency_s: float = 0.0  # sum over answered attempts
    latency_sq: float = 0.0  # sum of squares over answered attempts

    def calls_per_unit(self) -> Range:
        return poisson_rate(self.calls, self.units)

    def per_call_in(self) -> Range:
        return mean_interval(self.tokens_in, self.tokens_in_sq, self.answered)

    def per_call_out(self) -> Range:
        return mean_interval(self.tokens_out, self.tokens_out_sq, self.answered)


@dataclass(frozen=True)
class Profile:
    """Per-role figures and where they come from (a table file or a store)."""

    source: str
    roles: dict[str, RoleProfile]
    settings: dict[str, Any] = field(default_factory=dict)  # the build settings it was measured with
    command: str = ""
    #: mean extracted text of the eligible papers it was measured on, in tokens (characters / 4)
    document_tokens: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "command": self.command, "settings": self.settings,
                "document_tokens": self.document_tokens,
                "roles": {r: asdict(p) for r, p in sorted(self.roles.items())}}


def load_profile(path: Path) -> Profile:
    """A per-role table written by :func:`measure_profile` (``arcticqa estimate --profile-out``)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("estimate profile not found", path=str(path)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read estimate profile: {exc}", path=str(path)) from exc
    roles: dict[str, RoleProfile] = {}
    for role, fields in (data.get("roles") or {}).items():
        if role not in ROLES:
            raise InputError(f"field 'roles.{role}': not a role", path=str(path))
        try:
            roles[role] = RoleProfile(**fields)
        except TypeError as exc:
            raise InputError(f"field 'roles.{role}': {exc}", path=str(path)) from None
    try:
        document = float(data.get("document_tokens") or 0.0)
    except (TypeError, ValueError):
        raise InputError("field 'document_tokens': not a number", path=str(path)) from None
    return Profile(source=str(data.get("source") or path), roles=roles, settings=data.get("settings") or {},
                   command=str(data.get("command") or ""), document_tokens=document)


# -- what a store says -------------------------------------------------------------------------------------

_SUCCEEDED = text("SELECT stage, count(DISTINCT paper_id) FROM stage_run WHERE subject = '' AND status = :status "
                  "GROUP BY stage")
_PAPERS = text("SELECT count(*) FROM paper WHERE duplicate_of IS NULL")
_DOCUMENT = text(f"SELECT avg(length(text)) / {CHARS_PER_TOKEN} FROM document WHERE paper_id IN "
                 "(SELECT paper_id FROM stage_run WHERE stage = 'eligibility' AND subject = '' AND status = 'succeeded')")
# answered: an attempt without an error (a failed one stores its parsed output as JSON null, not
# SQL NULL, and its tokens and latency are a 429's or a timeout's, not an answer's)
_ANSWERED = "error IS NULL AND parsed IS NOT NULL"
_CALLS = text(
    "SELECT role, sum(CASE WHEN attempt = 1 THEN 1 ELSE 0 END), sum(CASE WHEN attempt > 1 THEN 1 ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN 1 ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN tokens_in ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN 1.0 * tokens_in * tokens_in ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN tokens_out ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN 1.0 * tokens_out * tokens_out ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN latency_s ELSE 0 END), "
    f"sum(CASE WHEN {_ANSWERED} THEN latency_s * latency_s ELSE 0 END) "
    "FROM llm_call WHERE NOT cache_hit GROUP BY role")
# A provider that reports no usage (the offline roles) leaves tokens at 0: count them as the
# stand-ins and the client's pacing do, characters / 4 of the messages and of the answer (SQLite only)
_CHARS_BY_ROLE = text(
    f"SELECT role, sum(i), sum(1.0 * i * i), sum(o), sum(1.0 * o * o) FROM ("
    f"SELECT c.role AS role, sum(length(json_extract(m.value, '$.content'))) / {CHARS_PER_TOKEN} AS i, "
    f"length(json(c.parsed)) / {CHARS_PER_TOKEN} AS o "
    "FROM llm_call c, json_each(c.request, '$.messages') m "
    "WHERE NOT c.cache_hit AND c.error IS NULL AND c.parsed IS NOT NULL GROUP BY c.id) GROUP BY role")


def _url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=True)


def funnel_of_store(store: Store) -> Funnel:
    """The store's own funnel: papers, full texts (``extract_text`` succeeded), screened and eligible."""
    with store.engine.connect() as conn:
        papers = int(conn.execute(_PAPERS).scalar() or 0)
        succeeded = {str(s): int(n) for s, n in conn.execute(_SUCCEEDED, {"status": "succeeded"})}
        rejected = {str(s): int(n) for s, n in conn.execute(_SUCCEEDED, {"status": "rejected"})}
    eligible = succeeded.get("eligibility", 0)
    return Funnel(source=f"the store's ({_url(store)})", discovered=papers,
                  fulltext=succeeded.get("extract_text", 0), screened=eligible + rejected.get("eligibility", 0),
                  eligible=eligible)


_FIRST_START = text("SELECT min(started_at) FROM stage_run WHERE subject = ''")
_CONSTRUCT_START = text("SELECT min(started_at) FROM stage_run WHERE subject = '' AND stage = 'construct'")
_TIMEOUTS = text("SELECT sum(CASE WHEN attempt = 1 THEN 1 ELSE 0 END), "
                 "sum(CASE WHEN error LIKE '%imeout%' THEN 1 ELSE 0 END) FROM llm_call WHERE NOT cache_hit")


def _when(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def measure_pace(store: Store, discovered: int) -> tuple[float, float]:
    """From a store that has built: seconds of the stages before construct per discovered paper
    (its first stage attempt to construct's first), and timed-out attempts per call."""
    with store.engine.connect() as conn:
        first, construct = (_when(conn.execute(q).scalar()) for q in (_FIRST_START, _CONSTRUCT_START))
        calls, timeouts = conn.execute(_TIMEOUTS).one()
    local = (construct - first).total_seconds() / discovered if first and construct and discovered else 0.0
    return max(local, 0.0), (int(timeouts or 0) / int(calls) if calls else 0.0)


def measure_profile(store: Store, settings: Settings, *, command: str = "") -> Profile:
    """Per-role figures from the store's ``llm_call`` rows, by SQL aggregates."""
    funnel = funnel_of_store(store)
    units = {role: (funnel.screened if role == "site_extractor" else funnel.eligible) for role in ROLES}
    roles: dict[str, RoleProfile] = {}
    with store.engine.connect() as conn:
        rows = list(conn.execute(_CALLS))
        document = float(conn.execute(_DOCUMENT).scalar() or 0.0)
        by_chars: dict[str, tuple[float, ...]] = {}
        if store.engine.dialect.name == "sqlite" and any(r[3] and not (r[4] or r[6]) for r in rows):
            by_chars = {str(r[0]): tuple(float(x or 0) for x in r[1:]) for r in conn.execute(_CHARS_BY_ROLE)}
    for role, calls, retries, answered, t_in, t_in_sq, t_out, t_out_sq, latency, latency_sq in rows:
        if role not in ROLES:
            continue
        if answered and not (t_in or t_out) and role in by_chars:
            t_in, t_in_sq, t_out, t_out_sq = by_chars[role]
        roles[str(role)] = RoleProfile(calls=int(calls or 0), units=units[str(role)], answered=int(answered or 0),
                                       tokens_in=float(t_in or 0), tokens_in_sq=float(t_in_sq or 0),
                                       tokens_out=float(t_out or 0), tokens_out_sq=float(t_out_sq or 0),
                                       retries=int(retries or 0), latency_s=float(latency or 0),
                                       latency_sq=float(latency_sq or 0))
    for role in ROLES:  # a role never asked is measured as asked 0 times
        roles.setdefault(role, RoleProfile(calls=0, units=units[role]))
    b = settings.build
    measured_with = {"findings_per_paper": b.findings_per_paper, "max_revisions": b.max_revisions,
                     "items_per_family": b.items_per_family, "options_per_call": b.options_per_call,
                     "site_extractor": b.site_extractor, "discovered": funnel.discovered,
                     "fulltext": funnel.fulltext, "eligible": funnel.eligible}
    return Profile(source=f"the store's llm_call history ({_url(store)})", roles=roles,
                   settings=measured_with, command=command, document_tokens=document)


# -- the estimate --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RoleEstimate:
    role: str
    model: str  # the [models] name
    calls: Range
    tokens_in: Range
    tokens_out: Range
    cost_usd: Range
    cost_batch_usd: Range
    batched: bool
    source: str


@dataclass(frozen=True)
class ModelWall:
    """One model config's time terms (seconds) at its configured limits."""

    model: str
    requests: Range
    tokens: Range
    rpm: float | None
    tpm: float | None
    concurrency: int
    by_tokens: Range | None
    by_requests: Range | None
    by_latency: Range


@dataclass(frozen=True)
class Estimate:
    papers: int
    funnel: Funnel
    fulltext: Range
    eligible: Range
    roles: list[RoleEstimate]
    models: list[ModelWall]
    s2_pages: int
    s2_rate: float | None
    discovery_s: Range
    local_s: Range
    model_s: Range
    wall_s: Range
    binding: str
    latency_s: float
    assumptions: list[str]

    @property
    def calls(self) -> Range:
        return sum((r.calls for r in self.roles), Range.point(0.0))

    @property
    def tokens_in(self) -> Range:
        return sum((r.tokens_in for r in self.roles), Range.point(0.0))

    @property
    def tokens_out(self) -> Range:
        return sum((r.tokens_out for r in self.roles), Range.point(0.0))

    @property
    def cost_usd(self) -> Range:
        return sum((r.cost_usd for r in self.roles), Range.point(0.0))

    @property
    def cost_batch_usd(self) -> Range:
        return sum((r.cost_batch_usd for r in self.roles), Range.point(0.0))

    def to_json(self) -> dict[str, Any]:
        def rng(r: Range) -> dict[str, float]:
            return {"low": r.low, "mid": r.mid, "high": r.high}

        return {
            "papers": self.papers, "funnel": asdict(self.funnel), "fulltext": rng(self.fulltext),
            "eligible": rng(self.eligible),
            "roles": [{"role": r.role, "model": r.model, "calls": rng(r.calls), "tokens_in": rng(r.tokens_in),
                       "tokens_out": rng(r.tokens_out), "cost_usd": rng(r.cost_usd),
                       "cost_batch_usd": rng(r.cost_batch_usd), "batched": r.batched, "source": r.source}
                      for r in self.roles],
            "models": [{"model": m.model, "requests": rng(m.requests), "tokens": rng(m.tokens), "rpm": m.rpm,
                        "tpm": m.tpm, "concurrency": m.concurrency,
                        "by_tokens_s": rng(m.by_tokens) if m.by_tokens else None,
                        "by_requests_s": rng(m.by_requests) if m.by_requests else None,
                        "by_latency_s": rng(m.by_latency)} for m in self.models],
            "totals": {"calls": rng(self.calls), "tokens_in": rng(self.tokens_in), "tokens_out": rng(self.tokens_out),
                       "cost_usd": rng(self.cost_usd), "cost_batch_usd": rng(self.cost_batch_usd)},
            "s2_pages": self.s2_pages, "s2_rate": self.s2_rate, "discovery_s": rng(self.discovery_s),
            "local_s": rng(self.local_s),
            "model_s": rng(self.model_s), "wall_s": rng(self.wall_s), "binding": self.binding,
            "latency_s": self.latency_s, "assumptions": self.assumptions,
        }


def estimate(settings: Settings, *, papers: int, funnel: Funnel, profiles: Mapping[str, tuple[RoleProfile, str]],
             latency_s: float, s2_queries: int | None, s2_rate: float | None,
             document_shift: Mapping[str, float] | None = None, local_s_per_paper: float = 0.0,
             timeout_share: float = 0.0, latency_sd: float = 0.0) -> Estimate:
    """The arithmetic: ``papers`` discovered through ``funnel``, each role's calls and tokens from its
    profile (with where it came from), priced and paced by ``settings``.

    ``s2_queries``: bulk-search queries discovery runs (None: a source that is not Semantic Scholar);
    ``latency_s``: mean seconds per model call; ``document_shift``: tokens to add to a role's
    input per call (the papers to build are longer, or shorter, than those it was measured on);
    ``local_s_per_paper``: seconds of the stages before construct per discovered paper (prefilter,
    fetch, extraction, eligibility), which run beside the model stages (later batches' local work
    overlaps earlier batches' construct), so the longer of the two counts; ``timeout_share``: attempts
    that timed out per call, which make the slowest paper wait a client timeout
    (``timeout_s × P(at least one)``); ``latency_sd``: the spread of one call's latency, which
    makes the slowest of the eligible papers' chains longer than the mean chain (by about
    ``sd × √chain × √(2 ln papers)``, the expected maximum of that many sums).
    """
    shift = dict(document_shift or {})
    fulltext = funnel.fulltext_share * papers
    eligible = fulltext * funnel.eligible_share
    roles: list[RoleEstimate] = []
    chain = Range.point(0.0)  # construct's calls for one eligible paper, one after the other
    for role in ROLES:
        profile, source = profiles[role]
        if role == "site_extractor" and settings.build.site_extractor == "never":
            per = Range.point(0.0)
        else:
            per = profile.calls_per_unit()
        calls = per * (fulltext if role == "site_extractor" else eligible)
        name = settings.roles[role]
        cfg = settings.models[name]
        batched = settings.build.batch and cfg.provider == "openai" and role in settings.build.batch_roles
        if role in CONSTRUCT_ROLES and not batched:
            chain = chain + per
        per_in = profile.per_call_in() + shift.get(role, 0.0)
        per_in = Range(max(0.0, per_in.low), max(0.0, per_in.mid), max(0.0, per_in.high))
        t_in, t_out = calls * per_in, calls * profile.per_call_out()
        cost = (t_in * cfg.price_in_per_mtok + t_out * cfg.price_out_per_mtok) / 1e6
        batch_cost = cost * (cfg.batch_price_factor if cfg.provider == "openai" else 1.0)
        roles.append(RoleEstimate(role=role, model=name, calls=calls, tokens_in=t_in, tokens_out=t_out,
                                  cost_usd=batch_cost if batched else cost, cost_batch_usd=batch_cost,
                                  batched=batched, source=source))
    retry = {role: (p.retries / p.calls if p.calls else 0.0) for role, (p, _) in profiles.items()}
    walls: list[ModelWall] = []
    for name in sorted({r.model for r in roles}):
        cfg = settings.models[name]
        # a batched role waits for its job, not for the limits: its calls are priced, not timed
        mine = [r for r in roles if r.model == name and not r.batched]
        requests = sum((r.calls * (1 + retry[r.role]) for r in mine), Range.point(0.0))
        tokens = sum((r.tokens_in + r.tokens_out for r in mine), Range.point(0.0))
        calls = sum((r.calls for r in mine), Range.point(0.0))
        # a paper has one call in flight at a time: papers in flight bound the slots too
        slots = min(cfg.max_concurrency, cfg.endpoint_max_concurrency or cfg.max_concurrency,
                    settings.build.paper_concurrency, settings.build.batch_size)
        offline = cfg.provider == "offline"
        by_latency = Range.point(0.0) if offline else (calls * latency_s / slots + chain * latency_s
                                                       + _straggler(chain, eligible, latency_sd))
        by_tokens = tokens * (60.0 / cfg.tokens_per_minute) if cfg.tokens_per_minute and not offline else None
        by_requests = requests * (60.0 / cfg.requests_per_minute) if cfg.requests_per_minute and not offline else None
        walls.append(ModelWall(model=name, requests=requests, tokens=tokens, rpm=cfg.requests_per_minute,
                               tpm=cfg.tokens_per_minute, concurrency=slots, by_tokens=by_tokens,
                               by_requests=by_requests, by_latency=by_latency))
    terms: dict[str, Range] = {}
    for w in walls:
        for kind, value in (("tokens ÷ TPM", w.by_tokens), ("requests ÷ RPM", w.by_requests),
                            ("latency × calls ÷ concurrency", w.by_latency)):
            if value is not None:
                terms[f"{w.model}: {kind}"] = value
    model_s = Range.maximum(*terms.values()) if terms else Range.point(0.0)
    local_s = Range.point(local_s_per_paper * papers)
    if timeout_share > 0:
        expected = timeout_share * sum(w.requests.mid for w in walls)
        wait = max(settings.models[w.model].timeout_s for w in walls)
        tail = Range(0.0, wait * (1 - math.exp(-expected)), wait)
        terms = {k: v + tail for k, v in terms.items()}
        model_s = model_s + tail
    pages = 0
    discovery_s = Range.point(0.0)
    if s2_queries:
        per_query = papers / s2_queries
        pages = s2_queries * max(1, math.ceil(per_query / S2_PAGE))
        if s2_rate:
            discovery_s = Range.point(pages / s2_rate)
    binding = max(terms, key=lambda k: terms[k].mid) if terms else "none"
    if local_s.mid > model_s.mid:
        binding = "the local stages"
    if discovery_s.mid > max(model_s.mid, local_s.mid):
        binding = "S2 pages ÷ rate"
    assumptions = [f"mean model latency {latency_s:g} s a call",
                   f"funnel: {funnel.source}"]
    if local_s.mid:
        assumptions.append(f"{local_s_per_paper * 1000:.1f} ms of local stages per discovered paper before "
                           f"construct ({local_s.mid:,.0f} s)")
    via_batch = sorted({r.role for r in roles if r.batched})
    if via_batch:
        assumptions.append(f"{', '.join(via_batch)} through the Batch API: answered within its completion window, "
                           "which the wall time leaves out")
    if timeout_share:
        assumptions.append(f"{timeout_share:.2%} of calls time out, so the slowest paper may wait a client timeout")
    return Estimate(papers=papers, funnel=funnel, fulltext=fulltext, eligible=eligible, roles=roles, models=walls,
                    s2_pages=pages, s2_rate=s2_rate, discovery_s=discovery_s, local_s=local_s, model_s=model_s,
                    wall_s=Range.maximum(discovery_s + chain * latency_s, local_s, model_s), binding=binding,
                    latency_s=latency_s,
                    assumptions=assumptions)


def _straggler(chain: Range, papers: Range, sd: float) -> Range:
    """How much longer than the mean chain the slowest of ``papers`` chains of ``chain`` calls
    takes, with a call's latency spread ``sd`` (the expected maximum of n sums ≈ mean + σ√(2 ln n))."""
    def one(k: float, n: float) -> float:
        return sd * math.sqrt(max(k, 0.0)) * math.sqrt(2 * math.log(n)) if n > 1 and sd > 0 else 0.0

    return Range(one(chain.low, papers.low), one(chain.mid, papers.mid), one(chain.high, papers.high))


# -- from settings and a store ----------------------------------------------------------------------------------

def default_papers(settings: Settings, store_funnel: Funnel | None) -> tuple[int, str]:
    """How many papers to estimate for when none is given, and why: the store's, a snapshot's
    lines, or the reference's discovered papers."""
    if store_funnel is not None and store_funnel.discovered:
        return store_funnel.discovered, "papers in the store"
    source = settings.build.source.strip()
    if source.startswith("snapshot:"):
        path = Path(source.removeprefix("snapshot:")).expanduser()
        if not path.is_absolute() and settings.config_path is not None:
            path = settings.config_path.parent / path
        if path.is_file():
            with path.open("rb") as handle:
                return sum(1 for line in handle if line.strip()), f"records in {path.name}"
    return REFERENCE_FUNNEL.discovered, "the reference's discovered papers"


def _s2(settings: Settings) -> tuple[int | None, float | None]:
    """Queries and requests per second of a live Semantic Scholar source (None, None otherwise)."""
    if settings.build.source.strip() != "s2":
        return None, None
    # imported here: only the live source reads a keyword file
    from arcticqa.stages.discover import load_queries

    queries = len(load_queries(settings.build.keywords_file))
    d = settings.discovery
    rate = d.rate_per_s if d.rate_per_s is not None else (1.0 if d.api_key() else 1 / 3)
    return queries, rate


def estimate_for_settings(settings: Settings, *, papers: int | None = None,
                          use_store: bool = True) -> tuple[Estimate, str]:
    """The estimate for a build with ``settings``: the store's history where it has enough, the
    table and the reference's funnel otherwise. Returns it and what ``papers`` was taken from."""
    store_funnel: Funnel | None = None
    store_profile: Profile | None = None
    pace = (0.0, 0.0)
    path = sqlite_file(settings.store.url)
    if use_store and (path is None or (path.is_file() and path.stat().st_size > 0)):
        store = Store(settings.store.url, busy_timeout_s=settings.store.busy_timeout_s, migrate=False)
        try:
            # a database no build has written to yet (PostgreSQL: it exists before the first build)
            # has no history; one that cannot be reached is the build's to report, not the estimate's
            if all(inspect(store.engine).has_table(t) for t in ("llm_call", "stage_run", "paper", "document")):
                store_funnel = funnel_of_store(store)
                store_profile = measure_profile(store, settings)
                if store_funnel.discovered >= MIN_STORE_PAPERS:
                    pace = measure_pace(store, store_funnel.discovered)
        except OperationalError:
            store_funnel, store_profile = None, None
        finally:
            store.close()
    table_path = settings.estimate.profile or DEFAULT_PROFILE
    if not table_path.is_absolute() and settings.config_path is not None:
        table_path = settings.config_path.parent / table_path
    table = load_profile(table_path)
    profiles: dict[str, tuple[RoleProfile, str]] = {}
    latency_sum, latency_sq, latency_n = 0.0, 0.0, 0
    for role in ROLES:
        own = store_profile.roles.get(role) if store_profile else None
        if own is not None and own.answered >= MIN_STORE_CALLS:
            profiles[role] = (own, "store")
            if own.latency_s > 0:
                latency_sum, latency_n = latency_sum + own.latency_s, latency_n + own.answered
                latency_sq += own.latency_sq
        else:
            profiles[role] = (table.roles.get(role) or RoleProfile(calls=0, units=0), "table")
    funnel = REFERENCE_FUNNEL
    if store_funnel is not None and store_funnel.discovered >= MIN_STORE_PAPERS and store_funnel.screened:
        funnel = store_funnel
    given, why = (papers, "--papers") if papers is not None else default_papers(settings, store_funnel)
    latency = latency_sum / latency_n if latency_n else settings.estimate.latency_s
    latency_sd = math.sqrt(max(0.0, latency_sq / latency_n - latency * latency)) if latency_n else 0.0
    stated_p99 = settings.estimate.latency_p99_s if not latency_n else None
    if stated_p99 is not None:
        latency_sd = lognormal_sd(latency, stated_p99)
    # a pilot measured its calls' timeouts; before one, the share the config states
    paced = store_funnel is not None and store_funnel.discovered >= MIN_STORE_PAPERS
    timeout_share = pace[1] if paced else settings.estimate.timeout_share
    queries, rate = _s2(settings)
    target = settings.estimate.document_tokens
    shift: dict[str, float] = {}
    if target is not None:
        for role in DOCUMENT_ROLES:
            measured_on = store_profile.document_tokens if profiles[role][1] == "store" and store_profile \
                else table.document_tokens
            shift[role] = target - measured_on
    # the table measured the offline roles' prompts, which carry no reply schema; an endpoint is
    # sent one with every request (a store's calls counted it already)
    schema: dict[str, float] = {}
    for role in ROLES:
        cfg = settings.models[settings.roles[role]]
        if profiles[role][1] == "table" and cfg.provider == "openai":
            schema[role] = structure_tokens(role, cfg.mode, options_per_call=settings.build.options_per_call)
            shift[role] = shift.get(role, 0.0) + schema[role]
    result = estimate(settings, papers=given, funnel=funnel, profiles=profiles, latency_s=latency,
                      s2_queries=queries, s2_rate=rate, document_shift=shift, local_s_per_paper=pace[0],
                      timeout_share=timeout_share, latency_sd=latency_sd)
    if target is not None:
        result.assumptions.append(f"papers of {target:,.0f} tokens of text on average (estimate.document_tokens; "
                                  f"{', '.join(DOCUMENT_ROLES)} carries the whole text)")
    from_store = [r for r in ROLES if profiles[r][1] == "store"]
    from_table = [r for r in ROLES if profiles[r][1] == "table"]
    if from_store:
        result.assumptions.append(f"per-role calls and tokens of {', '.join(from_store)}: the store's llm_call history")
    if from_table:
        result.assumptions.append(f"per-role calls and tokens of {', '.join(from_table)}: {table.source}")
    if latency_n:
        result.assumptions[0] = (f"mean model latency {latency:.2f} s a call, sd {latency_sd:.2f} s (the store's "
                                 "answered calls)")
    elif stated_p99 is not None:
        result.assumptions[0] = (f"mean model latency {latency:g} s a call, p99 {stated_p99:g} s (estimate.latency_s, "
                                 f"latency_p99_s: lognormal, sd {latency_sd:.2f} s)")
    else:
        result.assumptions[0] = f"mean model latency {latency:g} s a call (estimate.latency_s)"
    if schema:
        result.assumptions.append("the reply schema each request carries, added to the table's prompts: "
                                  + ", ".join(f"{r} {t:,.0f}" for r, t in schema.items()) + " tokens a call")
    differs = {k: v for k, v in table.settings.items() if k in type(settings.build).model_fields
               and getattr(settings.build, k) != v}
    if differs and any(src == "table" and p.calls for p, src in profiles.values()):
        result.assumptions.append("the table was measured with " + ", ".join(f"build.{k} = {v!r}" for k, v in
                                                                           sorted(differs.items()))
                                  + "; this config differs, so its calls per paper may too")
    return result, why
