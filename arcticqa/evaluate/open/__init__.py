"""The open-ended protocol (``--protocol open``): spontaneous abstention without answer options.

Items are a release ``items.jsonl`` (:mod:`.items`); the model sees context and question and answers
briefly or abstains in its own words (:mod:`.prompt`); replies are graded by abstention rules and the
deterministic answer matcher (:mod:`.parse`) into records (:mod:`.records`); accuracy, abstention rate,
R-Acc and the pairing with the multiple-choice answer-present condition (:mod:`.metrics`) make the
report (:mod:`.report`). A report from the store pairs with the ArcticAbstain responses recorded there
(read from the shared table, :func:`.records.mc_responses_from_store`).
Options (:class:`OpenOptions`, ``-P KEY=VALUE``): ``verifier``, the ``[models]`` entry that answers the
verifier role (default ``[evaluate] open_verifier``). With one, :meth:`OpenProtocol.judge_roles` names
the role and a live run given its client (``RunOptions.roles``) asks it about each reply the matcher
leaves undecided, before the row is stored (:func:`.records.verify_row`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import Field
from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel, Settings, did_you_mean
from arcticqa.errors import ConfigError
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.open import items, metrics, parse, prompt, records, report
from arcticqa.evaluate.open.items import EvalItem
from arcticqa.evaluate.open.prompt import OpenCall
from arcticqa.evaluate.open.records import OpenRecord
from arcticqa.evaluate.open.report import OpenReport
from arcticqa.evaluate.runner import LiveProtocol
from arcticqa.evaluate.shape import ProtocolBase, ProtocolOptions, ReportOptions, ReportSummary, RunOptions
from arcticqa.llm.chat import ChatOutcome

__all__ = ["OpenProtocol", "OpenOptions", "OPEN", "items", "metrics", "parse", "prompt", "records", "report"]


class OpenOptions(ProtocolOptions):
    """The open protocol's options."""

    RUN_ONLY = frozenset({"verifier"})

    verifier: str | None = Field(None, description="The [models] entry whose model judges the replies the matcher "
                                                   "leaves undecided (default: [evaluate] open_verifier; none: they "
                                                   "stay undecided).")


class OpenProtocol(ProtocolBase[EvalItem, OpenCall, OpenRecord, OpenReport]):
    """The open-ended protocol: see the module docstring."""

    name = "open"
    summary = "Open-ended: no options, answer briefly or abstain in your own words"
    question_id_fields = ("item_id", "question_id")
    options_model = OpenOptions
    variants_help = f"{' | '.join(prompt.VARIANTS)} (the default) or prompt files, separated by commas"

    def judge_roles(self, options: ProtocolOptions | None, settings: Settings) -> dict[str, str]:
        name = OpenOptions.of(options).verifier or settings.evaluate.open_verifier
        if name is None:
            return {}
        cfg = settings.models.get(name)
        if cfg is None:
            raise ConfigError(f"open verifier {name!r} is not under [models]{did_you_mean(name, settings.models)}")
        if cfg.provider == "offline":  # the rule-based roles judge build outputs, not free-text replies
            raise ConfigError(f"open verifier {name!r}: the offline provider has no open verifier; "
                              "name a model served over an OpenAI-compatible API")
        cfg.api_key()  # fail before any call when its key is missing
        return {parse.VERIFIER_ROLE: name}

    def live(self, options: RunOptions, items: Sequence[Any] | None = None) -> LiveProtocol:
        live = super().live(options, items)
        verifier = options.roles
        if verifier is None:
            return live

        async def review(call: OpenCall, row: dict[str, Any]) -> dict[str, Any]:
            return await records.verify_row(verifier, call, row)

        return replace(live, review=review)

    def load_items(self, path: Path, *, eval_set: str) -> list[EvalItem]:
        return items.load_open_items(path)

    def item_id(self, item: EvalItem) -> str:
        return item.item_id

    def plan(self, items: Sequence[EvalItem], options: RunOptions) -> Callable[[EvalModel], Sequence[OpenCall]]:
        prompts = [prompt.load_open_prompt(v) for v in (options.variants or ["answer_or_abstain"])]
        calls = prompt.plan_calls(items, prompts, trials=options.trials, eval_set=options.eval_set)
        return lambda model: calls  # every model is shown the same calls

    def store_row(self, call: OpenCall, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
        return records.store_row(call, model, outcome)

    def record_from_row(self, row: Mapping[str, Any]) -> OpenRecord:
        return records.record_from_row(row)

    def record_from_external(self, item: EvalItem, line: ExternalLine) -> OpenRecord:
        return records.record_from_external(item, line)

    def build_report(self, records: Sequence[OpenRecord], options: ReportOptions, *, source: str,
                     models: Sequence[str] | None = None) -> OpenReport:
        return report.build_open_report(records, source=source)

    def write_report(self, report_: OpenReport, out: Path, options: ReportOptions) -> Path:
        return report.write_open_report(report_, out, figure=options.figure)

    def report_summary(self, report_: OpenReport, out_dir: Path) -> ReportSummary:
        warnings = ["no ArcticAbstain responses to pair with"] if report_.pairings == [] else []
        return ReportSummary(out_dir, report.summary_lines(report_), warnings)

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        # the store also holds the MC runs of the same models: pair with them
        open_records = self.records_from_store(engine, models=models)
        if not open_records:
            of = f" of model(s) {', '.join(models)}" if models else ""
            raise ConfigError(f"{source}: the store holds no {self.name} responses{of}")
        mc = records.mc_responses_from_store(engine, models=models)
        report_ = report.build_open_report(open_records, source=source, mc_records=mc)
        return self.report_summary(report_, self.write_report(report_, out, options))


OPEN = OpenProtocol()
