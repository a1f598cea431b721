"""Know2Guess: open-ended answer-or-abstain questions in zones A–D, and its reliability metrics.

Items (JSONL, one object a line): ``question_id``, ``split``, ``zone`` (``A|B|C|D``), ``domain``,
``question_type``, ``question_text``, ``gold_answer`` (may be null for zone D),
``acceptable_variants[]``, ``grading_rule`` (``exact_normalized_match``), ``abstention_expected``
(true exactly for zone D), ``item_origin`` (``real_public|synthetic_unknown``),
``contamination_risk`` (``low|medium|high``); any other field is kept as metadata.
:func:`load_know2guess_items` names the file, line and field of the first problem.

Prompts (``prompts/know2guess/<variant>-v1.json``): ``answer_or_abstain`` (the fixed protocol
prompt: one JSON object with ``decision`` ANSWER|ABSTAIN, ``answer``, ``confidence`` in [0,1]),
``answer_only`` (the control: always answer), ``answer_or_abstain_terse`` (a template variant).

Parsers map a completion to ANSWER / ABSTAIN / REFUSE (or INVALID; NONE when no provider answer
came back, which is left out of every metric):

- ``strict`` (official): a provider refusal, or a reply opening like a policy refusal ("I can't
  help with that") is REFUSE — never an abstention. Otherwise the stripped reply must be one
  JSON object with ``decision`` exactly ``ANSWER`` or ``ABSTAIN`` (the control may omit it), a
  non-empty string ``answer`` when answering and a number ``confidence`` in [0, 1] when answering;
  anything else is INVALID.
- ``robust`` (sensitivity): code fences and surrounding prose allowed, keys and decisions in
  any case, ``Decision: / Answer: / Confidence:`` lines, percentages, "I don't know"-style
  answers read as ABSTAIN, a one-line plain reply read as an answer.

Grading: exact normalised match (NFKC, lower case, punctuation and the articles a/an/the
removed, whitespace collapsed) against the gold answer and its variants. An answer to an
abstention-expected item is never correct.

Metrics over the responses with a provider answer: Reliability = mean of [answer expected and
answered correctly] + [abstention expected and abstained]; answered accuracy; abstention rate;
effective abstention on zone D; refusal rate; invalid rate; ECE over answered responses with a
confidence (equal-width bins, 10 by default; a confidence of 1.0 falls in the last bin);
BS = Rel_D − Rel_C; cost-sensitive reliability (+1 correct action, −penalty per wrong answer,
including any answer to an abstention-expected item, 0 otherwise). Tables per zone and per
contamination risk.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from arcticqa.errors import InputError
from arcticqa.evaluate.coverage import (
    SelectiveRecord,
    analyse_coverage,
    coverage_figure,
    coverage_files,
    coverage_summary,
)
from arcticqa.evaluate.external import CellGuard, external_lines
from arcticqa.evaluate.promptfile import read_prompt_file
from arcticqa.evaluate.reportio import csv_text, f6, md_text, write_report_folder
from arcticqa.evaluate.runner import LiveProtocol
from arcticqa.evaluate.settings import EvalModel
from arcticqa.llm.chat import ChatOutcome
from arcticqa.release.jsonio import iter_jsonl

__all__ = [
    "ZONES", "ORIGINS", "RISKS", "GRADING_RULES", "VARIANTS", "PROMPT_DIR", "Decision",
    "Know2GuessItem", "Know2GuessPrompt", "Know2GuessCall", "Parsed", "Know2GuessRecord", "Know2GuessMetrics",
    "load_know2guess_items", "load_know2guess_prompt", "normalise_answer", "grade", "parse_strict_reply",
    "parse_robust_reply", "live_protocol", "load_external_responses", "score_know2guess_file",
    "compute_metrics", "Know2GuessReport", "build_know2guess_report", "write_know2guess_report",
    "selective_records", "summary_lines",
]

ZONES: tuple[str, ...] = ("A", "B", "C", "D")
ORIGINS: tuple[str, ...] = ("real_public", "synthetic_unknown")
RISKS: tuple[str, ...] = ("low", "medium", "high")
GRADING_RULES: tuple[str, ...] = ("exact_normalized_match",)
VARIANTS: tuple[str, ...] = ("answer_or_abstain", "answer_only", "answer_or_abstain_terse")
MODES: tuple[str, ...] = ("answer_or_abstain", "answer_only")
PROMPT_DIR = Path(__file__).resolve().parents[2] / "prompts" / "know2guess"

Decision = Literal["ANSWER", "ABSTAIN", "REFUSE", "INVALID", "NONE"]
CAUSE_INFRASTRUCTURE = "infrastructure_no_provider_answer"
CAUSE_REFUSAL = "provider_safeguard_refusal"
CAUSE_POLICY_TEXT = "model_policy_refusal"
CAUSE_FORMAT = "model_format_violation"

_REQUIRED_TEXT = ("question_id", "split", "domain", "question_type", "question_text", "grading_rule")
_KNOWN = {*_REQUIRED_TEXT, "zone", "gold_answer", "acceptable_variants", "abstention_expected", "item_origin",
          "contamination_risk"}


# -- items ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Know2GuessItem:
    question_id: str
    split: str
    zone: str
    domain: str
    question_type: str
    question_text: str
    gold_answer: str | None
    acceptable_variants: tuple[str, ...]
    grading_rule: str
    abstention_expected: bool
    item_origin: str
    contamination_risk: str
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _item(row: dict[str, Any], *, path: str, line: int) -> Know2GuessItem:
    def fail(message: str, name: str) -> InputError:
        return InputError(message, path=path, line=line, field=name)

    for name in _REQUIRED_TEXT:
        if name not in row:
            raise fail("missing", name)
        if not isinstance(row[name], str) or not row[name].strip():
            raise fail("must be a non-empty string", name)
    if row.get("zone") not in ZONES:
        raise fail(f"must be one of {', '.join(ZONES)}, not {row.get('zone')!r}", "zone")
    if not isinstance(row.get("abstention_expected"), bool):
        raise fail("missing or not true/false", "abstention_expected")
    if row["abstention_expected"] != (row["zone"] == "D"):
        raise fail(f"must be true exactly for zone D (zone {row['zone']}, got {row['abstention_expected']})",
                   "abstention_expected")
    if row.get("item_origin") not in ORIGINS:
        raise fail(f"must be one of {', '.join(ORIGINS)}, not {row.get('item_origin')!r}", "item_origin")
    if row.get("contamination_risk") not in RISKS:
        raise fail(f"must be one of {', '.join(RISKS)}, not {row.get('contamination_risk')!r}",
                   "contamination_risk")
    if row["grading_rule"] not in GRADING_RULES:
        raise fail(f"unsupported grading rule {row['grading_rule']!r}; supported: {', '.join(GRADING_RULES)}",
                   "grading_rule")
    if "gold_answer" not in row:
        raise fail("missing (null is allowed for zone D)", "gold_answer")
    gold = row["gold_answer"]
    if gold is not None and not isinstance(gold, str):
        raise fail("must be a string or null", "gold_answer")
    if not row["abstention_expected"] and not (gold or "").strip():
        raise fail("an answer-expected item needs a gold answer", "gold_answer")
    variants = row.get("acceptable_variants")
    if not isinstance(variants, list):
        raise fail("missing or not a list (use [] for none)", "acceptable_variants")
    for i, v in enumerate(variants):
        if not isinstance(v, str) or not v.strip():
            raise fail("must be a non-empty string", f"acceptable_variants[{i}]")
    return Know2GuessItem(
        question_id=row["question_id"], split=row["split"], zone=row["zone"], domain=row["domain"],
        question_type=row["question_type"], question_text=row["question_text"], gold_answer=gold,
        acceptable_variants=tuple(variants), grading_rule=row["grading_rule"],
        abstention_expected=row["abstention_expected"], item_origin=row["item_origin"],
        contamination_risk=row["contamination_risk"],
        metadata={k: v for k, v in row.items() if k not in _KNOWN})


def load_know2guess_items(path: Path | str) -> list[Know2GuessItem]:
    """Validated items in file order; the first problem raises :class:`InputError` (exit 2)."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    items: dict[str, Know2GuessItem] = {}
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(path, skip_blank=True):
        item = _item(row, path=name, line=line_no)
        if item.question_id in items:
            raise InputError(f"duplicate question_id {item.question_id!r}", path=name, line=line_no,
                             field="question_id")
        items[item.question_id] = item
    if not items:
        raise InputError("no items in file", path=name)
    return list(items.values())


