"""Abstain-QA as a protocol object: multiple choice with an IDK/NOTA option.

Items, prompt variants, parsing, records, metrics and the report live in
:mod:`arcticqa.evaluate.abstainqa`; this object is what the CLI and the registry see of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import Engine

from arcticqa.errors import ConfigError
from arcticqa.evaluate import abstainqa
from arcticqa.evaluate.protocols.shape import EvalProtocol, ReportOptions, ReportSummary, RunOptions
from arcticqa.evaluate.records import load_protocol_details
from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["AbstainQA", "ABSTAINQA"]


class AbstainQA(EvalProtocol):
    """Abstain-QA: see the module docstring."""

    name = "abstainqa"
    summary = "Abstain-QA: multiple choice with an IDK/NOTA option"

    def live(self, options: RunOptions) -> LiveProtocol:
        return abstainqa.live_protocol(
            abstainqa.load_abstainqa_items(options.items, eval_set=options.eval_set),
            [abstainqa.load_abstainqa_prompt(v) for v in (options.variants or ["standard"])],
            trials=options.trials, verbal_confidence=options.verbal_confidence, eval_set=options.eval_set)

    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions) -> ReportSummary:
        return self._write(abstainqa.score_abstainqa_file(items, responses), out, options, source=str(responses))

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        # Rows come in model-position order either way; ``in_given_order`` only matters to ArcticAbstain.
        details = load_protocol_details(engine, self.name, models=models)
        if not details:
            raise ConfigError(f"{source}: the store holds no {self.name} responses")
        return self._write([abstainqa.AbstainQARecord.from_details(d) for d in details], out, options,
                           source=source)

    def _write(self, records: Sequence[abstainqa.AbstainQARecord], out: Path, options: ReportOptions, *,
               source: str) -> ReportSummary:
        report = abstainqa.build_abstainqa_report(records, source=source, thresholds=options.thresholds)
        abstainqa.write_abstainqa_report(report, out, figure=options.figure)
        return ReportSummary(out, abstainqa.summary_lines(report))


ABSTAINQA = AbstainQA()
