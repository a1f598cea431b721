"""Metadata prefilter: one test per rule id, the policy file's errors, and odd records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from arcticqa.errors import InputError
from arcticqa.papers import PaperRecord
from arcticqa.rules import all_rules
from arcticqa.stages.prefilter import (
    DEFAULT_POLICY_PATH,
    MetadataPolicy,
    detect_language,
    load_metadata_policy,
    prefilter,
    server_filters_from_policy,
)

ABSTRACT_EN = ("We measured sea ice thickness in the Fram Strait with upward-looking sonar moorings "
               "between 1990 and 2020 and found that the ice has thinned by one third over the record.")
ABSTRACT_RU = ("Рассматривается динамика многолетней мерзлоты на полуострове Ямал по данным "
               "наблюдений за температурой грунтов в скважинах, которые были выполнены в 2000–2020 гг.")


@pytest.fixture(scope="module")
def policy() -> MetadataPolicy:
    return load_metadata_policy()


def _paper(**fields: Any) -> PaperRecord:
    base: dict[str, Any] = {
        "paperId": "p1", "title": "Thinning of Arctic sea ice in the Fram Strait", "abstract": ABSTRACT_EN,
        "year": 2021, "publicationTypes": ["JournalArticle"],
        "openAccessPdf": {"url": "https://example.org/p1.pdf", "status": "GOLD"},
    }
    base.update(fields)
    return PaperRecord.model_validate(base)


def test_good_paper_passes_and_records_the_policy(policy: MetadataPolicy) -> None:
    decision = prefilter(_paper(), policy)
    assert decision.disposition == "pass" and decision.rejections == []
    assert decision.policy_version == "1" and len(decision.policy_sha256) == 64
    assert decision.policy_sha256 == policy.sha256
    assert decision.language == "en" and "arctic" in decision.arctic_keywords


def test_russian_paper_passes(policy: MetadataPolicy) -> None:
    decision = prefilter(_paper(title="Мерзлота Ямала", abstract=ABSTRACT_RU), policy)
    assert decision.disposition == "pass", decision.rule_ids
    assert decision.language == "ru"
    assert {"многолетнемерзл", "ямал"} - set(decision.arctic_keywords) == {"многолетнемерзл"}


@pytest.mark.parametrize("fields,rule_id", [
    ({"title": None}, "prefilter.missing_title"),
    ({"title": "   "}, "prefilter.missing_title"),
    ({"title": "Arctic sea ice \ufffd thickness"}, "prefilter.garbled_text"),
    ({"abstract": ABSTRACT_EN.replace("sonar", "sonÃ©r")}, "prefilter.garbled_text"),
    ({"abstract": ABSTRACT_EN + "\x07"}, "prefilter.garbled_text"),
    ({"year": None}, "prefilter.year_missing"),
    ({"year": 1066}, "prefilter.year_out_of_range"),
    ({"year": 30000}, "prefilter.year_out_of_range"),
    ({"year": -5}, "prefilter.year_out_of_range"),
    ({"publicationTypes": ["Review", "JournalArticle"]}, "prefilter.publication_type_excluded"),
    ({"publicationTypes": ["Editorial"]}, "prefilter.publication_type_excluded"),
    ({"publicationTypes": ["MetaAnalysis"]}, "prefilter.publication_type_excluded"),
    ({"title": "Erratum: Thinning of Arctic sea ice"}, "prefilter.nonresearch_title"),
    ({"title": "Corrigendum to 'Arctic sea ice'"}, "prefilter.nonresearch_title"),
    ({"title": "Book review: The Arctic Ocean"}, "prefilter.nonresearch_title"),
    ({"title": "Reply to comment on Arctic sea ice"}, "prefilter.nonresearch_title"),
    ({"abstract": None}, "prefilter.no_abstract"),
    ({"abstract": "Arctic sea ice."}, "prefilter.no_abstract"),
    ({"openAccessPdf": None}, "prefilter.no_open_access_pdf"),
    ({"openAccessPdf": {"url": "", "status": "CLOSED"}}, "prefilter.no_open_access_pdf"),
    ({"abstract": "Die Meereisdicke in der Arktis wurde mit Sonar gemessen, und die Ergebnisse "
                  "zeigen, dass das Eis in der Framstraße dünner wird als erwartet wurde."},
     "prefilter.language_not_allowed"),
    ({"title": "Thinning of Antarctic sea-level records",
      "abstract": ABSTRACT_EN.replace("sea ice", "shelf water").replace("Fram Strait", "Ross Sea")},
     "prefilter.not_arctic_relevant"),
])
def test_each_rule_fires(policy: MetadataPolicy, fields: dict[str, Any], rule_id: str) -> None:
    decision = prefilter(_paper(**fields), policy)
    assert decision.disposition == "reject"
    assert rule_id in decision.rule_ids
    assert all(r.stage == "prefilter" and r.message for r in decision.rejections)


def test_every_declared_prefilter_rule_is_exercised() -> None:
    declared = {r.id for r in all_rules() if r.stage == "prefilter"}
    tested = {"prefilter.missing_title", "prefilter.garbled_text", "prefilter.year_missing",
              "prefilter.year_out_of_range", "prefilter.publication_type_excluded",
              "prefilter.nonresearch_title", "prefilter.no_abstract", "prefilter.no_open_access_pdf",
              "prefilter.language_not_allowed", "prefilter.not_arctic_relevant"}
    assert declared == tested


def test_record_with_only_an_id_gets_every_applicable_rule(policy: MetadataPolicy) -> None:
    decision = prefilter(PaperRecord(paperId="bare"), policy)
    assert decision.disposition == "reject"
    assert set(decision.rule_ids) == {"prefilter.missing_title", "prefilter.year_missing",
                                      "prefilter.no_abstract", "prefilter.no_open_access_pdf",
                                      "prefilter.not_arctic_relevant"}
    assert decision.language == "unknown"


def test_local_pdf_counts_and_institutional_access_can_drop_the_pdf_rule(
        policy: MetadataPolicy) -> None:
    assert prefilter(_paper(openAccessPdf=None, localPdf="pdfs/p1.pdf"), policy).disposition == "pass"
    relaxed = policy.model_copy(update={
        "open_access": policy.open_access.model_copy(update={"require_pdf": False})})
    assert prefilter(_paper(openAccessPdf=None), relaxed).disposition == "pass"
    assert relaxed.sha256 != policy.sha256
    assert server_filters_from_policy(relaxed).open_access_pdf is False
    assert server_filters_from_policy(policy).open_access_pdf is True
    assert server_filters_from_policy(policy).year == f"{policy.years.min}-{policy.years.max}"


def test_missing_types_pass_by_default_but_can_be_required(policy: MetadataPolicy) -> None:
    assert prefilter(_paper(publicationTypes=None), policy).disposition == "pass"
    strict = policy.model_copy(update={
        "publication_types": policy.publication_types.model_copy(update={"allow_missing": False})})
    assert prefilter(_paper(publicationTypes=None), strict).rule_ids == ["prefilter.publication_type_excluded"]


def test_keyword_matching_is_word_start_prefix(policy: MetadataPolicy) -> None:
    hits = prefilter(_paper(title="Pan-Arctic greening", abstract=ABSTRACT_EN.replace("Fram Strait", "x")),
                     policy).arctic_keywords
    assert "arctic" in hits
    antarctic = prefilter(_paper(title="Antarctic krill", abstract="Krill of the Antarctic. " * 10), policy)
    assert "prefilter.not_arctic_relevant" in antarctic.rule_ids


@pytest.mark.parametrize("text,expected", [
    (ABSTRACT_EN, "en"),
    (ABSTRACT_RU, "ru"),
    ("Досліджено динаміку морського льоду в Арктиці за супутниковими даними і їх порівняння.", "uk"),
    ("La glace de mer dans l'Arctique est étudiée avec des données satellitaires pour la période.", "fr"),
    ("short", "unknown"),
    ("北極海の海氷は過去数十年で急速に減少しており、その影響は生態系全体に及んでいる。" * 2, "other"),
])
def test_language_heuristic(text: str, expected: str) -> None:
    assert detect_language(text) == expected


def test_shipped_policy_is_the_default() -> None:
    assert DEFAULT_POLICY_PATH.is_file()
    assert load_metadata_policy(DEFAULT_POLICY_PATH).sha256 == load_metadata_policy().sha256


def test_policy_hash_ignores_comments(tmp_path: Path) -> None:
    text = DEFAULT_POLICY_PATH.read_text(encoding="utf-8")
    copy = tmp_path / "p.toml"
    copy.write_text("# an extra comment\n" + text, encoding="utf-8")
    assert load_metadata_policy(copy).sha256 == load_metadata_policy().sha256
    copy.write_text(text.replace("min_chars = 100", "min_chars = 101"), encoding="utf-8")
    assert load_metadata_policy(copy).sha256 != load_metadata_policy().sha256


@pytest.mark.parametrize("content,field,line", [
    ('version = "1"\n[years]\nmin = \n', None, 3),
    ('version = "1"\n[years]\nminimum = 1990\n', "years.minimum", None),
    ('version = "1"\n[years]\nmin = 2020\nmax = 2000\n', "years", None),
    ('[years]\nmin = 1990\n', "version", None),
    ('version = "1"\n[publication_types]\nnonresearch_title_patterns = ["(unclosed"]\n',
     "publication_types.nonresearch_title_patterns", None),
])
def test_bad_policy_files_name_the_field_or_line(tmp_path: Path, content: str, field: str | None,
                                                 line: int | None) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_metadata_policy(path)
    assert err.value.path == str(path)
    assert err.value.field == field
    assert err.value.line == line


def test_missing_policy_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        load_metadata_policy(tmp_path / "absent.toml")