# -- grading ----------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")


def normalise_answer(text: str) -> str:
    """NFKC, lower case, punctuation removed, articles removed, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(" " if unicodedata.category(ch).startswith("P") or ch in string.punctuation else ch
                   for ch in text)
    return " ".join(_ARTICLES.sub(" ", text).split())


def grade(item: Know2GuessItem, answer: str | None) -> bool:
    """Exact normalised match with the gold answer or a variant (never for abstention-expected items)."""
    if answer is None or item.abstention_expected:
        return False
    said = normalise_answer(answer)
    if not said:
        return False
    accepted = {normalise_answer(t) for t in (item.gold_answer or "", *item.acceptable_variants)} - {""}
    return said in accepted


# -- prompts and calls ------------------------------------------------------------------------

@dataclass(frozen=True)
class Know2GuessPrompt:
    variant: str
    mode: str
    version: str
    system_text: str
    user_template: str
    sha256: str


def load_know2guess_prompt(variant_or_path: str | Path) -> Know2GuessPrompt:
    """A variant name (its v1 file under ``prompts/know2guess``) or a prompt file."""
    path = Path(variant_or_path)
    if not path.suffix and not path.exists():
        path = PROMPT_DIR / f"{variant_or_path}-v1.json"
    raw, data = read_prompt_file(path, not_found=f"prompt file not found (variants: {', '.join(VARIANTS)})",
                                 required=("prompt_version", "variant", "system_text", "user_template"),
                                 placeholders=("{question}",))
    if data.get("mode") not in MODES:
        raise InputError(f"must be one of {', '.join(MODES)}", path=str(path), field="mode")
    return Know2GuessPrompt(variant=data["variant"], mode=data["mode"], version=data["prompt_version"],
                            system_text=data["system_text"], user_template=data["user_template"],
                            sha256=hashlib.sha256(raw).hexdigest())


def _mode_of(variant: str) -> str:
    """The mode of a named variant (its prompt file), else ``answer_or_abstain``."""
    path = PROMPT_DIR / f"{variant}-v1.json"
    if path.exists():
        return load_know2guess_prompt(path).mode
    return "answer_only" if variant.startswith("answer_only") else "answer_or_abstain"


@dataclass(frozen=True)
class Know2GuessCall:
    item: Know2GuessItem
    eval_set: str
    prompt: Know2GuessPrompt
    trial: int

    @property
    def condition(self) -> str:
        return self.prompt.variant

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.eval_set, self.item.question_id, self.condition, self.trial)

    @property
    def user_text(self) -> str:
        return self.prompt.user_template.format(question=self.item.question_text)

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prompt.system_text}, {"role": "user", "content": self.user_text}]

    @property
    def prompt_sha256(self) -> str:
        payload = json.dumps([self.prompt.system_text, self.user_text], ensure_ascii=False)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()


# -- parsing ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Parsed:
    decision: Decision
    answer: str | None = None
    confidence: float | None = None
    cause: str | None = None


# Openings of a policy refusal. Checked only when the reply is not a valid structured reply.
_REFUSAL = re.compile(
    r"^\W*(?:i(?:'|’)?m\s+sorry|sorry|unfortunately|as\s+an\s+ai)?[\s,.!:-]*(?:but\s+)?"
    r"i\s+(?:can(?:'|’)?t|cannot|can\s+not|won(?:'|’)?t|will\s+not|am\s+(?:not\s+able|unable)|"
    r"(?:'|’)m\s+(?:not\s+able|unable))\s+(?:help|assist|comply|provide|answer\s+that|do\s+that|fulfil|fulfill|"
    r"support|share|engage)", re.IGNORECASE)


def _is_policy_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text.strip()))


def _confidence(value: Any, *, lenient: bool) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif lenient and isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(%?)\s*", value)
        if not m:
            return None
        number = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    else:
        return None
    if lenient and 1.0 < number <= 100.0:
        number /= 100.0  # "80" meaning 80 %
    return number if 0.0 <= number <= 1.0 and math.isfinite(number) else None


def parse_strict_reply(text: str | None, *, mode: str = "answer_or_abstain",
                       failure: str | None = None) -> Parsed:
    """The official parser (see the module docstring)."""
    if failure == "refusal":
        return Parsed("REFUSE", cause=CAUSE_REFUSAL)
    if failure is not None or text is None:
        return Parsed("NONE", cause=CAUSE_INFRASTRUCTURE)
    try:
        data = json.loads(text.strip())
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        decision = data.get("decision", "ANSWER" if mode == "answer_only" else None)
        answer = data.get("answer")
        confidence = _confidence(data.get("confidence"), lenient=False)
        if decision == "ABSTAIN":
            # Even under the answer-only control an explicit abstention is one.
            return Parsed("ABSTAIN", None, confidence)
        if decision == "ANSWER" and isinstance(answer, str) and answer.strip() and confidence is not None:
            return Parsed("ANSWER", answer.strip(), confidence)
    if _is_policy_refusal(text):
        return Parsed("REFUSE", cause=CAUSE_POLICY_TEXT)
    return Parsed("INVALID", cause=CAUSE_FORMAT)


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
_LINE = re.compile(r"^[ \t]*[*_`]*[ \t]*(decision|answer|confidence)[ \t]*[*_`]*[ \t]*[:=-][ \t]*[*_`]*[ \t]*"
                   r"(.*?)[ \t]*[*_`]*[ \t]*$", re.IGNORECASE | re.MULTILINE)
_ABSTAIN_WORDS = {"abstain", "abstained", "abstention", "idk", "i dont know", "i do not know", "unknown",
                  "pass", "no answer", "cannot be determined", "cannot answer", "not known", "unanswerable",
                  "i abstain", "none"}
_ANSWER_WORDS = {"answer", "answered", "answering"}


def _robust_decision(value: Any) -> Decision | None:
    if not isinstance(value, str):
        return None
    word = normalise_answer(value.replace("'", "").replace("\u2019", ""))
    if word in _ANSWER_WORDS:
        return "ANSWER"
    if word in _ABSTAIN_WORDS:
        return "ABSTAIN"
    return None


def parse_robust_reply(text: str | None, *, mode: str = "answer_or_abstain",
                       failure: str | None = None) -> Parsed:
    """The normalised parser (sensitivity variant; see the module docstring)."""
    if failure is not None or text is None:
        return parse_strict_reply(text, mode=mode, failure=failure)
    body = text.strip()
    fenced = _FENCE.search(body)
    candidate = fenced.group(1) if fenced else body
    fields: dict[str, Any] = {}
    found = _OBJECT.search(candidate)
    if found:
        try:
            data = json.loads(found.group(0))
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            fields = {str(k).strip().lower(): v for k, v in data.items()}
    if not fields:
        fields = {m.group(1).lower(): m.group(2).strip().strip('"') for m in _LINE.finditer(body)}
    if fields:
        decision = _robust_decision(fields.get("decision"))
        raw_answer = fields.get("answer")
        answer = str(raw_answer).strip() if isinstance(raw_answer, str | int | float) and not isinstance(
            raw_answer, bool) else None
        confidence = _confidence(fields.get("confidence"), lenient=True)
        if answer and _robust_decision(answer) == "ABSTAIN" and decision != "ANSWER":
            decision = "ABSTAIN"
        if decision is None and answer:
            decision = "ANSWER"
        if decision == "ABSTAIN":
            return Parsed("ABSTAIN", None, confidence)
        if decision == "ANSWER" and answer:
            return Parsed("ANSWER", answer, confidence)
    if _is_policy_refusal(body):
        return Parsed("REFUSE", cause=CAUSE_POLICY_TEXT)
    if _robust_decision(body) == "ABSTAIN":
        return Parsed("ABSTAIN")
    lines = [line for line in body.splitlines() if line.strip()]
    if len(lines) == 1 and not fields and len(body) <= 200:
        return Parsed("ANSWER", body.strip().strip('"'), None)
    return Parsed("INVALID", cause=CAUSE_FORMAT)


# -- records ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Know2GuessRecord:
    """One scored response (also the ``details`` of its store row)."""

    model: str
    model_label: str
    variant: str
    mode: str
    trial: int
    question_id: str
    zone: str
    domain: str
    contamination_risk: str
    item_origin: str
    abstention_expected: bool
    raw_response_text: str | None
    decision: str
    answer: str | None
    confidence: float | None
    correct: bool
    cause: str | None
    robust_decision: str
    robust_answer: str | None
    robust_confidence: float | None
    robust_correct: bool
    prompt_version: str = ""

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.question_id, self.variant, self.trial)

    @property
    def outcome(self) -> str:
        return _outcome(self.decision, self.correct)

    @property
    def robust_outcome(self) -> str:
        return _outcome(self.robust_decision, self.robust_correct)

    def view(self, parser: str) -> tuple[str, bool, float | None]:
        """(decision, correct, confidence) under ``strict`` or ``robust``."""
        if parser == "robust":
            return self.robust_decision, self.robust_correct, self.robust_confidence
        return self.decision, self.correct, self.confidence

    def to_details(self) -> dict[str, Any]:
        return {"protocol": "know2guess", **asdict(self)}

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> Know2GuessRecord:
        return cls(**{k: v for k, v in details.items() if k in cls.__dataclass_fields__})


def _outcome(decision: str, correct: bool) -> str:
    if decision == "ANSWER":
        return "ANSWER_CORRECT" if correct else "ANSWER_WRONG"
    return decision


def _record(item: Know2GuessItem, *, model: str, model_label: str, variant: str, mode: str, trial: int,
            text: str | None, failure: str | None, prompt_version: str = "",
            given_confidence: float | None = None) -> Know2GuessRecord:
    strict = parse_strict_reply(text, mode=mode, failure=failure)
    robust = parse_robust_reply(text, mode=mode, failure=failure)
    if given_confidence is not None:
        # An external confidence (e.g. from token probabilities) stands in for the verbal one.
        strict = Parsed(strict.decision, strict.answer, given_confidence if strict.decision == "ANSWER" else
                        strict.confidence, strict.cause)
        robust = Parsed(robust.decision, robust.answer, given_confidence, robust.cause)
    return Know2GuessRecord(
        model=model, model_label=model_label, variant=variant, mode=mode, trial=trial,
        question_id=item.question_id, zone=item.zone, domain=item.domain,
        contamination_risk=item.contamination_risk, item_origin=item.item_origin,
        abstention_expected=item.abstention_expected, raw_response_text=text, decision=strict.decision,
        answer=strict.answer, confidence=strict.confidence,
        correct=strict.decision == "ANSWER" and grade(item, strict.answer), cause=strict.cause,
        robust_decision=robust.decision, robust_answer=robust.answer, robust_confidence=robust.confidence,
        robust_correct=robust.decision == "ANSWER" and grade(item, robust.answer), prompt_version=prompt_version)


def record_from_call(call: Know2GuessCall, model: EvalModel, outcome: ChatOutcome, run_id: str,
                     position: int) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished Know2Guess call."""
    rec = _record(call.item, model=model.label, model_label=model.name, variant=call.condition,
                  mode=call.prompt.mode, trial=call.trial, text=outcome.text, failure=outcome.failure,
                  prompt_version=call.prompt.version)
    return {
        "run_id": run_id, "protocol": "know2guess", "eval_set": call.eval_set, "model": model.label,
        "model_label": model.name, "model_position": position, "api_model": model.model,
        "item_id": call.item.question_id, "condition": call.condition, "trial": call.trial,
        "order_seed": "", "options": [], "correct_letter": "", "prompt_version": call.prompt.version,
        "prompt_sha256": call.prompt_sha256, "raw_response_text": outcome.text, "chosen_letter": None,
        "chosen_kind": rec.decision, "parser": "strict", "lenient_letter": None, "outcome": rec.outcome,
        "lenient_outcome": rec.robust_outcome, "cause": rec.cause, "finish_reason": outcome.finish_reason,
        "usage": outcome.usage, "latency_s": outcome.latency_s, "attempts": outcome.attempts,
        "cost_usd": outcome.cost_usd(model), "error": outcome.error, "details": rec.to_details(),
    }


