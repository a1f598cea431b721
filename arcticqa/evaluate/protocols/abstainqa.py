"""Abstain-QA as a protocol object: multiple choice with an IDK/NOTA option.

Items, prompt variants, parsing, records, metrics and the report live in
:mod:`arcticqa.evaluate.abstainqa`; this object is what the CLI and the registry see of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arcticqa.evaluate import abstainqa
from arcticqa.evaluate.protocols.shape import DetailsProtocol, ReportOptions, ReportSummary, RunOptions
from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["AbstainQA", "ABSTAINQA"]


class AbstainQA(DetailsProtocol[abstainqa.AbstainQARecord]):
    """Abstain-QA: see the module docstring."""

    name = "abstainqa"
    summary = "Abstain-QA: multiple choice with an IDK/NOTA option"

    def live(self, options: RunOptions) -> LiveProtocol:
        return abstainqa.live_protocol(
            abstainqa.load_abstainqa_items(options.items, eval_set=options.eval_set),
            [abstainqa.load_abstainqa_prompt(v) for v in (options.variants or ["standard"])],
            trials=options.trials, verbal_confidence=options.verbal_confidence, eval_set=options.eval_set)

    def score_file(self, items: Path, responses: Path) -> list[abstainqa.AbstainQARecord]:
        return abstainqa.score_abstainqa_file(items, responses)

    def record_from_details(self, details: dict[str, Any]) -> abstainqa.AbstainQARecord:
        return abstainqa.AbstainQARecord.from_details(details)

    def write_report(self, records: Sequence[abstainqa.AbstainQARecord], out: Path, options: ReportOptions, *,
                     source: str) -> ReportSummary:
        report = abstainqa.build_abstainqa_report(records, source=source, thresholds=options.thresholds)
        abstainqa.write_abstainqa_report(report, out, figure=options.figure)
        return ReportSummary(out, abstainqa.summary_lines(report))


ABSTAINQA = AbstainQA()
