"""Direction words and their antonyms: the table behind ``is_direction_reversal``.

Each word maps to an *axis* (what changes: amount, temperature, thickness, timing, ...) and a
*polarity* (+1/-1). Two words reverse each other when they share an axis and have opposite
polarity. Word forms are listed explicitly (no stemmer) so that the table can be audited; the
reference method's six pairs left most direction distractors to a model, this table covers the
vocabulary of Arctic change studies.
"""

from __future__ import annotations

from dataclasses import dataclass

from arcticqa.gates.text import words

__all__ = ["DirectionTerm", "DIRECTION_AXES", "direction_terms", "is_direction_reversal", "antonyms"]


def _forms(*stems: str) -> list[str]:
    """Common inflections of verb/noun stems: "increase" -> increase(s/d), increasing."""
    out: list[str] = []
    for stem in stems:
        out.append(stem)
        if stem.endswith("e"):
            out += [stem + "s", stem + "d", stem[:-1] + "ing"]
        elif stem.endswith("y") and len(stem) > 3:
            out += [stem[:-1] + "ies", stem[:-1] + "ied", stem + "ing"]
        else:
            out += [stem + "s", stem + "ed", stem + "ing"]
    return out


#: axis -> (words of polarity +1, words of polarity -1)
DIRECTION_AXES: dict[str, tuple[list[str], list[str]]] = {
    "change": (_forms("increase", "rise", "grow") + ["rose", "risen", "grew", "grown", "growth",
                                                      "upward", "upwards", "enhancement", "enhanced"],
               _forms("decrease", "decline", "reduce", "drop", "diminish", "fall")
               + ["reduction", "reductions", "fell", "fallen", "downward", "downwards", "dropped",
                  "dropping", "lessened", "decay"]),
    "comparison": (["higher", "greater", "larger", "more", "bigger", "highest", "greatest",
                    "largest", "most", "above", "exceeded", "exceeds"],
                   ["lower", "smaller", "less", "fewer", "lesser", "lowest", "smallest", "least",
                    "fewest", "below"]),
    "sign": (["positive", "positively"], ["negative", "negatively"]),
    "timing": (["earlier", "earliest", "sooner", "advanced"],
               ["later", "latest", "delayed", "delay", "postponed"]),
    "mass": (_forms("gain", "accumulate") + ["accumulation", "net gain"],
             _forms("lose") + ["loss", "losses", "lost", "ablation"]),
    "extent": (_forms("expand", "widen", "lengthen") + ["expansion", "longer", "wider", "broader"],
               _forms("contract", "narrow", "shorten", "shrink") + ["contraction", "shrank", "shrunk",
                                                                    "shorter", "narrower"]),
    "temperature": (_forms("warm") + ["warmer", "warmest", "hotter"],
                    _forms("cool") + ["cooler", "coolest", "colder", "coldest"]),
    "thickness": (_forms("thicken") + ["thicker", "thickest"],
                  _forms("thin") + ["thinner", "thinnest", "thinned", "thinning"]),
    "glacier_front": (["advance", "advances", "advancing", "readvance"],
                      _forms("retreat")),
    "speed": (_forms("accelerate") + ["acceleration", "faster", "fastest", "speedup"],
              _forms("decelerate", "slow") + ["deceleration", "slower", "slowest", "slowdown"]),
    "depth": (_forms("deepen") + ["deeper", "deepest"],
              _forms("shoal") + ["shallower", "shallowest", "shoaling"]),
    "strength": (_forms("strengthen", "intensify") + ["stronger", "strongest", "intensification"],
                 _forms("weaken") + ["weaker", "weakest", "weakening"]),
    "meridional": (["northward", "northwards", "poleward", "polewards", "north"],
                   ["southward", "southwards", "equatorward", "equatorwards", "south"]),
    "zonal": (["eastward", "eastwards", "east"], ["westward", "westwards", "west"]),
    "vertical": (["upslope", "uphill", "upstream", "upwelling"],
                 ["downslope", "downhill", "downstream", "downwelling"]),
    "moisture": (["wetter", "wetting", "moister"], ["drier", "dryer", "drying"]),
    "salinity": (["saltier", "salinification", "salinization"], ["fresher", "freshening", "freshened"]),
    "vegetation": (["greening"], ["browning"]),
    "isotope": (["enriched", "enrichment"], ["depleted", "depletion"]),
    "flux": (["source", "emission", "emissions", "release", "released", "outgassing"],
             ["sink", "uptake", "absorption", "absorbed", "sequestration"]),
    "phase": (_forms("freeze") + ["froze", "frozen", "freezeup", "freeze-up"],
              _forms("thaw", "melt") + ["thawed", "melted"]),
    "presence": (["present", "presence", "detected", "found"], ["absent", "absence", "undetected"]),
    "age": (["older", "oldest"], ["younger", "youngest"]),
    "weight": (["heavier", "heaviest"], ["lighter", "lightest"]),
}


@dataclass(frozen=True)
class DirectionTerm:
    word: str
    axis: str
    polarity: int


_INDEX: dict[str, DirectionTerm] = {}
for _axis, (_pos, _neg) in DIRECTION_AXES.items():
    for _w in _pos:
        _INDEX.setdefault(_w, DirectionTerm(_w, _axis, +1))
    for _w in _neg:
        _INDEX.setdefault(_w, DirectionTerm(_w, _axis, -1))

_NEGATORS = {"not", "no", "never", "without", "neither", "nor"}


def direction_terms(text: str) -> list[DirectionTerm]:
    """The direction words in ``text`` (a preceding "not"/"no" flips the polarity)."""
    toks = words(text)
    out: list[DirectionTerm] = []
    for i, tok in enumerate(toks):
        term = _INDEX.get(tok)
        if term is None:
            continue
        if i > 0 and toks[i - 1] in _NEGATORS:
            term = DirectionTerm(term.word, term.axis, -term.polarity)
        out.append(term)
    return out


def antonyms(word: str) -> list[str]:
    """Words of the same axis and opposite polarity (empty if ``word`` is not in the table)."""
    term = _INDEX.get(word.casefold())
    if term is None:
        return []
    pos, neg = DIRECTION_AXES[term.axis]
    return list(neg if term.polarity > 0 else pos)


def is_direction_reversal(answer: str, option: str) -> bool | None:
    """Whether ``option`` states the opposite direction of ``answer`` on the same axis.

    None when not comparable: one side has no direction word, or they share no axis. False when
    they share an axis with the same polarity (or the option hedges with both polarities).
    """
    ta, to = direction_terms(answer), direction_terms(option)
    if not ta or not to:
        return None
    shared = {t.axis for t in ta} & {t.axis for t in to}
    if not shared:
        return None
    for axis in shared:
        pa = {t.polarity for t in ta if t.axis == axis}
        po = {t.polarity for t in to if t.axis == axis}
        if len(pa) != 1 or len(po) != 1:
            return False  # "increased then decreased": not a clean reversal
        if pa == po:
            return False
    return True
