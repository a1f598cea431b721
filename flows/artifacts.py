"""What a ``build-arcticqa`` flow run shows in the Prefect UI: its artifacts.

- one **progress artifact per stage** (keys ``build-arcticqa-prefilter`` … ``build-arcticqa-construct``),
  created when the first batch starts (after discovery) and moved after every batch: the share
  of the build's papers the stage has dealt with;
- a **Markdown summary** when the run ends, finished or not (key ``build-arcticqa-summary``):
  the funnel of papers and candidate items, the accepted items, rejections by rule id, model
  calls and cost, and where the store is and how to export the release.

So the flow run's Artifacts tab answers "how far is it, and what did it reject" without a
terminal. Everything here is read from the store, the build's durable truth, with the same
adapters as ``arcticqa funnel`` and ``arcticqa status``; nothing is written to it.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Sequence
from uuid import UUID

from prefect.artifacts import acreate_markdown_artifact, acreate_progress_artifact, aupdate_progress_artifact

from arcticqa.outputs import md_code, md_text
from arcticqa.pipeline.build import BuildSummary
from arcticqa.pipeline.funnel import funnel_counts
from arcticqa.pipeline.runner import BatchReport, BuildContext

__all__ = ["SUMMARY_KEY", "progress_key", "StageProgress", "summary_markdown", "publish_summary"]

SUMMARY_KEY = "build-arcticqa-summary"
#: accepted items listed in the summary (the release holds them all)
_ITEMS_SHOWN = 20
#: a stage's outcomes that do not finish a paper there: another worker has it (a later pass
#: comes back to it)
_NOT_DONE = frozenset({"claimed_elsewhere"})


def progress_key(stage: str) -> str:
    """The progress artifact's key of ``stage`` (Prefect keys: lowercase letters, digits, dashes)."""
    return "build-arcticqa-" + stage.replace("_", "-")


class StageProgress:
    """One progress artifact per stage of this flow run: the share of the build's papers the
    stage has dealt with (run, or found done, blocked or rejected upstream)."""

    def __init__(self, ctx: BuildContext, stages: Sequence[str]) -> None:
        self.ctx, self.stages = ctx, list(stages)
        self.total = 0
        self.ids: dict[str, UUID] = {}
        self.done: dict[str, set[str]] = {stage: set() for stage in self.stages}
        self._starting = asyncio.Lock()  # batches run side by side with Dask: one creates them

    async def start(self) -> None:
        """Create the artifacts at 0% (once, before the first batch: discovery has found the papers)."""
        async with self._starting:
            if self.ids:
                return
            self.total = len(self.ctx.store.paper_ids())
            for stage in self.stages:
                self.ids[stage] = await acreate_progress_artifact(0.0, key=progress_key(stage),
                                                                  description=self._description(stage))

    async def advance(self, report: BatchReport) -> None:
        """Move ``report.stage``'s artifact on by the papers the batch dealt with, and the later
        stages' by the papers it did not pass (they never reach those stages: dealt with)."""
        dealt = {pid for pid, status in report.statuses.items() if status not in _NOT_DONE}
        stopped = dealt - set(report.passed)
        at = self.stages.index(report.stage)
        for stage in self.stages[at:]:
            done = self.done[stage]
            before = len(done)
            done.update(dealt if stage == report.stage else stopped)
            if stage == report.stage or len(done) > before:
                share = 100.0 * len(done) / self.total if self.total else 100.0
                await aupdate_progress_artifact(self.ids[stage], min(share, 100.0),
                                                description=self._description(stage))

    def _description(self, stage: str) -> str:
        return f"{stage}: {len(self.done[stage])} of {self.total} papers"


