"""The evidence store's tables (SQLModel). Nothing is overwritten: a re-run adds an attempt.

Every stage's evidence table shares the same spine (the stage run that produced the row, the
paper, the subject it is about) and keeps the stage's full typed result as JSON in ``payload``,
with the columns people filter on promoted next to it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field, SQLModel

from arcticqa.evidence import SpanRef

__all__ = [
    "utcnow",
    "Paper",
    "RawRecord",
    "DiscoveryPage",
    "StageRun",
    "Worker",
    "LLMCall",
    "LLMSent",
    "LLMBatch",
    "LLMBatchRequest",
    "RejectionRow",
    "ScreeningDecision",
    "FetchRow",
    "DocumentRow",
    "SpanRow",
    "FindingRow",
    "QuestionRow",
    "ReconstructionRow",
    "VerificationRow",
    "DistractorCandidateRow",
    "OptionCheckRow",
    "ItemRow",
    "ReviewPlan",
    "ReviewAssignment",
    "ReviewVerdict",
    "EVIDENCE_TABLES",
    "EvalResponseRow",
]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _json() -> Any:
    return Field(default=None, sa_column=Column(JSON))


class Paper(SQLModel, table=True):
    __tablename__ = "paper"
    paper_id: str = Field(primary_key=True)
    doi: str | None = Field(default=None, index=True)
    title: str | None = None
    year: int | None = None
    family_id: str | None = Field(default=None, index=True)
    duplicate_of: str | None = Field(default=None, index=True)
    source: str = "unknown"
    record: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)


class RawRecord(SQLModel, table=True):
    """Every record a source returned, with its provenance (kept even for duplicates)."""

    __tablename__ = "raw_record"
    id: int | None = Field(default=None, primary_key=True)
    source: str
    query: str | None = None
    page: int | None = None
    line: int | None = None
    paper_id: str | None = Field(default=None, index=True)
    fetched_at: datetime = Field(default_factory=utcnow)
    payload: dict[str, Any] | None = _json()


class DiscoveryPage(SQLModel, table=True):
    """Discovery checkpoint: one row per fetched page, so an interrupted query resumes."""

    __tablename__ = "discovery_page"
    __table_args__ = (UniqueConstraint("source", "query", "page_no"),)
    id: int | None = Field(default=None, primary_key=True)
    source: str
    query: str
    page_no: int
    token_in: str | None = None
    token_out: str | None = None
    n_records: int = 0
    fetched_at: datetime = Field(default_factory=utcnow)


class StageRun(SQLModel, table=True):
    """One (paper, stage, subject, attempt). Status: pending|running|succeeded|rejected|failed|interrupted."""

    __tablename__ = "stage_run"
    __table_args__ = (
        UniqueConstraint("paper_id", "stage", "subject", "attempt"),
        Index("ix_stage_run_lookup", "paper_id", "stage", "subject"),
    )
    id: int | None = Field(default=None, primary_key=True)
    paper_id: str = Field(index=True)
    stage: str = Field(index=True)
    subject: str = ""
    attempt: int = 1
    status: str = Field(default="pending", index=True)
    input_hash: str | None = None
    output: dict[str, Any] | None = _json()
    error_class: str | None = None
    error_message: str | None = None
    code_version: str | None = None
    prompt_version: str | None = None
    run_id: str | None = None
    #: the build process that claimed this attempt (``worker.id``); decides whether a
    #: ``running`` row is still being worked on or was left behind by a crash
    worker_id: str | None = Field(default=None, index=True)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Worker(SQLModel, table=True):
    """One build process (``arcticqa build``/``resume``, a flow run, a Dask task) that claims work.

    Alive while its ``heartbeat_at`` is recent and, seen from the same host, its pid exists.
    """

    __tablename__ = "worker"
    id: str = Field(primary_key=True)
    host: str = Field(index=True)
    pid: int
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow)
    stopped_at: datetime | None = None


class LLMBatch(SQLModel, table=True):
    """One job submitted to a provider's Batch API (build ``batch`` mode, arcticqa/llm/batch.py).

    ``status`` follows the provider's (validating … completed, failed, expired, cancelled) until
    its results are stored, then ``ingested``. A job that is not ``ingested`` when a build stops
    is polled again by the next build instead of its requests being sent twice.
    """

    __tablename__ = "llm_batch"
    id: str = Field(primary_key=True)  # the provider's batch id
    endpoint: str = Field(index=True)  # base_url the batch went to
    model: str
    status: str = Field(index=True)
    input_file_id: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    request_count: int = 0
    answered: int = 0
    error: str | None = None
    run_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None


class LLMBatchRequest(SQLModel, table=True):
    """One line of a batch: which request (by the hash of its exact body) and what came back."""

    __tablename__ = "llm_batch_request"
    __table_args__ = (UniqueConstraint("batch_id", "custom_id"),)
    id: int | None = Field(default=None, primary_key=True)
    batch_id: str = Field(foreign_key="llm_batch.id", index=True)
    custom_id: str
    body_sha256: str = Field(index=True)
    status_code: int | None = None  # None until the batch's results are stored
    response: dict[str, Any] | None = _json()
    error: str | None = None


class LLMCall(SQLModel, table=True):
    __tablename__ = "llm_call"
    id: int | None = Field(default=None, primary_key=True)
    request_hash: str = Field(index=True)
    attempt: int = 1
    role: str = Field(index=True)
    provider: str
    model: str
    prompt_version: str
    subject: str | None = Field(default=None, index=True)
    request: dict[str, Any] | None = _json()
    raw_response: dict[str, Any] | None = _json()
    parsed: dict[str, Any] | None = _json()
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cache_hit: bool = False
    error: str | None = None
    run_id: str | None = None
    created_at: datetime = Field(default_factory=utcnow)


class LLMSent(SQLModel, table=True):
    """A request about to be sent with ``store: true`` (a model config's ``recover_in_flight``),
    written before it leaves: whoever later asks the same request and finds no answer stored
    looks the completion up at the provider by ``send_id`` instead of paying for it again."""

    __tablename__ = "llm_sent"
    id: int | None = Field(default=None, primary_key=True)
    request_hash: str = Field(index=True)
    #: the ``arcticqa_send`` metadata value the request went out with
    send_id: str
    #: the sending process (host:pid:nonce)
    worker: str
    run_id: str | None = None
    sent_at: datetime = Field(default_factory=utcnow)


class RejectionRow(SQLModel, table=True):
    __tablename__ = "rejection"
    id: int | None = Field(default=None, primary_key=True)
    stage_run_id: int = Field(foreign_key="stage_run.id", index=True)
    paper_id: str = Field(index=True)
    subject: str = ""
    stage: str
    rule_id: str = Field(index=True)
    message: str
    evidence: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)


class _Evidence(SQLModel):
    id: int | None = Field(default=None, primary_key=True)
    stage_run_id: int = Field(foreign_key="stage_run.id", index=True)
    paper_id: str = Field(index=True)
    subject: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class ScreeningDecision(_Evidence, table=True):
    """Prefilter and eligibility decisions (``stage`` says which)."""

    __tablename__ = "screening_decision"
    stage: str
    decision: str
    rule_ids: list[str] | None = _json()
    policy_hash: str | None = None
    payload: dict[str, Any] | None = _json()


class FetchRow(_Evidence, table=True):
    """Full-text acquisition: where the PDF came from and what was stored."""

    __tablename__ = "fulltext_fetch"
    status: str
    url: str | None = None
    final_url: str | None = None
    sha256: str | None = None
    bytes: int | None = None
    license: str | None = None
    payload: dict[str, Any] | None = _json()


class DocumentRow(_Evidence, table=True):
    __tablename__ = "document"
    sha256: str = Field(index=True)
    status: str
    pages: int = 0
    text: str = ""
    payload: dict[str, Any] | None = _json()


class SpanRow(SQLModel, table=True):
    __tablename__ = "span"
    __table_args__ = (UniqueConstraint("document_id", "span_id"),)
    id: int | None = Field(default=None, primary_key=True)
    document_id: int = Field(foreign_key="document.id", index=True)
    span_id: str = Field(index=True)
    section: str
    page: int
    start: int
    end: int
    sha256: str
    text: str

    def ref(self, role: str | None = None) -> SpanRef:
        """The stored span as the span model: the one conversion out of this table."""
        return SpanRef(id=self.span_id, role=role, section=self.section, page=self.page, start=self.start,
                       end=self.end, sha256=self.sha256, text=self.text)


class FindingRow(_Evidence, table=True):
    __tablename__ = "finding"
    payload: dict[str, Any] | None = _json()


class QuestionRow(_Evidence, table=True):
    __tablename__ = "question"
    payload: dict[str, Any] | None = _json()


class ReconstructionRow(_Evidence, table=True):
    __tablename__ = "reconstruction"
    payload: dict[str, Any] | None = _json()


class VerificationRow(_Evidence, table=True):
    __tablename__ = "verification"
    payload: dict[str, Any] | None = _json()


class DistractorCandidateRow(_Evidence, table=True):
    __tablename__ = "distractor_candidate"
    payload: dict[str, Any] | None = _json()


class OptionCheckRow(_Evidence, table=True):
    __tablename__ = "option_check"
    payload: dict[str, Any] | None = _json()


class ItemRow(_Evidence, table=True):
    __tablename__ = "item"
    item_id: str = Field(index=True, unique=True)
    status: str = "machine_accepted_unverified"
    family_id: str | None = None
    payload: dict[str, Any] | None = _json()


class ReviewPlan(SQLModel, table=True):
    """A seeded expert-review plan (``arcticqa review sample``). Extending it adds assignments;
    ``strata`` keeps each stratum's population size so estimates are weighted correctly."""

    __tablename__ = "review_plan"
    id: str = Field(primary_key=True)
    seed: int
    double_share: float = 0.2
    reviewers: list[str] | None = _json()
    #: population ("accepted"/"rejected") -> stratum -> items in it when the plan was last extended
    strata: dict[str, Any] | None = _json()
    #: the sampling settings (target half-width, sizes, confidence) as given
    params: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ReviewAssignment(SQLModel, table=True):
    """One sampled item given to one reviewer; slot 1 is the primary review, slot 2 the second
    (agreement) review. Rows are only ever added, so extending a plan never reshuffles it."""

    __tablename__ = "review_assignment"
    __table_args__ = (UniqueConstraint("plan_id", "item_key", "slot"),)
    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(foreign_key="review_plan.id", index=True)
    item_key: str = Field(index=True)
    population: str
    stratum: str
    reviewer: str = Field(index=True)
    slot: int = 1
    position: int = 0
    content_hash: str
    created_at: datetime = Field(default_factory=utcnow)


class ReviewVerdict(SQLModel, table=True):
    """A reviewer's verdict on an item, append-only: a newer row supersedes an older one of the
    same reviewer, and a row whose ``content_hash`` differs from the item's current one is stale."""

    __tablename__ = "review_verdict"
    id: int | None = Field(default=None, primary_key=True)
    plan_id: str = Field(foreign_key="review_plan.id", index=True)
    item_key: str = Field(index=True)
    reviewer: str = Field(index=True)
    verdict: str
    failure_types: list[str] | None = _json()
    note: str = ""
    content_hash: str
    created_at: datetime = Field(default_factory=utcnow)


#: stage name → the evidence table its results are written to
EVIDENCE_TABLES: dict[str, type[SQLModel]] = {
    "prefilter": ScreeningDecision,
    "eligibility": ScreeningDecision,
    "fetch_fulltext": FetchRow,
    "extract_text": DocumentRow,
    "findings": FindingRow,
    "question": QuestionRow,
    "reconstruct": ReconstructionRow,
    "verify": VerificationRow,
    "distractors": DistractorCandidateRow,
    "option_check": OptionCheckRow,
    "accept": ItemRow,
}


# -- the evaluator's table (arcticqa.evaluate reads and writes it through arcticqa.evaluate.recorded) --

class EvalResponseRow(SQLModel, table=True):
    """One recorded call: what it showed, what came back, and how it scored."""

    __tablename__ = "eval_response"
    __table_args__ = (UniqueConstraint("eval_set", "model", "item_id", "condition", "trial",
                                       name="uq_eval_response_cell"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(index=True)
    #: which evaluation protocol recorded the row (arcticabstain | abstainqa | know2guess)
    protocol: str = Field(default="arcticabstain", index=True,
                          sa_column_kwargs={"server_default": "arcticabstain"})
    eval_set: str = Field(index=True)
    model: str = Field(index=True)  # the configured label (the design's model id)
    #: the model's place in the run's configuration: reports list models in this order
    model_position: int = 0
    model_label: str
    api_model: str
    item_id: str = Field(index=True)
    condition: str
    trial: int
    order_seed: str
    #: [{letter, kind, text, option_id}] in the order shown
    options: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    correct_letter: str
    prompt_version: str
    prompt_sha256: str
    raw_response_text: str | None = None
    chosen_letter: str | None = None
    chosen_kind: str | None = None
    parser: str | None = None  # which parser found a letter: strict | lenient | None
    lenient_letter: str | None = None
    outcome: str
    lenient_outcome: str
    cause: str | None = None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    latency_s: float = 0.0
    attempts: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    #: the protocol's scored record (decision, answer, confidence, item facts); None for ArcticAbstain
    details: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    recorded_at: datetime = Field(default_factory=utcnow)
