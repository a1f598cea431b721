"""Abstain-QA: multiple choice with an IDK/NOTA option, its confusion matrix and metrics.

Items are answerable (one correct option) or unanswerable (the correct action is the IDK/NOTA
option, "I Don't Know/ None of the above", always listed last). Sources:

- a release ``items.jsonl`` (ArcticQA v1 or ours): every item gives two questions,
  ``<item_id>#present`` (gold + distractors of rank 0–2; answerable) and ``<item_id>#absent``
  (distractors of rank 0–3; unanswerable). Their content options are ordered by
  ``sha256("abstainqa-position|<eval_set>|<question_id>|<option_id>")`` — fixed per question,
  the same for every model, variant and trial, as in Abstain-QA;
- the import format (JSONL, one object a line): ``question_id``, ``question``, ``options`` (a list
  of texts, or ``{"A": text, ...}``, in the order shown), ``gold`` (an option letter, the exact
  option text, or ``"IDK/NOTA"``), optional ``context``; other fields are kept as metadata.

Prompt variants (``prompts/abstainqa/<variant>-v1.json``): ``standard``, ``abstain``,
``extreme_abstain``. With verbal confidence the model also gives a confidence 1–5 (condition
``<variant>+confidence``); for a threshold t, an answer with confidence ≤ t counts as IDK/NOTA.

Scoring (the protocol's definitions). Answerable: correct option → TP, IDK/NOTA → FN, other
option → FP. Unanswerable: IDK/NOTA → TN, any option → FP (never FN). With D the scored
responses, A the answerable and U the unanswerable ones among them: AR = (FN+TN)/|D|,
AAC = TP/|A|, UAC = TN/|U|, P = TP/(TP+FP). A reply that names no option (format violation,
provider refusal, no provider answer) is ``INVALID``: reported, outside the matrix and every
denominator (like ArcticAbstain's N0) — a refusal is never an IDK.

Parsers: ``strict`` (default) — the stripped reply is exactly one option letter, or, with
verbal confidence, exactly ``Answer: <letter>`` and ``Confidence: <1-5>`` on two lines;
``lenient`` (sensitivity only) — ArcticAbstain's lenient letter rules, a reply equal to an
option's text, and a ``confidence`` of 1–5 anywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from arcticqa.errors import InputError
from arcticqa.evaluate.conditions import load_items
from arcticqa.evaluate.coverage import (
    SelectiveRecord,
    analyse_coverage,
    coverage_figure,
    coverage_files,
    coverage_summary,
)
from arcticqa.evaluate.external import CellGuard, external_lines
from arcticqa.evaluate.outcomes import normalise_option_text, parse_lenient, parse_strict
from arcticqa.evaluate.promptfile import read_prompt_file
from arcticqa.evaluate.reportio import csv_text, f6, md_text, write_report_folder
from arcticqa.evaluate.runner import LiveProtocol
from arcticqa.evaluate.settings import EvalModel
from arcticqa.llm.chat import ChatOutcome
from arcticqa.release.conditions import distractor_option_id
from arcticqa.release.jsonio import iter_jsonl

__all__ = [
    "IDK_TEXT", "IDK_GOLD", "VARIANTS", "DEFAULT_THRESHOLDS", "PROMPT_DIR",
    "AbstainQAItem", "AbstainQAPrompt", "AbstainQACall", "AbstainQARecord", "ConfusionCounts",
    "load_abstainqa_items", "load_abstainqa_prompt", "variant_label", "build_abstainqa_call",
    "parse_reply", "score_abstainqa", "record_from_call", "live_protocol",
    "score_abstainqa_file", "load_external_responses", "AbstainQAReport", "build_abstainqa_report",
    "write_abstainqa_report", "selective_records", "summary_lines",
]

IDK_TEXT = "I Don't Know/ None of the above"
IDK_GOLD = "IDK/NOTA"
VARIANTS: tuple[str, ...] = ("standard", "abstain", "extreme_abstain")
DEFAULT_THRESHOLDS: tuple[int, ...] = (0, 1, 2, 3, 4)
PROMPT_DIR = Path(__file__).resolve().parents[2] / "prompts" / "abstainqa"
CONFIDENCE_SUFFIX = "+confidence"
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

Outcome = Literal["TP", "FN", "FP", "TN", "INVALID"]
CAUSE_INFRASTRUCTURE = "infrastructure_no_provider_answer"
CAUSE_REFUSAL = "provider_safeguard_refusal"
CAUSE_FORMAT = "model_format_violation"


# -- items ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AbstainQAItem:
    """One question. ``options`` are the content options in shown order; IDK/NOTA comes last."""

    question_id: str
    question: str
    options: tuple[str, ...]
    gold: int | None  # index into options; None: unanswerable
    context: str = ""
    option_ids: tuple[str, ...] = ()
    order_seed: str = ""
    domain: str | None = None

    @property
    def answerable(self) -> bool:
        return self.gold is not None

    @property
    def letters(self) -> str:
        return _LETTERS[:len(self.options) + 1]

    @property
    def idk_letter(self) -> str:
        return self.letters[-1]

    @property
    def correct_letter(self) -> str:
        return self.letters[self.gold] if self.gold is not None else self.idk_letter

    def shown(self) -> list[dict[str, str]]:
        """Every option as shown: letter, kind (gold | distractor | abstain), text, option_id."""
        ids = self.option_ids or tuple(distractor_option_id(t) for t in self.options)
        rows = [{"letter": letter, "kind": "gold" if i == self.gold else "distractor", "text": text,
                 "option_id": "gold" if i == self.gold else ids[i]}
                for i, (letter, text) in enumerate(zip(self.letters, self.options, strict=False))]
        return [*rows, {"letter": self.idk_letter, "kind": "abstain", "text": IDK_TEXT, "option_id": "abstain"}]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _from_release(path: Path, eval_set: str) -> list[AbstainQAItem]:
    out = []
    for item in load_items(path):
        set_id = item.eval_set_id or eval_set
        for suffix, listed in (
                ("present", [("gold", item.gold_answer), *((distractor_option_id(t), t) for t in item.distractors[:3])]),
                ("absent", [(distractor_option_id(t), t) for t in item.distractors])):
            qid = f"{item.item_id}#{suffix}"
            seed = _sha(f"abstainqa-order|{set_id}|{qid}")
            ordered = sorted(listed, key=lambda o: _sha(f"abstainqa-position|{set_id}|{qid}|{o[0]}"))  # noqa: B023
            gold = next((i for i, (oid, _) in enumerate(ordered) if oid == "gold"), None)
            out.append(AbstainQAItem(qid, item.question, tuple(t for _, t in ordered), gold,
                                     context=item.question_context, option_ids=tuple(o for o, _ in ordered),
                                     order_seed=seed))
    return out


_IDK_FORMS = {normalise_option_text(t).lower() for t in (IDK_TEXT, IDK_GOLD, "IDK", "NOTA")}


def _import_row(row: dict[str, Any], *, path: str, line: int) -> AbstainQAItem:
    for name in ("question_id", "question"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            raise InputError("missing or empty", path=path, line=line, field=name)
    raw = row.get("options")
    if isinstance(raw, dict):
        keys = list(raw)
        if keys != list(_LETTERS[:len(keys)]):
            raise InputError("option letters must be A, B, C, ... in order", path=path, line=line, field="options")
        texts = list(raw.values())
    elif isinstance(raw, list):
        texts = raw
    else:
        raise InputError("expected a list of option texts or a letter -> text object", path=path, line=line,
                         field="options")
    if len(texts) < 2 or len(texts) > len(_LETTERS) - 1:
        raise InputError(f"need 2 to {len(_LETTERS) - 1} options (IDK/NOTA is added)", path=path, line=line,
                         field="options")
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InputError("each option must be a non-empty string", path=path, line=line, field=f"options[{i}]")
        if normalise_option_text(text).lower() in _IDK_FORMS:
            raise InputError("do not list the IDK/NOTA option: it is added as the last option", path=path,
                             line=line, field=f"options[{i}]")
    norm = [normalise_option_text(t) for t in texts]
    if len(set(norm)) != len(norm):
        raise InputError("two options have the same text", path=path, line=line, field="options")
    gold_raw = row.get("gold")
    if not isinstance(gold_raw, str) or not gold_raw.strip():
        raise InputError("missing: an option letter, the option's text, or IDK/NOTA", path=path, line=line,
                         field="gold")
    gold: int | None
    if gold_raw.strip().upper() == IDK_GOLD or normalise_option_text(gold_raw).lower() in _IDK_FORMS:
        gold = None
    elif gold_raw.strip() in _LETTERS[:len(texts)] and len(gold_raw.strip()) == 1:
        gold = _LETTERS.index(gold_raw.strip())
    elif normalise_option_text(gold_raw) in norm:
        gold = norm.index(normalise_option_text(gold_raw))
    else:
        raise InputError(f"{gold_raw[:60]!r} is neither an option letter, an option's text nor IDK/NOTA",
                         path=path, line=line, field="gold")
    context = row.get("context") or ""
    if not isinstance(context, str):
        raise InputError("must be a string", path=path, line=line, field="context")
    domain = row.get("domain")
    return AbstainQAItem(row["question_id"], row["question"], tuple(texts), gold, context=context,
                         order_seed=_sha(f"abstainqa-order|import|{row['question_id']}"),
                         domain=str(domain) if domain is not None else None)


def load_abstainqa_items(path: Path | str, *, eval_set: str = "arcticqa") -> list[AbstainQAItem]:
    """Questions of a release ``items.jsonl`` (both conditions) or of an Abstain-QA import file."""
    path = Path(path)
    name = str(path)
    if not path.exists():
        raise InputError("file not found", path=name)
    rows: list[tuple[int, dict[str, Any]]] = []
    # strict UTF-8, bounded lines, one named error per bad line (untrusted input)
    for line_no, row in iter_jsonl(path, skip_blank=True):
        rows.append((line_no, row))
    if not rows:
        raise InputError("no items in file", path=name)
    if "distractors" in rows[0][1]:
        return _from_release(path, eval_set)
    items: dict[str, AbstainQAItem] = {}
    for line_no, row in rows:
        item = _import_row(row, path=name, line=line_no)
        if item.question_id in items:
            raise InputError(f"duplicate question_id {item.question_id!r}", path=name, line=line_no,
                             field="question_id")
        items[item.question_id] = item
    return list(items.values())


# -- prompts and calls ------------------------------------------------------------------------

@dataclass(frozen=True)
class AbstainQAPrompt:
    variant: str
    version: str
    system_text: str
    user_template: str
    context_template: str
    reply_instruction: str
    confidence_instruction: str
    sha256: str

    def system(self, verbal_confidence: bool) -> str:
        tail = self.confidence_instruction if verbal_confidence else self.reply_instruction
        return f"{self.system_text}\n{tail}"

    def user(self, item: AbstainQAItem) -> str:
        block = self.context_template.format(context=item.context) if item.context.strip() else ""
        listing = "\n".join(f"{o['letter']}. {o['text']}" for o in item.shown())
        return self.user_template.format(question=item.question, context_block=block, options=listing)


def load_abstainqa_prompt(variant_or_path: str | Path) -> AbstainQAPrompt:
    """A variant name (``standard``, ``abstain``, ``extreme_abstain``: its v1 file) or a prompt file."""
    path = Path(variant_or_path)
    if str(variant_or_path) in VARIANTS or (not path.suffix and not path.exists()):
        path = PROMPT_DIR / f"{variant_or_path}-v1.json"
    raw, data = read_prompt_file(
        path, not_found=f"prompt file not found (variants: {', '.join(VARIANTS)})",
        required=("prompt_version", "variant", "system_text", "user_template", "reply_instruction",
                  "confidence_instruction"),
        placeholders=("{question}", "{context_block}", "{options}"))
    if data.get("idk_option_text", IDK_TEXT) != IDK_TEXT:
        raise InputError(f"the IDK/NOTA option text is fixed: {IDK_TEXT!r}", path=str(path), field="idk_option_text")
    return AbstainQAPrompt(variant=data["variant"], version=data["prompt_version"], system_text=data["system_text"],
                           user_template=data["user_template"],
                           context_template=str(data.get("context_template", "\nCONTEXT\n{context}\n")),
                           reply_instruction=data["reply_instruction"],
                           confidence_instruction=data["confidence_instruction"], sha256=_sha_bytes(raw))


def _sha_bytes(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def variant_label(variant: str, verbal_confidence: bool) -> str:
    return f"{variant}{CONFIDENCE_SUFFIX}" if verbal_confidence else variant


@dataclass(frozen=True)
class AbstainQACall:
    item: AbstainQAItem
    eval_set: str
    condition: str  # the variant label
    trial: int
    verbal_confidence: bool
    system_text: str
    user_text: str
    prompt_version: str

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.eval_set, self.item.question_id, self.condition, self.trial)

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.system_text}, {"role": "user", "content": self.user_text}]

    @property
    def prompt_sha256(self) -> str:
        return _sha(json.dumps([self.system_text, self.user_text], ensure_ascii=False))


def build_abstainqa_call(item: AbstainQAItem, prompt: AbstainQAPrompt, *, trial: int = 1,
                         verbal_confidence: bool = False, eval_set: str = "abstainqa:arcticqa") -> AbstainQACall:
    return AbstainQACall(item=item, eval_set=eval_set, condition=variant_label(prompt.variant, verbal_confidence),
                         trial=trial, verbal_confidence=verbal_confidence,
                         system_text=prompt.system(verbal_confidence), user_text=prompt.user(item),
                         prompt_version=prompt.version)


# -- parsing and scoring ----------------------------------------------------------------------

_STRICT_CONFIDENCE = re.compile(r"Answer:[ \t]*([A-Z])[ \t]*\r?\nConfidence:[ \t]*([1-5])")
_ANY_CONFIDENCE = re.compile(r"confidence\W{0,3}([1-5])(?:\s*/\s*5)?\b", re.IGNORECASE)
_ANSWER_LINE = re.compile(r"answer(?:\s+is)?\W{0,3}\(?([A-Z])\b\)?", re.IGNORECASE)


def parse_reply(text: str | None, letters: str, *, verbal_confidence: bool,
                option_texts: Sequence[str] = ()) -> tuple[str | None, int | None, str | None, int | None]:
    """(strict letter, strict confidence, lenient letter, lenient confidence)."""
    if text is None:
        return None, None, None, None
    strict_letter: str | None
    strict_conf: int | None = None
    if verbal_confidence:
        m = _STRICT_CONFIDENCE.fullmatch(text.strip())
        strict_letter = m.group(1) if m and m.group(1) in letters else None
        strict_conf = int(m.group(2)) if strict_letter and m else None
    else:
        strict_letter = parse_strict(text, letters)
    lenient = parse_lenient(text, letters)
    if lenient is None:
        found = _ANSWER_LINE.search(text)
        if found and found.group(1).upper() == found.group(1) and found.group(1) in letters:
            lenient = found.group(1)
    if lenient is None and option_texts:
        # A reply that is an option's text, e.g. "I don't know / none of the above".
        said = normalise_option_text(text.strip().strip(".")).lower()
        for letter, option in zip(letters, option_texts, strict=False):
            if said == normalise_option_text(option).lower():
                lenient = letter
        if said in _IDK_FORMS or said in {"i don't know", "i do not know", "none of the above"}:
            lenient = letters[-1]
    conf_match = _ANY_CONFIDENCE.search(text)
    lenient_conf = int(conf_match.group(1)) if conf_match else None
    return strict_letter, strict_conf, lenient, lenient_conf


def score_abstainqa(answerable: bool, chosen: str | None, correct_letter: str, idk_letter: str) -> Outcome:
    """The protocol's confusion cell of one reply (INVALID when no option was chosen)."""
    if chosen is None:
        return "INVALID"
    if chosen == idk_letter:
        return "FN" if answerable else "TN"
    if answerable and chosen == correct_letter:
        return "TP"
    return "FP"  # a wrong option on an answerable item, or any option on an unanswerable one


