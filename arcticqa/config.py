"""The one typed settings object: TOML file + environment (``ARCTICQA_`` prefix, ``__`` nesting).

Everything configurable flows from :class:`Settings`, loaded once by the process's entry point (the
CLI's loader, ``arcticqa.cli.app.load_cli_settings``) and passed down. :func:`load_settings` reads
the file it is given and the environment mapping it is handed, never ``os.environ`` of its own
accord: a library caller (a test, a notebook, the demo) gets the file and the defaults only. API
keys are never settings: a model config names the *environment variable* that holds its key, and
the key is read only when a client is built.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import tomllib
from collections.abc import Iterable, Mapping
from datetime import date
from pathlib import Path
from typing import Any, Literal, Self, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from arcticqa.errors import ConfigError

__all__ = [
    "ROLES",
    "ModelConfig",
    "StoreSettings",
    "BuildSettings",
    "DiscoverySettings",
    "PrefectSettings",
    "EstimateSettings",
    "PolicyFiles",
    "EvalModel",
    "EvaluateSettings",
    "VariantPlanSettings",
    "FetchPolicy",
    "ExtractionLimits",
    "ExtractionSettings",
    "Settings",
    "load_settings",
    "find_config_file",
    "read_toml",
    "read_env_file",
    "DEFAULT_CONFIG_NAME",
    "did_you_mean",
]

DEFAULT_CONFIG_NAME = "arcticqa.toml"
#: the environment variable naming the config file when no ``-c`` is given
CONFIG_ENV = "ARCTICQA_CONFIG"

#: keys read from the ``.env`` file the user points to (``env_file`` / ``$ARCTICQA_ENV_FILE``);
#: kept here, never copied into ``os.environ`` or into any settings dump
_DOTENV: dict[str, str] = {}

#: Model roles of the build pipeline. The evaluator's roles are the model names it evaluates.
ROLES: tuple[str, ...] = (
    "site_extractor",
    "finding_extractor",
    "question_writer",
    "reconstructor",
    "verifier",
    "distractor_writer",
    "option_verifier",
)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the closest known name, or ``""`` when none is close."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys the settings schema accepts at ``loc`` (the parent of an unknown key)."""
    model: type[BaseModel] = Settings
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if model is Settings and part == "models" and parts:
            parts.pop(0)  # the model config's own name
            model = ModelConfig
            continue
        field = model.model_fields.get(part) if isinstance(part, str) else None
        annotation = field.annotation if field is not None else None
        if get_origin(annotation) is list and parts and isinstance(parts[0], int):
            parts.pop(0)  # an entry of a list of sections, e.g. [[evaluate.models]]
            annotation = get_args(annotation)[0]
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)