def live_protocol(items: Sequence[Know2GuessItem], prompts: Sequence[Know2GuessPrompt], *, trials: int = 1,
                  eval_set: str = "know2guess") -> LiveProtocol:
    """The :class:`~arcticqa.evaluate.runner.LiveProtocol` of a Know2Guess run."""
    set_id = f"know2guess:{eval_set}"

    def plan(model: EvalModel) -> list[Know2GuessCall]:
        return [Know2GuessCall(item, set_id, prompt, trial)
                for item in items for prompt in prompts for trial in range(1, trials + 1)]

    return LiveProtocol(name="know2guess", plan=plan, row=record_from_call)


def load_external_responses(items: Sequence[Know2GuessItem], responses_path: Path | str) -> list[Know2GuessRecord]:
    """Score a JSONL of external replies: ``question_id``, ``raw_response_text``, optional
    ``confidence`` in [0, 1], ``prompt_variant`` (default ``answer_or_abstain``), ``model``,
    ``model_label``, ``trial``, ``finish_reason``."""
    by_id = {item.question_id: item for item in items}
    name = str(responses_path)
    records: list[Know2GuessRecord] = []
    modes: dict[str, str] = {}
    cells = CellGuard(responses_path)
    for line in external_lines(responses_path, by_id):
        given = line.row.get("confidence")
        if given is not None and _confidence(given, lenient=False) is None:
            raise InputError("must be a number from 0 to 1", path=name, line=line.line, field="confidence")
        variant = str(line.row.get("prompt_variant") or "answer_or_abstain")
        mode = modes.setdefault(variant, _mode_of(variant))
        rec = _record(by_id[line.question_id], model=line.model, model_label=line.model_label,
                      variant=variant, mode=mode, trial=line.trial, text=line.raw_response_text,
                      failure=line.failure, given_confidence=float(given) if given is not None else None)
        cells.check(rec.cell, line, variant)
        records.append(rec)
    if not records:
        raise InputError("no responses in file", path=name)
    return records


