"""Stage: geographic eligibility — is a paper's study set in the Arctic?

A study is eligible when its primary study sites are Arctic: a terrestrial site at or north of
the Arctic Circle (66.56°N), or a marine site inside an eligible Arctic marine region (marginal
seas that straddle the circle only north of it, unless the policy says otherwise). Sites come
from three sources, kept apart with their evidence: the coordinate parser, the gazetteer, and the
``site_extractor`` LLM role (which only cites span ids; coordinates never come from the model).
A place named only as a bound or reference point ("between Iceland and …", "off X", "north of
X", "from X to Y") is a landmark, not a site; one named only as the setting of cited work ("as
in the European Alps (Huss, 2011)") is cited, not a site. The decision is ``eligible``,
``ineligible`` (with the rule of every failing site) or ``needs_review``; every site found —
including background mentions, landmarks and cited places that did not count — is listed in the
decision, which also carries the SHA-256 of the policy, region and gazetteer files.

Pure functions, no database and no Prefect: the runner persists the returned pydantic objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import shapely
from pydantic import BaseModel, Field

from arcticqa.evidence import Document
from arcticqa.geo.citations import cited_phrase
from arcticqa.geo.coordinates import parse_coordinates
from arcticqa.geo.gazetteer import Gazetteer, Place, load_gazetteer
from arcticqa.geo.landmarks import landmark_phrase
from arcticqa.geo.policy import EligibilityPolicy, load_eligibility_policy
from arcticqa.geo.regions import MarineRegion, RegionSet, load_regions, normalize_lon
from arcticqa.llm.types import RoleClient
from arcticqa.papers import PaperRecord
from arcticqa.rules import Rejection, rule

__all__ = [
    "SiteSource",
    "SiteKind",
    "SiteMention",
    "SiteVerdict",
    "EligibilityDecision",
    "ProposedSite",
    "SiteExtractorReply",
    "LLMSiteExtraction",
    "find_sites",
    "impossible_coordinates",
    "judge_sites",
    "decide_eligibility",
    "extract_sites_llm",
    "site_extractor_variables",
    "baseline_site_proposals",
    "assess",
    "EligibilityPolicy",
    "load_eligibility_policy",
    "SITE_EXTRACTOR_ROLE",
    "SITE_EXTRACTOR_PROMPT",
]

SITE_EXTRACTOR_ROLE = "site_extractor"
SITE_EXTRACTOR_PROMPT = "site_extractor/v1"

# --- rule ids --------------------------------------------------------------------------------
R_NORTH = rule("eligibility.site_north_of_circle", "site at or north of the Arctic Circle")
R_REGION = rule("eligibility.site_in_arctic_region", "marine site inside an eligible Arctic marine region")
R_SOUTH = rule("eligibility.south_of_arctic_circle", "site south of the Arctic Circle")
R_OUTSIDE = rule("eligibility.outside_arctic_regions", "marine site outside every eligible Arctic marine region")
R_SOUTHERN = rule("eligibility.southern_hemisphere", "site in the southern hemisphere (Antarctic or other)")
R_STRADDLE = rule("eligibility.site_straddles_circle",
                  "site or named sea straddles the Arctic Circle and nothing places it north")
R_SEA_MOSTLY_NORTH = rule("eligibility.sea_mostly_north",
                          "named marginal sea with at most the policy's small share of its area south of "
                          "the Arctic Circle (marginal_sea_south_share)")
R_BACKGROUND = rule("eligibility.background_mention",
                    "place named outside the study-site sections (or as background); not used")
R_LANDMARK = rule("eligibility.landmark_mention",
                  "place named as a bound or reference point (between X and Y, off X, north of X, "
                  "from X to Y), not as a study site; not used")
R_CITED = rule("eligibility.cited_mention",
                "place named only as the setting of cited work (as in X (Author, Year), similar to "
                "findings in X [12]), not as a study site; not used")
R_UNLOCATED = rule("eligibility.site_unlocated",
                   "site named by the model but neither in the gazetteer nor given coordinates in its span")
R_REFINED = rule("eligibility.region_refined_by_site",
                  "a straddling region or large feature made precise by a study site inside it; not used")
R_NO_SITE = rule("eligibility.no_site_found", "no primary study site found")
R_IMPOSSIBLE = rule("eligibility.impossible_coordinate",
                    "text written as a coordinate that cannot be one (e.g. latitude beyond 90°); not used")
R_LAB = rule("eligibility.lab_or_model_only", "laboratory or model-only study with no Arctic site")
R_MIXED = rule("eligibility.mixed_sites", "some primary study sites are Arctic and some are not")
R_UNCERTAIN = rule("eligibility.uncertain_sites", "some primary study sites cannot be placed on either side")
R_NO_MAJORITY = rule("eligibility.no_majority", "neither eligible nor ineligible sites are a majority")
R_LLM_SPAN = rule("eligibility.llm_span_unresolved", "site_extractor cited a span id that does not exist")
R_LLM_NAME = rule("eligibility.llm_name_not_in_span",
                  "site_extractor named a site that its cited span does not contain")

SiteSource = Literal["coordinates", "gazetteer", "llm"]
SiteKind = Literal["land", "sea", "unknown"]
Verdict = Literal["eligible", "ineligible", "uncertain", "background", "landmark", "cited", "unlocated",
                  "context"]

# a coordinate this close to a gazetteer name (characters, degrees) is taken to be that place
_NEAR_CHARS = 120
_NEAR_DEG_LAT = 1.0
_NEAR_DEG_LON = 3.0
_NEAR_DEG_LON_EXTENT = 20.0
_LLM_SPAN_BUDGET_CHARS = 60_000
# a site refines a straddling feature when it lies in the feature's latitudes and this near in longitude
_REFINE_DEG_LON = 40.0


class SiteMention(BaseModel):
    """One place or coordinate found in the text, with the evidence that names it."""

    source: SiteSource
    name: str  # canonical place name, or the coordinate as written
    text: str  # the exact matched text
    span_id: str  # a Document span id, or "abstract" / "title" / "document"
    section: str
    start: int  # offsets into that span's text (into Document.text for span_id "document")
    end: int
    lat: float | None = None
    lon: float | None = None
    lat_min: float | None = None
    lat_max: float | None = None
    kind: SiteKind = "unknown"
    place: str | None = None  # gazetteer name, when the site is (or sits next to) a known place
    region_hint: str | None = None  # the marine region a named sea is judged by
    primary: bool = True
    doc_start: int | None = None  # offset in Document.text, when known
    landmark: str | None = None  # the phrase naming the place as a bound or reference point
    cited: str | None = None  # the phrase naming the place as the setting of cited work


class SiteVerdict(BaseModel):
    """How the rule judged one mention."""

    mention: SiteMention
    site_key: str
    region: str | None = None
    verdict: Verdict
    rule_id: str
    reason: str

    @property
    def eligible(self) -> bool | None:
        return {"eligible": True, "ineligible": False}.get(self.verdict)


class EligibilityDecision(BaseModel):
    """The stage's result for one paper."""

    paper_id: str
    decision: Literal["eligible", "ineligible", "needs_review"]
    rule_ids: list[str]
    message: str
    rejections: list[Rejection] = Field(default_factory=list)
    warnings: list[Rejection] = Field(default_factory=list)
    sites: list[SiteVerdict] = Field(default_factory=list)
    lab_model_cue: str | None = None
    site_rule: str
    policy_version: str
    policy_sha256: str
    regions_sha256: str
    gazetteer_sha256: str

    def explain_json(self) -> dict[str, Any]:
        """The ``eligibility explain --json`` object."""
        return {
            "paper_id": self.paper_id,
            "decision": self.decision,
            "rule_ids": self.rule_ids,
            "message": self.message,
            "sites": [{
                "name": v.mention.name, "lat": v.mention.lat, "lon": v.mention.lon,
                "lat_min": v.mention.lat_min, "lat_max": v.mention.lat_max,
                "kind": v.mention.kind, "source": v.mention.source, "region": v.region,
                "eligible": v.eligible, "verdict": v.verdict, "rule_id": v.rule_id, "reason": v.reason,
                "span_id": v.mention.span_id, "section": v.mention.section, "text": v.mention.text,
                "primary": v.mention.primary, "landmark": v.mention.landmark, "cited": v.mention.cited,
            } for v in self.sites],
            "warnings": [w.model_dump() for w in self.warnings],
            "site_rule": self.site_rule,
            "policy_version": self.policy_version,
            "policy_sha256": self.policy_sha256,
            "regions_sha256": self.regions_sha256,
            "gazetteer_sha256": self.gazetteer_sha256,
        }


