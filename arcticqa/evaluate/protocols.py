"""Re-scoring externally produced runs: a registry of evaluation protocols.

A protocol turns an items file and a JSONL of raw responses into a report. ``arcticabstain``
scores into :class:`~arcticqa.evaluate.responses.ResponseRecord` rows, which then go through
the same parsers, metrics and report as a live run (``scorer``). ``abstainqa``
(:mod:`arcticqa.evaluate.abstainqa`) and ``know2guess`` (:mod:`arcticqa.evaluate.know2guess`)
have their own records and reports and plug in a ``rescore`` function instead, which scores
and writes the report folder. :func:`register_protocol` is the hook; :func:`get_entry` finds one.

ArcticAbstain response lines (JSONL, one object each)::

    {"item_id": "aqa-...", "model": "my-model", "condition": "answer_absent", "trial": 1,
     "options": [{"letter": "A", "text": "..."}, ...]   # or {"A": "...", "B": "..."}
     "raw_response_text": "C", "confidence": 0.7, "finish_reason": "stop"}

``question_id`` may stand for ``item_id``; ``model`` defaults to ``external``, ``trial`` to 1.
Each shown option's kind (gold / distractor / abstain) is found by matching its text against
the item (after Unicode NFC, whitespace collapsing and removal of zero-width characters: one
published gold answer holds a zero-width space), unless the line gives ``kind`` itself.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arcticqa.errors import ConfigError, InputError
from arcticqa.evaluate.conditions import EvalItem, load_items
from arcticqa.evaluate.outcomes import CONDITIONS, OptionKind, ShownOption
from arcticqa.evaluate.responses import ResponseRecord, check_unique_cells, record_from_published
from arcticqa.release.jsonio import iter_jsonl

__all__ = ["ProtocolScorer", "ProtocolRescore", "RescoreOptions", "ProtocolEntry", "PROTOCOLS",
           "register_protocol", "get_protocol", "get_entry", "score_arcticabstain", "normalise_option_text"]

ProtocolScorer = Callable[[Path, Path], list[ResponseRecord]]


@dataclass(frozen=True)
class RescoreOptions:
    """Report options of the protocols with their own reports."""

    figure: bool = True
    #: Abstain-QA verbal-confidence thresholds (an answer with confidence <= t becomes IDK/NOTA)
    thresholds: tuple[int, ...] = (0, 1, 2, 3, 4)
    #: Know2Guess cost-sensitive reliability: the score of a wrong answer is -wrong_penalty
    wrong_penalty: float = 1.0
    #: Know2Guess ECE bins
    bins: int = 10


#: (items file, responses file, report folder, options) -> console lines summarising the report
ProtocolRescore = Callable[[Path, Path, Path, RescoreOptions], list[str]]


@dataclass(frozen=True)
class ProtocolEntry:
    name: str
    summary: str
    scorer: ProtocolScorer | None  # ArcticAbstain-style records for the ArcticAbstain report
    rescore: ProtocolRescore | None = None  # a protocol with its own records and report

    @property
    def implemented(self) -> bool:
        return self.scorer is not None or self.rescore is not None


PROTOCOLS: dict[str, ProtocolEntry] = {}


def register_protocol(name: str, summary: str, scorer: ProtocolScorer | None,
                      rescore: ProtocolRescore | None = None) -> ProtocolEntry:
    entry = ProtocolEntry(name, summary, scorer, rescore)
    PROTOCOLS[name] = entry
    return entry


def get_entry(name: str) -> ProtocolEntry:
    """The registered protocol ``name`` (a :class:`ConfigError` naming the known ones otherwise)."""
    entry = PROTOCOLS.get(name)
    if entry is None:
        raise ConfigError(f"unknown protocol {name!r}; known: {', '.join(sorted(PROTOCOLS))}")
    if not entry.implemented:
        raise ConfigError(f"protocol {name!r} ({entry.summary}) is not implemented yet; "
                          f"implemented: {', '.join(n for n, e in sorted(PROTOCOLS.items()) if e.implemented)}")
    return entry


def get_protocol(name: str) -> ProtocolScorer:
    """The ArcticAbstain-style scorer of ``name`` (protocols with their own report have none)."""
    entry = get_entry(name)
    if entry.scorer is None:
        raise ConfigError(f"protocol {name!r} ({entry.summary}) writes its own report; use get_entry().rescore")
    return entry.scorer


_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


def normalise_option_text(text: str) -> str:
    return " ".join(_ZERO_WIDTH.sub("", unicodedata.normalize("NFC", text)).split())


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
    if not responses_path.exists():
        raise InputError("file not found", path=name)
    records: list[ResponseRecord] = []
    lines: list[int] = []
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(responses_path, skip_blank=True):
        item_id = row.get("item_id") or row.get("question_id")
        if item_id not in items:
            raise InputError(f"unknown item {item_id!r} (not in {items_path})", path=name, line=line_no,
                             field="item_id")
        if row.get("condition") not in CONDITIONS:
            raise InputError(f"condition must be one of {', '.join(CONDITIONS)}", path=name, line=line_no,
                             field="condition")
        if "raw_response_text" not in row:
            raise InputError("missing (use null when no answer came back)", path=name, line=line_no,
                             field="raw_response_text")
        confidence = row.get("confidence")
        if confidence is not None and not isinstance(confidence, int | float):
            raise InputError("must be a number", path=name, line=line_no, field="confidence")
        options = _shown_options(row, items[item_id], path=name, line=line_no)
        published = {"item_id": item_id, "model": row.get("model") or "external",
                      "model_label": row.get("model_label"), "condition": row["condition"],
                      "trial": row.get("trial", 1), "raw_response_text": row["raw_response_text"],
                      "finish_reason": row.get("finish_reason")}
        records.append(record_from_published(published, options, path=name, line=line_no))
        lines.append(line_no)
    if not records:
        raise InputError("no responses in file", path=name)
    check_unique_cells(records, lines, path=name)
    return records


register_protocol("arcticabstain", "paired answer-present/answer-absent abstention (ArcticQA v1)",
                  lambda items, responses: score_arcticabstain(items, responses))


def _rescore_abstainqa(items: Path, responses: Path, out: Path, options: RescoreOptions) -> list[str]:
    from arcticqa.evaluate.abstainqa import (
        build_abstainqa_report,
        score_abstainqa_file,
        summary_lines,
        write_abstainqa_report,
    )

    report = build_abstainqa_report(score_abstainqa_file(items, responses), source=str(responses),
                                    thresholds=options.thresholds)
    write_abstainqa_report(report, out, figure=options.figure)
    return summary_lines(report)


def _rescore_know2guess(items: Path, responses: Path, out: Path, options: RescoreOptions) -> list[str]:
    from arcticqa.evaluate.know2guess import (
        build_know2guess_report,
        score_know2guess_file,
        summary_lines,
        write_know2guess_report,
    )

    report = build_know2guess_report(score_know2guess_file(items, responses), source=str(responses),
                                     wrong_penalty=options.wrong_penalty, bins=options.bins)
    write_know2guess_report(report, out, figure=options.figure)
    return summary_lines(report)


register_protocol("abstainqa", "Abstain-QA: multiple choice with an IDK/NOTA option", None, _rescore_abstainqa)
register_protocol("know2guess", "Know2Guess: open-ended answer-or-abstain with zones A-D", None,
                  _rescore_know2guess)
