"""Abstain-QA as one protocol object: multiple choice with an IDK/NOTA option.

Items are answerable (one correct option) or unanswerable (the correct action is the IDK/NOTA
option, "I Don't Know/ None of the above", always listed last); see :mod:`.items` for the two
sources. Prompt variants ``standard``, ``abstain``, ``extreme_abstain``, optionally with verbal
confidence (:mod:`.prompt`); strict and lenient parsers and the confusion cell (:mod:`.parse`);
records (:mod:`.records`); AR, AAC, UAC and P (:mod:`.metrics`); the report (:mod:`.report`).

Options (:class:`AbstainQAOptions`, ``-P KEY=VALUE``): ``verbal_confidence`` (a live run also asks for
a confidence 1–5) and the report's verbal-confidence ``thresholds``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from arcticqa.config import EvalModel
from arcticqa.evaluate.abstainqa import items, metrics, parse, prompt, records, report
from arcticqa.evaluate.abstainqa.items import AbstainQAItem
from arcticqa.evaluate.abstainqa.prompt import AbstainQACall
from arcticqa.evaluate.abstainqa.records import AbstainQARecord
from arcticqa.evaluate.abstainqa.report import AbstainQAReport
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.shape import ProtocolBase, ProtocolOptions, ReportOptions, ReportSummary, RunOptions
from arcticqa.llm.chat import ChatOutcome

__all__ = ["AbstainQA", "AbstainQAOptions", "ABSTAINQA", "items", "metrics", "parse", "prompt", "records", "report"]


class AbstainQAOptions(ProtocolOptions):
    """Abstain-QA's options."""

    RUN_ONLY = frozenset({"verbal_confidence"})

    verbal_confidence: bool = Field(False, description="Also ask for a verbal confidence 1-5 (reply `Answer: "
                                                       "<letter>` / `Confidence: <1-5>`; the condition becomes "
                                                       "`<variant>+confidence`).")
    thresholds: tuple[int, ...] = Field((0, 1, 2, 3, 4), min_length=1,
                                        description="Verbal-confidence thresholds t: an answer with confidence "
                                                    "<= t becomes IDK/NOTA before scoring (t = 0: unchanged).")

    @field_validator("thresholds", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            try:
                return tuple(int(part) for part in value.split(",") if part.strip())
            except ValueError:
                raise ValueError(f"expected integers 0-5 separated by commas, not {value!r}") from None
        return value

    @field_validator("thresholds")
    @classmethod
    def _zero_to_five(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 0 <= t <= 5 for t in value):
            raise ValueError(f"expected integers 0-5, not {','.join(map(str, value))}")
        return value


class AbstainQA(ProtocolBase[AbstainQAItem, AbstainQACall, AbstainQARecord, AbstainQAReport]):
    """Abstain-QA: see the module docstring."""

    name = "abstainqa"
    summary = "Abstain-QA: multiple choice with an IDK/NOTA option"
    question_id_fields = ("question_id", "item_id")
    options_model = AbstainQAOptions
    variants_help = (f"{' | '.join(prompt.VARIANTS)} (default standard) or prompt files, separated by commas")

    def load_items(self, path: Path, *, eval_set: str) -> list[AbstainQAItem]:
        return items.load_abstainqa_items(path, eval_set=eval_set)

    def item_id(self, item: AbstainQAItem) -> str:
        return item.question_id

    def plan(self, items: Sequence[AbstainQAItem],
             options: RunOptions) -> Callable[[EvalModel], Sequence[AbstainQACall]]:
        prompts = [prompt.load_abstainqa_prompt(v) for v in (options.variants or ["standard"])]
        calls = prompt.plan_calls(items, prompts, trials=options.trials, eval_set=options.eval_set,
                                  verbal_confidence=AbstainQAOptions.of(options.protocol_options).verbal_confidence)
        return lambda model: calls  # every model is shown the same calls

    def store_row(self, call: AbstainQACall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
        return records.store_row(call, model, outcome)

    def record_from_row(self, row: Mapping[str, Any]) -> AbstainQARecord:
        return records.record_from_row(row)

    def record_from_external(self, item: AbstainQAItem, line: ExternalLine) -> AbstainQARecord:
        return records.record_from_external(item, line)

    def build_report(self, records: Sequence[AbstainQARecord], options: ReportOptions, *, source: str,
                     models: Sequence[str] | None = None) -> AbstainQAReport:
        # groups are sorted by model id and variant, whatever the order asked for
        return report.build_abstainqa_report(records, source=source,
                                             thresholds=AbstainQAOptions.of(options.protocol_options).thresholds)

    def write_report(self, report_: AbstainQAReport, out: Path, options: ReportOptions) -> Path:
        return report.write_abstainqa_report(report_, out, figure=options.figure)

    def report_summary(self, report_: AbstainQAReport, out_dir: Path) -> ReportSummary:
        return ReportSummary(out_dir, report.summary_lines(report_))


ABSTAINQA = AbstainQA()