def summary_markdown(ctx: BuildContext, summary: BuildSummary | None, error: BaseException | None = None) -> str:
    """The run's summary as Markdown, read from the store (``summary``: this run's outcomes, None
    when it ended on ``error``)."""
    store = ctx.store
    funnel = funnel_counts(store)
    items = store.items()
    calls = store.call_totals()
    lines = [f"# build-arcticqa run {md_text(ctx.run_id)}", ""]
    if error is not None:
        lines += [f"**Failed**: {md_text(f'{type(error).__name__}: {error}')}", ""]
    elif summary is not None and summary.stopped:
        lines += [f"**Stopped**: {md_text(summary.stopped)} (finished work is kept; raise the cap and run "
                  "`arcticqa resume`)", ""]
    else:
        lines += ["**Finished**", ""]
    discovered = funnel.step("discovered")
    lines += [f"{len(items)} accepted items from {discovered.count if discovered else 0} papers in the store.", ""]

    lines += ["## Funnel", "", "Every box counts what reached it; the units of the box before that did not are "
              "left out there (first rule id, `failed`, `not_yet_run`) or held for review.", "",
              "| box | unit | reached | left out | held for review |", "| --- | --- | ---: | ---: | ---: |"]
    for step in funnel.steps:
        lines.append(f"| {step.name} | {step.unit} | {step.count} | {sum(step.rejected.values())} | "
                     f"{step.needs_review or ''} |")
    rules = sorted(((rule, step.name, n) for step in funnel.steps for rule, n in step.rejected.items()),
                   key=lambda r: (-r[2], r[0]))
    lines += ["", "## Rejections by rule id", ""]
    if rules:
        lines += ["| rule id | box | units |", "| --- | --- | ---: |"]
        lines += [f"| {md_code(rule)} | {box} | {n} |" for rule, box, n in rules]
        lines += ["", "Every rejection with its message and evidence: `arcticqa audit`."]
    else:
        lines.append("None.")

    if summary is not None:
        columns = ("succeeded", "rejected", "failed", "skipped", "blocked", "claimed_elsewhere", "not_started")
        lines += ["", "## This run, per stage (papers)", "", "| stage | " + " | ".join(columns) + " |",
                  "| --- |" + " ---: |" * len(columns)]
        for stage, counts in summary.stages.items():
            lines.append(f"| {stage} | " + " | ".join(str(counts.get(c, 0)) for c in columns) + " |")
        errors = [(stage, pid, message) for stage, errs in summary.errors.items() for pid, message in errs.items()]
        if errors:
            lines += ["", f"{len(errors)} failed; the first: " + "; ".join(
                f"{md_text(stage)} {md_code(pid)}: {md_text(message[:200])}" for stage, pid, message in errors[:3])]

    lines += ["", "## Accepted items", ""]
    if items:
        shown = items[:_ITEMS_SHOWN]
        lines += [f"{len(items)} in all{f', the first {len(shown)}' if len(shown) < len(items) else ''}:", "",
                  "| item | question | answer | paper |", "| --- | --- | --- | --- |"]
        for row in shown:
            p = row.payload or {}
            lines.append(f"| {md_code(row.item_id)} | {md_text(p.get('question', ''))} | "
                         f"{md_text(p.get('gold_answer', ''))} | {md_text((p.get('paper') or {}).get('title') or '')} |")
    else:
        lines.append("None yet.")

    total = sum(c.calls for c in calls.values())
    cost = sum(c.cost_usd for c in calls.values())
    lines += ["", "## Model calls", "", f"{total} calls recorded in the store "
              f"({sum(c.cache_hits for c in calls.values())} answered from the cache), USD {cost:.4f} in all"
              + (f"; this run spent USD {summary.llm_spent_usd:.4f}" if summary is not None else "") + "."]
    if calls:
        lines += ["", "| role | calls | from the cache | USD |", "| --- | ---: | ---: | ---: |"]
        lines += [f"| {md_code(role)} | {c.calls} | {c.cache_hits} | {c.cost_usd:.4f} |" for role, c in calls.items()]

    config = ctx.settings.config_path
    flag = f" -c {shlex.quote(str(config))}" if config is not None else ""
    lines += ["", "## Where", "",
              f"- store: {md_code(store.engine.url.render_as_string(hide_password=True))}",
              f"- data (PDFs, extraction cache): {md_code(ctx.settings.build.data_dir)}",
              f"- settings: {md_code(config) if config is not None else 'the defaults (no config file)'}",
              f"- release: the build does not write one; {md_code(f'arcticqa export{flag} --out DIR')} does, from "
              f"this store ({md_code(f'arcticqa status{flag}')}, `audit` and `funnel` read it too)"]
    return "\n".join(lines) + "\n"


async def publish_summary(ctx: BuildContext, summary: BuildSummary | None, error: BaseException | None = None) -> None:
    """Publish :func:`summary_markdown` as the flow run's Markdown artifact."""
    state = "failed" if error is not None else "stopped" if summary is not None and summary.stopped else "finished"
    await acreate_markdown_artifact(summary_markdown(ctx, summary, error), key=SUMMARY_KEY,
                                    description=f"build-arcticqa run {ctx.run_id}: {state}")