@dataclass(frozen=True)
class AbstainQARecord:
    """One scored response (also the ``details`` of its store row)."""

    model: str
    model_label: str
    variant: str
    trial: int
    question_id: str
    answerable: bool
    letters: str
    correct_letter: str
    raw_response_text: str | None
    chosen_letter: str | None
    confidence: int | None
    lenient_letter: str | None
    lenient_confidence: int | None
    cause: str | None
    prompt_version: str = ""
    domain: str | None = None

    @property
    def idk_letter(self) -> str:
        return self.letters[-1]

    @property
    def outcome(self) -> Outcome:
        return score_abstainqa(self.answerable, self.chosen_letter, self.correct_letter, self.idk_letter)

    @property
    def lenient_outcome(self) -> Outcome:
        if self.cause in (CAUSE_INFRASTRUCTURE, CAUSE_REFUSAL):
            return "INVALID"
        return score_abstainqa(self.answerable, self.lenient_letter, self.correct_letter, self.idk_letter)

    def thresholded(self, t: int) -> Outcome:
        """The outcome when an answer with confidence ≤ t counts as IDK/NOTA."""
        chosen = self.chosen_letter
        if chosen is not None and chosen != self.idk_letter and self.confidence is not None and self.confidence <= t:
            chosen = self.idk_letter
        return score_abstainqa(self.answerable, chosen, self.correct_letter, self.idk_letter)

    @property
    def cell(self) -> tuple[str, str, str, int]:
        return (self.model, self.question_id, self.variant, self.trial)

    def to_details(self) -> dict[str, Any]:
        return {"protocol": "abstainqa", **asdict(self)}

    @classmethod
    def from_details(cls, details: dict[str, Any]) -> AbstainQARecord:
        fields = {k: v for k, v in details.items() if k in cls.__dataclass_fields__}
        return cls(**fields)