# --- the text a paper offers -----------------------------------------------------------------
@dataclass(frozen=True)
class _Piece:
    span_id: str
    section: str
    text: str
    doc_start: int | None


def _pieces(document: Document | None, paper: PaperRecord) -> list[_Piece]:
    pieces: list[_Piece] = []
    has_text = document is not None and document.status == "ok" and bool(document.text)
    if document is not None and has_text:
        if document.spans:
            pieces.extend(_Piece(s.id, s.section, s.text, s.start) for s in document.spans)
        elif document.sections:
            pieces.extend(_Piece("document", sec.kind, document.text[sec.start:sec.end], sec.start)
                          for sec in document.sections)
        else:
            pieces.append(_Piece("document", "other", document.text, 0))
    else:
        # abstract-only: the title is all the setting evidence there is besides the abstract
        if paper.title:
            pieces.append(_Piece("title", "title", paper.title, None))
    if paper.abstract:
        pieces.append(_Piece("abstract", "abstract", paper.abstract, None))
    return pieces


def _assets(policy: EligibilityPolicy | None) -> tuple[EligibilityPolicy, RegionSet, Gazetteer]:
    pol = policy if policy is not None else load_eligibility_policy()
    return pol, load_regions(pol.regions_file), load_gazetteer(pol.gazetteer_file)


def _place_fields(place: Place) -> dict[str, Any]:
    return {"lat": place.lat, "lon": place.lon, "lat_min": place.lat_min, "lat_max": place.lat_max,
            "kind": place.kind, "place": place.name, "region_hint": place.region}


