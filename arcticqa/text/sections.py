"""Section headings and reference entries: recognising them and naming their kind.

A heading's kind comes from its words (English and Russian names of the usual sections),
ignoring numbering such as ``2.``, ``3.1``, ``IV.`` or ``B.`` and letter-spacing
(``A B S T R A C T``). Back matter (references,
acknowledgements, author contributions, funding, competing interests, supplementary material,
data availability) is not evidence. A heading with an unknown name inherits the kind of the
section it sits in when it is a numbered sub-heading (``2.3 Ice cores`` inside Methods) or an
unnumbered one; an unknown top-level numbered heading starts an ``other`` section.
"""

from __future__ import annotations

import re

from arcticqa.text.spans import sentence_bounds

__all__ = [
    "EVIDENCE_KINDS",
    "NON_EVIDENCE_KINDS",
    "HeadingInfo",
    "classify_heading",
    "split_inline_heading",
    "CAPTION_START",
    "NON_EVIDENCE_LINE",
    "heading_words",
    "looks_like_reference",
    "split_run_in_heading",
    "cannot_be_heading",
    "figures_in",
]

EVIDENCE_KINDS = ("abstract", "introduction", "study_area", "methods", "results", "discussion",
                  "conclusions", "other")
NON_EVIDENCE_KINDS = ("front_matter", "references", "acknowledgements", "author_contributions",
                      "funding", "competing_interests", "supplementary", "data_availability",
                      "captions", "footnotes", "tables")

_NUMBERING = re.compile(r"^(?:(\d{1,2}(?:\.\d{1,2})*)\.?|([IVX]{1,5})\.|([A-H])[.)])\s+(?=\S)")
_LETTER_SPACED = re.compile(r"^(?:\w ){3,}\w$")

# Ordered: the first pattern that matches the whole (lower-cased, unnumbered) heading wins.
_KIND_PATTERNS: tuple[tuple[str, str], ...] = (
    ("abstract", r"abstract|summary|аннотация|резюме|реферат"),
    ("introduction", r"(?:\w+\s+)?introduction|background|введение|вступление"),
    ("study_area", r"(?:the\s+)?(?:study|research|field)\s+(?:area|areas|site|sites|region|location)s?"
                   r"(?:\s+and\s+.*)?|site\s+descriptions?|regional\s+setting|geographic(?:al)?\s+setting"
                   r"|район(?:ы)?\s+исследован\w*|объекты?\s+и\s+район\w*\s+исследован\w*"),
    ("methods", r"(?:materials?|data|data\s+sets?|datasets?)(?:\s+and\s+methods?|\s+and\s+methodology)?"
                r"|methods?|methodology|experimental(?:\s+\w+)?|approach|материалы?\s+и\s+методы\w*"
                r"|методы\w*|методика\w*"),
    ("results", r"results(?:\s+and\s+discussion)?|findings|результаты(?:\s+и\s+обсуждение)?"),
    ("discussion", r"discussion|обсуждение(?:\s+результатов)?"),
    ("conclusions", r"conclusions?|concluding\s+remarks|summary\s+and\s+conclusions?|"
                    r"conclusions?\s+and\s+(?:outlook|perspectives|implications)|заключение|выводы"),
    ("references", r"references(?:\s+cited)?|bibliography|literature\s+cited|cited\s+literature"
                   r"|список\s+литературы|литература"),
    ("acknowledgements", r"acknowledge?ments?|благодарност\w*"),
    ("author_contributions", r"(?:credit\s+)?author(?:s'?|'s|ship)?\s+contributions?(?:\s+statement)?"
                             r"|contributions"),
    ("funding", r"funding(?:\s+information|\s+sources?)?|financial\s+support|финансирование"),
    ("competing_interests", r"(?:declaration\s+of\s+)?(?:competing|conflicts?\s+of)\s+interests?"
                            r"|conflicts?\s+of\s+interest\s+statement|disclosure\s+statement"),
    ("supplementary", r"supplement(?:ary)?(?:\s+(?:material|materials|information|data))?"
                      r"|appendix\s+[a-z]\s*:?\s*supplementary.*"),
    ("data_availability", r"(?:data|code)(?:\s+and\s+code)?\s+availability(?:\s+statement)?"
                          r"|open\s+research"),
)
_COMPILED = tuple((kind, re.compile(rf"(?:{pattern})", re.IGNORECASE)) for kind, pattern in _KIND_PATTERNS)

