"""Abstain-QA records: one scored response, from a live call, a store row or an external line.

A record is also the ``details`` of its ``eval_response`` row, so the store and an external file
give the same records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from arcticqa.config import EvalModel
from arcticqa.errors import InputError
from arcticqa.evaluate.abstainqa.items import AbstainQAItem
from arcticqa.evaluate.abstainqa.parse import (
    CAUSE_FORMAT,
    CAUSE_INFRASTRUCTURE,
    CAUSE_REFUSAL,
    Outcome,
    parse_reply,
    score_abstainqa,
)
from arcticqa.evaluate.abstainqa.prompt import CONFIDENCE_SUFFIX, AbstainQACall
from arcticqa.evaluate.external import ExternalLine
from arcticqa.llm.chat import ChatOutcome

__all__ = ["AbstainQARecord", "record_from_call", "store_row", "record_from_row", "record_from_external"]


@dataclass(frozen=True)
class AbstainQARecord:
    """One scored response (also the ``details`` of its store row)."""

    model: str
    model_label: str
    variant: str
    trial: int
    question_id: str
    answerable: bool
    letters: str
    correct_letter: str
    raw_response_text: str | None
    chosen_letter: str | None
    confidence: int | None
    lenient_letter: str | None
    lenient_confidence: int | None
    cause: str | None
    prompt_version: str = ""
    domain: str | None = None

    @property
    def idk_letter(self) -> str:
        return self.letters[-1]

    @property
    def outcome(self) -> Outcome:
        return score_abstainqa(self.answerable, self.chosen_letter, self.correct_letter, self.idk_letter)

    @property
    def lenient_outcome(self) -> Outcome:
        if self.cause in (CAUSE_INFRASTRUCTURE, CAUSE_REFUSAL):
            return "INVALID"
        return score_abstainqa(self.answerable, self.lenient_letter, self.correct_letter, self.idk_letter)

    def thresholded(self, t: int) -> Outcome:
        """The outcome when an answer with confidence ≤ t counts as IDK/NOTA."""
        chosen = self.chosen_letter
        if chosen is not None and chosen != self.idk_letter and self.confidence is not None and self.confidence <= t:
            chosen = self.idk_letter
        return score_abstainqa(self.answerable, chosen, self.correct_letter, self.idk_letter)

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.question_id, self.variant, self.trial)

    def to_details(self) -> dict[str, Any]:
        return {"protocol": "abstainqa", **asdict(self)}

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> AbstainQARecord:
        fields = {k: v for k, v in details.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


def _record(item: AbstainQAItem, *, model: str, model_label: str, variant: str, trial: int,
            text: str | None, verbal_confidence: bool, failure: str | None, prompt_version: str = "",
            given_confidence: int | None = None) -> AbstainQARecord:
    if failure is not None or text is None:
        cause = CAUSE_REFUSAL if failure == "refusal" else CAUSE_INFRASTRUCTURE
        return AbstainQARecord(model, model_label, variant, trial, item.question_id, item.answerable, item.letters,
                               item.correct_letter, text, None, None, None, None, cause, prompt_version, item.domain)
    texts = [o["text"] for o in item.shown()]
    strict, conf, lenient, lenient_conf = parse_reply(text, item.letters, verbal_confidence=verbal_confidence,
                                                      option_texts=texts)
    if given_confidence is not None:
        conf = given_confidence if strict is not None else None
        lenient_conf = given_confidence
    return AbstainQARecord(model, model_label, variant, trial, item.question_id, item.answerable, item.letters,
                           item.correct_letter, text, strict, conf, lenient, lenient_conf,
                           None if strict is not None else CAUSE_FORMAT, prompt_version, item.domain)


def record_from_call(call: AbstainQACall, model: EvalModel, outcome: ChatOutcome) -> AbstainQARecord:
    """Parse one finished live call into its record."""
    return _record(call.item, model=model.label, model_label=model.name, variant=call.condition, trial=call.trial,
                   text=outcome.text, verbal_confidence=call.verbal_confidence, failure=outcome.failure,
                   prompt_version=call.prompt_version)


def store_row(call: AbstainQACall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished call (the runner adds run id and position);
    the record itself travels in ``details``."""
    rec = record_from_call(call, model, outcome)
    kinds = {o["letter"]: o["kind"] for o in call.item.shown()}
    return {
        "protocol": "abstainqa", "eval_set": call.eval_set, "model": model.label,
        "model_label": model.name, "api_model": model.model,
        "item_id": call.item.question_id, "condition": call.condition, "trial": call.trial,
        "order_seed": call.item.order_seed, "options": call.item.shown(), "correct_letter": call.item.correct_letter,
        "prompt_version": call.prompt_version, "prompt_sha256": call.prompt_sha256,
        "raw_response_text": outcome.text, "chosen_letter": rec.chosen_letter,
        "chosen_kind": kinds.get(rec.chosen_letter or ""), "parser": "strict" if rec.chosen_letter else (
            "lenient" if rec.lenient_letter else None),
        "lenient_letter": rec.lenient_letter, "outcome": rec.outcome, "lenient_outcome": rec.lenient_outcome,
        "cause": rec.cause, "finish_reason": outcome.finish_reason, "usage": outcome.usage,
        "latency_s": outcome.latency_s, "attempts": outcome.attempts, "cost_usd": outcome.cost_usd(model),
        "error": outcome.error, "details": rec.to_details(),
    }


def record_from_row(row: Mapping[str, Any]) -> AbstainQARecord:
    """The record a store row carries in ``details``."""
    return AbstainQARecord.from_details(dict(row["details"] or {}))


def record_from_external(item: AbstainQAItem, line: ExternalLine) -> AbstainQARecord:
    """One external line (read by :func:`arcticqa.evaluate.external.external_lines`): optional
    ``confidence`` (an integer 1–5; it overrides a parsed one) and ``prompt_variant`` (default
    ``standard``; ``<variant>+confidence`` parses the two-line confidence reply) on top of the
    shared fields."""
    confidence = line.row.get("confidence")
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, int | float)
                                   or not 1 <= confidence <= 5 or confidence != int(confidence)):
        raise InputError("must be an integer from 1 to 5", path=line.path, line=line.line, field="confidence")
    variant = str(line.row.get("prompt_variant") or "standard")
    return _record(item, model=line.model, model_label=line.model_label, variant=variant, trial=line.trial,
                   text=line.raw_response_text, verbal_confidence=variant.endswith(CONFIDENCE_SUFFIX),
                   failure=line.failure, given_confidence=int(confidence) if confidence is not None else None)