def _near_place(lat: float, lon: float | None, place: Place, regions: RegionSet) -> int | None:
    """How specific a match ``place`` is for a coordinate (0 best), or None if it lies elsewhere."""
    if place.region is not None:
        j = regions.index_of(place.region)
        if j is None:
            return None
        if lon is not None:
            return 1 if bool(shapely.intersects_xy(regions.geometries[j], float(normalize_lon(lon)), lat)) else None
        _, miny, _, maxy = regions.geometries[j].bounds
        return 1 if miny <= lat <= maxy else None
    dlon = None if lon is None else abs((lon - place.lon + 180.0) % 360.0 - 180.0)
    if place.lat_min is not None and place.lat_max is not None:
        inside = place.lat_min <= lat <= place.lat_max and (dlon is None or dlon <= _NEAR_DEG_LON_EXTENT)
        return 2 if inside else None
    near = abs(lat - place.lat) <= _NEAR_DEG_LAT and (dlon is None or dlon <= _NEAR_DEG_LON)
    return 0 if near else None


def find_sites(document: Document | None, paper: PaperRecord,
               policy: EligibilityPolicy | None = None) -> list[SiteMention]:
    """Deterministic sites: coordinates and gazetteer places in the document's spans and the abstract.

    A coordinate written next to a gazetteer name that lies near it is attached to that place
    (taking its land/sea kind), so "Ny-Ålesund (78.92°N, 11.93°E)" is one land site, not two.
    A place named as a bound or reference point is marked as a landmark and lends nothing to a
    coordinate beside it: in "between Iceland and Greenland (68°N, 25°W)" the point is the site.
    A place named only as the setting of cited work is marked as cited and lends nothing either.
    """
    pol, regions, gaz = _assets(policy)
    primary_sections = set(pol.primary_sections)
    out: list[SiteMention] = []
    seen: set[tuple[Any, ...]] = set()
    for piece in _pieces(document, paper):
        primary = piece.section in primary_sections
        places = gaz.find(piece.text)
        coords = parse_coordinates(piece.text).coordinates
        anchors = [(pm.start, pm.end) for pm in places] + [(c.start, c.end) for c in coords]
        landmarks = {pm.start: landmark_phrase(piece.text, pm.start, pm.end, anchors) for pm in places}
        cited = {pm.start: cited_phrase(piece.text, pm.start, pm.end) for pm in places}
        for pm in places:
            doc_start = piece.doc_start + pm.start if piece.doc_start is not None else None
            key = ("gazetteer", doc_start if doc_start is not None else (piece.span_id, pm.start), pm.end - pm.start)
            if key in seen:
                continue
            seen.add(key)
            out.append(SiteMention(source="gazetteer", name=pm.place.name, text=pm.text, span_id=piece.span_id,
                                   section=piece.section, start=pm.start, end=pm.end, primary=primary,
                                   doc_start=doc_start, landmark=landmarks[pm.start], cited=cited[pm.start],
                                   **_place_fields(pm.place)))
        for c in coords:
            doc_start = piece.doc_start + c.start if piece.doc_start is not None else None
            key = ("coordinates", doc_start if doc_start is not None else (piece.span_id, c.start), c.end - c.start)
            if key in seen:
                continue
            seen.add(key)
            ranked = []
            for pm in places:
                if landmarks[pm.start] is not None or cited[pm.start] is not None:
                    continue
                chars = min(abs(pm.start - c.end), abs(c.start - pm.end))
                rank = _near_place(c.lat, c.lon, pm.place, regions) if chars <= _NEAR_CHARS else None
                if rank is not None:
                    ranked.append((rank, chars, pm.place))
            ranked.sort(key=lambda t: (t[0], t[1]))
            place = ranked[0][2] if ranked else None
            out.append(SiteMention(
                source="coordinates", name=c.text, text=c.text, span_id=piece.span_id, section=piece.section,
                start=c.start, end=c.end, lat=c.lat, lon=c.lon, lat_min=c.lat_min, lat_max=c.lat_max,
                kind=place.kind if place is not None else "unknown",
                place=place.name if place is not None else None,
                # without a longitude, the named sea next to it is the only way to place it
                region_hint=place.region if place is not None and c.lon is None else None,
                primary=primary, doc_start=doc_start))
    return out


_ANGLE_MARK = re.compile(r"[°º˚◦∘⁰ᵒ′'’″]|\bdeg|\blat|\blon", re.IGNORECASE)


def impossible_coordinates(document: Document | None, paper: PaperRecord) -> list[Rejection]:
    """Warnings for coordinates the parser refused (``95°N, 200°E``), so a paper whose only
    coordinates are impossible says so instead of a bare "no site found"."""
    out: list[Rejection] = []
    for piece in _pieces(document, paper):
        for r in parse_coordinates(piece.text).rejected:
            if not _ANGLE_MARK.search(r.text):
                continue  # "−2.4 W m⁻²" was refused as a coordinate, but nobody wrote it as one
            out.append(R_IMPOSSIBLE.reject(f"{r.text!r} in {piece.span_id} ({piece.section}): {r.reason}",
                                           span_id=piece.span_id, text=r.text, reason=r.reason))
    return out


# --- judging ---------------------------------------------------------------------------------
def _site_key(m: SiteMention) -> str:
    if m.place:
        return f"place:{m.place}"
    if m.lat is None:
        return f"name:{m.name.casefold()}"
    if m.lat_min is not None and m.lat_max is not None:
        return f"band:{m.lat_min:.1f}..{m.lat_max:.1f}"
    if m.lon is None:
        return f"lat:{m.lat:.1f}"
    return f"pt:{m.lat:.1f},{m.lon:.1f}"


