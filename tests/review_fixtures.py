"""A small store for review tests: accepted items and candidates rejected at verification,
written through the store's own write path (``Store.record_run``), in a second or so; and the
workbench as a real server (``arcticqa review serve`` in a subprocess on 127.0.0.1)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from arcticqa.rules import Rejection
from arcticqa.store.store import Store
from arcticqa.store.tables import ItemRow

__all__ = ["make_review_store", "item_payload", "free_port", "start_workbench"]

#: (question, answer, distractors, evidence) in the shape of the demo's offline items
_TOPICS = [
    ("By how much did mean sea-ice thickness at station S{i} change between 2001 and 2010?",
     "a decrease of {i}1 cm", ["a decrease of {i}5 cm", "an increase of {i}1 cm", "no change", "a decrease of {i}9 cm"],
     "Mean sea-ice thickness at station S{i} decreased by {i}1 cm between 2001 and 2010."),
    ("What share of the grid's active layer thickened by more than 10 cm at site G{i}?",
     "{i}8%", ["{i}2%", "{i}4%", "{i}6%", "9{i}%"],
     "At site G{i}, {i}8% of the grid's active layer thickened by more than 10 cm."),
]


def item_payload(i: int, *, question: str | None = None) -> dict[str, Any]:
    q, answer, distractors, span = (t.format(i=i) if isinstance(t, str) else [d.format(i=i) for d in t]
                                    for t in _TOPICS[i % 2])
    return {
        "item_id": f"aqa-test{i:04d}", "question": question or q, "question_context": f"Station S{i} is in the Fram Strait.",
        "gold_answer": answer, "answer_type": "numeric", "claim_type": "observation" if i % 3 else "trend",
        "language_script": "latin", "numeric_answer": True,
        "evidence_spans": [{"id": f"sp-{i:04d}", "section": "results", "page": 1, "start": 0, "end": len(span),
                            "sha256": "0" * 64}],
        "distractors": [{"rank": r, "text": d, "type": "numeric", "verification": "model-verified",
                         "rule": None, "evidence_span_id": f"sp-{i:04d}"} for r, d in enumerate(distractors)],
        "answer_present_drops": distractors[3], "writer_model": "offline-baseline",
        "paper": {"doi": f"10.5555/test.{i}", "title": f"Sea ice at S{i} <b>bold</b>", "year": 2020},
    }


def make_review_store(path: Path, *, accepted: int = 6, rejected: int = 2) -> Store:
    """A store at ``path`` with ``accepted`` items and ``rejected`` verify-rejected candidates."""
    store = Store(f"sqlite:///{path}")
    for i in range(accepted):
        pid = f"paper{i:036d}"
        store.record_run(pid, "accept", f"fd-{i}/r0", input_hash=f"h{i}", status="succeeded",
                         evidence=[ItemRow(stage_run_id=0, paper_id=pid, subject=f"fd-{i}/r0",
                                           item_id=f"aqa-test{i:04d}", payload=item_payload(i))])
    for j in range(rejected):
        pid = f"rejected{j:032d}"
        payload = item_payload(100 + j)
        store.record_run(pid, "findings", "", input_hash=f"f{j}", status="succeeded", output={"findings": [
            {"id": f"fd-r{j}", "answer": payload["gold_answer"],
             "support": [{"id": f"sp-r{j}", "section": "results", "page": 2, "text": "The thickness fell."}]}]})
        store.record_run(pid, "question", f"fd-r{j}/r0", input_hash=f"q{j}", status="succeeded",
                         output={"draft": {"question": payload["question"], "question_context": "At S1."}})
        store.record_run(pid, "verify", f"fd-r{j}/r0", input_hash=f"v{j}", status="rejected",
                         rejections=[Rejection(rule_id="verify.not_entailed", stage="verify",
                                               message="the cited evidence does not entail the answer")])
    return store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_workbench(db: Path, port: int, *args: str) -> subprocess.Popen[bytes]:
    """``arcticqa review serve`` on the store ``db`` at 127.0.0.1:``port`` (extra CLI ``args``), once
    it answers; the caller stops it."""
    config = db.with_suffix(".toml")
    config.write_text(f'[store]\nurl = "sqlite:///{db}"\n', encoding="utf-8")
    proc = subprocess.Popen([sys.executable, "-m", "arcticqa", "review", "serve", "-c", str(config),
                             "--reviewer", "ana", "--port", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(300):
        try:
            httpx.get(f"http://127.0.0.1:{port}/static/workbench.css", timeout=1)
            return proc
        except httpx.TransportError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"workbench did not start: {proc.stderr.read() if proc.stderr else ''!r}")
