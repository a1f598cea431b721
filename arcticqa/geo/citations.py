"""Places named only as the setting of other work, with its citation: not the study's own sites.

In "scaling laws were taken from the literature: some fitted globally (…), one for the European
Alps (Chen and Ohmura, 1990)" or "similar to findings in the Alps [12]" the place belongs to the
cited study. :func:`cited_phrase` recognises such a mention when both hold:

- a citation follows the place at once (after, at most, a list of further places): an author-year
  parenthesis "(Huss, 2011)", "(Chen and Ohmura, 1990; …)", "(e.g. Huss et al., 2011)", a narrative
  "by Huss (2011)", or a bracketed number "[12]", "[3, 4]", "[5–7]";
- the words before it frame the place as other work's: a comparison or likeness right before it,
  over at most a few fillers ("similar to findings in the", "as in the", "compared with those of",
  "unlike", "like those in", "consistent with", "than in", "previous studies in"), or, anywhere
  earlier in the sentence, the literature itself ("from the literature", "previously published")
  with the place introduced by for/in/from/on/over. Not "like X" or "such as X", which introduce
  examples (often the study's own sites), nor "as well as in X", which adds a site.

Both are needed: a citation alone often describes the study's own site ("at Zackenberg (Meltofte
and others, 2008)"), and a comparison alone often names a second site ("we compared Abisko with
Kiruna"). A site wrongly taken for cited stops voting and could hide a non-Arctic site, so the
cues are few and literal; bare parenthesised numbers "(12)" are not read as citations, since
region numbers and figure counts are written the same way.
"""

from __future__ import annotations

import re

__all__ = ["cited_phrase"]

_FLAGS = re.IGNORECASE
_WINDOW = 300

# --- the citation after the place ---------------------------------------------------------------
_NAME = r"(?:(?:van|von|de|der|den|du|da|la|le)\s+)*[A-ZÀ-ÖØ-Þ][\w'’\-]*"
_AUTHORS = rf"{_NAME}(?:\s+(?:and|&)\s+{_NAME}|\s+et\s+al\.?|\s+and\s+others)?"
_YEAR = r"(?:1[89]|20)\d{2}[a-z]?"
_LEAD = r"(?:(?:e\.\s?g\.|i\.\s?e\.|see(?:\s+also)?|cf\.|after|following)[,\s]+)?"
_PAREN_CITATION = rf"\({_LEAD}{_AUTHORS},?\s+{_YEAR}(?:[,;][^()]{{0,300}})?\)"
_NARRATIVE_CITATION = rf"(?:by|in)\s+{_AUTHORS}\s+\({_YEAR}(?:[,;][^()]{{0,100}})?\)"
_NUMBER_CITATION = r"\[\d{1,3}(?:\s*[,–\-]\s*\d{1,3})*\]"
# "the Alps and the Andes (…)": further places in a list may stand between the place and the citation
_MORE_PLACES = r"(?:\s*(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)(?:the\s+)?[A-ZÀ-ÖØ-Þ][\w'’\-]*(?:\s+[A-ZÀ-ÖØ-Þ][\w'’\-]*){0,3}){0,4}"
_CITATION_AFTER = re.compile(
    rf"{_MORE_PLACES}(?:\s*(?:{_PAREN_CITATION}|{_NUMBER_CITATION})|\s+{_NARRATIVE_CITATION})")

# --- the framing before the place ---------------------------------------------------------------
_COMPASS_ADJ = r"(?:(?:north|south)-?(?:east|west)|north|south|east|west)(?:ern)?"
_WHAT = (r"(?:findings|results|studies|study|observations|values|estimates|those|that|measurements|"
         r"glaciers|ice\s+caps|ones|work|data|conditions|trends|records|relations(?:hips)?|"
         r"laws|parameters|coefficients|rates|sites?|areas?|regions?)")
_FILLER = (rf"(?:the\s+)?(?:{_WHAT}\s+(?:(?:reported|found|obtained|observed|measured|made|derived)\s+)?"
           rf"(?:in|at|for|from|on|of|over)\s+(?:the\s+)?)?(?:{_COMPASS_ADJ}\s+)?")