def _admits(region: MarineRegion, pol: EligibilityPolicy) -> bool | None:
    """True: every point of the region counts; None: only north of the circle; False: none."""
    rule_of: str = region.eligibility
    if rule_of == "policy:hudson_bay":
        rule_of = pol.hudson_bay
    if rule_of == "eligible":
        return True
    if rule_of == "ineligible":
        return False
    return True if pol.marginal_seas == "whole_region" else None


def _judge(m: SiteMention, containing: list[MarineRegion], pol: EligibilityPolicy,
           south_share: float | None = None) -> tuple[Verdict, str, str, str | None]:
    """(verdict, rule id, reason, region shown) for one located, primary mention.

    ``south_share`` is given for a sea named without coordinates: the share of its area south of
    the circle.
    """
    circle = pol.arctic_circle_lat
    assert m.lat is not None
    lo = m.lat_min if m.lat_min is not None else m.lat
    hi = m.lat_max if m.lat_max is not None else m.lat
    if m.kind == "land":
        containing = []  # a land site is judged by latitude and never placed in a marine polygon
    admitting = [r for r in containing if _admits(r, pol) is not False]
    shown = admitting or containing
    region_name = shown[0].name if shown else None
    where = f" ({region_name})" if region_name else ""
    if hi < 0:
        what = "Antarctic" if hi <= -60 else "southern hemisphere"
        return "ineligible", R_SOUTHERN.id, f"{what} site at {-hi:.2f}°S{where}", region_name
    band = m.lat_min is not None and m.lat_max is not None
    if lo < 0:
        if hi < circle:  # the Andes (55°S–11°N): no part of it reaches the circle
            return ("ineligible", R_SOUTH.id, f"extent {-lo:.2f}°S–{hi:.2f}°N lies south of {circle}°N",
                    region_name)
        return "uncertain", R_STRADDLE.id, "latitude band crosses the equator", region_name
    if m.kind == "land":
        if lo >= circle:
            return "eligible", R_NORTH.id, f"terrestrial site at {lo:.2f}°N ≥ {circle}°N", region_name
        if hi < circle:
            if band:
                return ("ineligible", R_SOUTH.id,
                        f"terrestrial extent {lo:.2f}–{hi:.2f}°N lies south of {circle}°N", region_name)
            return "ineligible", R_SOUTH.id, f"terrestrial site at {hi:.2f}°N < {circle}°N", region_name
        return "uncertain", R_STRADDLE.id, f"extent {lo:.2f}–{hi:.2f}°N crosses {circle}°N", region_name
    # marine (or unknown) sites: region membership first, then latitude
    kind = m.kind
    if kind == "sea" and not containing and m.lon is None:
        kind = "unknown"  # a sea latitude with no longitude and no named sea: latitude is all we have
    for r in containing:
        admits = _admits(r, pol)
        if admits is True:
            return "eligible", R_REGION.id, f"inside {r.name} (eligible region)", r.name
        if admits is None and lo >= circle:
            return "eligible", R_REGION.id, f"inside {r.name} at {lo:.2f}°N ≥ {circle}°N", r.name
    if kind == "unknown" and lo >= circle:
        return "eligible", R_NORTH.id, f"site at {lo:.2f}°N ≥ {circle}°N", region_name
    straddling = [r for r in containing if _admits(r, pol) is None]
    if straddling and hi >= circle and south_share is not None and south_share <= pol.marginal_sea_south_share:
        # a sliver south of the circle (the head of the Gulf of Ob) does not make "the Kara Sea" a
        # place that may lie south of it
        return ("eligible", R_SEA_MOSTLY_NORTH.id,
                f"{straddling[0].name}: {south_share:.1%} of its area lies south of {circle}°N "
                f"(at most {pol.marginal_sea_south_share:.0%})", straddling[0].name)
    if straddling and hi >= circle:
        return ("uncertain", R_STRADDLE.id,
                f"{straddling[0].name} straddles {circle}°N and nothing places the site north of it",
                straddling[0].name)
    if kind == "sea":
        if containing:
            return ("ineligible", R_OUTSIDE.id,
                    f"in {containing[0].name} at {hi:.2f}°N, where it is not eligible", containing[0].name)
        return "ineligible", R_OUTSIDE.id, f"marine site at {hi:.2f}°N outside every eligible region", None
    return "ineligible", R_SOUTH.id, f"site at {hi:.2f}°N < {circle}°N{where}", region_name