class _Section(BaseModel):
    """A settings section: a misspelt key is an error naming it, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class ModelConfig(_Section):
    """How one role reaches a model. ``provider='offline'`` uses the rule-based baseline."""

    provider: Literal["openai", "offline"] = "openai"
    base_url: str | None = None
    model: str = "offline-baseline"
    api_key_env: str | None = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_tokens: int = 2048
    timeout_s: float = 120.0
    price_in_per_mtok: float = 0.0
    price_out_per_mtok: float = 0.0
    max_concurrency: int = 8
    #: requests in flight to this config's endpoint (``base_url``) summed over every model config
    #: that shares it; when configs sharing an endpoint disagree, the smallest value applies.
    #: None: only ``max_concurrency`` bounds this config
    endpoint_max_concurrency: int | None = Field(None, ge=1)
    #: client-side pacing (token buckets holding one second's worth, see arcticqa/llm/ratelimit.py):
    #: requests per minute, None for no limit
    requests_per_minute: float | None = Field(None, gt=0)
    #: tokens per minute (prompt estimate from its length + max_tokens, corrected with reported usage)
    tokens_per_minute: float | None = Field(None, gt=0)
    #: transport retries (429, 5xx, connection errors, timeouts); Retry-After is honoured
    max_retries: int = 6
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 60.0
    #: instructor validation re-asks after the first answer (build roles only; the evaluator never re-asks)
    max_reasks: int = 1
    #: times a refused answer (``message.refusal`` or ``finish_reason=content_filter``) is asked
    #: again, the same request unchanged (build roles only; a role in batch mode never: the same
    #: request is answered from the batch ledger); 0: a refusal fails the call at once
    max_refusal_reasks: int = Field(1, ge=0)
    #: times a truncated answer (``finish_reason=length``) is asked again, each time with
    #: ``max_tokens`` doubled, up to ``max_tokens_ceiling``; 0: a truncation fails the call at once
    max_length_reasks: int = Field(1, ge=0)
    #: the most ``max_tokens`` a length re-ask may ask for (at least ``max_tokens``); None: only
    #: ``max_length_reasks`` bounds it (``max_tokens * 2 ** max_length_reasks``)
    max_tokens_ceiling: int | None = Field(None, ge=1)
    #: instructor mode: json works with every OpenAI-compatible server (vLLM, Ollama, llama.cpp)
    mode: Literal["json", "tools", "json_schema", "md_json"] = "json"
    extra_body: dict[str, Any] = Field(default_factory=dict)
    #: the openai SDK's HTTP transport: aiohttp (the SDK's ``aiohttp`` extra) spends ~0.5 ms less
    #: CPU per call than httpx (bench/bench_pipeline.py), which decides how many calls/s one
    #: process can drive; httpx is the SDK's default and honours proxy environment variables
    http_client: Literal["aiohttp", "httpx"] = "aiohttp"
    #: Batch API (build ``batch`` mode): a batch is submitted once no new request has been queued
    #: for ``batch_linger_s`` or ``batch_max_requests`` are waiting; its status is polled every
    #: ``batch_poll_s``; prices are multiplied by ``batch_price_factor`` (OpenAI: half price)
    batch_linger_s: float = Field(2.0, gt=0)
    batch_max_requests: int = Field(50_000, ge=1)
    batch_poll_s: float = Field(30.0, gt=0)
    batch_completion_window: str = "24h"
    batch_price_factor: float = Field(0.5, ge=0)
    #: recover the answers of requests a process sent and never recorded (it was killed, or its
    #: store went away) instead of paying for them again: every live request is sent with
    #: ``store: true`` and ``metadata`` naming it, and its sending is written to the store first;
    #: a request sent before, with no answer stored, is first looked up among the provider's stored
    #: completions (waiting for it up to ``timeout_s`` after it was sent). OpenAI only: the provider
    #: keeps every stored completion, prompt and answer (30 days on OpenAI), and each request costs
    #: one more store write. Off by default (docs/reliability.md)
    recover_in_flight: bool = False

    @model_validator(mode="after")
    def _ceiling_above_max_tokens(self) -> Self:
        if self.max_tokens_ceiling is not None and self.max_tokens_ceiling < self.max_tokens:
            raise ValueError(f"max_tokens_ceiling ({self.max_tokens_ceiling}) is below max_tokens "
                             f"({self.max_tokens}): a length re-ask may only raise max_tokens")
        if self.recover_in_flight and self.provider != "openai":
            raise ValueError(f"recover_in_flight needs provider = \"openai\" (stored chat completions); "
                             f"this model's provider is {self.provider!r}")
        return self

    def api_key(self) -> str:
        """The key value, read from the environment at client-build time, never stored."""
        if self.provider == "offline":
            return "offline"
        if not self.api_key_env:
            return "not-needed"
        value = os.environ.get(self.api_key_env) or _DOTENV.get(self.api_key_env)
        if value is None:
            raise ConfigError(f"environment variable {self.api_key_env} (API key for model "
                              f"{self.model!r}) is not set")
        return value


class FetchPolicy(_Section):
    """``[fetch]``: how full texts may be fetched (:mod:`arcticqa.text.fetch`). Defaults are the
    strict production settings."""

    require_https: bool = True
    max_bytes: int = Field(50 * 1024 * 1024, ge=1)
    max_redirects: int = Field(5, ge=0)
    connect_timeout_s: float = Field(10.0, gt=0)
    read_timeout_s: float = Field(30.0, gt=0)
    #: the whole download (all hops, retries excluded) must finish within this
    total_timeout_s: float = Field(180.0, gt=0)
    contact_email: str = "arcticqa@example.org"
    user_agent: str = "arcticqa/0.1 (+https://github.com/arcticqa; mailto:{email})"
    per_host_concurrency: int = Field(2, ge=1, le=2)
    max_retries: int = Field(3, ge=0)
    backoff_base_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(60.0, ge=0)
    require_redistributable_license: bool = False
    #: licence names (compared without case, spaces, '-' and '_') that allow redistribution
    redistributable_licenses: list[str] = Field(default_factory=lambda: [
        "cc0", "ccby", "ccbysa", "ccbync", "ccbyncsa", "ccbynd", "ccbyncnd", "publicdomain", "pd"])
    #: DOI-based fallback URL templates tried after ``openAccessPdf.url``, e.g.
    #: ``"https://mirror.example.org/pdf/{doi}"``; empty by default
    doi_fallback_urls: list[str] = Field(default_factory=list)

    def headers(self) -> dict[str, str]:
        return {"User-Agent": self.user_agent.format(email=self.contact_email),
                "Accept": "application/pdf,*/*;q=0.5", "From": self.contact_email}


class ExtractionLimits(_Section):
    """Bounds on one document's extraction and the sizes of its spans and chunks (the extract
    stage's input, hashed with each attempt; :mod:`arcticqa.text.extract`)."""

    max_pages: int = Field(600, ge=1)
    time_limit_s: float = Field(120.0, gt=0)
    span_target_chars: int = Field(600, ge=50)
    max_span_chars: int = Field(1600, ge=100)
    chunk_chars: int = Field(6000, ge=500)
    chunk_overlap_chars: int = Field(500, ge=0)
    #: also cut figure/table captions into spans (flagged ``is_caption=True``); off by default
    caption_spans: bool = False
    #: run each extraction in a child process with the hard limits below (see arcticqa.text.isolate)
    isolate: bool = True
    #: the child's address-space cap (RLIMIT_AS; the interpreter and MuPDF take ~0.6 GB of it
    #: before the PDF is read); a PDF needing more is ``too_large``
    memory_limit_mb: int = Field(2048, ge=768)