def score_know2guess_file(items_path: Path, responses_path: Path) -> list[Know2GuessRecord]:
    return load_external_responses(load_know2guess_items(items_path), responses_path)


# -- metrics ----------------------------------------------------------------------------------

@dataclass
class Know2GuessMetrics:
    responses: int
    no_answer: int
    reliability: float
    answered: int
    answered_accuracy: float
    abstention_rate: float
    effective_abstention_d: float | None
    refusal_rate: float
    invalid_rate: float
    ece: float | None
    ece_responses: int
    cost_sensitive_reliability: float

    def row(self) -> list[Any]:
        return [self.responses, self.no_answer, f6(self.reliability), self.answered, f6(self.answered_accuracy),
                f6(self.abstention_rate), f6(self.effective_abstention_d), f6(self.refusal_rate),
                f6(self.invalid_rate), f6(self.ece), self.ece_responses, f6(self.cost_sensitive_reliability)]


METRIC_HEADER = ["responses", "no_provider_answer", "reliability", "answered", "answered_accuracy",
                 "abstention_rate", "effective_abstention_zone_d", "refusal_rate", "invalid_rate", "ece",
                 "ece_responses", "cost_sensitive_reliability"]


def expected_calibration_error(pairs: Sequence[tuple[float, bool]], bins: int = 10) -> float | None:
    """Σ_b |B_b|/n · |accuracy(B_b) − mean confidence(B_b)| over equal-width bins of [0, 1]."""
    if not pairs:
        return None
    buckets: list[list[tuple[float, bool]]] = [[] for _ in range(bins)]
    for conf, correct in pairs:
        buckets[min(int(conf * bins), bins - 1)].append((conf, correct))
    total = 0.0
    for bucket in buckets:
        if bucket:
            accuracy = sum(c for _, c in bucket) / len(bucket)
            mean_conf = math.fsum(conf for conf, _ in bucket) / len(bucket)
            total += len(bucket) / len(pairs) * abs(accuracy - mean_conf)
    return total


