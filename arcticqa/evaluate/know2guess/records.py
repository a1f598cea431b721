"""Know2Guess records: one scored response (strict and robust readings), from a live call, a store
row or an external line. A record is also the ``details`` of its ``eval_response`` row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from arcticqa.config import EvalModel
from arcticqa.errors import InputError
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.know2guess.items import Know2GuessItem
from arcticqa.evaluate.know2guess.parse import (
    Parsed,
    grade,
    parse_confidence,
    parse_robust_reply,
    parse_strict_reply,
)
from arcticqa.evaluate.know2guess.prompt import Know2GuessCall, mode_of
from arcticqa.llm.chat import ChatOutcome

__all__ = ["Know2GuessRecord", "record_from_call", "store_row", "record_from_row", "record_from_external"]


@dataclass(frozen=True)
class Know2GuessRecord:
    """One scored response (also the ``details`` of its store row)."""

    model: str
    model_label: str
    variant: str
    mode: str
    trial: int
    question_id: str
    zone: str
    domain: str
    contamination_risk: str
    item_origin: str
    abstention_expected: bool
    raw_response_text: str | None
    decision: str
    answer: str | None
    confidence: float | None
    correct: bool
    cause: str | None
    robust_decision: str
    robust_answer: str | None
    robust_confidence: float | None
    robust_correct: bool
    prompt_version: str = ""

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.question_id, self.variant, self.trial)

    @property
    def outcome(self) -> str:
        return _outcome(self.decision, self.correct)

    @property
    def robust_outcome(self) -> str:
        return _outcome(self.robust_decision, self.robust_correct)

    def view(self, parser: str) -> tuple[str, bool, float | None]:
        """(decision, correct, confidence) under ``strict`` or ``robust``."""
        if parser == "robust":
            return self.robust_decision, self.robust_correct, self.robust_confidence
        return self.decision, self.correct, self.confidence

    def to_details(self) -> dict[str, Any]:
        return {"protocol": "know2guess", **asdict(self)}

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> Know2GuessRecord:
        return cls(**{k: v for k, v in details.items() if k in cls.__dataclass_fields__})


def _outcome(decision: str, correct: bool) -> str:
    if decision == "ANSWER":
        return "ANSWER_CORRECT" if correct else "ANSWER_WRONG"
    return decision


def _record(item: Know2GuessItem, *, model: str, model_label: str, variant: str, mode: str, trial: int,
            text: str | None, failure: str | None, prompt_version: str = "",
            given_confidence: float | None = None) -> Know2GuessRecord:
    strict = parse_strict_reply(text, mode=mode, failure=failure)
    robust = parse_robust_reply(text, mode=mode, failure=failure)
    if given_confidence is not None:
        # An external confidence (e.g. from token probabilities) stands in for the verbal one.
        strict = Parsed(strict.decision, strict.answer, given_confidence if strict.decision == "ANSWER" else
                        strict.confidence, strict.cause)
        robust = Parsed(robust.decision, robust.answer, given_confidence, robust.cause)
    return Know2GuessRecord(
        model=model, model_label=model_label, variant=variant, mode=mode, trial=trial,
        question_id=item.question_id, zone=item.zone, domain=item.domain,
        contamination_risk=item.contamination_risk, item_origin=item.item_origin,
        abstention_expected=item.abstention_expected, raw_response_text=text, decision=strict.decision,
        answer=strict.answer, confidence=strict.confidence,
        correct=strict.decision == "ANSWER" and grade(item, strict.answer), cause=strict.cause,
        robust_decision=robust.decision, robust_answer=robust.answer, robust_confidence=robust.confidence,
        robust_correct=robust.decision == "ANSWER" and grade(item, robust.answer), prompt_version=prompt_version)


def record_from_call(call: Know2GuessCall, model: EvalModel, outcome: ChatOutcome) -> Know2GuessRecord:
    """Parse one finished live call into its record."""
    return _record(call.item, model=model.label, model_label=model.name, variant=call.condition,
                   mode=call.prompt.mode, trial=call.trial, text=outcome.text, failure=outcome.failure,
                   prompt_version=call.prompt.version)


def store_row(call: Know2GuessCall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished call (the runner adds run id and position);
    the record itself travels in ``details``."""
    rec = record_from_call(call, model, outcome)
    return {
        "protocol": "know2guess", "eval_set": call.eval_set, "model": model.label,
        "model_label": model.name, "api_model": model.model,
        "item_id": call.item.question_id, "condition": call.condition, "trial": call.trial,
        "order_seed": "", "options": [], "correct_letter": "", "prompt_version": call.prompt.version,
        "prompt_sha256": call.prompt_sha256, "raw_response_text": outcome.text, "chosen_letter": None,
        "chosen_kind": rec.decision, "parser": "strict", "lenient_letter": None, "outcome": rec.outcome,
        "lenient_outcome": rec.robust_outcome, "cause": rec.cause, "finish_reason": outcome.finish_reason,
        "usage": outcome.usage, "latency_s": outcome.latency_s, "attempts": outcome.attempts,
        "cost_usd": outcome.cost_usd(model), "error": outcome.error, "details": rec.to_details(),
    }


def record_from_row(row: Mapping[str, Any]) -> Know2GuessRecord:
    """The record a store row carries in ``details``."""
    return Know2GuessRecord.from_details(dict(row["details"] or {}))


def record_from_external(item: Know2GuessItem, line: ExternalLine) -> Know2GuessRecord:
    """One external line (read by :func:`arcticqa.evaluate.external.external_lines`): optional
    ``confidence`` in [0, 1] (stands in for the verbal one) and ``prompt_variant`` (default
    ``answer_or_abstain``; a known variant's mode is used for parsing) on top of the shared fields."""
    given = line.row.get("confidence")
    if given is not None and parse_confidence(given, lenient=False) is None:
        raise InputError("must be a number from 0 to 1", path=line.path, line=line.line, field="confidence")
    variant = str(line.row.get("prompt_variant") or "answer_or_abstain")
    return _record(item, model=line.model, model_label=line.model_label, variant=variant, mode=mode_of(variant),
                   trial=line.trial, text=line.raw_response_text, failure=line.failure,
                   given_confidence=float(given) if given is not None else None)