def judge_sites(mentions: Iterable[SiteMention], policy: EligibilityPolicy | None = None) -> list[SiteVerdict]:
    """Judge every mention; region membership is computed for all points in one vectorised call."""
    pol, regions, _gaz = _assets(policy)
    ms = list(mentions)
    idx = [i for i, m in enumerate(ms) if m.lat is not None and m.lon is not None and m.region_hint is None]
    member = (regions.membership(np.array([ms[i].lat for i in idx], dtype=float),
                                 np.array([ms[i].lon for i in idx], dtype=float))
              if idx else np.zeros((0, len(regions)), dtype=bool))
    row_of = {i: k for k, i in enumerate(idx)}
    out: list[SiteVerdict] = []
    for i, m in enumerate(ms):
        key = _site_key(m)
        if not m.primary:
            out.append(SiteVerdict(mention=m, site_key=key, verdict="background", rule_id=R_BACKGROUND.id,
                                   reason=f"named in section '{m.section}', which does not locate the study"))
            continue
        if m.landmark is not None:
            out.append(SiteVerdict(mention=m, site_key=key, verdict="landmark", rule_id=R_LANDMARK.id,
                                   reason=f"named as a bound or reference point ({m.landmark!r}), not as a site"))
            continue
        if m.cited is not None:
            out.append(SiteVerdict(mention=m, site_key=key, verdict="cited", rule_id=R_CITED.id,
                                   reason=f"named as the setting of cited work ({m.cited!r}), not as a site"))
            continue
        if m.lat is None:
            out.append(SiteVerdict(mention=m, site_key=key, verdict="unlocated", rule_id=R_UNLOCATED.id,
                                   reason="no gazetteer entry and no coordinates in the cited span"))
            continue
        containing: list[MarineRegion] = []
        south_share: float | None = None
        if m.region_hint is not None:
            j = regions.index_of(m.region_hint)
            if j is not None:
                containing = [regions.regions[j]]
                if m.lat_min is None and m.source != "coordinates":
                    # a named sea without coordinates spans the whole region's latitudes
                    _, miny, _, maxy = regions.geometries[j].bounds
                    m = m.model_copy(update={"lat_min": round(miny, 2), "lat_max": round(maxy, 2)})
                    south_share = regions.south_share(j, pol.arctic_circle_lat)
        elif i in row_of:
            containing = [regions.regions[j] for j in np.flatnonzero(member[row_of[i]])]
        verdict, rule_id, reason, region = _judge(m, containing, pol, south_share)
        out.append(SiteVerdict(mention=m, site_key=key, region=region, verdict=verdict, rule_id=rule_id,
                               reason=reason))
    return out


# --- deciding: decide_eligibility's steps, in its order ----------------------------------------

_Decision = Literal["eligible", "ineligible", "needs_review"]

#: verdicts that are listed in the decision but never count as a study site
_NOT_STUDY_SITES = ("background", "landmark", "cited", "unlocated")
#: which source's verdict stands for a site found by several: coordinates, then a gazetteer name,
#: then a model's name
_SOURCE_RANK = {"coordinates": 0, "gazetteer": 1, "llm": 2}


@dataclass(frozen=True)
class _StudySites:
    """The distinct primary study sites that count, and the same split by verdict."""

    all: list[SiteVerdict]
    eligible: list[SiteVerdict]
    ineligible: list[SiteVerdict]
    uncertain: list[SiteVerdict]

    @classmethod
    def of(cls, verdicts: list[SiteVerdict]) -> _StudySites:
        return cls(all=verdicts,
                   eligible=[v for v in verdicts if v.verdict == "eligible"],
                   ineligible=[v for v in verdicts if v.verdict == "ineligible"],
                   uncertain=[v for v in verdicts if v.verdict == "uncertain"])


@dataclass(frozen=True)
class _Ruling:
    """What the policy makes of the study sites: the decision, its rule ids and the rejections."""

    decision: _Decision
    rule_ids: list[str]
    rejections: list[Rejection]
    lab_model_cue: str | None = None


def _one_verdict_per_site(verdicts: list[SiteVerdict]) -> list[SiteVerdict]:
    """The verdicts of the study sites, one per distinct site (by ``site_key``), the best source's."""
    by_site: dict[str, SiteVerdict] = {}
    for v in verdicts:
        if v.verdict in _NOT_STUDY_SITES:
            continue
        cur = by_site.get(v.site_key)
        if cur is None or _SOURCE_RANK[v.mention.source] < _SOURCE_RANK[cur.mention.source]:
            by_site[v.site_key] = v
    return list(by_site.values())


def _regions_refined(sites: list[SiteVerdict]) -> dict[str, list[str]]:
    """Uncertain broad sites (a latitude extent) with a located site inside them: key → those sites' names.

    "Zackenberg, Northeast Greenland": the broad feature is context once a site inside it is known.
    """
    refined: dict[str, list[str]] = {}
    for v in sites:
        m = v.mention
        if v.verdict != "uncertain" or m.lat_min is None or m.lat_max is None:
            continue
        inside = [s.mention.name for s in sites
                  if s is not v and s.verdict in ("eligible", "ineligible") and s.mention.lat is not None
                  and s.mention.lat_min is None and m.lat_min <= s.mention.lat <= m.lat_max
                  and (s.mention.lon is None or m.lon is None
                       or abs((s.mention.lon - m.lon + 180.0) % 360.0 - 180.0) <= _REFINE_DEG_LON)]
        if inside:
            refined[v.site_key] = inside
    return refined


def _as_context(verdicts: list[SiteVerdict], refined: Mapping[str, list[str]]) -> list[SiteVerdict]:
    """``verdicts`` with each uncertain verdict of a refined site turned into context."""
    return [v.model_copy(update={"verdict": "context", "rule_id": R_REFINED.id,
                                 "reason": f"made precise by {', '.join(refined[v.site_key])}"})
            if v.site_key in refined and v.verdict == "uncertain" else v for v in verdicts]


def _names(vs: list[SiteVerdict]) -> list[str]:
    # one site can be found twice (a coordinate beside two different place names): say it once
    return list(dict.fromkeys(v.mention.name for v in vs))


def _reasons(vs: list[SiteVerdict]) -> str:
    return "; ".join(dict.fromkeys(f"{v.mention.name}: {v.reason}" for v in vs))