def _record(item: AbstainQAItem, *, model: str, model_label: str, variant: str, trial: int,
            text: str | None, verbal_confidence: bool, failure: str | None, prompt_version: str = "",
            given_confidence: int | None = None) -> AbstainQARecord:
    if failure is not None or text is None:
        cause = CAUSE_REFUSAL if failure == "refusal" else CAUSE_INFRASTRUCTURE
        return AbstainQARecord(model, model_label, variant, trial, item.question_id, item.answerable, item.letters,
                               item.correct_letter, text, None, None, None, None, cause, prompt_version, item.domain)
    texts = [o["text"] for o in item.shown()]
    strict, conf, lenient, lenient_conf = parse_reply(text, item.letters, verbal_confidence=verbal_confidence,
                                                      option_texts=texts)
    if given_confidence is not None:
        conf = given_confidence if strict is not None else None
        lenient_conf = given_confidence
    return AbstainQARecord(model, model_label, variant, trial, item.question_id, item.answerable, item.letters,
                           item.correct_letter, text, strict, conf, lenient, lenient_conf,
                           None if strict is not None else CAUSE_FORMAT, prompt_version, item.domain)


def record_from_call(call: AbstainQACall, model: EvalModel, outcome: ChatOutcome, run_id: str,
                     position: int) -> dict[str, Any]:
    """The ``eval_response`` columns of one finished Abstain-QA call."""
    rec = _record(call.item, model=model.label, model_label=model.name, variant=call.condition, trial=call.trial,
                  text=outcome.text, verbal_confidence=call.verbal_confidence, failure=outcome.failure,
                  prompt_version=call.prompt_version)
    kinds = {o["letter"]: o["kind"] for o in call.item.shown()}
    return {
        "run_id": run_id, "protocol": "abstainqa", "eval_set": call.eval_set, "model": model.label,
        "model_label": model.name, "model_position": position, "api_model": model.model,
        "item_id": call.item.question_id, "condition": call.condition, "trial": call.trial,
        "order_seed": call.item.order_seed, "options": call.item.shown(), "correct_letter": call.item.correct_letter,
        "prompt_version": call.prompt_version, "prompt_sha256": call.prompt_sha256,
        "raw_response_text": outcome.text, "chosen_letter": rec.chosen_letter,
        "chosen_kind": kinds.get(rec.chosen_letter or ""), "parser": "strict" if rec.chosen_letter else (
            "lenient" if rec.lenient_letter else None),
        "lenient_letter": rec.lenient_letter, "outcome": rec.outcome, "lenient_outcome": rec.lenient_outcome,
        "cause": rec.cause, "finish_reason": outcome.finish_reason, "usage": outcome.usage,
        "latency_s": outcome.latency_s, "attempts": outcome.attempts, "cost_usd": outcome.cost_usd(model),
        "error": outcome.error, "details": rec.to_details(),
    }


