"""ArcticAbstain as a protocol object: paired answer-present/answer-absent abstention (ArcticQA v1).

Items are a release ``items.jsonl`` (:mod:`arcticqa.evaluate.conditions`), replies are read by the
strict parser with a lenient sensitivity row (:mod:`arcticqa.evaluate.outcomes`), and the report
reproduces the published v1 analysis (:mod:`arcticqa.evaluate.report`). It is the only protocol
whose published responses file can be reported on directly.

External response lines (JSONL, one object each)::

    {"item_id": "aqa-...", "model": "my-model", "condition": "answer_absent", "trial": 1,
     "options": [{"letter": "A", "text": "..."}, ...]   # or {"A": "...", "B": "..."}
     "raw_response_text": "C", "confidence": 0.7, "finish_reason": "stop"}

``question_id`` may stand for ``item_id``; ``model`` defaults to ``external``, ``trial`` to 1.
Each shown option's kind (gold / distractor / abstain) is found by matching its text against
the item (after Unicode NFC, whitespace collapsing and removal of zero-width characters: one
published gold answer holds a zero-width space), unless the line gives ``kind`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.conditions import EvalItem, load_items, load_prompt
from arcticqa.evaluate.external import external_lines
from arcticqa.evaluate.outcomes import CONDITIONS, OptionKind, ShownOption, normalise_option_text
from arcticqa.evaluate.protocols.shape import EvalProtocol, ReportOptions, ReportSummary, RunOptions
from arcticqa.evaluate.records import load_store_responses
from arcticqa.evaluate.report import Report, StatsSettings, build_report, write_report
from arcticqa.evaluate.responses import (
    ResponseRecord,
    check_unique_cells,
    load_published_responses,
    record_from_published,
    rederivation_disagreements,
)
from arcticqa.evaluate.runner import LiveProtocol, arcticabstain_live

__all__ = ["ArcticAbstain", "ARCTICABSTAIN", "score_arcticabstain"]


def _kind_index(item: EvalItem, abstain_text: str) -> dict[str, OptionKind]:
    index: dict[str, OptionKind] = {normalise_option_text(t): "distractor" for t in item.distractors}
    index[normalise_option_text(item.gold_answer)] = "gold"
    index[normalise_option_text(abstain_text)] = "abstain"
    return index


def _shown_options(row: dict[str, Any], item: EvalItem, *, path: str, line: int) -> list[ShownOption]:
    raw = row.get("options")
    pairs: list[tuple[str, str, Any]] = []
    if isinstance(raw, dict):
        pairs = [(str(k), str(v), None) for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, o in enumerate(raw):
            if not isinstance(o, dict) or "letter" not in o or "text" not in o:
                raise InputError("each option needs letter and text", path=path, line=line, field=f"options[{i}]")
            pairs.append((str(o["letter"]), str(o["text"]), o.get("kind")))
    else:
        raise InputError("expected the options as shown (a list or a letter -> text object)", path=path,
                         line=line, field="options")
    index = _kind_index(item, "I abstain from answering")
    options = []
    for letter, text, given in pairs:
        kind = given if given in ("gold", "distractor", "abstain") else index.get(normalise_option_text(text))
        if kind is None:
            raise InputError(f"option {letter} ({text[:60]!r}) is neither the gold answer, a distractor nor "
                             f"the abstain option of item {item.item_id}", path=path, line=line,
                             field="options")
        options.append(ShownOption(letter, kind, text))
    return options


def score_arcticabstain(items_path: Path, responses_path: Path) -> list[ResponseRecord]:
    """Score an external ArcticAbstain run (see the module docstring for the line format)."""
    items = {item.item_id: item for item in load_items(items_path)}
    name = str(responses_path)
    records: list[ResponseRecord] = []
    lines: list[int] = []
    # the shared reader checks the file, the question id, the raw reply, trial and model names
    for line in external_lines(responses_path, items, id_keys=("item_id", "question_id")):
        row = line.row
        if row.get("condition") not in CONDITIONS:
            raise InputError(f"condition must be one of {', '.join(CONDITIONS)}", path=name, line=line.line,
                             field="condition")
        confidence = row.get("confidence")
        if confidence is not None and not isinstance(confidence, int | float):
            raise InputError("must be a number", path=name, line=line.line, field="confidence")
        options = _shown_options(row, items[line.question_id], path=name, line=line.line)
        published = {"item_id": line.question_id, "model": line.model, "model_label": row.get("model_label"),
                     "condition": row["condition"], "trial": row.get("trial", 1),
                     "raw_response_text": line.raw_response_text, "finish_reason": row.get("finish_reason")}
        records.append(record_from_published(published, options, path=name, line=line.line))
        lines.append(line.line)
    if not records:
        raise InputError("no responses in file", path=name)
    check_unique_cells(records, lines, path=name)
    return records


def _summary(report: Report, out_dir: Path) -> ReportSummary:
    lines = [f"questions {report.questions}, responses {report.responses} "
             f"({report.valid} valid, {report.invalid} invalid), models {len(report.models)}"]
    lines += [f"  {r.label}: present {r.counts.present_abstention:.3f}, absent "
              f"{r.counts.absent_abstention:.3f}, shift {r.counts.shift:+.3f} "
              f"(p {r.test.p_value:.5f}, Holm {r.holm_p:.4f}); ACC {r.counts.acc:.3f}" for r in report.models]
    warnings = []
    if report.disagreements:
        with_answer = sum(1 for d in report.disagreements if not d.no_provider_answer)
        warnings.append(f"re-derivation: {len(report.disagreements)} outcome(s) differ from the "
                        f"recorded ones ({with_answer} with a provider answer); see checks.json")
    return ReportSummary(out_dir, lines, warnings)


def _stats(options: ReportOptions) -> StatsSettings:
    return StatsSettings(resamples=options.resamples, draws=options.draws, seed=options.seed)


def _only(records: list[ResponseRecord], models: Sequence[str] | None) -> list[ResponseRecord]:
    if not models:
        return records
    kept = [r for r in records if r.model in models]
    if not kept:
        raise ConfigError(f"no responses of model(s) {', '.join(models)}")
    return kept


class ArcticAbstain(EvalProtocol):
    """ArcticAbstain: see the module docstring."""

    name = "arcticabstain"
    summary = "paired answer-present/answer-absent abstention (ArcticQA v1)"

    def live(self, options: RunOptions) -> LiveProtocol:
        return arcticabstain_live(load_items(options.items), load_prompt(options.prompt), trials=options.trials,
                                  eval_set=options.eval_set)

    def score_external(self, items: Path, responses: Path, out: Path, options: ReportOptions) -> ReportSummary:
        report = build_report(score_arcticabstain(items, responses), settings=_stats(options),
                              source=str(responses))
        return _summary(report, write_report(report, out, figure=options.figure).out_dir)

    def report_from_store(self, engine: Engine, out: Path, options: ReportOptions, *, source: str,
                          models: Sequence[str] | None = None, in_given_order: bool = False) -> ReportSummary:
        if in_given_order:
            records = load_store_responses(engine, models=models)
        else:
            records = load_store_responses(engine)
            if not records:
                raise ConfigError(f"{source}: the store holds no evaluator responses")
            records = _only(records, models)
        report = build_report(records, settings=_stats(options), source=source,
                              models=models if in_given_order else None)
        return _summary(report, write_report(report, out, figure=options.figure).out_dir)

    def report_from_published(self, responses: Path, out: Path, options: ReportOptions, *,
                              models: Sequence[str] | None = None) -> ReportSummary:
        records, lines = load_published_responses(responses)
        disagreements = rederivation_disagreements(records, lines)
        report = build_report(_only(records, models), settings=_stats(options), source=str(responses),
                              disagreements=disagreements)
        return _summary(report, write_report(report, out, figure=options.figure).out_dir)


ARCTICABSTAIN = ArcticAbstain()
