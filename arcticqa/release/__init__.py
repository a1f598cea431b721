"""Release files: the models and schemas of a release, the writer, validate-release, audit, funnel.

Store-agnostic: the store converts its rows into these models; nothing here opens the database.
"""

from __future__ import annotations

from arcticqa.release.audit import AuditData, render_audit_html
from arcticqa.release.conditions import build_conditions
from arcticqa.release.funnel import render_funnel
from arcticqa.release.models import (
    ConditionRecord,
    Construction,
    Distractor,
    EvidenceRef,
    FunnelCounts,
    FunnelStep,
    Manifest,
    PaperRef,
    ReleaseItem,
    ResponseRecord,
    SourceLicense,
    ValidationReport,
)
from arcticqa.release.validate import validate_release
from arcticqa.release.writer import write_release

__all__ = [
    "AuditData",
    "ConditionRecord",
    "Construction",
    "Distractor",
    "EvidenceRef",
    "FunnelCounts",
    "FunnelStep",
    "Manifest",
    "PaperRef",
    "ReleaseItem",
    "ResponseRecord",
    "SourceLicense",
    "ValidationReport",
    "build_conditions",
    "render_audit_html",
    "render_funnel",
    "validate_release",
    "write_release",
]