def live_protocol(items: Sequence[AbstainQAItem], prompts: Sequence[AbstainQAPrompt], *, trials: int = 1,
                  verbal_confidence: bool = False, eval_set: str = "arcticqa") -> LiveProtocol:
    """The :class:`~arcticqa.evaluate.runner.LiveProtocol` of an Abstain-QA run."""
    set_id = f"abstainqa:{eval_set}"

    def plan(model: EvalModel) -> list[AbstainQACall]:
        return [build_abstainqa_call(item, prompt, trial=trial, verbal_confidence=verbal_confidence,
                                     eval_set=set_id)
                for item in items for prompt in prompts for trial in range(1, trials + 1)]

    return LiveProtocol(name="abstainqa", plan=plan, row=record_from_call)


# -- external responses -----------------------------------------------------------------------

def load_external_responses(items: Sequence[AbstainQAItem], responses_path: Path | str) -> list[AbstainQARecord]:
    """Score a JSONL of external replies: ``question_id``, ``raw_response_text``, optional
    ``confidence`` (1–5), ``prompt_variant`` (default ``standard``; ``<v>+confidence`` parses the
    two-line confidence reply), ``model``, ``model_label``, ``trial``, ``finish_reason``."""
    by_id = {item.question_id: item for item in items}
    name = str(responses_path)
    records: list[AbstainQARecord] = []
    cells = CellGuard(responses_path)
    for line in external_lines(responses_path, by_id, id_keys=("question_id", "item_id")):
        confidence = line.row.get("confidence")
        if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, int | float)
                                       or not 1 <= confidence <= 5 or confidence != int(confidence)):
            raise InputError("must be an integer from 1 to 5", path=name, line=line.line, field="confidence")
        variant = str(line.row.get("prompt_variant") or "standard")
        rec = _record(by_id[line.question_id], model=line.model, model_label=line.model_label,
                      variant=variant, trial=line.trial, text=line.raw_response_text,
                      verbal_confidence=variant.endswith(CONFIDENCE_SUFFIX), failure=line.failure,
                      given_confidence=int(confidence) if confidence is not None else None)
        cells.check(rec.cell, line, variant)
        records.append(rec)
    if not records:
        raise InputError("no responses in file", path=name)
    return records