class ExtractionSettings(ExtractionLimits):
    """``[extraction]``: the document limits plus the size of the build's extraction pool."""

    #: extraction processes the build keeps warm (docs/fulltext.md); None: one per core. A setting
    #: of the build, not a limit of the document, so :meth:`limits` leaves it out of the stage's
    #: input hash
    workers: int | None = None

    @field_validator("workers", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        # a bool is an int to Python, and "2" would be coerced: both are refused, as before
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"expected a whole number ≥ 1, got {value!r}")
        return value

    def limits(self) -> ExtractionLimits:
        """The document limits alone: what the extract stage receives and hashes."""
        return ExtractionLimits.model_validate(self.model_dump(exclude={"workers"}))


class StoreSettings(_Section):
    #: any SQLAlchemy URL: sqlite:///FILE (default) or postgresql+psycopg://USER@HOST:PORT/DB
    url: str = "sqlite:///arcticqa.db"
    busy_timeout_s: float = 30.0
    #: how often a build process records that it is alive (docs/scale-out.md)
    heartbeat_s: float = Field(10.0, gt=0)
    #: a ``running`` attempt whose worker has not heartbeaten for this long is taken over
    stale_after_s: float = Field(30.0, gt=0)


class BuildSettings(_Section):
    data_dir: Path = Path(".arcticqa/data")
    batch_size: int = Field(50, ge=1)
    paper_concurrency: int = Field(8, ge=1)
    #: the flow fails only when more than this share of a batch's papers failed at a stage
    failure_threshold: float = Field(0.5, ge=0.0, le=1.0)
    #: per-run spending cap: no new model call starts once reached (the build stops cleanly)
    budget_usd: float | None = None
    #: per-paper spending cap (this run's calls for one paper): that paper's stage fails with
    #: BudgetExceeded, other papers continue
    budget_per_paper_usd: float | None = Field(None, gt=0)
    source: str = "snapshot:data/sample_corpus/papers.jsonl"
    keywords_file: Path = Path("data/keywords/arctic.txt")
    findings_per_paper: int = Field(3, ge=1)
    max_revisions: int = Field(1, ge=0)
    items_per_family: int = Field(1, ge=1)
    seed: str = "arcticqa-v1"
    #: when the site_extractor role is asked: only when the free deterministic sources leave the
    #: decision at needs_review (cheap first), always, or never
    site_extractor: Literal["when_undecided", "always", "never"] = "when_undecided"
    #: after a pass over every stage, wait for papers other live workers hold and re-check them
    #: (a worker that dies mid-paper has its work taken over); False: finish with what is left
    wait_for_claimed: bool = True
    claim_poll_s: float = Field(2.0, gt=0)
    #: the Prefect flow's task runner: Prefect's default (in-process) or prefect-dask's DaskTaskRunner
    task_runner: Literal["default", "dask"] = "default"
    #: DaskTaskRunner: an existing scheduler (tcp://HOST:PORT), or None for a LocalCluster of
    #: ``dask_workers`` processes
    dask_address: str | None = None
    dask_workers: int = Field(2, ge=1)
    #: options the option_verifier judges in one call: 1 keeps each option's contradiction check a
    #: call of its own; k > 1 asks about up to k options at once (one verdict each), up to k
    #: times fewer verifier calls per item (docs/item-construction.md)
    options_per_call: int = Field(1, ge=1, le=8)
    #: send the ``batch_roles`` through the provider's Batch API (``arcticqa build --batch``):
    #: cheaper and slower; see docs/batch.md
    batch: bool = False
    batch_roles: list[str] = Field(default_factory=lambda: list(ROLES))