def _site_rules(vs: list[SiteVerdict]) -> list[str]:
    return sorted({v.rule_id for v in vs})


def _failing_sites(vs: list[SiteVerdict]) -> list[Rejection]:
    """One rejection per rule id the sites ``vs`` fail by, naming the sites and their spans."""
    out = []
    for rid in _site_rules(vs):
        members = [v for v in vs if v.rule_id == rid]
        out.append(Rejection(rule_id=rid, stage="eligibility",
                             message=_reasons(members),
                             evidence={"sites": _names(members),
                                       "spans": list(dict.fromkeys(v.mention.span_id for v in members))}))
    return out


def _lab_model_cue(document: Document | None, paper: PaperRecord, pol: EligibilityPolicy) -> str | None:
    """The first of the policy's laboratory/model cues found in the primary sections' text."""
    texts = [p.text for p in _pieces(document, paper) if p.section in set(pol.primary_sections)]
    for text in texts:
        for cue in pol.lab_model_cues:
            m = re.search(cue, text, flags=re.IGNORECASE)
            if m:
                return m.group(0)
    return None


def _rule_without_sites(verdicts: list[SiteVerdict], cue: str | None) -> _Ruling:
    """No study site: ineligible when the text reads as lab/model-only, else a person looks.

    The rejection names what was found and did not count (landmarks, cited and background places).
    """
    unlocated = [v for v in verdicts if v.verdict == "unlocated"]
    background = [v for v in verdicts if v.verdict == "background"]
    landmarks = [v for v in verdicts if v.verdict == "landmark"]
    cited = [v for v in verdicts if v.verdict == "cited"]
    if cue is not None:
        return _Ruling("ineligible", [R_LAB.id], [R_LAB.reject(
            f"no study site found and the text reads as lab/model-only (cue: {cue!r})", cue=cue,
            background=_names(background))], lab_model_cue=cue)
    return _Ruling("needs_review", [R_NO_SITE.id], [R_NO_SITE.reject(
        "no primary study site found"
        + (f"; landmarks: {', '.join(_names(landmarks))}" if landmarks else "")
        + (f"; named with cited work: {', '.join(_names(cited))}" if cited else "")
        + (f"; background mentions: {', '.join(_names(background))}" if background else ""),
        background=_names(background), landmarks=_names(landmarks), cited=_names(cited),
        unlocated=_names(unlocated))])


def _apply_site_rule(sites: _StudySites, pol: EligibilityPolicy) -> tuple[_Decision, list[str]]:
    """The decision and its rule ids by the policy's ``site_rule`` (and ``on_mixed``)."""
    eligible, ineligible, uncertain = sites.eligible, sites.ineligible, sites.uncertain
    if pol.site_rule == "any":
        if eligible:
            return "eligible", _site_rules(eligible)
        if uncertain:
            return "needs_review", [R_UNCERTAIN.id, *_site_rules(uncertain)]
        return "ineligible", _site_rules(ineligible)
    if pol.site_rule == "majority":
        n = len(sites.all)
        if 2 * len(eligible) > n:
            return "eligible", _site_rules(eligible)
        if 2 * len(ineligible) > n:
            return "ineligible", _site_rules(ineligible)
        return "needs_review", [R_NO_MAJORITY.id]
    # all
    if not ineligible and not uncertain:
        return "eligible", _site_rules(eligible)
    if ineligible and not eligible and not uncertain:
        return "ineligible", _site_rules(ineligible)
    if ineligible and eligible:
        if pol.on_mixed == "ineligible":
            return "ineligible", [R_MIXED.id, *_site_rules(ineligible)]
        return "needs_review", [R_MIXED.id]
    if ineligible and pol.on_mixed == "ineligible":
        # an uncertain site that proved Arctic would make the paper mixed: dropped either way
        return "ineligible", [R_UNCERTAIN.id, *_site_rules(ineligible)]
    # an uncertain site may hold the Arctic part of the study (Greenland beside the Andes in a
    # global glacier study): a person decides, as for a mixed paper
    return "needs_review", [R_UNCERTAIN.id, *_site_rules(uncertain)]


def _rule_on_sites(sites: _StudySites, pol: EligibilityPolicy) -> _Ruling:
    """The site rule's decision, with a rejection per failing rule and one for mixed, uncertain or
    no-majority sites."""
    decision, rule_ids = _apply_site_rule(sites, pol)
    eligible, ineligible, uncertain = sites.eligible, sites.ineligible, sites.uncertain
    rejections: list[Rejection] = []
    if decision == "ineligible":
        rejections.extend(_failing_sites(ineligible))
    if R_MIXED.id in rule_ids:
        rejections.insert(0, R_MIXED.reject(
            f"Arctic: {', '.join(_names(eligible))}; not Arctic: {', '.join(_names(ineligible))}",
            eligible=_names(eligible), ineligible=_names(ineligible)))
    if R_UNCERTAIN.id in rule_ids:
        rejections.append(R_UNCERTAIN.reject(
            _reasons(uncertain) + (f"; not Arctic: {', '.join(_names(ineligible))}" if ineligible else ""),
            sites=_names(uncertain), ineligible=_names(ineligible)))
    if R_NO_MAJORITY.id in rule_ids:
        rejections.append(R_NO_MAJORITY.reject(
            f"{len(eligible)} eligible, {len(ineligible)} ineligible, {len(uncertain)} uncertain of "
            f"{len(sites.all)}",
            eligible=_names(eligible), ineligible=_names(ineligible), uncertain=_names(uncertain)))
    return _Ruling(decision, rule_ids, rejections)


