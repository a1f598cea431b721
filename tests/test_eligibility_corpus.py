"""The eligibility stage on the bundled sample corpus: each paper lands on its documented branch."""

from __future__ import annotations

import pytest

from arcticqa.papers import PaperRecord
from arcticqa.stages.eligibility import assess

corpus = pytest.importorskip("arcticqa.demo.corpus")
extract = pytest.importorskip("arcticqa.text.extract")

_EXPECTED = {"eligible_terrestrial": "eligible", "eligible_marine": "eligible", "eligible_russian": "eligible",
             "subarctic": "ineligible", "antarctic": "ineligible"}


@pytest.mark.slow
def test_sample_corpus_branches_decided_by_eligibility() -> None:
    sources = [s for s in corpus.load_sources() if s.meta.branch in _EXPECTED]
    if not sources:
        pytest.skip("the sample corpus has no eligibility branches yet")
    for src in sources:
        record = PaperRecord.model_validate(corpus.record_for(src))
        data = corpus.pdf_bytes_for(src)
        document = extract.extract_pdf_bytes(data) if data else None
        decision = assess(record, document)
        assert decision.decision == _EXPECTED[src.meta.branch], (src.meta.slug, decision.rule_ids)
        if src.meta.branch == "antarctic":
            assert "eligibility.southern_hemisphere" in decision.rule_ids
        if src.meta.branch == "subarctic":
            assert "eligibility.south_of_arctic_circle" in decision.rule_ids