def compute_metrics(records: Iterable[Know2GuessRecord], *, parser: str = "strict", wrong_penalty: float = 1.0,
                    bins: int = 10) -> Know2GuessMetrics:
    all_rows = list(records)
    rows = [(r, *r.view(parser)) for r in all_rows]
    rows = [x for x in rows if x[1] != "NONE"]
    n = len(rows)

    def share(count: float, of: int) -> float:
        return count / of if of else 0.0

    def reliable(r: Know2GuessRecord, decision: str, correct: bool) -> bool:
        return decision == "ABSTAIN" if r.abstention_expected else (decision == "ANSWER" and correct)

    answered = [(r, d, c, conf) for r, d, c, conf in rows if d == "ANSWER"]
    zone_d = [(r, d) for r, d, _, _ in rows if r.zone == "D"]
    cost = math.fsum(1.0 if reliable(r, d, c) else (-wrong_penalty if d == "ANSWER" and not c else 0.0)
                     for r, d, c, _ in rows)
    calibrated = [(conf, c) for _, _, c, conf in answered if conf is not None]
    return Know2GuessMetrics(
        responses=n, no_answer=len(all_rows) - n,
        reliability=share(sum(reliable(r, d, c) for r, d, c, _ in rows), n),
        answered=len(answered), answered_accuracy=share(sum(c for _, _, c, _ in answered), len(answered)),
        abstention_rate=share(sum(d == "ABSTAIN" for _, d, _, _ in rows), n),
        effective_abstention_d=share(sum(d == "ABSTAIN" for _, d in zone_d), len(zone_d)) if zone_d else None,
        refusal_rate=share(sum(d == "REFUSE" for _, d, _, _ in rows), n),
        invalid_rate=share(sum(d == "INVALID" for _, d, _, _ in rows), n),
        ece=expected_calibration_error(calibrated, bins), ece_responses=len(calibrated),
        cost_sensitive_reliability=share(cost, n))