def _message(ruling: _Ruling, sites: _StudySites, pol: EligibilityPolicy) -> str:
    if ruling.decision == "eligible":
        return f"eligible: {len(sites.eligible)} of {len(sites.all)} primary sites are Arctic ({pol.site_rule})"
    return ("ineligible: " if ruling.decision == "ineligible" else "needs review: ") + ", ".join(ruling.rule_ids)


def decide_eligibility(paper: PaperRecord, sites: Iterable[SiteMention],
                       policy: EligibilityPolicy | None = None, *,
                       document: Document | None = None,
                       warnings: Iterable[Rejection] = ()) -> EligibilityDecision:
    """Judge ``sites`` and combine the primary ones by the policy's site rule.

    The steps: judge every site (:func:`judge_sites`); keep one verdict per distinct site, the
    best source's; make a broad region with a located site inside it context; then rule on the
    study sites left by the policy's ``site_rule``, or, with none left, on the laboratory/model
    cues of the text. ``document`` is only read for those cues.
    """
    pol, regions, gaz = _assets(policy)
    verdicts = judge_sites(sites, pol)
    candidates = _one_verdict_per_site(verdicts)
    refined = _regions_refined(candidates)
    verdicts = _as_context(verdicts, refined)
    study = _StudySites.of([v for v in candidates if v.site_key not in refined])
    if study.all:
        ruling = _rule_on_sites(study, pol)
    else:
        ruling = _rule_without_sites(verdicts, _lab_model_cue(document, paper, pol))
    return EligibilityDecision(
        paper_id=paper.paperId, decision=ruling.decision, rule_ids=list(dict.fromkeys(ruling.rule_ids)),
        message=_message(ruling, study, pol), rejections=ruling.rejections, warnings=list(warnings),
        sites=verdicts, lab_model_cue=ruling.lab_model_cue, site_rule=pol.site_rule,
        policy_version=pol.version, policy_sha256=pol.sha256, regions_sha256=regions.sha256,
        gazetteer_sha256=gaz.sha256,
    )


# --- the site_extractor role -----------------------------------------------------------------
class ProposedSite(BaseModel):
    """A site the model says the study used, named by the span that names it."""

    name: str = Field(description="the site's name exactly as written in the cited span")
    span_id: str = Field(description="id of the span whose text names the site")
    kind: SiteKind = Field("unknown", description="land, sea, or unknown")
    role: Literal["study_site", "background"] = Field(
        "study_site", description="study_site if data were collected/modelled there, else background")


class SiteExtractorReply(BaseModel):
    sites: list[ProposedSite] = Field(default_factory=list)


class LLMSiteExtraction(BaseModel):
    """What the role contributed, after checking every citation; with the call's provenance."""

    sites: list[SiteMention] = Field(default_factory=list)
    rejections: list[Rejection] = Field(default_factory=list)
    provenance: dict[str, Any] = Field(default_factory=dict)


def site_extractor_variables(document: Document | None, paper: PaperRecord,
                             policy: EligibilityPolicy | None = None) -> dict[str, Any]:
    """The prompt variables: the paper's primary-section spans (capped), each with its id."""
    pol = policy if policy is not None else load_eligibility_policy()
    primary = set(pol.primary_sections)
    spans: list[dict[str, str]] = []
    budget = _LLM_SPAN_BUDGET_CHARS
    for piece in _pieces(document, paper):
        if piece.section not in primary or piece.span_id == "document":
            continue
        if len(piece.text) > budget:
            break
        budget -= len(piece.text)
        spans.append({"id": piece.span_id, "section": piece.section, "text": piece.text})
    return {"paper_id": paper.paperId, "title": paper.title or "", "spans": spans}


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().casefold()


def _resolve_piece(span_id: str, document: Document | None, paper: PaperRecord) -> _Piece | None:
    if document is not None:
        span = document.span(span_id)
        if span is not None:
            return _Piece(span.id, span.section, span.text, span.start)
    for piece in _pieces(None, paper):
        if piece.span_id == span_id:
            return piece
    return None


def _anchors(text: str, gaz: Gazetteer) -> list[tuple[int, int]]:
    """Where ``text`` names a place or writes a coordinate (the ends of "from X to Y")."""
    return ([(pm.start, pm.end) for pm in gaz.find(text)]
            + [(c.start, c.end) for c in parse_coordinates(text).coordinates])


def _landmark_only(name: str, text: str, gaz: Gazetteer) -> str | None:
    """The bound phrase when every mention of ``name`` in ``text`` names it as a landmark, else None."""
    hits = list(re.finditer(re.escape(name), text, flags=re.IGNORECASE))
    if not hits:
        return None
    anchors = _anchors(text, gaz)
    phrases = [landmark_phrase(text, h.start(), h.end(), anchors) for h in hits]
    return phrases[0] if all(phrases) else None


def _cited_only(name: str, text: str) -> str | None:
    """The citing phrase when every mention of ``name`` in ``text`` names the setting of cited work."""
    hits = list(re.finditer(re.escape(name), text, flags=re.IGNORECASE))
    if not hits:
        return None
    phrases = [cited_phrase(text, h.start(), h.end()) for h in hits]
    return phrases[0] if all(phrases) else None


