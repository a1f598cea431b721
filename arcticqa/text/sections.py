"""Section headings: recognising them and naming their kind.

A heading's kind comes from its words (English and Russian names of the usual sections),
ignoring numbering such as ``2.``, ``3.1`` or ``IV.``. Back matter (references,
acknowledgements, author contributions, funding, competing interests, supplementary material,
data availability) is not evidence. A heading with an unknown name inherits the kind of the
section it sits in when it is a numbered sub-heading (``2.3 Ice cores`` inside Methods) or an
unnumbered one; an unknown top-level numbered heading starts an ``other`` section.
"""

from __future__ import annotations

import re

__all__ = [
    "EVIDENCE_KINDS",
    "NON_EVIDENCE_KINDS",
    "HeadingInfo",
    "classify_heading",
    "split_inline_heading",
    "is_known_heading",
    "CAPTION_START",
]

EVIDENCE_KINDS = ("abstract", "introduction", "study_area", "methods", "results", "discussion",
                  "conclusions", "other")
NON_EVIDENCE_KINDS = ("front_matter", "references", "acknowledgements", "author_contributions",
                      "funding", "competing_interests", "supplementary", "data_availability",
                      "captions")

_NUMBERING = re.compile(r"^(?:(\d+(?:\.\d+)*)\.?|([IVX]+)\.|([A-H])[.)])\s+(?=\S)")

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
    ("author_contributions", r"author(?:s'?|'s)?\s+contributions?|contributions"),
    ("funding", r"funding(?:\s+information|\s+sources?)?|financial\s+support|финансирование"),
    ("competing_interests", r"(?:declaration\s+of\s+)?(?:competing|conflicts?\s+of)\s+interests?"
                            r"|conflicts?\s+of\s+interest\s+statement|disclosure\s+statement"),
    ("supplementary", r"supplement(?:ary)?(?:\s+(?:material|materials|information|data))?"
                      r"|appendix\s+[a-z]\s*:?\s*supplementary.*"),
    ("data_availability", r"(?:data|code)(?:\s+and\s+code)?\s+availability(?:\s+statement)?"
                          r"|open\s+research"),
)
_COMPILED = tuple((kind, re.compile(rf"(?:{pattern})", re.IGNORECASE)) for kind, pattern in _KIND_PATTERNS)

#: a figure/table caption starts like "Figure 3.", "Fig. 2:", "Table 1 |", "Рис. 4."
CAPTION_START = re.compile(
    r"^(?:fig(?:ure)?\.?|table|tab\.|рис(?:унок)?\.?|таблица)\s*[A-Z]?\d+[a-z]?\s*[.:|—–-]",
    re.IGNORECASE)

_INLINE = re.compile(r"^(abstract|summary|аннотация)\s*[.:—–-]\s+(?=\S)", re.IGNORECASE)


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


def classify_heading(title: str) -> HeadingInfo:
    """Kind, level and numbering of a heading's text."""
    text = title.strip()
    level, numbered = 1, False
    m = _NUMBERING.match(text)
    if m:
        # only digits count as numbering: "A." and "V." are as likely to be author initials
        numbered = bool(m.group(1))
        if m.group(1):
            level = m.group(1).count(".") + 1
        text = text[m.end():]
    words = re.sub(r"[\s:.]+$", "", text).strip().lower()
    words = re.sub(r"\s+", " ", words)
    for kind, pattern in _COMPILED:
        if pattern.fullmatch(words):
            return HeadingInfo(kind, level, numbered)
    return HeadingInfo(None, level, numbered)


def is_known_heading(title: str) -> bool:
    return classify_heading(title).kind is not None


def split_inline_heading(text: str) -> tuple[str, str] | None:
    """``"Abstract. We measured…"`` → ``("Abstract", "We measured…")``; otherwise ``None``."""
    m = _INLINE.match(text)
    if not m:
        return None
    return m.group(1), text[m.end():]