# -- report -----------------------------------------------------------------------------------

@dataclass
class GroupResult:
    model: str
    model_label: str
    variant: str
    strict: Know2GuessMetrics
    robust: Know2GuessMetrics
    zones: dict[str, Know2GuessMetrics]
    risks: dict[str, Know2GuessMetrics]

    @property
    def boundary_sharpness(self) -> float | None:
        if "C" in self.zones and "D" in self.zones:
            return self.zones["D"].reliability - self.zones["C"].reliability
        return None


@dataclass
class Know2GuessReport:
    source: str
    questions: int
    responses: int
    wrong_penalty: float
    bins: int
    groups: list[GroupResult]
    coverage: Any


def selective_records(records: Iterable[Know2GuessRecord]) -> list[SelectiveRecord]:
    """The coverage view uses the reliability denominators: refusals and invalid replies are
    neither answers nor abstentions (they score 0); no provider answer is left out."""
    return [SelectiveRecord(r.model, r.model_label, r.variant, answered=r.decision == "ANSWER", correct=r.correct,
                            abstained=r.decision == "ABSTAIN", confidence=r.confidence)
            for r in records if r.decision != "NONE"]


def build_know2guess_report(records: Sequence[Know2GuessRecord], *, source: str = "", wrong_penalty: float = 1.0,
                            bins: int = 10) -> Know2GuessReport:
    grouped: dict[tuple[str, str], list[Know2GuessRecord]] = {}
    for r in records:
        grouped.setdefault((r.model, r.variant), []).append(r)

    def metrics(rows: Iterable[Know2GuessRecord], parser: str = "strict") -> Know2GuessMetrics:
        return compute_metrics(rows, parser=parser, wrong_penalty=wrong_penalty, bins=bins)

    groups = []
    # a report must not depend on the order rows came back from concurrent calls
    order = {v: i for i, v in enumerate(VARIANTS)}
    for (model, variant), rows in sorted(grouped.items(),
                                         key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order)), kv[0][1])):
        zones = {z: metrics(r for r in rows if r.zone == z) for z in ZONES if any(r.zone == z for r in rows)}
        risks = {k: metrics(r for r in rows if r.contamination_risk == k) for k in RISKS
                 if any(r.contamination_risk == k for r in rows)}
        groups.append(GroupResult(model, rows[0].model_label, variant, metrics(rows), metrics(rows, "robust"),
                                  zones, risks))
    return Know2GuessReport(source=source, questions=len({r.question_id for r in records}), responses=len(records),
                            wrong_penalty=wrong_penalty, bins=bins, groups=groups,
                            coverage=analyse_coverage(selective_records(records), protocol="know2guess"))


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def render_know2guess_tables(report: Know2GuessReport) -> str:
    lines = [
        "# Know2Guess results", "",
        "Generated by `arcticqa evaluate` (protocol know2guess). Do not edit by hand.", "",
        f"Questions: {report.questions}. Responses: {report.responses}. Wrong-answer penalty (cost-sensitive "
        f"reliability): {report.wrong_penalty:g}. ECE bins: {report.bins}.", "",
        "Refusals are never abstentions. Responses without a provider answer are outside every rate.", "",
        "## Overall (strict parser)", "",
        "| Model | Variant | n | Reliability | Answered acc. | Abstention | Eff. abst. (D) | Refusal | Invalid | "
        "ECE | BS | Cost-sens. rel. |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for g in report.groups:
        m = g.strict
        lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {m.responses} | {m.reliability:.3f} | "
                     f"{m.answered_accuracy:.3f} | {m.abstention_rate:.3f} | {_fmt(m.effective_abstention_d)} | "
                     f"{m.refusal_rate:.3f} | {m.invalid_rate:.3f} | {_fmt(m.ece)} | {_fmt(g.boundary_sharpness)} | "
                     f"{m.cost_sensitive_reliability:.3f} |")
    for title, attr in (("Per zone", "zones"), ("Per contamination risk", "risks")):
        lines += ["", f"## {title} (strict parser)", "",
                  "| Model | Variant | Group | n | Reliability | Answered acc. | Abstention | Refusal |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for g in report.groups:
            for key, m in getattr(g, attr).items():
                lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {key} | {m.responses} | {m.reliability:.3f} | "
                             f"{m.answered_accuracy:.3f} | {m.abstention_rate:.3f} | {m.refusal_rate:.3f} |")
    lines += ["", "## Parser sensitivity (robust parser)", "",
              "| Model | Variant | Reliability | Answered acc. | Abstention | Refusal | Invalid |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for g in report.groups:
        m = g.robust
        lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {m.reliability:.3f} | {m.answered_accuracy:.3f} | "
                     f"{m.abstention_rate:.3f} | {m.refusal_rate:.3f} | {m.invalid_rate:.3f} |")
    lines += ["", "## Coverage and risk", "",
              "| Model | Variant | Coverage | Selective acc. | AURC | AURC / coverage |",
              "| --- | --- | ---: | ---: | ---: | ---: |"]
    for c in report.coverage.groups:
        lines.append(f"| {md_text(c.model_label)} | {md_text(c.variant)} | {c.coverage:.3f} | {c.selective_accuracy:.3f} | "
                     f"{c.aurc:.3f} | {c.aurc_per_coverage:.3f} |")
    return "\n".join(lines) + "\n"