class PrefectSettings(_Section):
    """The Prefect route's API server when ``PREFECT_API_URL`` is unset (README, "Running on a
    Prefect server")."""

    #: "shared": a server that ``arcticqa prefect start`` (or the first build that finds none)
    #: starts and later builds with the same ``PREFECT_HOME`` reuse (``arcticqa prefect stop`` ends
    #: it); "temporary": Prefect's own, started and stopped by every build
    server: Literal["shared", "temporary"] = "shared"
    #: the shared server stops after this long without a request and without a live build
    idle_shutdown_s: float = Field(900.0, gt=0)


class EstimateSettings(_Section):
    """``[estimate]``: what ``arcticqa estimate`` assumes and when ``arcticqa build`` asks first
    (docs/estimate.md). Changes no output (not in the fingerprint)."""

    #: a build whose estimated cost is above this stops before its first model call unless given
    #: ``--yes``; None: ``build.budget_usd`` when set, else never
    confirm_above_usd: float | None = Field(None, ge=0)
    #: seconds one model call takes on average (transport only, retries excluded) when the store
    #: has no answered calls to measure it from
    latency_s: float = Field(2.0, gt=0)
    #: the 99th percentile of one call's latency, seconds, while the store has none measured: with
    #: ``latency_s`` it gives the spread of a lognormal latency, which makes the slowest paper's
    #: chain of calls longer than the mean chain; None: every call takes ``latency_s``
    latency_p99_s: float | None = Field(None, gt=0)
    #: the share of calls left unanswered until the client's ``timeout_s`` (then asked again), while
    #: the store has none measured: the slowest paper waits a timeout when one of its calls does
    timeout_share: float = Field(0.0, ge=0, le=1)
    #: mean extracted text of the papers the build will read, in tokens (characters / 4; measure a
    #: few with ``arcticqa extract-text``); None: as long as those the per-role figures came from
    document_tokens: float | None = Field(None, gt=0)
    #: the per-role table used while the store has too few calls of its own (relative: to the config
    #: file's folder); None: the one measured on the sample corpus (data/estimate/sample-corpus.json)
    profile: Path | None = None


class DiscoverySettings(_Section):
    """The live Semantic Scholar source (``source = "s2"``)."""

    api_url: str | None = None  # None: the public API
    api_key_env: str | None = "S2_API_KEY"
    rate_per_s: float | None = None  # None: 1/s with a key, one every 3 s without
    timeout_s: float = 30.0
    max_attempts: int = Field(6, ge=1)
    page_size: int = Field(500, ge=1)  # lines per page for file sources

    def api_key(self) -> str | None:
        """The key value from the environment (or the env file), read when discovery starts;
        None without one (the API then allows one request every 3 s)."""
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env) or _DOTENV.get(self.api_key_env) or None


class PolicyFiles(_Section):
    """Policy files; each decision records the hash of the file it applied."""

    metadata: Path | None = None  # None: data/policies/metadata.toml
    eligibility: Path | None = None  # None: data/policies/eligibility.toml


