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

__all__ = ["DirectionTerm", "DIRECTION_AXES", "RUSSIAN_STEMS", "direction_terms", "is_direction_reversal", "antonyms",
           "terms_reverse"]


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
                                                      "upward", "upwards", "enhancement", "enhanced",
                                                      "doubled", "tripled", "quadrupled"],
               _forms("decrease", "decline", "reduce", "drop", "diminish", "fall")
               + ["reduction", "reductions", "fell", "fallen", "downward", "downwards", "dropped",
                  "dropping", "lessened", "decay", "halved"]),
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


#: Russian direction words by stem (Russian inflects too much for a list of forms): stem -> (axis, polarity).
#: Several published v1 items are Russian ("на 0,01–0,04 … больше" against "… меньше").
RUSSIAN_STEMS: dict[str, tuple[str, int]] = {
    "увелич": ("change", +1), "уменьш": ("change", -1), "рост": ("change", +1), "вырос": ("change", +1),
    "возрос": ("change", +1), "сниж": ("change", -1), "сниз": ("change", -1), "сокращ": ("change", -1),
    "повыш": ("change", +1), "пониж": ("change", -1), "потепл": ("temperature", +1),
    "похолод": ("temperature", -1), "теплее": ("temperature", +1), "холоднее": ("temperature", -1),
    "больше": ("comparison", +1), "меньше": ("comparison", -1), "выше": ("comparison", +1),
    "ниже": ("comparison", -1), "более": ("comparison", +1), "менее": ("comparison", -1),
    "раньше": ("timing", +1), "позже": ("timing", -1), "позднее": ("timing", -1),
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

_NEGATORS = {"not", "no", "never", "without", "neither", "nor", "не", "нет", "без"}


def _lookup(token: str) -> DirectionTerm | None:
    term = _INDEX.get(token)
    if term is not None or not token[:1] or not ("\u0400" <= token[0] <= "\u04ff"):
        return term
    for stem, (axis, polarity) in RUSSIAN_STEMS.items():
        if token.startswith(stem):
            return DirectionTerm(token, axis, polarity)
    return None


def direction_terms(text: str) -> list[DirectionTerm]:
    """The direction words in ``text`` (a preceding "not"/"no" flips the polarity)."""
    toks = words(text)
    out: list[DirectionTerm] = []
    for i, tok in enumerate(toks):
        term = _lookup(tok)
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
    """Whether ``option`` states the opposite direction of ``answer`` on a shared axis.

    True when some shared axis has one polarity on each side and they differ. False when every
    shared axis has the same single polarity on both sides. None when not comparable: one side
    has no direction word, they share no axis, or a side states both polarities ("increased
    then decreased").
    """
    return terms_reverse(direction_terms(answer), direction_terms(option))


def terms_reverse(ta: list[DirectionTerm], to: list[DirectionTerm]) -> bool | None:
    """:func:`is_direction_reversal` on direction terms already read."""
    if not ta or not to:
        return None
    shared = {t.axis for t in ta} & {t.axis for t in to}
    clean_same = 0
    for axis in shared:
        pa = {t.polarity for t in ta if t.axis == axis}
        po = {t.polarity for t in to if t.axis == axis}
        if len(pa) != 1 or len(po) != 1:
            continue  # "decreased in May, increased in November": no clean direction on this axis
        if pa != po:
            return True  # "started later and exceeded the rise" reverses "started earlier and …"
        clean_same += 1
    return False if shared and clean_same == len(shared) else None
