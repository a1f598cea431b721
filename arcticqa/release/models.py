"""The typed records of a release folder (items, conditions, responses, manifest and funnel) and
the reports ``validate-release`` returns about one.

These models are the contract of a release. ``schemas/*.schema.json`` are generated from them
(see :mod:`arcticqa.release.schemas`), the writer serialises them and ``validate-release`` parses
every line with them. The ArcticQA v1 fields keep their published names and meaning (documented
in the v1 ``RELEASE-README.md``); our additions are optional keys, so a published v1 record is a
valid :class:`ReleaseItem` too.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from arcticqa.errors import InputError
from arcticqa.evidence import SpanRef

__all__ = [
    "ABSTAIN_TEXT",
    "ReviewSummary",
    "FUNNEL_STEPS",
    "ItemStatus",
    "LanguageScript",
    "Verification",
    "AnswerMatch",
    "ANSWER_MATCH",
    "Distractor",
    "PaperRef",
    "Construction",
    "EvidenceRef",
    "SourceLicense",
    "ReleaseItem",
    "ConditionOption",
    "ConditionRecord",
    "ResponseOption",
    "ResponseRecord",
    "FunnelStep",
    "FunnelCounts",
    "ExcludedItem",
    "Manifest",
    "license_allows_redistribution",
    "Issue",
    "RecheckFlag",
    "RecheckResult",
    "ValidationReport",
]

#: the abstain option of both conditions (ArcticQA v1 ``prompt.json`` ``abstention_option_text``)
ABSTAIN_TEXT = "I abstain from answering"

#: the build's funnel, in order (the PRISMA-style figure draws them top to bottom): the paper
#: boxes, then the candidate-item boxes (arcticqa.pipeline.funnel.funnel_counts builds them)
FUNNEL_STEPS: tuple[str, ...] = (
    "discovered", "prefiltered", "full_text", "eligible", "with_items",
    "candidates", "questions", "reconstructed", "verified", "distractors", "options_checked", "accepted",
)

ItemStatus = Literal["machine_accepted_unverified", "expert_verified"]
LanguageScript = Literal["latin", "cyrillic", "mixed"]
Verification = Literal["deterministic-contradiction", "model-verified"]
#: how the blind reconstruction's answer was matched to the gold answer: a rule of the answer
#: matcher proved them equal (``deterministic-match``), or the matcher could not decide and the
#: verifier model judged them equivalent (``model-verified``, the distractors' word for a verdict
#: that rests on a model)
AnswerMatch = Literal["deterministic-match", "model-verified"]
#: an accepted item's ``answer_match_confidence`` in the store (the verify step's
#: ``match_confidence``) -> its ``answer_match`` in a release
ANSWER_MATCH: dict[str, AnswerMatch] = {"deterministic": "deterministic-match", "model": "model-verified"}

_SHA256 = r"^[0-9a-f]{64}$"


class _Strict(BaseModel):
    # a release is a published contract: an unknown key is an error, not silently dropped
    model_config = ConfigDict(extra="forbid")


class Distractor(_Strict):
    """One wrong option. ``rank`` is its fixed listing position (0–3); rank 3 is dropped from
    the answer-present condition."""

    rank: int = Field(ge=0, le=3)
    text: str = Field(min_length=1)
    type: str = Field(min_length=1, description="distractor kind, e.g. numeric_outside_tolerance")
    verification: Verification


class PaperRef(_Strict):
    doi: str | None = None
    title: str | None = Field(default=None, description="arcticqa addition (v1 names the DOI only)")
    year: int | None = Field(default=None, description="arcticqa addition")
    publication_date: str | None = Field(
        default=None, pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description="arcticqa addition: the paper's publication date from discovery metadata "
                                  "(training-exposure splits; absent when the source has none)")
    paper_family_id: str = Field(min_length=1)


class Construction(_Strict):
    writer_model: str
    option_verifier_models: list[str]
    generation_prompt_version: str


class EvidenceRef(SpanRef):
    """arcticqa addition: one source span an item rests on. ``text`` only in releases built
    with ``--include-evidence`` (source licences may forbid redistribution)."""

    # The span model as the release writes it: ``id`` is ``span_id`` on the wire (and in the
    # constructor), ``role`` always has a value, an absent ``text`` is written as null, and the
    # release's constraints apply. Fields keep SpanRef's order, which is the release's.
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True)

    id: str = Field(alias="span_id", min_length=1)
    role: str = Field(default="finding", description="finding|context|scope|distractor")
    page: int = Field(ge=0)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    sha256: str = Field(pattern=_SHA256, description="SHA-256 of the span text (UTF-8)")

    @model_serializer(mode="wrap")
    def _unset_left_out(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a published format keeps every key, null or not
        data: dict[str, Any] = handler(self)
        return data

    @property
    def span_id(self) -> str:
        return self.id


class SourceLicense(_Strict):
    """arcticqa addition: the licence of the source paper, as the open-access record gave it."""

    license: str | None = None
    url: str | None = None
    redistributable: bool = Field(description="True when the licence allows sharing evidence text")


class ReleaseItem(_Strict):
    """One accepted question (one line of ``items.jsonl``)."""

    item_id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    question_context: str
    gold_answer: str = Field(min_length=1)
    distractors: list[Distractor] = Field(min_length=4, max_length=4)
    answer_present_drops: str
    status: ItemStatus
    language_script: LanguageScript
    numeric_answer: bool
    paper: PaperRef
    construction: Construction
    # published v1 records bind the item to its frozen evaluation set
    eval_set_id: str | None = None
    candidate_hash: str | None = None
    # arcticqa additions (all optional, so v1 records validate)
    evidence: list[EvidenceRef] | None = None
    claim_type: str | None = Field(default=None, description="observation|association|causal|definition")
    scope: dict[str, str | None] | None = Field(default=None, description="scope dimension -> value")
    answer_unit: str | None = None
    answer_match: AnswerMatch | None = Field(
        default=None, description="arcticqa addition: deterministic-match when the answer matcher proved the "
                                  "blind reconstruction equal to the gold answer, model-verified when the "
                                  "verifier model judged them equivalent (absent in releases made before it "
                                  "was recorded)")
    source_license: SourceLicense | None = None

    def distractor(self, rank: int) -> Distractor | None:
        for d in self.distractors:
            if d.rank == rank:
                return d
        return None


class ConditionOption(_Strict):
    option_id: str = Field(pattern=r"^(gold|abstain|distractor-[0-9a-f]{20})$")
    kind: Literal["gold", "distractor", "abstain"]
    text: str


class ConditionRecord(_Strict):
    """One benchmark condition of an item (one line of ``conditions.jsonl``)."""

    item_id: str
    condition: Literal["answer_present", "answer_absent"]
    question: str
    question_context: str
    options: list[ConditionOption] = Field(min_length=5, max_length=5)
    correct_action: Literal["choose_gold_answer", "abstain"]
    correct_option_text: str
    dropped_distractor: str | None
    option_order: str


class ResponseOption(BaseModel):
    model_config = ConfigDict(extra="allow")
    letter: str
    kind: Literal["gold", "distractor", "abstain"]
    text: str


class ResponseRecord(BaseModel):
    """One recorded model response (one line of a v1 ``responses.jsonl``).

    Unknown keys are allowed: the published file is documented field by field but not shipped
    with a schema, and an evaluator may add bookkeeping fields.
    """

    model_config = ConfigDict(extra="allow")

    trial_id: str
    item_id: str
    model: str
    condition: Literal["answer_present", "answer_absent"]
    trial: int = Field(ge=1)
    model_label: str | None = None
    model_family: str | None = None
    access_route: str | None = None
    harness_version: str | None = None
    model_version: str | None = None
    reasoning_effort: str | None = None
    options: list[ResponseOption] = Field(min_length=1)
    correct_letter: str
    gold_letter: str | None = None
    abstain_letter: str
    prompt_user_text: str | None = None
    stimulus_sha256: str | None = None
    shuffle_seed: str | int | None = None
    raw_response_text: str | None = None
    chosen_letter: str | None = None
    chosen_kind: Literal["gold", "distractor", "abstain"] | None = None
    outcome: Literal["N0", "N1", "N2", "N3", "N4", "N5"]
    outcome_label: str | None = None
    valid: bool
    invalid_reason: str | None = None
    invalid_cause: str | None = None
    response_state: str | None = None
    finish_reason: str | None = None
    error: str | None = None
    usage: dict[str, Any] | None = None
    latency_seconds: float | None = None
    cost_usd: float | None = None
    recorded_at_utc: str | None = None
    evaluator_commit: str | None = None
    eval_set_id: str | None = None


class FunnelStep(_Strict):
    """One box of the funnel: how many units reached this step, and why others did not."""

    name: str = Field(min_length=1)
    unit: str = Field(default="papers", description="papers|findings|questions|items")
    count: int = Field(ge=0)
    #: rule id (or ``failed`` / ``not_yet_run``) -> how many units of the box before were left out here
    rejected: dict[str, int] = Field(default_factory=dict)
    needs_review: int = Field(default=0, ge=0)

    @field_validator("rejected")
    @classmethod
    def _non_negative(cls, value: dict[str, int]) -> dict[str, int]:
        for rule_id, n in value.items():
            if n < 0:
                raise ValueError(f"rejection count for {rule_id!r} is negative")
        return dict(sorted(value.items()))


class FunnelCounts(_Strict):
    """The build's funnel, step by step (normally the names of :data:`FUNNEL_STEPS`)."""

    steps: list[FunnelStep] = Field(default_factory=list)

    def step(self, name: str) -> FunnelStep | None:
        return next((s for s in self.steps if s.name == name), None)

    def total_rejected(self) -> int:
        return sum(sum(s.rejected.values()) for s in self.steps)