class EvalModel(ModelConfig):
    """A model under evaluation (``[[evaluate.models]]``): how to reach it, plus its id in the design.
    Pacing is the build's: ``requests_per_minute`` / ``tokens_per_minute`` (one unit everywhere)."""

    label: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._:@/+-]+$")
    display_name: str | None = None
    # papers published before this date count as possibly seen in training (evaluate exposure)
    knowledge_cutoff: date | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_requests_per_second(cls, data: Any) -> Any:
        # the evaluator's own per-second pacing key before the evaluator shared ModelConfig's
        if isinstance(data, dict) and "requests_per_second" in data:
            rps = data["requests_per_second"]
            hint = f" = {rps * 60:g}" if isinstance(rps, int | float) and not isinstance(rps, bool) else ""
            raise ValueError(f"requests_per_second was replaced by requests_per_minute (the build's unit); "
                             f"write requests_per_minute{hint}")
        return data

    @property
    def name(self) -> str:
        return self.display_name or self.label


LabelSet = Literal["letters", "numbers"]
AbstainPosition = Literal["shuffled", "first", "last", "seeded"]


class VariantPlanSettings(_Section):
    """ArcticAbstain's prompt-robustness plan (``[evaluate.variants]``; docs/evaluation.md): the cross
    product of the three lists, or the explicit ``ids`` when given. ``evaluate run --variants plan``
    runs it; the reference variant ``published`` is always part of it."""

    instructions: list[str] = Field(default_factory=lambda: ["published"], min_length=1)
    labels: list[LabelSet] = Field(default_factory=lambda: list[LabelSet](["letters"]), min_length=1)
    abstain_positions: list[AbstainPosition] = Field(default_factory=lambda: list[AbstainPosition](["shuffled"]),
                                                     min_length=1)
    #: the seed of the ``seeded`` abstain position (it becomes part of the variant id: ``seeded-<seed>``)
    seed: int = Field(0, ge=0)
    #: an explicit list of variant ids instead of the cross product
    ids: list[str] = Field(default_factory=list)


class EvaluateSettings(_Section):
    """The evaluator (``[evaluate]``; docs/evaluation.md). Relative ``items`` and ``prompt`` paths
    are resolved against the config file's folder by :meth:`resolved`."""

    trials: int = Field(3, ge=1)
    eval_set: str = "arcticqa"
    items: Path | None = None
    prompt: Path | None = None
    db_url: str = "sqlite:///arcticqa-eval.db"
    models: list[EvalModel] = Field(default_factory=list)
    variants: VariantPlanSettings = Field(default_factory=VariantPlanSettings)
    #: the open protocol's verifier: a ``[models]`` name whose model judges the replies the
    #: deterministic matcher leaves undecided (role ``open_verifier``); None: they stay undecided
    open_verifier: str | None = None

    @field_validator("models")
    @classmethod
    def _unique_labels(cls, models: list[EvalModel]) -> list[EvalModel]:
        labels = [m.label for m in models]
        duplicates = sorted({x for x in labels if labels.count(x) > 1})
        if duplicates:
            raise ValueError(f"model labels must be unique; repeated: {', '.join(duplicates)}")
        return models

    def resolved(self, config_file: Path | str) -> EvaluateSettings:
        """These settings with relative ``items``/``prompt`` made absolute against ``config_file``'s folder."""
        base = Path(config_file).resolve().parent
        return self.model_copy(update={name: base / value for name in ("items", "prompt")
                                       if (value := getattr(self, name)) is not None and not value.is_absolute()})


def _default_models() -> dict[str, ModelConfig]:
    return {"offline": ModelConfig(provider="offline", model="offline-baseline", api_key_env=None)}


def _default_roles() -> dict[str, str]:
    return {role: "offline" for role in ROLES}