#: a figure/table caption starts like "Figure 3.", "Fig. 2:", "Table 1 |", "Рис. 4."; or its label
#: stands alone on a line (IEEE's "TABLE I", cas-dc's "Table 1") and the caption follows
CAPTION_START = re.compile(
    r"^(?:(?:fig(?:ure)?\.?|table|tab\.|рис(?:унок)?\.?|таблица)\s*[A-Z]?\d+[a-z]?\s*[.:|—–-]"
    r"|(?:fig(?:ure)?\.?|table|рис(?:унок)?\.?|таблица)\s*(?:[A-Z]?\d+[a-z]?|[IVX]{1,5})$)",
    re.IGNORECASE)

#: lines that are never study evidence wherever they stand: corresponding-author and e-mail
#: notes, ORCIDs, "Preprint submitted to", IEEE's "Manuscript received", keyword lists (the
#: towns of affiliation notes must not become study sites)
NON_EVIDENCE_LINE = re.compile(
    r"^[∗*†‡§¶]?\s*(?:corresponding\s+authors?\b|e-?mail(?:\s+address(?:es)?)?\s*:|preprint\s+submitted\s+to\b"
    r"|manuscript\s+received\b|(?:received|accepted|published)\s*:?\s*\d|orcid|https?://orcid"
    r"|(?:digital\s+object\s+identifier|doi)\s*:?\s*10\.|key\s?words\s*[:—–-]|index\s+terms\s*[:—–-])",
    re.IGNORECASE)

_INLINE = re.compile(r"^(abstract|summary|аннотация)\s*(?:[.:]\s+|[—–-]\s*)(?=\S)", re.IGNORECASE)
_RUN_IN_END = re.compile(r"[\s.:—–-]+$")

# A reference entry: "[12] A. Surname, …"; "12. Surname, A. …" or "12. A. Surname …";
# "Surname, A. B., …" or "Surname A. 1999."
_INITIALS = r"(?:[A-Z]\.\s?-?){1,3}"
_SURNAME = r"[A-Z][^\W\d_]+(?:[-'’ ][A-Z][^\W\d_]+)?"
_REF_BRACKET = re.compile(r"^\[\d{1,3}\]\s*\S")
_REF_AUTHOR = re.compile(rf"^(?:\d{{1,3}}\.\s+)?(?:{_SURNAME},?\s+{_INITIALS}[,\s(]|{_INITIALS}\s?{_SURNAME}[,\s])")
_YEAR = re.compile(r"(?<!\d)(?:1[89]|20)\d{2}[a-z]?(?!\d)")
_AUTHOR_ANYWHERE = re.compile(rf"{_INITIALS}\s?{_SURNAME}|{_SURNAME},\s{_INITIALS}")


class HeadingInfo:
    """What a heading says: its kind (or ``None`` if unknown), numbering depth, evidence flag."""

    __slots__ = ("kind", "level", "numbered", "evidence")

    def __init__(self, kind: str | None, level: int, numbered: bool) -> None:
        self.kind = kind
        self.level = level
        self.numbered = numbered
        self.evidence = kind not in NON_EVIDENCE_KINDS

    def __repr__(self) -> str:
        return f"HeadingInfo(kind={self.kind!r}, level={self.level}, numbered={self.numbered})"


def heading_words(text: str) -> str:
    """``"A B S T R A C T"`` → ``"ABSTRACT"``; other text unchanged."""
    return text.replace(" ", "") if _LETTER_SPACED.match(text) else text


def numbering_of(title: str) -> tuple[str | None, int, int]:
    """(``"digits"``/``"roman"``/``"letter"`` or ``None``, level, length of the numbering)."""
    m = _NUMBERING.match(title)
    if not m:
        return None, 1, 0
    if m.group(1):
        return "digits", m.group(1).count(".") + 1, m.end()
    if m.group(2):
        return "roman", 1, m.end()
    return "letter", 2, m.end()


def classify_heading(title: str) -> HeadingInfo:
    """Kind, level and numbering of a heading's text."""
    text = heading_words(title.strip())
    level, numbered = 1, False
    style, depth, cut = numbering_of(text)
    if style is not None:
        # only digits and Roman numerals start a section: "A." is as likely an author's initial
        numbered = style in ("digits", "roman")
        level = depth
        text = text[cut:]
    words = re.sub(r"[\s:.]+$", "", text).strip().lower()
    words = re.sub(r"\s+", " ", words)
    for kind, pattern in _COMPILED:
        if pattern.fullmatch(words):
            return HeadingInfo(kind, level, numbered)
    return HeadingInfo(None, level, numbered)