class ExcludedItem(_Strict):
    """An accepted item left out of the release, with the reason (``excluded-items.json``)."""

    item_id: str
    status: str = "machine_accepted_unverified"
    reason: str
    # v1 records explain missing evaluation responses
    responses_recorded: int | None = None
    responses_planned: int | None = None
    responses_by_model: dict[str, int] | None = None
    in_released_responses: bool | None = None


class ReviewSummary(_Strict):
    """What an expert review measured, for the release card (``arcticqa review``; docs/review.md).

    ``expert_rejected`` are the accepted items a reviewer rejected: left out of the release and
    listed in ``excluded-items.json``."""

    plan_id: str
    reviewed: int
    errors: int
    residual_error: float
    low: float
    high: float
    coverage: float
    sampled: int
    population: int
    seed: int
    double_share: float
    expert_verified: int
    reviewers_named: list[str] = Field(default_factory=list)
    reviewers_unnamed: int = 0
    expert_rejected: list[ExcludedItem] = Field(default_factory=list)


class Manifest(_Strict):
    """``MANIFEST.json``: counts, the SHA-256 of every file, and how the release was built.

    Both our releases and the published v1 manifest validate; fields only one of them writes
    are optional.
    """

    release_id: str = Field(min_length=1)
    format: str | None = Field(default=None, description="arcticqa release format version")
    files: dict[str, str]
    counts: dict[str, int | dict[str, int]]
    created_utc: str | None = None
    code_version: str | None = None
    config_hash: str | None = None
    policy_hashes: dict[str, str] | None = None
    roster: dict[str, list[str]] | None = None
    include_evidence: bool | None = None
    funnel: FunnelCounts | None = None
    # published ArcticQA v1 fields
    snapshot_utc: str | None = None
    builder: str | None = None
    builder_sha256: str | None = None
    renderer_sha256: str | None = None
    source_files: int | None = None
    source_digest: str | None = None
    withheld: list[str] | None = None

    @field_validator("files")
    @classmethod
    def _hashes(cls, value: dict[str, str]) -> dict[str, str]:
        for name, digest in value.items():
            if not re.fullmatch(_SHA256, digest):
                raise ValueError(f"file {name!r}: {digest!r} is not a lowercase hex SHA-256")
        return value