_LIKENESS = (r"(?:similar\s+to|(?<!such\s)(?<!well\s)as\s+(?:in|at|for|on|from|over|with)|unlike|like(?=\s+(?:those|that)\s)|"
             r"(?:consistent|in\s+(?:agreement|line|accordance))\s+with|comparable\s+(?:to|with)|"
             r"analogous\s+to|contrary\s+to|in\s+contrast\s+(?:to|with)|than(?:\s+(?:in|at|for|on|over|from))?|"
             r"compared\s+(?:to|with)|in\s+comparison\s+(?:to|with)|"
             r"(?:previous|earlier|other|prior|published)\s+(?:\w+\s+)?(?:studies|study|work|results|"
             r"findings|estimates|measurements|analyses|investigations|assessments|surveys)\s+"
             r"(?:(?:made|conducted|carried\s+out|performed|done|reported|published)\s+)?"
             r"(?:in|at|for|from|on|of|over))")
_NEAR_CUE = re.compile(rf"\b{_LIKENESS}\s+{_FILLER}$", _FLAGS)
# "similar to the Alps and the Andes (…)": the places listed before this one share its framing
_LISTED = re.compile(r"(?:(?:the\s+)?[A-ZÀ-ÖØ-Þ][\w'’\-]*(?:\s+[A-ZÀ-ÖØ-Þ][\w'’\-]*){0,3}"
                     r"\s*(?:,\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+)){1,4}(?:the\s+)?")
_WORD_START = re.compile(r"(?<![\w'’\-])(?=\S)")
_LITERATURE = re.compile(r"\b(?:literature|previously\s+(?:published|reported|proposed|derived)|"
                         r"published\s+(?:by|in|for))\b", _FLAGS)
_INTRODUCED = re.compile(rf"\b(?:for|in|from|on|over)\s+{_FILLER}$", _FLAGS)

# where a sentence does not end: inside parentheses and after common abbreviations
_PARENS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_ABBREV = re.compile(r"\b(?:al|e\.g|i\.e|cf|Fig|Figs|Eq|Eqs|approx|ca|vs|resp|Sect|No)\.", _FLAGS)
# a colon does not end the framing: "from the literature: global ones (…) and one for the Alps (…)"
_STOP = re.compile(r"[.;!?]")


def _sentence_before(text: str, pos: int) -> str:
    """The sentence (or clause after a semicolon) that runs up to ``pos``, with its parentheses and
    abbreviations blanked so that "(Radić and Hock, 2010; Bahr, 2012)" or "et al." do not end it."""
    window = text[max(0, pos - _WINDOW):pos]
    masked = _PARENS.sub(lambda m: " " * len(m.group(0)), window)
    masked = _ABBREV.sub(lambda m: " " * len(m.group(0)), masked)
    stops = list(_STOP.finditer(masked))
    return masked[stops[-1].end():] if stops else masked


def _ends_with(pattern: re.Pattern[str], sentence: str) -> re.Match[str] | None:
    """``pattern`` (anchored at the end) found at the end of ``sentence``, or before a list of places
    that ends it ("than estimates for the European Alps and the "); the shortest list is tried
    first, so in "Unlike Svalbard and " the cue is "Unlike" and the list "Svalbard and "."""
    m = pattern.search(sentence)
    if m is not None:
        return m
    for w in reversed(list(_WORD_START.finditer(sentence))):
        if _LISTED.fullmatch(sentence, w.start()):
            m = pattern.search(sentence, 0, w.start())
            if m is not None:
                return m
    return None


def cited_phrase(text: str, start: int, end: int) -> str | None:
    """The phrase naming ``text[start:end]`` as the setting of cited work, or None."""
    after = _CITATION_AFTER.match(text, end)
    if after is None:
        return None
    sentence = _sentence_before(text, start)
    base = start - len(sentence)
    m = _ends_with(_NEAR_CUE, sentence)
    if m is None:
        lit = _LITERATURE.search(sentence)
        m = _ends_with(_INTRODUCED, sentence) if lit is not None else None
        if m is None or lit is None or lit.start() > m.start():
            return None
        m = lit
    return " ".join(text[base + m.start():after.end()].split())