# -- metrics and report -----------------------------------------------------------------------

@dataclass
class ConfusionCounts:
    """TP, FN, FP (split by answerability), TN and INVALID of a set of responses."""

    tp: int = 0
    fn: int = 0
    fp_answerable: int = 0
    fp_unanswerable: int = 0
    tn: int = 0
    invalid: int = 0
    no_answer: int = 0  # no provider answer (infrastructure): outside everything, counted apart

    @classmethod
    def of(cls, pairs: Iterable[tuple[bool, str]], causes: Iterable[str | None] = ()) -> ConfusionCounts:
        c = cls()
        for answerable, outcome in pairs:
            c.add(answerable, outcome)
        c.no_answer = sum(1 for cause in causes if cause == CAUSE_INFRASTRUCTURE)
        return c

    def add(self, answerable: bool, outcome: str) -> None:
        if outcome == "TP":
            self.tp += 1
        elif outcome == "FN":
            self.fn += 1
        elif outcome == "TN":
            self.tn += 1
        elif outcome == "FP":
            if answerable:
                self.fp_answerable += 1
            else:
                self.fp_unanswerable += 1
        else:
            self.invalid += 1

    @property
    def fp(self) -> int:
        return self.fp_answerable + self.fp_unanswerable

    @property
    def scored(self) -> int:  # |D|
        return self.tp + self.fn + self.fp + self.tn

    @property
    def answerable(self) -> int:  # |A|
        return self.tp + self.fn + self.fp_answerable

    @property
    def unanswerable(self) -> int:  # |U|
        return self.tn + self.fp_unanswerable

    @staticmethod
    def _ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    @property
    def ar(self) -> float:
        return self._ratio(self.fn + self.tn, self.scored)

    @property
    def aac(self) -> float:
        return self._ratio(self.tp, self.answerable)

    @property
    def uac(self) -> float:
        return self._ratio(self.tn, self.unanswerable)

    @property
    def precision(self) -> float:
        return self._ratio(self.tp, self.tp + self.fp)

    def metrics(self) -> dict[str, float]:
        return {"AR": self.ar, "AAC": self.aac, "UAC": self.uac, "P": self.precision}


