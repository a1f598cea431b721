"""inspect_ai logs of the ArcticAbstain task, as the response lines ``arcticqa evaluate score`` reads.

Each sample of an ``arcticabstain`` log (:mod:`arcticqa.integrations.inspect_task`) becomes one
external response line (the format of ``evaluate score --responses``, docs/evaluation.md
"Re-scoring external runs"): item id, model label, condition, trial, the options as shown (letter
and text only, so every option's kind is recovered from the release and a log of another
release is refused) and the raw reply, which the evaluator scores again with its own parser.

- A sample whose call failed (inspect recorded an error) has no reply: ``raw_response_text`` is
  null, the N0 "no provider answer" of the protocol.
- A reply the provider withheld (inspect's ``content_filter`` stop reason) keeps that as its
  finish reason: an N0 provider refusal.
- A sample without shown options (its solver never ran: the run was stopped first) cannot be
  scored and is counted in the warnings, as is a log whose run did not finish.

Logs are read with inspect's own :func:`inspect_ai.log.read_eval_log` (``.eval`` and ``.json``),
so the format is inspect's business; a folder stands for every log in it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from inspect_ai.log import EvalLog, EvalSample, read_eval_log

from arcticqa.errors import InputError
from arcticqa.integrations.inspect_task import TASK_NAME, release_items_path

__all__ = ["InspectResponses", "inspect_log_files", "read_inspect_logs"]

_LOG_SUFFIXES = (".eval", ".json")


@dataclass
class InspectResponses:
    """The response lines of some logs, the release items file their task ran on, and warnings."""

    lines: list[dict[str, Any]] = field(default_factory=list)
    items: Path | None = None
    warnings: list[str] = field(default_factory=list)

    def jsonl(self) -> str:
        return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in self.lines)


def inspect_log_files(paths: Sequence[Path]) -> list[Path]:
    """The log files named: a file as is, a folder as its ``*.eval``/``*.json`` logs (sorted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.suffix in _LOG_SUFFIXES and p.is_file())
            if not found:
                raise InputError("no inspect logs (*.eval, *.json) in this folder", path=str(path))
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("file not found", path=str(path))
    return files


def _read(path: Path) -> EvalLog:
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises whatever its zip/JSON readers raise on a bad file
        raise InputError(f"not an inspect log: {type(exc).__name__}: {str(exc)[:200]}", path=str(path)) from None
    if log.eval.task_registry_name != TASK_NAME and log.eval.task != TASK_NAME:
        raise InputError(f"a log of inspect task {log.eval.task!r}, not {TASK_NAME!r} "
                         "(arcticqa/integrations/inspect_task.py)", path=str(path), field="eval.task")
    return log


def _line(sample: EvalSample, path: Path) -> dict[str, Any] | None:
    meta = sample.metadata
    if not meta.get("options"):
        return None
    where = f"sample {sample.id} epoch {sample.epoch}"
    for key in ("item_id", "condition", "trial", "model_label"):
        if meta.get(key) in (None, ""):
            raise InputError(f"{where}: metadata has no {key}", path=str(path), field=f"metadata.{key}")
    answered = sample.error is None and bool(sample.output.choices)
    return {"item_id": meta["item_id"], "model": meta["model_label"], "condition": meta["condition"],
            "trial": meta["trial"], "options": [{"letter": o["letter"], "text": o["text"]} for o in meta["options"]],
            "raw_response_text": sample.output.completion if answered else None,
            "finish_reason": sample.output.stop_reason if answered else None}


def read_inspect_logs(paths: Sequence[Path]) -> InspectResponses:
    """Every scorable sample of the logs (files or folders) as an external response line.

    One cell (model, item, condition, trial) may come from one log only; the logs must have run
    on the same release for its items file to be the default of ``--items``.
    """
    result = InspectResponses()
    first_seen: dict[tuple[str, str, str, int], str] = {}
    releases: set[str] = set()
    for path in inspect_log_files(paths):
        log = _read(path)
        release = log.eval.task_args.get("release")
        if isinstance(release, str):
            releases.add(release)
        samples = log.samples or []
        if log.status != "success":
            result.warnings.append(f"{path}: the inspect run ended with status {log.status!r}; "
                                   f"{len(samples)} sample(s) read")
        unscorable = 0
        for sample in samples:
            line = _line(sample, path)
            if line is None:
                unscorable += 1
                continue
            cell = (line["model"], line["item_id"], line["condition"], int(line["trial"]))
            if cell in first_seen:
                raise InputError(f"model {cell[0]}, item {cell[1]}, {cell[2]}, trial {cell[3]} is answered "
                                 f"again (first in {first_seen[cell]})", path=str(path))
            first_seen[cell] = f"{path}, sample {sample.id} epoch {sample.epoch}"
            result.lines.append(line)
        if unscorable:
            result.warnings.append(f"{path}: {unscorable} sample(s) without shown options (the solver never "
                                   "ran for them) left out")
    if not result.lines:
        raise InputError("no scorable samples in the inspect log(s)", path=", ".join(str(p) for p in paths))
    if len(releases) == 1:
        result.items = release_items_path(releases.pop(), must_exist=False)
    return result