def split_inline_heading(text: str) -> tuple[str, str] | None:
    """``"Abstract. We measured…"`` or IEEE's ``"Abstract—We…"`` → ``("Abstract", "We…")``."""
    m = _INLINE.match(text)
    if not m:
        return None
    return m.group(1), text[m.end():]


def split_run_in_heading(text: str, styled_lead: int) -> tuple[str, str] | None:
    """A heading run into its paragraph: ``"Results. The mean …"`` whose first ``styled_lead``
    characters are set in bold or italics → ``("Results", "The mean …")`` when the styled words
    are a known section name or a numbered title; otherwise ``None``."""
    if not 0 < styled_lead < min(len(text), 100):
        return None
    title = _RUN_IN_END.sub("", text[:styled_lead])
    rest = text[styled_lead:].lstrip(" .:—–-")
    if not title or not rest or not (rest[:1].isupper() or rest[:1].isdigit()):
        return None
    info = classify_heading(title)
    if info.kind is None and not info.numbered:
        return None
    return title, rest


#: a heading never ends on a word that needs another after it ("… to comprehend how its")
_OPEN_END = re.compile(r"\b(?:the|a|an|of|and|or|to|in|on|at|by|for|with|from|is|are|was|were|be|its|their|"
                       r"we|that|which|as|than)$", re.IGNORECASE)
#: ... and has a word of three letters or more (not "2 NO NM", an equation's indices)
_TITLE_WORD = re.compile(r"[^\W\d_]{3,}")
#: "12. Kim, B.-M. et al. Weakening of …": a numbered reference entry, year or not on its first line
_ENUMERATOR = re.compile(r"^\(?\w{1,3}\)\s")  # "1) Comparison", "(a) Sites"
_REF_AUTHOR_LIST = re.compile(rf"^(?:\d{{1,3}}\.\s+)?{_SURNAME},\s+{_INITIALS}[,\s(&]"
                              rf"|^\d{{1,3}}\.\s+{_SURNAME}\s+[A-Z]{{1,3}},\s")  # Vancouver: "48. Goodfellow I, …"


_YEAR_TOKEN = re.compile(r"(?<!\d)(?:1[89]|2[01])\d{2}(?!\d)")  # 1800–2199: projections run to 2100


def figures_in(title: str) -> int:
    """Digits in a title that are not years: a heading has few ("4.1 Volume change 2006–2100"
    has none), a figure's axis labels or a table row many."""
    return sum(ch.isdigit() for ch in _YEAR_TOKEN.sub("", title))


def cannot_be_heading(text: str) -> bool:
    """Whether a line's words rule it out as a heading whatever its style: it ends on a word that
    needs another (a list item or a sentence wrapped onto the next line), leaves a bracket open or
    closes one it did not open, has no word of three letters, or opens like a reference entry."""
    text = heading_words(text)
    body = _ENUMERATOR.sub("", text)
    if body.count("(") != body.count(")") or body.count("[") != body.count("]"):
        return True  # a fragment: a whole heading closes what it opens ("1997 [43]) PhyDNet …")
    return bool(_OPEN_END.search(text) or not _TITLE_WORD.search(text) or _REF_BRACKET.match(text)
                or _REF_AUTHOR_LIST.match(text) or looks_like_reference(text))


def looks_like_reference(text: str) -> bool:
    """Whether a paragraph has the shape of a reference-list entry: ``[n]`` with a year or an
    author, or an author (``Surname, I.`` / ``I. Surname``, optionally numbered ``n.``) with a year
    near the start. A body sentence has neither shape, and a paragraph of several sentences
    numbered ``[n]`` (AGU's numbered paragraphs, citing ``[Hansen et al., 2006]``) is prose."""
    head = text[:300]
    if _REF_BRACKET.match(head):
        if len(text) > 400 and len(sentence_bounds(text)) >= 3 and not _AUTHOR_ANYWHERE.search(head[:80]):
            return False
        return bool(_YEAR.search(head) or _AUTHOR_ANYWHERE.search(head[:80]))
    return bool(_REF_AUTHOR.match(head) and _YEAR.search(head[:150]))
