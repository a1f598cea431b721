"""Where ArcticAbstain's prompt-robustness plan and report used to live: kept for old imports.

The plan and the report are ArcticAbstain's own (:mod:`arcticqa.evaluate.arcticabstain.variants`);
the reference policies' variants run is :func:`arcticqa.evaluate.policies.run_policy_variants`.
"""

from __future__ import annotations

from arcticqa.evaluate.arcticabstain.variants import (
    METRICS,
    RankingFlip,
    Spread,
    VariantCell,
    VariantReport,
    build_variant_report,
    plan_ids,
    read_plan_file,
    render_variants_md,
    resolve_variants,
    variant_summary_lines,
    write_variant_report,
)
from arcticqa.evaluate.policies import run_policy_variants

__all__ = ["METRICS", "plan_ids", "read_plan_file", "resolve_variants", "VariantCell",
           "Spread", "RankingFlip", "VariantReport", "build_variant_report", "render_variants_md",
           "write_variant_report", "variant_summary_lines", "run_policy_variants"]