class Settings(BaseSettings):
    """All of arcticqa's configuration. See ``docs/configuration.md``."""

    model_config = SettingsConfigDict(env_prefix="ARCTICQA_", env_nested_delimiter="__",
                                      extra="forbid")

    store: StoreSettings = Field(default_factory=StoreSettings)
    build: BuildSettings = Field(default_factory=BuildSettings)
    discovery: DiscoverySettings = Field(default_factory=DiscoverySettings)
    #: where the Prefect flow reports; changes no output (not in the fingerprint)
    prefect: PrefectSettings = Field(default_factory=PrefectSettings)
    #: what ``arcticqa estimate`` assumes and when ``build`` asks for ``--yes``; changes no output
    estimate: EstimateSettings = Field(default_factory=EstimateSettings)
    policies: PolicyFiles = Field(default_factory=PolicyFiles)
    fetch: FetchPolicy = Field(default_factory=FetchPolicy)
    #: document limits (max_pages, time_limit_s, max_span_chars, ...) and the pool size; docs/fulltext.md
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    #: a dotenv file holding API keys (read at load time, never stored); or $ARCTICQA_ENV_FILE
    env_file: Path | None = None
    models: dict[str, ModelConfig] = Field(default_factory=_default_models)
    roles: dict[str, str] = Field(default_factory=_default_roles)
    evaluate: EvaluateSettings = Field(default_factory=EvaluateSettings)

    #: the TOML file these settings were read from, absolute (None: defaults and overrides only).
    #: Set by :func:`load_settings`, never written in a file or the environment; it travels with the
    #: settings (to the Prefect flow, to ``--workers`` helpers) so every process knows the file,
    #: and it is not part of :meth:`fingerprint` (a release must not depend on where it was built).
    config_path: Path | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # only what the caller passes: load_settings merges the file, the environment mapping it is
        # handed and the overrides itself, so Settings(...) never reads os.environ or a file
        return (init_settings,)

    @field_validator("models")
    @classmethod
    def _offline_always_exists(cls, value: dict[str, ModelConfig]) -> dict[str, ModelConfig]:
        # roles not given a model fall back to "offline", so it must exist whatever [models] says
        return _default_models() | value

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, value: dict[str, str]) -> dict[str, str]:
        for role in value:
            if role not in ROLES:
                raise ValueError(f"unknown role {role!r}{did_you_mean(role, ROLES)}")
        merged = _default_roles() | value
        return merged

    @model_validator(mode="after")
    def _references_resolve(self) -> Settings:
        # checked at load, not when the first model call needs it (after minutes of work): every
        # name that points elsewhere in the settings must exist there
        for role, name in self.roles.items():
            if name not in self.models:
                raise ValueError(f"role {role!r} names model {name!r}, which is not under [models]"
                                 f"{did_you_mean(name, self.models)} (defined: {', '.join(sorted(self.models))})")
        verifier = self.evaluate.open_verifier
        if verifier is not None and verifier not in self.models:
            raise ValueError(f"evaluate.open_verifier names model {verifier!r}, which is not under [models]"
                             f"{did_you_mean(verifier, self.models)} (defined: {', '.join(sorted(self.models))})")
        for role in self.build.batch_roles:
            if role not in ROLES:
                raise ValueError(f"build.batch_roles names {role!r}, which is not a role{did_you_mean(role, ROLES)}")
        return self

    def model_for(self, role: str) -> ModelConfig:
        name = self.roles.get(role)
        if name is None:
            raise ConfigError(f"no model is configured for role {role!r}")
        try:
            return self.models[name]
        except KeyError:
            raise ConfigError(f"role {role!r} names model {name!r}, which is not under [models]") from None

    def fingerprint(self, inputs: Mapping[str, str | None] | None = None) -> str:
        """A hash of the settings that change outputs (recorded in manifests and release cards).

        It does not depend on the folder the build ran in: the store, the data folder (a cache),
        the env file and the config file's own path are left out, and the settings that name input
        files (``build.source``, ``build.keywords_file``, ``policies.*``) count by what ``inputs``
        says of them (the caller hashes each file's content: ``pipeline.export.input_identities``);
        a path ``inputs`` does not name counts relative to the config file's folder.
        """
        # [evaluate] configures the evaluator, which reads releases, and [prefect] where the flow
        # reports: neither changes a build output
        payload = self.model_dump(mode="json", exclude={"store", "env_file", "evaluate", "prefect", "estimate",
                                                     "config_path"})
        # only the extraction keys that differ from the defaults, as when [extraction] was a plain
        # table of the keys set
        payload["extraction"] = self.extraction.model_dump(mode="json", exclude_defaults=True)
        del payload["build"]["data_dir"]  # where PDFs are cached changes no output
        for model in payload["models"].values():
            model.pop("recover_in_flight", None)  # which way an answer came back changes no output
        if self.build.source.strip() != "s2":
            del payload["build"]["keywords_file"]  # read only by the live Semantic Scholar source
        given = dict(inputs or {})
        for dotted in self.input_settings():
            section, key = dotted.split(".")
            if key in payload[section]:
                payload[section][key] = given[dotted] if dotted in given else self._relative(payload[section][key])
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    @staticmethod
    def input_settings() -> tuple[str, ...]:
        """The settings that name an input file or folder (``section.key``)."""
        return ("build.source", "build.keywords_file", "policies.metadata", "policies.eligibility")

    def _relative(self, value: str | None) -> str | None:
        """A path setting's value with a path relative to the config file's folder (a source keeps
        its ``kind:`` prefix); None and ``s2`` as they are."""
        if value is None or value.strip() == "s2":
            return value
        kind, sep, rest = value.partition(":") if value.startswith(("snapshot:", "s2-datasets:")) else ("", "", value)
        path = Path(rest).expanduser()
        if path.is_absolute():
            base = self.config_path.parent if self.config_path is not None else Path.cwd()
            rest = Path(os.path.relpath(path, base)).as_posix()
        return f"{kind}{sep}{rest}"


