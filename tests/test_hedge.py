"""``verify.hedged_answer`` (:mod:`arcticqa.gates.hedge`): an answer every cited sentence hedges is
rejected by rule, whatever the verifier says; a result stated plainly never is.

The red team's ``entailment_lie`` (a verifier calling "Lichen cover possibly declined" entailed)
reached the release until this rule; the generated firm statements below, with hedge words in
other clauses or after the answer, are the "true things" it must not fire on.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

from arcticqa.evidence import SpanRef
from arcticqa.gates.hedge import answer_hedged, hedged_statement
from arcticqa.llm.types import OutputT, RoleReply
from arcticqa.stages.findings import Finding, Scope
from arcticqa.stages.question import QuestionDraft
from arcticqa.stages.reconstruct import Reconstruction
from arcticqa.stages.verify import verify


@pytest.mark.parametrize(("sentence", "answer", "hedge"), [
    ("Lichen cover possibly declined in some plots, but the apparent change is within the observer error.",
     "declined", "possibly"),
    ("Depending on the gap-filling method, mean snowmelt in 2020 was either 4 days earlier or 3 days later "
     "than in 2019.", "4 days", "either"),
    ("It is likely that thaw depth increased by 18%.", "18%", "likely"),
    ("Thaw depth may have increased by 18% between 2012 and 2021.", "18%", "may"),
    ("Shrub cover seemed to expand by 8 percentage points.", "8 percentage points", "seemed"),
    ("The data suggest that ice thickness decreased by 23%.", "23%", "suggest that"),
    ("Температура, вероятно, повысилась на 0,6 °C.", "0,6 °C", "вероятно"),
    ("Высота снега, возможно, увеличилась на 12 см.", "12 см", "возможно"),
])
def test_a_hedge_before_the_answer_in_its_clause_hedges_it(sentence: str, answer: str, hedge: str) -> None:
    assert hedged_statement(sentence, answer) == hedge
    assert answer_hedged(answer, sentence) == hedge


_SUBJECTS = ["Mean thaw depth", "Shrub cover", "Ice thickness at the mooring", "Chlorophyll a", "Snow depth"]
_VERBS = ["increased by", "decreased by", "rose by", "was", "averaged"]
_VALUES = ["18%", "0.9 °C", "12 cm", "9 days", "2.6 times", "117"]
_OTHER_CLAUSES = [
    "likely due to warmer summers", "which may reflect the early snowmelt", "although the record may be incomplete",
    "but the cause remains unclear", "possibly because of grazing", "and it is uncertain whether this will persist",
]


def _firm_statements(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """Firm statements of a value with a hedge word elsewhere: in another clause, after the answer,
    in a following sentence, or none at all."""
    out = []
    for _ in range(count):
        subject, verb, value = rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_VALUES)
        core = f"{subject} {verb} {value} between 2012 and 2021"
        shape = rng.randrange(5)
        if shape == 0:
            sentence = f"{core}, {rng.choice(_OTHER_CLAUSES)}."
        elif shape == 1:
            sentence = f"{rng.choice(_OTHER_CLAUSES).capitalize()}, {core[0].lower()}{core[1:]}."
        elif shape == 2:
            sentence = f"{core} in plots that may have been disturbed."
        elif shape == 3:
            sentence = f"{core}. This may reflect warmer summers."
        else:
            sentence = f"{core}."
        out.append((sentence, value))
    return out


def test_a_result_stated_plainly_is_never_hedged() -> None:
    fired = [(s, a) for s, a in _firm_statements(random.Random(35), 400) if answer_hedged(a, s) is not None]
    assert fired == []
    # one firm sentence among hedged ones is enough: the paper states it
    text = "Thaw depth may have increased by 18%. Mean thaw depth increased by 18% between 2012 and 2021."
    assert answer_hedged("18%", text) is None
    # no sentence states it: that is finding.answer_not_in_evidence's business, not this rule's
    assert answer_hedged("31%", "Thaw depth may have increased by 18%.") is None


class _LyingVerifier:
    """A verifier that calls everything entailed and equivalent."""

    async def ask(self, role: str, prompt: str, variables: Mapping[str, Any], response_model: type[OutputT], *,
                  subject: str | None = None) -> RoleReply[OutputT]:
        output = response_model.model_validate({"answers_equivalent": True, "entailed": True,
                                                "question_claim_type": "observation"})
        return RoleReply(output=output, role=role, provider="fake", model="liar", prompt_version="verifier@v1#x",
                         request_hash="h", cached=False)


def _finding(text: str, answer: str) -> Finding:
    span = SpanRef(id="sp-1", section="results", page=1, start=0, end=len(text), sha256="0" * 64, text=text)
    return Finding(id="fd-1", paper_id="p-1", rank=0, claim=text, answer=answer, answer_type="direction",
                   claim_type="observation", scope=Scope(), support=[span])


def test_the_verify_step_rejects_a_hedged_answer_the_verifier_calls_entailed() -> None:
    draft = QuestionDraft(question="Did lichen cover decline or increase in the Abisko snowbed plots?")
    rebuilt = Reconstruction(answer="declined", span_ids=["sp-1"], claim_type="observation")
    hedged = _finding("Lichen cover possibly declined in some plots, but the change is within observer error.",
                      "declined")
    result = asyncio.run(verify(hedged, draft, rebuilt, _LyingVerifier(), subject="fd-1/r0"))
    assert [r.rule_id for r in result.rejections] == ["verify.hedged_answer"]
    assert result.rejections[0].evidence["hedge"] == "possibly"
    firm = _finding("Lichen cover declined in all plots between 2010 and 2020.", "declined")
    assert asyncio.run(verify(firm, draft, rebuilt, _LyingVerifier(), subject="fd-1/r0")).rejections == []
