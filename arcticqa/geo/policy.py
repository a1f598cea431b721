"""The geographic eligibility policy: a TOML file loaded into :class:`EligibilityPolicy`.

The policy, like the region and gazetteer files it names, is fixed for a build; the SHA-256 of
its bytes is recorded with every decision, so a decision can always be traced to its rules.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from arcticqa.errors import InputError

__all__ = ["EligibilityPolicy", "DEFAULT_POLICY_PATH", "load_eligibility_policy"]

DEFAULT_POLICY_PATH = Path(__file__).resolve().parents[2] / "data" / "policies" / "eligibility.toml"


class EligibilityPolicy(BaseModel):
    """The choices of the eligibility rule (see ``data/policies/eligibility.toml``)."""

    model_config = ConfigDict(extra="forbid")

    version: str
    arctic_circle_lat: float = Field(66.56, ge=60.0, le=70.0)
    site_rule: Literal["all", "any", "majority"] = "all"
    on_mixed: Literal["needs_review", "ineligible"] = "needs_review"
    marginal_seas: Literal["north_of_circle", "whole_region"] = "north_of_circle"
    #: a bare mention of a marginal sea counts as north of the circle when at most this share of
    #: its area lies south of it (0 = only a sea wholly north of the circle)
    marginal_sea_south_share: float = Field(0.0, ge=0.0, le=0.5)
    hudson_bay: Literal["ineligible", "eligible", "north_of_circle"] = "ineligible"
    primary_sections: list[str] = Field(
        default_factory=lambda: ["title", "abstract", "study_area", "methods", "results", "other"])
    lab_model_cues: list[str] = Field(default_factory=list)
    regions_file: Path
    gazetteer_file: Path
    #: filled by the loader: where the policy came from and the hash of its bytes
    source_path: Path | None = None
    sha256: str = ""

    @field_validator("lab_model_cues")
    @classmethod
    def _cues_compile(cls, cues: list[str]) -> list[str]:
        for cue in cues:
            try:
                re.compile(cue)
            except re.error as exc:
                raise ValueError(f"bad regular expression {cue!r}: {exc}") from exc
        return cues


def _toml_line(message: str) -> int | None:
    m = re.search(r"line (\d+)", message)
    return int(m.group(1)) if m else None


def load_eligibility_policy(path: Path | str | None = None) -> EligibilityPolicy:
    """Read the policy TOML (default ``data/policies/eligibility.toml`` of the repository).

    Data-file paths inside it are resolved relative to the policy file. Problems raise
    :class:`InputError` naming the file, the line (for TOML syntax) and the field.
    """
    p = Path(path) if path is not None else DEFAULT_POLICY_PATH
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError("policy file not found" if isinstance(exc, FileNotFoundError)
                         else f"cannot read policy file: {exc.strerror}", path=str(p)) from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"invalid TOML: {exc}", path=str(p), line=_toml_line(str(exc))) from exc
    for key in ("source_path", "sha256"):
        if key in data:
            raise InputError("this key is filled by the loader and must not be in the file", path=str(p),
                             field=key)
    try:
        policy = EligibilityPolicy.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise InputError(first["msg"], path=str(p), field=loc) from exc
    base = p.resolve().parent
    return policy.model_copy(update={
        "regions_file": (base / policy.regions_file).resolve(),
        "gazetteer_file": (base / policy.gazetteer_file).resolve(),
        "source_path": p.resolve(),
        "sha256": hashlib.sha256(raw).hexdigest(),
    })
