"""The bundled abstention evaluator (ArcticAbstain): conditions, runner, scoring, statistics, reports.

Entry points: :func:`run_evaluation` (live runs through OpenAI-compatible endpoints),
:func:`build_report` / :func:`write_report` (tables reproducing the published ArcticQA v1
analysis), :func:`load_published_responses` (published response files) and
:func:`run_reference_policies` (built-in policies for the demo). See ``docs/evaluation.md``.
"""

from __future__ import annotations

from arcticqa.evaluate.conditions import EvalItem, PromptTemplate, build_call, load_items, load_prompt
from arcticqa.evaluate.outcomes import parse_lenient, parse_strict, score_reply
from arcticqa.evaluate.policies import REFERENCE_POLICIES, policy_responder, run_reference_policies
from arcticqa.evaluate.records import EvalResponseRow, load_store_responses
from arcticqa.evaluate.report import Report, ReportPaths, StatsSettings, build_report, write_report
from arcticqa.evaluate.responses import ResponseRecord, load_published_responses
from arcticqa.evaluate.runner import RunResult, run_evaluation, run_model
from arcticqa.evaluate.settings import EvalModel, EvaluateSettings, load_evaluate_settings

__all__ = [
    "EvalItem", "PromptTemplate", "build_call", "load_items", "load_prompt",
    "parse_lenient", "parse_strict", "score_reply",
    "REFERENCE_POLICIES", "policy_responder", "run_reference_policies",
    "EvalResponseRow", "load_store_responses",
    "Report", "ReportPaths", "StatsSettings", "build_report", "write_report",
    "ResponseRecord", "load_published_responses",
    "RunResult", "run_evaluation", "run_model",
    "EvalModel", "EvaluateSettings", "load_evaluate_settings",
]