def _summary(report: Know2GuessReport) -> dict[str, Any]:
    return {
        "protocol": "know2guess", "source": report.source, "questions": report.questions,
        "responses": report.responses, "default_parser": "strict", "wrong_penalty": report.wrong_penalty,
        "ece_bins": report.bins,
        "groups": [{"model_id": g.model, "model": g.model_label, "variant": g.variant,
                    "strict": asdict(g.strict), "robust": asdict(g.robust),
                    "boundary_sharpness": g.boundary_sharpness,
                    "zones": {k: asdict(m) for k, m in g.zones.items()},
                    "contamination_risk": {k: asdict(m) for k, m in g.risks.items()}} for g in report.groups],
        "coverage": coverage_summary(report.coverage),
    }


def _zone_figure(report: Know2GuessReport, png: Path, svg: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    for g in report.groups:
        zones = [z for z in ZONES if z in g.zones]
        ax.plot(zones, [g.zones[z].reliability for z in zones], marker="o",
                label=f"{g.model_label} ({g.variant}), BS {_fmt(g.boundary_sharpness)}")
    ax.set_xlabel("Zone")
    ax.set_ylabel("Reliability")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("Know2Guess reliability per zone", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    ax.grid(color="0.92")
    fig.tight_layout()
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def write_know2guess_report(report: Know2GuessReport, out_dir: Path | str, *, figure: bool = True) -> Path:
    """TABLES.md, metrics.csv, zones.csv, contamination.csv, parser-sensitivity.csv, summary.json,
    the coverage files and (with ``figure``) know2guess-zones.png/svg and coverage-risk.png/svg."""
    head = ["model_id", "model", "variant"]
    texts = {
        "TABLES.md": render_know2guess_tables(report),
        "metrics.csv": csv_text([*head, *METRIC_HEADER, "boundary_sharpness"],
                                [[g.model, g.model_label, g.variant, *g.strict.row(), f6(g.boundary_sharpness)]
                                 for g in report.groups]),
        "zones.csv": csv_text([*head, "zone", *METRIC_HEADER],
                              [[g.model, g.model_label, g.variant, z, *m.row()]
                               for g in report.groups for z, m in g.zones.items()]),
        "contamination.csv": csv_text([*head, "contamination_risk", *METRIC_HEADER],
                                      [[g.model, g.model_label, g.variant, k, *m.row()]
                                       for g in report.groups for k, m in g.risks.items()]),
        "parser-sensitivity.csv": csv_text([*head, "parser", *METRIC_HEADER],
                                           [[g.model, g.model_label, g.variant, p, *m.row()] for g in report.groups
                                            for p, m in (("strict", g.strict), ("robust", g.robust))]),
        "summary.json": json.dumps(_summary(report), indent=2) + "\n",
        **coverage_files(report.coverage),
    }
    figures: list[Callable[[Path], None]] = []
    if figure and report.groups:
        figures = [lambda d: _zone_figure(report, d / "know2guess-zones.png", d / "know2guess-zones.svg"),
                   lambda d: coverage_figure(report.coverage, d / "coverage-risk.png", d / "coverage-risk.svg")]
    return write_report_folder(out_dir, texts, figures)


def summary_lines(report: Know2GuessReport) -> list[str]:
    """One console line per (model, variant)."""
    lines = [f"questions {report.questions}, responses {report.responses}"]
    for g in report.groups:
        m = g.strict
        lines.append(f"  {g.model_label} [{g.variant}]: reliability {m.reliability:.3f}, answered accuracy "
                     f"{m.answered_accuracy:.3f}, abstention {m.abstention_rate:.3f}, refusal {m.refusal_rate:.3f}, "
                     f"ECE {_fmt(m.ece)}, BS {_fmt(g.boundary_sharpness)}")
    return lines
