"""A prompt-reading stand-in model for whole builds over the OpenAI-compatible stand-in.

:class:`ScriptedModel` answers every build role about a synthetic mooring paper
(:mod:`arcticqa.standins.synthetic`) by reading the prompt the gateway sent (span ids and all),
as a real model would, so whole builds run through the real openai + instructor path.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from typing import Any

from arcticqa.standins.replies import Fault, Reply, json_reply, role_of

__all__ = ["prompt_spans", "results_finding", "ScriptedModel"]

_SPAN = re.compile(r"\[(sp-[0-9a-f]+)\] \((\w+)\) (.*)")
_DECREASE = re.compile(r"decreased by (\d+)%")


def prompt_spans(body: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(span id, section, text) of every span listed in the request's user prompt."""
    user = body["messages"][-1]["content"]
    return [m.groups() for m in (_SPAN.match(line) for line in user.splitlines()) if m]  # type: ignore[misc]


def results_finding(spans: list[tuple[str, str, str]]) -> tuple[str, str, int]:
    """(span id, site, percent) of the results sentence; ValueError when the prompt has none."""
    for sid, section, text in spans:
        m = _DECREASE.search(text)
        if m and section == "results":
            site = text.split("at the ", 1)[1].split(" mooring", 1)[0]
            return sid, site, int(m.group(1))
    raise ValueError("the synthetic paper's results span is not in the prompt")


class ScriptedModel:
    """A responder for :class:`~arcticqa.standins.server.FakeOpenAIServer` answering every build role.

    ``fail_when`` (a substring of the user prompt) makes matching requests fail with HTTP 500
    while ``failing`` is true, to simulate a model outage for one paper.
    """

    def __init__(self) -> None:
        self.fail_when: str | None = None
        self.failing = False
        # the server answers from many threads; subclasses that keep scripts use this lock
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any], headers: Mapping[str, str]) -> Reply | Fault:
        user = body["messages"][-1]["content"]
        if self.failing and self.fail_when and self.fail_when in user:
            return Fault(500)
        role = role_of(headers)
        spans = prompt_spans(body)
        if role == "site_extractor":
            return json_reply({"sites": []})
        try:
            sid, site, pct = results_finding(spans)
        except ValueError as exc:
            return Fault(400, body=json.dumps({"error": {"message": str(exc)}}))
        if role == "finding_extractor":
            # a long paper's prompt can hold no methods span (the rehearsal's corpus has some): a model
            # then cites the finding's own span for the scope, and the stand-in must answer, not crash
            methods = next((s for s, section, _ in spans if section in ("methods", "study_area")), sid)
            return json_reply({"findings": [{
                "claim": f"Mean sea-ice thickness at the {site} mooring decreased by {pct}% from 2010 to 2020.",
                "answer": f"{pct}%", "answer_type": "numeric", "unit": "%", "claim_type": "observation",
                "scope": {"location": f"{site} mooring", "period": "2010 and 2020"},
                "span_ids": [sid], "scope_span_ids": [methods]}]})
        if role == "question_writer":
            return json_reply({
                "question": f"By what percentage did mean sea-ice thickness at the {site} mooring decrease "
                            f"between 2010 and 2020?",
                "question_context": f"Sea-ice thickness was measured by upward-looking sonar at a mooring in "
                                    f"the {site} of the Arctic Ocean."})
        if role == "reconstructor":
            return json_reply({"answer": f"{pct} %", "span_ids": [sid], "claim_type": "observation",
                               "alternatives": []})
        if role == "verifier":
            return json_reply({"entailed": True, "entailment_span_ids": [sid], "scope_preserved": True,
                               "question_claim_type": "observation", "context_sufficient": True,
                               "context_discloses_answer": False, "defensible_alternatives": [],
                               "reason": ""})
        if role == "distractor_writer":
            return json_reply({"candidates": [{"text": f"{v}%", "type": "numeric"}
                                              for v in (pct + 10, pct + 24, max(pct - 9, 2), pct + 35, pct + 5)]})
        if role == "option_verifier":
            return json_reply({"verdict": "contradicted", "span_ids": [sid], "interpretation": "value",
                               "reason": f"the evidence states {pct}%"})
        return Fault(400, body=json.dumps({"error": {"message": f"unknown role {role}"}}))