@dataclass
class GroupResult:
    model: str
    model_label: str
    variant: str
    strict: ConfusionCounts
    lenient: ConfusionCounts
    thresholds: dict[int, ConfusionCounts] = field(default_factory=dict)
    has_confidence: bool = False


@dataclass
class AbstainQAReport:
    source: str
    questions: int
    answerable_questions: int
    responses: int
    groups: list[GroupResult]
    thresholds: tuple[int, ...]
    coverage: Any


def selective_records(records: Iterable[AbstainQARecord]) -> list[SelectiveRecord]:
    """The coverage view uses the matrix's responses (|D|): an option is an answer, IDK an abstention."""
    out = []
    for r in records:
        outcome = r.outcome
        if outcome == "INVALID":
            continue
        out.append(SelectiveRecord(r.model, r.model_label, r.variant, answered=outcome in ("TP", "FP"),
                                   correct=outcome == "TP", abstained=outcome in ("FN", "TN"),
                                   confidence=float(r.confidence) if r.confidence is not None else None))
    return out


def _group_key(model: str, variant: str) -> tuple[str, int, str]:
    """Models by id, then the variants in their documented order (unknown ones last)."""
    return model, VARIANTS.index(variant) if variant in VARIANTS else len(VARIANTS), variant


def build_abstainqa_report(records: Sequence[AbstainQARecord], *, source: str = "",
                           thresholds: Sequence[int] = DEFAULT_THRESHOLDS) -> AbstainQAReport:
    groups: dict[tuple[str, str], list[AbstainQARecord]] = {}
    for r in records:
        groups.setdefault((r.model, r.variant), []).append(r)
    results = []
    # a report must not depend on the order rows came back from concurrent calls
    for (model, variant), rows in sorted(groups.items(), key=lambda kv: _group_key(*kv[0])):
        has_conf = any(r.confidence is not None for r in rows)
        results.append(GroupResult(
            model=model, model_label=rows[0].model_label, variant=variant,
            strict=ConfusionCounts.of(((r.answerable, r.outcome) for r in rows), (r.cause for r in rows)),
            lenient=ConfusionCounts.of(((r.answerable, r.lenient_outcome) for r in rows), (r.cause for r in rows)),
            thresholds={t: ConfusionCounts.of((r.answerable, r.thresholded(t)) for r in rows) for t in thresholds}
            if has_conf else {}, has_confidence=has_conf))
    questions = {r.question_id: r.answerable for r in records}
    return AbstainQAReport(source=source, questions=len(questions),
                           answerable_questions=sum(questions.values()), responses=len(records), groups=results,
                           thresholds=tuple(thresholds),
                           coverage=analyse_coverage(selective_records(records), protocol="abstainqa"))


