"""Know2Guess as a protocol object: open-ended answer-or-abstain with zones A-D.

Items, prompt variants, parsing, records, metrics and the report live in
:mod:`arcticqa.evaluate.know2guess`; this object is what the CLI and the registry see of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.engine import Engine

from arcticqa.errors import ConfigError
from arcticqa.evaluate import know2guess
from arcticqa.evaluate.protocols.shape import EvalProtocol, ReportOptions, ReportSummary, RunOptions
from arcticqa.evaluate.records import load_protocol_details
from arcticqa.evaluate.runner import LiveProtocol

__all__ = ["Know2Guess", "KNOW2GUESS"]


class Know2Guess(EvalProtocol):
    """Know2Guess: see the module docstring."""

    name = "know2guess"
    summary = "Know2Guess: open-ended answer-or-abstain with zones A-D"

    def live(self, options: RunOptions) -> LiveProtocol:
        return know2guess.live_protocol(
            know2guess.load_know2guess_items(options.items),
            [know2guess.load_know2guess_prompt(v) for v in (options.variants or ["answer_or_abstain"])],
            trials=options.trials, eval_set=options.eval_set)

    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions) -> ReportSummary:
        return self._write(know2guess.score_know2guess_file(items, responses), out, options, source=str(responses))

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        # Rows come in model-position order either way; ``in_given_order`` only matters to ArcticAbstain.
        details = load_protocol_details(engine, self.name, models=models)
        if not details:
            raise ConfigError(f"{source}: the store holds no {self.name} responses")
        return self._write([know2guess.Know2GuessRecord.from_details(d) for d in details], out, options,
                           source=source)

    def _write(self, records: Sequence[know2guess.Know2GuessRecord], out: Path, options: ReportOptions, *,
               source: str) -> ReportSummary:
        report = know2guess.build_know2guess_report(records, source=source, wrong_penalty=options.wrong_penalty,
                                                    bins=options.bins)
        know2guess.write_know2guess_report(report, out, figure=options.figure)
        return ReportSummary(out, know2guess.summary_lines(report))


KNOW2GUESS = Know2Guess()
