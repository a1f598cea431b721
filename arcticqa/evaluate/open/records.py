"""Open-protocol records: one graded reply, from a live call, a store row or an external line. A
record is also the ``details`` of its ``eval_response`` row.

:func:`verify_row` sends a live row the matcher left undecided to the verifier role and regrades
it (confidence ``low``); the verifier's answer, or its failure, is kept in the record's
``verifier`` field, and its model call is recorded by the gateway like every role call.

:func:`mc_responses_from_store` reads what the report pairs with: the multiple-choice (ArcticAbstain)
rows of the same store table, through the one store reader. It depends on the table's columns, not
on the ArcticAbstain package: its rows carry ``protocol = 'arcticabstain'``, and a prompt variant's
rows name their variant in ``details.variant`` (the reference prompt's rows name none, or
``published``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel
from arcticqa.errors import LLMError
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.open.items import EvalItem
from arcticqa.evaluate.open.parse import (
    VERIFIER_PROMPT,
    VERIFIER_ROLE,
    Grade,
    VerifierVerdict,
    grade_from_verdict,
    grade_reply,
)
from arcticqa.evaluate.open.prompt import OpenCall
from arcticqa.evaluate.recorded import load_protocol_rows
from arcticqa.llm.chat import ChatOutcome
from arcticqa.llm.types import RoleClient

__all__ = ["OpenRecord", "record_from_call", "store_row", "record_from_row", "record_from_external", "verify_row",
           "MC_PROTOCOL", "MCRow", "mc_responses_from_store"]

#: the protocol whose answer-present replies the report pairs with (its rows in the shared table)
MC_PROTOCOL = "arcticabstain"
#: the name a multiple-choice row's ``details.variant`` gives the reference prompt (or none at all)
_MC_REFERENCE = "published"


@dataclass(frozen=True)
class OpenRecord:
    """One graded reply (also the ``details`` of its store row)."""

    model: str
    model_label: str
    variant: str
    trial: int
    item_id: str
    raw_response_text: str | None
    outcome: str
    rule: str | None
    grade_confidence: str | None
    prompt_version: str = ""
    #: what the verifier role said about an undecided reply (verdict, reason, model, prompt
    #: version, request hash), or its error; None when it was not asked
    verifier: dict[str, Any] | None = None

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.item_id, self.variant, self.trial)

    def to_details(self) -> dict[str, Any]:
        return {"protocol": "open", **asdict(self)}

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> OpenRecord:
        return cls(**{k: v for k, v in details.items() if k in cls.__dataclass_fields__})


def _record(item: EvalItem, *, model: str, model_label: str, variant: str, trial: int, text: str | None,
            failure: str | None, prompt_version: str = "") -> OpenRecord:
    grade = grade_reply(item.gold_answer, text, failure=failure)
    return OpenRecord(model=model, model_label=model_label, variant=variant, trial=trial, item_id=item.item_id,
                      raw_response_text=text, outcome=grade.outcome, rule=grade.rule,
                      grade_confidence=grade.confidence, prompt_version=prompt_version)


def record_from_call(call: OpenCall, model: EvalModel, outcome: ChatOutcome) -> OpenRecord:
    """Grade one finished live call into its record."""
    return _record(call.item, model=model.label, model_label=model.name, variant=call.condition, trial=call.trial,
                   text=outcome.text, failure=outcome.failure, prompt_version=call.prompt.version)


def store_row(call: OpenCall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished call (the runner adds run id and position)."""
    rec = record_from_call(call, model, outcome)
    return {
        "protocol": "open", "eval_set": call.eval_set, "model": model.label, "model_label": model.name,
        "api_model": model.model, "item_id": call.item.item_id, "condition": call.condition, "trial": call.trial,
        "order_seed": "", "options": [], "correct_letter": "", "prompt_version": call.prompt.version,
        "prompt_sha256": call.prompt_sha256, "raw_response_text": outcome.text, "chosen_letter": None,
        "chosen_kind": rec.outcome, "parser": "open-matcher", "lenient_letter": None, "outcome": rec.outcome,
        "lenient_outcome": rec.outcome, "cause": rec.rule, "finish_reason": outcome.finish_reason,
        "usage": outcome.usage, "latency_s": outcome.latency_s, "attempts": outcome.attempts,
        "cost_usd": outcome.cost_usd(model), "error": outcome.error, "details": rec.to_details(),
    }


def record_from_row(row: Mapping[str, Any]) -> OpenRecord:
    """The record a store row carries in ``details``."""
    return OpenRecord.from_details(dict(row["details"] or {}))


def record_from_external(item: EvalItem, line: ExternalLine) -> OpenRecord:
    """One external line (read by :func:`arcticqa.evaluate.external.external_lines`); optional
    ``prompt_variant`` (default ``answer_or_abstain``) on top of the shared fields."""
    variant = str(line.row.get("prompt_variant") or "answer_or_abstain")
    return _record(item, model=line.model, model_label=line.model_label, variant=variant, trial=line.trial,
                   text=line.raw_response_text, failure=line.failure)


async def verify_row(client: RoleClient, call: OpenCall, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` regraded by the verifier role when the matcher left it ``undecided`` (any other row
    is returned as it is, never sent). A verifier failure leaves the row undecided, with the error
    in ``details.verifier``: it is recorded, not raised."""
    text = row.get("raw_response_text")
    if row["outcome"] != "undecided" or not text:
        return row
    variables = {"question": call.item.question, "question_context": call.item.question_context,
                 "gold_answer": call.item.gold_answer, "reply": text}
    note: dict[str, Any]
    try:
        answer = await client.ask(VERIFIER_ROLE, VERIFIER_PROMPT, variables, VerifierVerdict,
                                  subject=call.item.item_id)
    except LLMError as exc:  # every model failure; the gateway has recorded its attempts
        grade, note = Grade("undecided"), {"error": f"{type(exc).__name__}: {exc}"}
    else:
        grade = grade_from_verdict(answer.output)
        note = {"verdict": answer.output.verdict, "reason": answer.output.reason, "provider": answer.provider,
                "model": answer.model, "prompt_version": answer.prompt_version,
                "request_hash": answer.request_hash, "cached": answer.cached, "cost_usd": answer.cost_usd}
    details = {**row["details"], "outcome": grade.outcome, "rule": grade.rule, "grade_confidence": grade.confidence,
               "verifier": note}
    return {**row, "outcome": grade.outcome, "lenient_outcome": grade.outcome, "chosen_kind": grade.outcome,
            "cause": grade.rule, "details": details}


@dataclass(frozen=True)
class MCRow:
    """One multiple-choice reply as the pairing reads it (:class:`.metrics.MCResponse`)."""

    model: str
    item_id: str
    condition: str
    trial: int
    outcome: str


def mc_responses_from_store(engine: Engine, *, models: Sequence[str] | None = None) -> list[MCRow]:
    """The multiple-choice replies recorded in the store (of ``models`` only, when given) with the
    reference prompt: what an open report pairs its cells with."""
    rows = load_protocol_rows(engine, MC_PROTOCOL, ("model", "item_id", "condition", "trial", "outcome", "details"),
                              models=models)
    return [MCRow(model=r["model"], item_id=r["item_id"], condition=r["condition"], trial=int(r["trial"]),
                  outcome=r["outcome"]) for r in rows
            if ((r["details"] or {}).get("variant") or _MC_REFERENCE) == _MC_REFERENCE]