def _mention_from_proposal(ps: ProposedSite, piece: _Piece, gaz: Gazetteer,
                           pol: EligibilityPolicy) -> SiteMention:
    at = _norm(piece.text).find(_norm(ps.name))
    # map the normalised hit back approximately: exact search first, then case-insensitive
    start = piece.text.find(ps.name)
    if start < 0:
        m = re.search(re.escape(ps.name), piece.text, flags=re.IGNORECASE)
        start = m.start() if m else max(at, 0)
    end = start + len(ps.name)
    base: dict[str, Any] = {
        "source": "llm", "name": ps.name, "text": piece.text[start:end] or ps.name, "span_id": piece.span_id,
        "section": piece.section, "start": start, "end": end, "kind": "unknown",
        "primary": piece.section in set(pol.primary_sections) and ps.role == "study_site",
        "doc_start": piece.doc_start + start if piece.doc_start is not None else None,
        "landmark": _landmark_only(ps.name, piece.text, gaz),
        "cited": _cited_only(ps.name, piece.text),
    }
    place = gaz.lookup(ps.name)
    if place is None:
        inner = gaz.find(ps.name)
        place = inner[0].place if inner else None
    if place is not None:
        base.update(_place_fields(place))
        base["name"] = place.name
        return SiteMention(**base)
    coords = parse_coordinates(piece.text).coordinates
    if coords:
        c = min(coords, key=lambda c: min(abs(c.start - end), abs(start - c.end)))
        base.update(lat=c.lat, lon=c.lon, lat_min=c.lat_min, lat_max=c.lat_max)
    return SiteMention(**base)


async def extract_sites_llm(document: Document | None, paper: PaperRecord, llm: RoleClient,
                            policy: EligibilityPolicy | None = None) -> LLMSiteExtraction:
    """Ask ``site_extractor`` for study sites; keep only those whose cited span names them.

    The model's coordinates are never used: a kept site is located through the gazetteer, or by
    the coordinates written in its cited span, or stays unlocated (listed, not decisive). A site
    its span names only as a bound or reference point ("off X") is kept as a landmark, and one it
    names only as the setting of cited work ("as in X (Author, Year)") as cited.
    """
    pol, _regions, gaz = _assets(policy)
    variables = site_extractor_variables(document, paper, pol)
    reply = await llm.ask(SITE_EXTRACTOR_ROLE, SITE_EXTRACTOR_PROMPT, variables, SiteExtractorReply,
                          subject=paper.paperId)
    result = LLMSiteExtraction(provenance={
        "role": reply.role, "provider": reply.provider, "model": reply.model,
        "prompt_version": reply.prompt_version, "request_hash": reply.request_hash, "cached": reply.cached,
        "cost_usd": reply.cost_usd,
    })
    for ps in reply.output.sites:
        piece = _resolve_piece(ps.span_id, document, paper)
        if piece is None:
            result.rejections.append(R_LLM_SPAN.reject(
                f"site {ps.name!r} cites span {ps.span_id!r}, which does not exist", name=ps.name,
                span_id=ps.span_id))
            continue
        if not ps.name.strip() or _norm(ps.name) not in _norm(piece.text):
            result.rejections.append(R_LLM_NAME.reject(
                f"site {ps.name!r} is not in the text of span {ps.span_id!r}", name=ps.name,
                span_id=ps.span_id))
            continue
        result.sites.append(_mention_from_proposal(ps, piece, gaz, pol))
    return result


def baseline_site_proposals(variables: Mapping[str, Any]) -> SiteExtractorReply:
    """A rule-based stand-in for the role (offline provider): every gazetteer name in the spans
    that is not named as a bound or reference point, nor as the setting of cited work, there."""
    gaz = load_gazetteer(load_eligibility_policy().gazetteer_file)
    sites: list[ProposedSite] = []
    seen: set[tuple[str, str]] = set()
    for span in variables.get("spans", []):
        text = str(span.get("text", ""))
        anchors = _anchors(text, gaz)
        for pm in gaz.find(text):
            if (landmark_phrase(text, pm.start, pm.end, anchors) is not None
                    or cited_phrase(text, pm.start, pm.end) is not None):
                continue
            key = (pm.place.name, str(span["id"]))
            if key not in seen:
                seen.add(key)
                sites.append(ProposedSite(name=pm.text, span_id=str(span["id"]), kind=pm.place.kind))
    return SiteExtractorReply(sites=sites)


def assess(paper: PaperRecord, document: Document | None = None,
           llm_sites: LLMSiteExtraction | list[SiteMention] | None = None,
           policy: EligibilityPolicy | None = None) -> EligibilityDecision:
    """Deterministic sites plus (optionally) the role's checked sites, decided by the policy."""
    pol = policy if policy is not None else load_eligibility_policy()
    sites = find_sites(document, paper, pol)
    warnings: list[Rejection] = impossible_coordinates(document, paper)
    if isinstance(llm_sites, LLMSiteExtraction):
        sites += llm_sites.sites
        warnings += llm_sites.rejections
    elif llm_sites:
        sites += llm_sites
    return decide_eligibility(paper, sites, pol, document=document, warnings=warnings)
