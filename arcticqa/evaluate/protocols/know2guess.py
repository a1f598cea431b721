"""Know2Guess as a protocol object: open-ended answer-or-abstain with zones A-D.

Items, prompt variants, parsing, records, metrics and the report live in
:mod:`arcticqa.evaluate.know2guess`; this object is what the CLI and the registry see of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from arcticqa.evaluate import know2guess
from arcticqa.evaluate.protocols.shape import DetailsProtocol, ReportOptions, ReportSummary, RunOptions
from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["Know2Guess", "KNOW2GUESS"]


class Know2Guess(DetailsProtocol[know2guess.Know2GuessRecord]):
    """Know2Guess: see the module docstring."""

    name = "know2guess"
    summary = "Know2Guess: open-ended answer-or-abstain with zones A-D"

    def live(self, options: RunOptions) -> LiveProtocol:
        return know2guess.live_protocol(
            know2guess.load_know2guess_items(options.items),
            [know2guess.load_know2guess_prompt(v) for v in (options.variants or ["answer_or_abstain"])],
            trials=options.trials, eval_set=options.eval_set)

    def score_file(self, items: Path, responses: Path) -> list[know2guess.Know2GuessRecord]:
        return know2guess.score_know2guess_file(items, responses)

    def record_from_details(self, details: dict[str, Any]) -> know2guess.Know2GuessRecord:
        return know2guess.Know2GuessRecord.from_details(details)

    def write_report(self, records: Sequence[know2guess.Know2GuessRecord], out: Path, options: ReportOptions, *,
                     source: str) -> ReportSummary:
        report = know2guess.build_know2guess_report(records, source=source, wrong_penalty=options.wrong_penalty,
                                                    bins=options.bins)
        know2guess.write_know2guess_report(report, out, figure=options.figure)
        return ReportSummary(out, know2guess.summary_lines(report))


KNOW2GUESS = Know2Guess()
