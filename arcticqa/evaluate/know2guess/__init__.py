"""Know2Guess as one protocol object: open-ended answer-or-abstain questions in zones A–D.

Items (:mod:`.items`), prompt variants ``answer_or_abstain``, ``answer_only`` and
``answer_or_abstain_terse`` (:mod:`.prompt`), the strict and robust parsers and exact-match grading
(:mod:`.parse`), records (:mod:`.records`), reliability, ECE and cost-sensitive reliability
(:mod:`.metrics`) and the report per zone and contamination risk (:mod:`.report`).

Options (:class:`Know2GuessOptions`, ``-P KEY=VALUE``): the report's ``wrong_penalty`` and ``ece_bins``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from arcticqa.config import EvalModel
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.know2guess import items, metrics, parse, prompt, records, report
from arcticqa.evaluate.know2guess.items import Know2GuessItem
from arcticqa.evaluate.know2guess.prompt import Know2GuessCall
from arcticqa.evaluate.know2guess.records import Know2GuessRecord
from arcticqa.evaluate.know2guess.report import Know2GuessReport
from arcticqa.evaluate.shape import ProtocolBase, ProtocolOptions, ReportOptions, ReportSummary, RunOptions
from arcticqa.llm.chat import ChatOutcome

__all__ = ["Know2Guess", "Know2GuessOptions", "KNOW2GUESS", "items", "metrics", "parse", "prompt", "records",
           "report"]


class Know2GuessOptions(ProtocolOptions):
    """Know2Guess's options (its report's)."""

    wrong_penalty: float = Field(1.0, ge=0.0, description="Cost-sensitive reliability: +1 per correct action, "
                                                          "-penalty per wrong answer (any answer on zone D).")
    ece_bins: int = Field(10, ge=1, description="Equal-width bins of the expected calibration error (ECE).")


class Know2Guess(ProtocolBase[Know2GuessItem, Know2GuessCall, Know2GuessRecord, Know2GuessReport]):
    """Know2Guess: see the module docstring."""

    name = "know2guess"
    summary = "Know2Guess: open-ended answer-or-abstain with zones A-D"
    options_model = Know2GuessOptions
    variants_help = (f"{' | '.join(prompt.VARIANTS)} (default answer_or_abstain) or prompt files, "
                     "separated by commas")

    def load_items(self, path: Path, *, eval_set: str) -> list[Know2GuessItem]:
        return items.load_know2guess_items(path)

    def item_id(self, item: Know2GuessItem) -> str:
        return item.question_id

    def plan(self, items: Sequence[Know2GuessItem],
             options: RunOptions) -> Callable[[EvalModel], Sequence[Know2GuessCall]]:
        prompts = [prompt.load_know2guess_prompt(v) for v in (options.variants or ["answer_or_abstain"])]
        calls = prompt.plan_calls(items, prompts, trials=options.trials, eval_set=options.eval_set)
        return lambda model: calls  # every model is shown the same calls

    def store_row(self, call: Know2GuessCall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
        return records.store_row(call, model, outcome)

    def record_from_row(self, row: Mapping[str, Any]) -> Know2GuessRecord:
        return records.record_from_row(row)

    def record_from_external(self, item: Know2GuessItem, line: ExternalLine) -> Know2GuessRecord:
        return records.record_from_external(item, line)

    def build_report(self, records: Sequence[Know2GuessRecord], options: ReportOptions, *, source: str,
                     models: Sequence[str] | None = None) -> Know2GuessReport:
        # groups are sorted by model id and variant, whatever the order asked for
        chosen = Know2GuessOptions.of(options.protocol_options)
        return report.build_know2guess_report(records, source=source, wrong_penalty=chosen.wrong_penalty,
                                              bins=chosen.ece_bins)

    def write_report(self, report_: Know2GuessReport, out: Path, options: ReportOptions) -> Path:
        return report.write_know2guess_report(report_, out, figure=options.figure)

    def report_summary(self, report_: Know2GuessReport, out_dir: Path) -> ReportSummary:
        return ReportSummary(out_dir, report.summary_lines(report_))


KNOW2GUESS = Know2Guess()
