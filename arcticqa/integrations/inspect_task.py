"""ArcticAbstain as an inspect_ai task: the harness runs the model, ``arcticqa evaluate score`` scores it.

Run it on any release (ours or ArcticQA v1) with any inspect provider::

    inspect eval arcticqa/integrations/inspect_task.py -T release=out/demo/release --model openai/gpt-4.1
    arcticqa evaluate score --from-inspect-log logs/ --out report/

Every item gives two samples, ``<item_id>/answer_present`` and ``<item_id>/answer_absent``, and
inspect's epochs are the trials (``-T trials=3``, the default; ``--epochs`` overrides it). Each call
shows exactly what ``arcticqa evaluate run`` shows for the same (eval set, item, condition, trial,
model label): the published system prompt, the user template, the five options including the abstain
option, in the order ``order_seed`` gives (:func:`arcticqa.evaluate.arcticabstain.prompt.build_call`). The model
label in the seed is ``-T model_label=...`` when given, else inspect's model name (``openai/gpt-4.1``).

The solver writes the trial, model label, order seed, the options as shown (letter, kind, text,
option id) and the prompt hash into the sample's metadata, so the log maps back to the design's
cells; the scorer reads the reply with the strict parser (the published rule) and records the
outcome (N0-N5) and the lenient one. Inspect's own ``accuracy`` is the share of correct actions
with N0 counted wrong; the paired analysis (N0 outside every denominator, shifts, CIs, tests) is
``arcticqa evaluate score --from-inspect-log``.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from inspect_ai import Epochs, Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver

from arcticqa.errors import InputError
from arcticqa.evaluate.arcticabstain.items import EvalItem, load_items
from arcticqa.evaluate.arcticabstain.parse import CONDITIONS, Condition, ShownOption, score_reply
from arcticqa.evaluate.arcticabstain.prompt import PromptTemplate, build_call, load_prompt

__all__ = ["TASK_NAME", "arcticabstain", "arcticabstain_call", "arcticabstain_outcome", "release_items_path",
           "user_path"]

#: the task's registry name, which the log importer checks
TASK_NAME = "arcticabstain"

#: inspect's stop reason for a reply the provider withheld (OpenAI's ``content_filter``/``refusal``)
_REFUSED = "content_filter"


def user_path(given: str | Path, *, must_exist: bool = True) -> Path:
    """A path the user typed, as they meant it.

    ``inspect eval`` creates the task with the working folder changed to the task file's folder,
    so a relative ``-T release=out/demo/release`` would be looked up under
    ``arcticqa/integrations/``. It is looked up first where the user typed it (the shell's
    ``$PWD``, which ``os.chdir`` leaves alone), then in the working folder; an absolute path is
    taken as it is. A path found in neither is an :class:`InputError` naming both places (or,
    unless ``must_exist``, the path as given).
    """
    path = Path(given).expanduser()
    if path.is_absolute():
        return path
    shell = os.environ.get("PWD")
    places = [Path(shell)] if shell and Path(shell).is_dir() else []
    places += [p for p in [Path.cwd()] if p not in places]
    for place in places:
        if (place / path).exists():
            return place / path
    if not must_exist:
        return path
    raise InputError(f"not found (looked in {' and '.join(str(p) for p in places)}; give an absolute path, e.g. "
                     f"$PWD/{path})", path=str(path))


def release_items_path(release: str | Path, *, must_exist: bool = True) -> Path:
    """``items.jsonl`` of a release folder, or the file itself when given one (a relative path is
    the user's: :func:`user_path`)."""
    path = user_path(release, must_exist=must_exist)
    return path / "items.jsonl" if path.is_dir() else path


def _samples(items: list[EvalItem], eval_set: str, prompt: PromptTemplate) -> list[Sample]:
    samples = []
    for item in items:
        for condition in CONDITIONS:
            # what the correct action shows as, for the log viewer (letters vary per call)
            target = item.gold_answer if condition == "answer_present" else prompt.abstention_option_text
            samples.append(Sample(
                id=f"{item.item_id}/{condition}", input=item.question, target=target,
                metadata={"item_id": item.item_id, "condition": condition,
                          "eval_set": item.eval_set_id or eval_set}))
    return samples


@solver
def arcticabstain_call(items: list[EvalItem], prompt: PromptTemplate, eval_set: str = "arcticqa",
                       model_label: str | None = None) -> Solver:
    """Show the cell's call (system prompt, user prompt with the options in the cell's order) and
    generate once: no re-ask, as the protocol says."""
    by_id = {item.item_id: item for item in items}

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        item = by_id[state.metadata["item_id"]]
        condition: Condition = state.metadata["condition"]
        label = model_label or str(state.model)
        call = build_call(item, condition, state.epoch, label, prompt, eval_set=eval_set)
        state.messages = [ChatMessageSystem(content=call.system_text), ChatMessageUser(content=call.user_text)]
        # a fresh dict: the log keeps each epoch's own shown order
        state.metadata = {**state.metadata, "trial": call.trial, "model_label": label,
                          "eval_set": call.eval_set, "order_seed": call.order_seed,
                          "options": [asdict(o) for o in call.options],
                          "prompt_version": call.prompt_version, "prompt_sha256": call.prompt_sha256}
        return await generate(state, tool_calls="none")

    return solve


def _shown(metadata: dict[str, Any]) -> list[ShownOption]:
    return [ShownOption(o["letter"], o["kind"], o["text"], o.get("option_id", "")) for o in metadata["options"]]


@scorer(metrics=[accuracy(), stderr()])
def arcticabstain_outcome() -> Scorer:
    """The strict parser's outcome N0-N5 (``answer`` is the letter, ``value`` C for N1/N5)."""

    async def score(state: TaskState, target: Target) -> Score:
        condition = state.metadata["condition"]
        output = state.output
        refused = output.stop_reason == _REFUSED
        text = output.completion if output.choices else None
        scored = score_reply(condition, _shown(state.metadata), text, failure="refusal" if refused else None)
        return Score(value=CORRECT if scored.outcome in ("N1", "N5") else INCORRECT,
                     answer=scored.chosen_letter, explanation=scored.outcome,
                     metadata={"outcome": scored.outcome, "cause": scored.cause, "parser": scored.parser,
                               "lenient_outcome": scored.lenient_outcome})

    return score


@task(name=TASK_NAME)
def arcticabstain(release: str, trials: int = 3, prompt: str | None = None, eval_set: str = "arcticqa",
                  model_label: str | None = None) -> Task:
    """ArcticAbstain on the release ``release`` (a folder or its ``items.jsonl``): both conditions of
    every item, ``trials`` epochs; ``prompt`` is a prompt file (default: the published v1 prompt)."""
    items = load_items(release_items_path(release))
    template = load_prompt(user_path(prompt) if prompt is not None else None)
    return Task(
        dataset=MemoryDataset(_samples(items, eval_set, template), name=Path(release).name or "release"),
        solver=arcticabstain_call(items, template, eval_set, model_label),
        scorer=arcticabstain_outcome(),
        epochs=Epochs(trials),
        # a trial is one call: a reply that is not a letter is an N0, never asked again
        fail_on_error=False,
    )