def _load_dotenv(path: Path | str | None) -> None:
    if not path:
        return
    from dotenv import dotenv_values

    env_path = Path(path)
    if not env_path.is_file():
        raise ConfigError(f"{env_path}: env file not found")
    _DOTENV.clear()
    _DOTENV.update({k: v for k, v in dotenv_values(env_path).items() if v is not None})


def read_env_file(settings: Settings) -> None:
    """Read the keys of the settings' env file (``env_file``, which ``$ARCTICQA_ENV_FILE`` sets like
    any other setting) into this process; :func:`load_settings` does it, and so does a process
    handed settings already loaded."""
    _load_dotenv(settings.env_file)


def read_toml(path: Path) -> dict[str, Any]:
    """A config file's TOML table; every way it can be unreadable is one :class:`ConfigError`."""
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a config file")
    try:
        raw = path.read_bytes()
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid UTF-8 at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc


class _EnvironSource(EnvSettingsSource):
    """pydantic-settings' environment source (``ARCTICQA_`` prefix, ``__`` nesting, JSON for
    lists and tables) over the mapping it is handed instead of ``os.environ``."""

    def __init__(self, settings_cls: type[BaseSettings], environ: Mapping[str, str]) -> None:
        self._environ = environ  # read by _load_env_vars, which the base __init__ calls
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._environ, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it, tables merged key by key (as pydantic-settings merges sources)."""
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        merged[key] = _merge(below, value) if isinstance(below, dict) and isinstance(value, Mapping) else value
    return merged


def find_config_file(given: Path | str | None, environ: Mapping[str, str], cwd: Path | None = None) -> Path | None:
    """The config file an entry point loads: ``given`` (``-c``), else ``$ARCTICQA_CONFIG`` of
    ``environ``, else ``./arcticqa.toml`` when it exists, else None (the defaults)."""
    if given is not None:
        return Path(given)
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV])
    default = (cwd or Path.cwd()) / DEFAULT_CONFIG_NAME
    return Path(DEFAULT_CONFIG_NAME) if default.is_file() else None


def load_settings(path: Path | str | None = None, *, environ: Mapping[str, str] | None = None,
                  **overrides: Any) -> Settings:
    """The settings of the TOML file ``path`` (None: the defaults), with the ``ARCTICQA_*``
    variables of ``environ`` (None: none) and then ``overrides`` laid over it.

    The file is read once; nothing else is read: an entry point that honours the environment
    passes its own (``arcticqa.cli.app.load_cli_settings``, which also finds the file).
    Precedence: explicit overrides > environment > TOML file > defaults.
    """
    toml_path = Path(path) if path is not None else None
    where = f"{toml_path}: " if toml_path else ""
    layers: list[tuple[str, Mapping[str, Any]]] = []
    if toml_path is not None:
        layers.append(("file", read_toml(toml_path)))
    if environ is not None:
        layers.append(("environment", _EnvironSource(Settings, environ)()))
    data: dict[str, Any] = {}
    for name, layer in [*layers, ("overrides", overrides)]:
        if "config_path" in layer:
            raise ConfigError(f"{where}setting 'config_path': set by the loader to the file's path, not in the {name}")
        data = _merge(data, layer)
    if toml_path is not None:
        data["config_path"] = toml_path.absolute()
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden" and first["loc"]:
            msg = f"unknown setting{did_you_mean(str(first['loc'][-1]), _allowed_keys(first['loc'][:-1]))}"
        raise ConfigError(f"{where}setting '{loc}': {msg}" if loc else f"{where}{msg}") from exc
    read_env_file(settings)
    return settings
