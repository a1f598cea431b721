"""Prefect flow ``evaluate-arcticabstain``: the one evaluator runner with one task per model.

Coarse on purpose: a Prefect task run costs ~35-40 ms of server CPU, so a task wraps a whole
model's calls (:func:`arcticqa.evaluate.runner.run_protocol` over one model), never one call. The
models run concurrently; a final task writes the report when ``out_dir`` is given. The CLI's
``arcticqa evaluate run`` runs the same runner without Prefect.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

from prefect import flow, task

from arcticqa.config import EvalModel, load_settings
from arcticqa.errors import ConfigError
from arcticqa.evaluate.arcticabstain import ARCTICABSTAIN
from arcticqa.evaluate.recorded import ensure_tables
from arcticqa.evaluate.runner import refuse_recorded_cells, run_protocol
from arcticqa.evaluate.shape import ReportOptions, RunOptions
from arcticqa.store.db import make_engine

__all__ = ["evaluate_arcticabstain", "evaluate_model", "write_evaluation_report"]


@task(name="evaluate-model", retries=0)
async def evaluate_model(items_path: str, model: dict[str, Any], *, db_url: str, trials: int, eval_set: str,
                         prompt_path: str | None, resume: bool, run_id: str, position: int = 0) -> dict[str, Any]:
    """Every call of one model (no task retries: the protocol forbids asking a cell again)."""
    options = RunOptions(items=Path(items_path), trials=trials, eval_set=eval_set,
                         prompt=Path(prompt_path) if prompt_path else None)
    result = await run_protocol(ARCTICABSTAIN.live(options), [EvalModel(**model)], make_engine(db_url),
                                resume=resume, run_id=run_id, first_position=position)
    return {"model": model["label"], "planned": result.planned, "skipped": result.skipped,
            "recorded": result.recorded, "elapsed_s": result.elapsed_s,
            "outcomes": dict(result.outcomes.get(model["label"], {}))}


@task(name="write-evaluation-report")
def write_evaluation_report(db_url: str, out_dir: str, models: list[str]) -> str:
    summary = ARCTICABSTAIN.report_from_store(make_engine(db_url), Path(out_dir), ReportOptions(), source=db_url,
                                              models=models, in_given_order=True)
    return str(summary.out_dir)


@flow(name="evaluate-arcticabstain")
async def evaluate_arcticabstain(config_path: str, items_path: str | None = None, db_url: str | None = None,
                                 trials: int | None = None, resume: bool = False,
                                 out_dir: str | None = None) -> dict[str, Any]:
    """Run every ``[[evaluate.models]]`` entry of ``config_path`` on the items; optionally report."""
    # the flow run is an entry point (a deployment's worker): its environment's ARCTICQA_* count
    settings = load_settings(config_path, environ=os.environ).evaluate.resolved(config_path)
    items_file = items_path or (str(settings.items) if settings.items else None)
    if items_file is None:
        raise ConfigError("give items_path or set [evaluate] items")
    if not settings.models:
        raise ConfigError(f"{config_path}: no [[evaluate.models]]")
    url = db_url or settings.db_url
    n_trials = trials or settings.trials
    engine = make_engine(url)
    ensure_tables(engine)
    if not resume:
        # Check every model before any task starts, so a refused run sends nothing.
        live = ARCTICABSTAIN.live(RunOptions(items=Path(items_file), trials=n_trials, eval_set=settings.eval_set,
                                             prompt=settings.prompt))
        refuse_recorded_cells(engine, {m.label: live.plan(m) for m in settings.models}, protocol=live.name)
    run_id = uuid.uuid4().hex[:12]
    results = await asyncio.gather(*(
        evaluate_model(items_file, m.model_dump(mode="json"), db_url=url, trials=n_trials,
                       eval_set=settings.eval_set, prompt_path=str(settings.prompt) if settings.prompt else None,
                       resume=resume, run_id=run_id, position=i)
        for i, m in enumerate(settings.models)))
    summary: dict[str, Any] = {"run_id": run_id, "models": results}
    if out_dir:
        summary["report"] = write_evaluation_report(url, out_dir, [m.label for m in settings.models])
    return summary