#: licences whose terms allow redistributing verbatim excerpts without further permission
_OPEN_LICENSES = {"CC0", "CC010", "PUBLICDOMAIN", "PD", "CCBY", "CCBY40", "CCBY30", "CCBY25",
                  "CCBY20", "CCBYSA", "CCBYSA40", "CCBYSA30"}


def license_allows_redistribution(license: str | None) -> bool:
    """True only for licences known to allow sharing evidence text (CC0, public domain, CC BY,
    CC BY-SA). Unknown, missing, NC/ND and publisher-specific licences are treated as closed:
    a wrong "no" costs an item, a wrong "yes" could break a licence."""
    if not license:
        return False
    key = re.sub(r"[^A-Z0-9]", "", license.upper())
    return key in _OPEN_LICENSES


# -- validation reports (validate-release and its --recheck) ---------------------------------------
class Issue(BaseModel):
    """One problem found in a release."""

    severity: Literal["error", "warning"] = "error"
    rule_id: str
    path: str
    line: int | None = None
    field: str | None = None
    message: str

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.path, self.line) if p is not None)
        suffix = f" (field '{self.field}')" if self.field else ""
        return f"{where}: {self.message}{suffix} [{self.rule_id}]"

    def to_error(self) -> InputError:
        return InputError(f"{self.message} [{self.rule_id}]", path=self.path, line=self.line,
                          field=self.field)


