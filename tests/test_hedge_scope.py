"""The verifier's hedge check looks where the answer is stated: a hedge in a clause contrasted
with the answer's clause ("X seemed earlier, but 9 of the 20 plots lacked images") does not make
the answer hedged; a hedge in the answer's clause, or in a later clause pointing back at it, does.
Scoping only ever narrows the whole-sentence check, never widens it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arcticqa.gates.evidence import answer_in_evidence
from arcticqa.gates.numbers import prepare_text
from arcticqa.standins.offline.text import _HEDGE, answer_hedge, is_hedged

# the sentence of the demo report (the sample corpus paper as it read when the hedge rule was written)
REPORTED = ("Snowmelt seemed to occur earlier in 2020 than in 2019 in most plots, but camera images were "
            "missing for 9 of the 20 plots in 2020.")
JOINTS = [", but ", "; ", ", whereas ", ", yet ", " but ", ", however, "]


def test_the_reported_count_is_not_hedged_by_the_snowmelt_clause() -> None:
    assert answer_hedge(REPORTED, "9") is None
    assert answer_hedge(REPORTED, "earlier") == "seemed to"  # the snowmelt timing still is


@pytest.mark.parametrize("joint", JOINTS)
def test_every_contrastive_joint_scopes_alike(joint: str) -> None:
    first, second = "Snowmelt seemed to occur earlier in most plots", "camera images were missing for 9 of the 20 plots"
    assert answer_hedge(f"{first}{joint}{second}.", "9") is None
    assert answer_hedge(f"{first}{joint}{second}.", "earlier") == "seemed to"
    # the same two claims the other way round: the hedge now sits in the answer's own clause
    assert answer_hedge(f"Camera images seemed to be missing for 9 of the 20 plots{joint}snowmelt was earlier.",
                        "9") == "seemed to"


@pytest.mark.parametrize(("sentence", "hedge"), [
    # a later clause pointing back at the answer hedges it
    ("Camera images were missing for 9 of the 20 plots, but this may be an undercount.", "may"),
    ("Camera images were missing for 9 of the 20 plots; the count is probably low.", "probably"),
    ("Camera images were missing for 9 of the 20 plots; snowmelt was probably earlier.", None),
    ("Camera images were missing for 9 of the 20 plots; these values are uncertain.", "uncertain"),
    # concessive clauses are not split off: they can qualify the answer
    ("Camera images were missing for 9 of the 20 plots, although the count may be low.", "may"),
    ("Although snowmelt may have been earlier, camera images were missing for 9 of the 20 plots.", "may"),
    # a hedge scoping over the whole sentence, with no joint, stays
    ("Possibly, camera images were missing for 9 of the 20 plots.", "Possibly"),
    ("Camera images were likely missing for 9 of the 20 plots.", "likely"),
    # plain statements
    ("Camera images were missing for 9 of the 20 plots.", None),
])
def test_the_answers_own_scope(sentence: str, hedge: str | None) -> None:
    assert answer_hedge(sentence, "9") == hedge


def test_an_answer_no_clause_states_alone_falls_back_to_the_whole_sentence() -> None:
    # "9 of the 20" is split across the joint nowhere; but an answer spanning both clauses is
    sentence = "Snowmelt seemed earlier in 2020, but plots 9 and 12 lacked images."
    assert answer_hedge(sentence, "9 and 12") is None
    assert answer_hedge("Cover seemed to be 9; 12 in the other plots.", "9 to 12") == "seemed to"


def test_the_sample_corpus_hedged_sentences_stay_hedged() -> None:
    # paper 13 of the sample corpus is written so every finding fails verification
    assert answer_hedge("Lichen cover possibly declined in some plots, but the apparent change was smaller "
                        "than the disagreement between the observers.", "declined") == "possibly"
    assert answer_hedge("Depending on the gap-filling method, mean snowmelt in 2020 was either 4 days earlier "
                        "or 3 days later than in 2019.", "4 days") is not None


@pytest.mark.shared
def test_scoping_only_narrows_on_the_v1_wording(arcticqa_v1: Path) -> None:
    """On the published items' real contexts: a context that hedges, contrasted with a clause
    stating the gold answer, never hedges the answer; the same context in the answer's clause
    always does; and the scoped check never fires where the whole-sentence one does not."""
    items = [json.loads(line) for line in (arcticqa_v1 / "items.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    contrasted = checked = 0
    for item in items:
        gold, context = item["gold_answer"], item["question_context"].rstrip(". ")
        claim = f"the reported answer was {gold}"
        for joint in JOINTS:
            sentence = f"{context}{joint}{claim}."
            scoped = answer_hedge(sentence, gold)
            assert not scoped or is_hedged(sentence), sentence
            checked += 1
            hedged_context = _HEDGE.search(context) is not None
            if not hedged_context or answer_in_evidence(gold, prepare_text(context)):
                continue  # the answer's clause is not the only one stating it
            if answer_in_evidence(gold, prepare_text(claim)) and not _HEDGE.search(claim):
                assert scoped is None, sentence
                contrasted += 1
        inside = f"{claim}, which {context[0].lower()}{context[1:]}." if _HEDGE.search(context) else None
        if inside and answer_in_evidence(gold, prepare_text(claim)):
            assert answer_hedge(inside, gold) is not None, inside
    assert checked == len(items) * len(JOINTS) and contrasted > 0