def _matrix_row(c: ConfusionCounts) -> list[Any]:
    return [c.scored, c.invalid, c.no_answer, c.tp, c.fn, c.fp_answerable, c.fp_unanswerable, c.tn,
            *(f6(v) for v in c.metrics().values())]


_MATRIX_HEADER = ["scored", "invalid", "no_provider_answer", "TP", "FN", "FP_answerable", "FP_unanswerable", "TN",
                  "AR", "AAC", "UAC", "P"]


def render_abstainqa_tables(report: AbstainQAReport) -> str:
    lines = [
        "# Abstain-QA results", "",
        "Generated by `arcticqa evaluate` (protocol abstainqa). Do not edit by hand.", "",
        f"Questions: {report.questions} ({report.answerable_questions} answerable, "
        f"{report.questions - report.answerable_questions} unanswerable). Responses: {report.responses}.", "",
        "Answerable: correct option TP, IDK/NOTA FN, other option FP. Unanswerable: IDK/NOTA TN, any option FP.",
        "AR = (FN+TN)/|D|, AAC = TP/|A|, UAC = TN/|U|, P = TP/(TP+FP). Invalid replies are outside |D|.", "",
        "## Confusion matrix and metrics (strict parser)", "",
        "| Model | Variant | |D| | Invalid | TP | FN | FP (A) | FP (U) | TN | AR | AAC | UAC | P |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for g in report.groups:
        c = g.strict
        lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {c.scored} | {c.invalid} | {c.tp} | {c.fn} | "
                     f"{c.fp_answerable} | {c.fp_unanswerable} | {c.tn} | {c.ar:.3f} | {c.aac:.3f} | {c.uac:.3f} | "
                     f"{c.precision:.3f} |")
    with_conf = [g for g in report.groups if g.has_confidence]
    if with_conf:
        lines += ["", "## Verbal confidence thresholds", "",
                  "An answer with confidence ≤ t counts as IDK/NOTA (t = 0: as answered).", "",
                  "| Model | Variant | t | AR | AAC | UAC | P |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for g in with_conf:
            for t, c in g.thresholds.items():
                lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {t} | {c.ar:.3f} | {c.aac:.3f} | {c.uac:.3f} | "
                             f"{c.precision:.3f} |")
    lines += ["", "## Parser sensitivity (lenient parser)", "",
              "| Model | Variant | |D| | Invalid | AR | AAC | UAC | P |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for g in report.groups:
        c = g.lenient
        lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {c.scored} | {c.invalid} | {c.ar:.3f} | {c.aac:.3f} | "
                     f"{c.uac:.3f} | {c.precision:.3f} |")
    lines += _coverage_lines(report.coverage)
    return "\n".join(lines) + "\n"