class RecheckFlag(BaseModel):
    """One item or option that a deterministic gate flags when re-run on the release."""

    item_id: str = Field(description="the item, or '(release)' for a finding about the whole release")
    option_rank: int | None = Field(default=None, description="None for the question or gold answer")
    rule_id: str
    message: str
    severity: Literal["error", "warning"] = Field(
        default="error", description="error: the item (or release) is wrong; warning: advice")


class RecheckResult(BaseModel):
    """What ``validate-release --recheck`` found (:func:`arcticqa.release.recheck.recheck_items`)."""

    flags: list[RecheckFlag] = Field(default_factory=list)
    #: the option-set cue audit, one record per strategy
    cues: list[dict[str, Any]] = Field(default_factory=list)
    #: distractors proved false with question, context and answer as the only evidence
    coverage: dict[str, Any] = Field(default_factory=dict)


class ValidationReport(BaseModel):
    """Every issue ``validate-release`` found in one release (and, with ``--recheck``, the flags)."""

    release_dir: str
    counts: dict[str, int] = Field(default_factory=dict)
    errors: list[Issue] = Field(default_factory=list)
    warnings: list[Issue] = Field(default_factory=list)
    truncated: bool = False
    recheck: list[RecheckFlag] | None = None
    #: the option-set cue audit of ``--recheck`` (one record per strategy), None without it
    cues: list[dict[str, Any]] | None = None
    #: distractors proved false with question, context and answer as the only evidence
    coverage: dict[str, Any] | None = None

    @property
    def recheck_errors(self) -> list[RecheckFlag]:
        return [f for f in self.recheck or [] if f.severity == "error"]

    @property
    def ok(self) -> bool:
        return not self.errors and not self.recheck_errors

    def error_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(i.rule_id for i in self.errors).items()))

    def recheck_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(f.rule_id for f in self.recheck or []).items()))

    def raise_for_errors(self) -> None:
        if not self.errors and self.recheck_errors:
            flag = self.recheck_errors[0]
            raise InputError(f"--recheck found {len(self.recheck_errors)} error(s); first: item {flag.item_id}"
                             f"{'' if flag.option_rank is None else f' option {flag.option_rank}'}: "
                             f"{flag.message} [{flag.rule_id}]", path=self.release_dir)
        if self.errors:
            first = self.errors[0]
            more = len(self.errors) - 1
            exc = first.to_error()
            if more:
                exc = InputError(f"{first.message} [{first.rule_id}] (and {more} more error(s))",
                                 path=first.path, line=first.line, field=first.field)
            raise exc

    def add_recheck(self, result: RecheckResult) -> None:
        self.recheck, self.cues, self.coverage = result.flags, result.cues, result.coverage
