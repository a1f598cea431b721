"""ArcticAbstain as one protocol object: paired answer-present/answer-absent abstention (ArcticQA v1).

Items are a release ``items.jsonl`` with the two conditions and the per-call option order
(:mod:`.items`); the published prompt and the calls of a run (:mod:`.prompt`); the strict parser with
a lenient sensitivity reading and the N0–N5 outcomes (:mod:`.parse`); records from live calls, the
store, published and external files (:mod:`.records`); the metrics (:mod:`.metrics`); the report
reproducing the published v1 analysis (:mod:`.report`). It is the only protocol whose published
responses file can be reported on directly.

``RunOptions.variants`` names prompt variants (:func:`.prompt.parse_variant_id`; ``--variants``
also takes ``plan`` or a plan file, :func:`.variants.resolve_variants`); without any a run asks with
the published prompt alone. Reports from the store read the reference variant's rows unless told
otherwise, so the paper tables never mix prompts; the prompt-robustness report compares every
variant (:mod:`.variants`), and a run that asked variants writes it.

Options (:class:`ArcticAbstainOptions`, ``-P KEY=VALUE``): the published statistics' bootstrap
resamples, sign-flip draws and seed.

External response lines (JSONL, one object each)::

    {"item_id": "aqa-...", "model": "my-model", "condition": "answer_absent", "trial": 1,
     "options": [{"letter": "A", "text": "..."}, ...]   # or {"A": "...", "B": "..."}
     "raw_response_text": "C", "confidence": 0.7, "finish_reason": "stop"}

``question_id`` may stand for ``item_id``; ``model`` defaults to ``external``, ``trial`` to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field
from sqlalchemy.engine import Engine

from arcticqa.config import EvalModel, EvaluateSettings
from arcticqa.errors import ConfigError
from arcticqa.evaluate.arcticabstain import items, metrics, parse, prompt, records, report, variants
from arcticqa.evaluate.arcticabstain.items import EvalItem
from arcticqa.evaluate.arcticabstain.prompt import Call
from arcticqa.evaluate.arcticabstain.records import ResponseRecord
from arcticqa.evaluate.arcticabstain.report import Report, StatsSettings
from arcticqa.evaluate.external import ExternalLine
from arcticqa.evaluate.shape import ProtocolBase, ProtocolOptions, ReportOptions, ReportSummary, RunOptions
from arcticqa.llm.chat import ChatOutcome

__all__ = ["ArcticAbstain", "ArcticAbstainOptions", "ARCTICABSTAIN", "items", "metrics", "parse", "prompt",
           "records", "report", "variants"]

_PUBLISHED = StatsSettings()


class ArcticAbstainOptions(ProtocolOptions):
    """ArcticAbstain's options: the draws of the published statistics (its tables and the
    prompt-variants report); the defaults are the published procedure's."""

    resamples: int = Field(_PUBLISHED.resamples, ge=1,
                           description="Bootstrap resamples of the confidence intervals (the paper tables and the "
                                       "prompt-variants report).")
    draws: int = Field(_PUBLISHED.draws, ge=1, description="Sign-flip permutation draws of the condition-shift test.")
    seed: int = Field(_PUBLISHED.seed, description="Seed of the bootstrap and permutation draws.")


def _stats(options: ReportOptions) -> StatsSettings:
    chosen = ArcticAbstainOptions.of(options.protocol_options)
    return StatsSettings(resamples=chosen.resamples, draws=chosen.draws, seed=chosen.seed)