def _coverage_lines(analysis: Any) -> list[str]:
    lines = ["", "## Coverage and risk", "",
             "| Model | Variant | Coverage | Selective acc. | AURC | AURC / coverage |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for g in analysis.groups:
        lines.append(f"| {md_text(g.model_label)} | {md_text(g.variant)} | {g.coverage:.3f} | {g.selective_accuracy:.3f} | "
                     f"{g.aurc:.3f} | {g.aurc_per_coverage:.3f} |")
    if analysis.crossings:
        lines += ["", "Ranking flips under abstention credit λ (correct 1, abstain λ, wrong 0): " + "; ".join(
            f"{c.above} / {c.below} at λ = {c.lam:.3f} ({c.variant})" for c in analysis.crossings) + "."]
    return lines


def _summary(report: AbstainQAReport) -> dict[str, Any]:
    return {
        "protocol": "abstainqa", "source": report.source, "questions": report.questions,
        "answerable_questions": report.answerable_questions, "responses": report.responses,
        "default_parser": "strict",
        "groups": [{"model_id": g.model, "model": g.model_label, "variant": g.variant,
                    "strict": {**asdict(g.strict), **g.strict.metrics()},
                    "lenient": {**asdict(g.lenient), **g.lenient.metrics()},
                    "thresholds": {str(t): c.metrics() for t, c in g.thresholds.items()}} for g in report.groups],
        "coverage": coverage_summary(report.coverage),
    }


def _metrics_figure(report: AbstainQAReport, png: Path, svg: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = ["AR", "AAC", "UAC", "P"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(report.groups) + 3), 3.8))
    x = np.arange(len(report.groups))
    width = 0.2
    for i, name in enumerate(names):
        ax.bar(x + (i - 1.5) * width, [g.strict.metrics()[name] for g in report.groups], width, label=name)
    ax.set_xticks(x, [f"{g.model_label}\n{g.variant}" for g in report.groups], fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_title("Abstain-QA metrics (strict parser)", fontsize=10)
    ax.legend(fontsize=8, frameon=False, ncol=4)
    ax.grid(axis="y", color="0.9")
    fig.tight_layout()
    fig.savefig(png, dpi=150, metadata={"Software": None})
    fig.savefig(svg, metadata={"Date": None})
    plt.close(fig)


def write_abstainqa_report(report: AbstainQAReport, out_dir: Path | str, *, figure: bool = True) -> Path:
    """TABLES.md, confusion.csv, thresholds.csv, parser-sensitivity.csv, summary.json, the coverage
    files and (with ``figure``) abstainqa-metrics.png/svg and coverage-risk.png/svg."""
    texts = {
        "TABLES.md": render_abstainqa_tables(report),
        "confusion.csv": csv_text(["model_id", "model", "variant", *_MATRIX_HEADER],
                                  [[g.model, g.model_label, g.variant, *_matrix_row(g.strict)] for g in report.groups]),
        "thresholds.csv": csv_text(["model_id", "model", "variant", "threshold", *_MATRIX_HEADER],
                                   [[g.model, g.model_label, g.variant, t, *_matrix_row(c)]
                                    for g in report.groups for t, c in g.thresholds.items()]),
        "parser-sensitivity.csv": csv_text(
            ["model_id", "model", "variant", "parser", *_MATRIX_HEADER],
            [[g.model, g.model_label, g.variant, parser, *_matrix_row(c)]
             for g in report.groups for parser, c in (("strict", g.strict), ("lenient", g.lenient))]),
        "summary.json": json.dumps(_summary(report), indent=2) + "\n",
        **coverage_files(report.coverage),
    }
    figures: list[Callable[[Path], None]] = []
    if figure and report.groups:
        figures = [lambda d: _metrics_figure(report, d / "abstainqa-metrics.png", d / "abstainqa-metrics.svg"),
                   lambda d: coverage_figure(report.coverage, d / "coverage-risk.png", d / "coverage-risk.svg")]
    return write_report_folder(out_dir, texts, figures)


def score_abstainqa_file(items_path: Path, responses_path: Path) -> list[AbstainQARecord]:
    """Re-score external responses against an items file (release or import format)."""
    return load_external_responses(load_abstainqa_items(items_path), responses_path)


def summary_lines(report: AbstainQAReport) -> list[str]:
    """One console line per (model, variant)."""
    lines = [f"questions {report.questions} ({report.answerable_questions} answerable), responses {report.responses}"]
    for g in report.groups:
        c = g.strict
        lines.append(f"  {g.model_label} [{g.variant}]: AR {c.ar:.3f}, AAC {c.aac:.3f}, UAC {c.uac:.3f}, "
                     f"P {c.precision:.3f} (TP {c.tp}, FN {c.fn}, FP {c.fp}, TN {c.tn}, invalid {c.invalid})")
    return lines