class ArcticAbstain(ProtocolBase[EvalItem, Call, ResponseRecord, Report]):
    """ArcticAbstain: see the module docstring."""

    name = "arcticabstain"
    summary = "paired answer-present/answer-absent abstention (ArcticQA v1)"
    question_id_fields = ("item_id", "question_id")
    row_columns = records.ROW_COLUMNS
    options_model = ArcticAbstainOptions
    variants_help = ("plan ([evaluate.variants]), a plan FILE.toml, or variant ids separated by commas "
                     "(published,reworded.numbers.last); default: the published prompt alone")
    inspect_task = "arcticqa/integrations/inspect_task.py"

    def resolve_variants(self, value: str, settings: EvaluateSettings) -> tuple[str, ...]:
        return tuple(variants.resolve_variants(value, settings.variants))

    def load_items(self, path: Path, *, eval_set: str) -> list[EvalItem]:
        # an item's eval set enters its option order at planning (its own eval_set_id first)
        return items.load_items(path)

    def item_id(self, item: EvalItem) -> str:
        return item.item_id

    def plan(self, items: Sequence[EvalItem], options: RunOptions) -> Callable[[EvalModel], Sequence[Call]]:
        template = prompt.load_prompt(options.prompt)
        variants = [prompt.load_variant(v, options.prompt) for v in dict.fromkeys(options.variants)]
        # the option order of every call depends on the model's label
        return lambda model: prompt.plan_calls(items, model.label, template, trials=options.trials,
                                               eval_set=options.eval_set, variants=variants)

    def records_from_store(self, engine: Engine, *, models: Sequence[str] | None = None,
                           run_id: str | None = None,
                           variant: str | None = prompt.REFERENCE_VARIANT) -> list[ResponseRecord]:
        """The store's records of ``variant`` (None: of every variant)."""
        found = super().records_from_store(engine, models=models, run_id=run_id)
        return found if variant is None else [r for r in found if r.variant == variant]

    def store_row(self, call: Call, model: EvalModel, outcome: ChatOutcome) -> dict[str, Any]:
        return records.store_row(call, model, outcome)

    def record_from_row(self, row: Mapping[str, Any]) -> ResponseRecord:
        return records.record_from_row(row)

    def record_from_external(self, item: EvalItem, line: ExternalLine) -> ResponseRecord:
        return records.record_from_external(item, line)

    def build_report(self, records: Sequence[ResponseRecord], options: ReportOptions, *, source: str,
                     models: Sequence[str] | None = None) -> Report:
        return report.build_report(records, settings=_stats(options), source=source, models=models)

    def write_report(self, report_: Report, out: Path, options: ReportOptions) -> Path:
        return report.write_report(report_, out, figure=options.figure).out_dir

    def report_summary(self, report_: Report, out_dir: Path) -> ReportSummary:
        lines = [f"questions {report_.questions}, responses {report_.responses} "
                 f"({report_.valid} valid, {report_.invalid} invalid), models {len(report_.models)}"]
        lines += [f"  {r.label}: present {r.counts.present_abstention:.3f}, absent "
                  f"{r.counts.absent_abstention:.3f}, shift {r.counts.shift:+.3f} "
                  f"(p {r.test.p_value:.5f}, Holm {r.holm_p:.4f}); ACC {r.counts.acc:.3f}" for r in report_.models]
        warnings = []
        if report_.disagreements:
            with_answer = sum(1 for d in report_.disagreements if not d.no_provider_answer)
            warnings.append(f"re-derivation: {len(report_.disagreements)} outcome(s) differ from the "
                            f"recorded ones ({with_answer} with a provider answer); see checks.json")
        return ReportSummary(out_dir, lines, warnings)

    def report_from_published(self, responses: Path, out: Path, options: ReportOptions, *,
                              models: Sequence[str] | None = None) -> ReportSummary:
        found, lines = records.load_published_responses(responses)
        disagreements = records.rederivation_disagreements(found, lines)
        kept = [r for r in found if r.model in models] if models else found
        if not kept:
            raise ConfigError(f"no responses of model(s) {', '.join(models or ())}")
        built = report.build_report(kept, settings=_stats(options), source=str(responses),
                                    disagreements=disagreements)
        return self.report_summary(built, self.write_report(built, out, options))

    def report_variants_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                                   models: Sequence[str] | None = None) -> ReportSummary:
        stats = _stats(options)
        found = self.records_from_store(engine, models=models, variant=None)
        built = variants.build_variant_report(found, source=source, resamples=stats.resamples, seed=stats.seed,
                                              models=models)
        written = variants.write_variant_report(built, out, figure=options.figure)
        return ReportSummary(written, variants.variant_summary_lines(built))

    def report_run(self, engine: Engine, out: Path, options: ReportOptions, run: RunOptions, *, source: str,
                   models: Sequence[str]) -> ReportSummary:
        # a run that asked prompt variants is reported across them; otherwise the paper tables
        if run.variants:
            return self.report_variants_from_store(engine, out, options, source=source, models=models)
        return super().report_run(engine, out, options, run, source=source, models=models)


ARCTICABSTAIN = ArcticAbstain()
