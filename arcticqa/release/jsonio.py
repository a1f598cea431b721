"""Canonical JSON bytes for release files, and a hardened JSONL reader for untrusted ones.

Writing: one ``json.dumps(..., ensure_ascii=False)`` object per line (the ArcticQA v1 byte
format), JSON documents indented by two spaces, every file ending in a newline. Reading: lines
are size-capped before they are decoded, must be valid UTF-8 and strict JSON (no NaN, no
duplicate keys), and every failure is an :class:`~arcticqa.errors.InputError` naming file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from arcticqa.errors import InputError

__all__ = ["MAX_LINE_BYTES", "MAX_JSON_DEPTH", "nesting_depth", "shown", "identifier", "decode_json", "item_json",
           "jsonl_bytes", "json_bytes", "iter_jsonl", "iter_jsonl_lenient", "load_json"]

#: a line longer than this is refused before it is decoded (an item with evidence is < 1 MB)
MAX_LINE_BYTES = 8 * 1024 * 1024
#: a JSON document (manifest, prompt, excluded items) larger than this is refused
MAX_JSON_BYTES = 16 * 1024 * 1024
#: arrays/objects nested deeper than this are refused before parsing: Python's parser recurses
#: once a level and dies with RecursionError near 1,000; a release record is under 10 deep
MAX_JSON_DEPTH = 100

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")

# additions that are left out when empty, so a v1 record serialises byte-identically
_OPTIONAL_ITEM_KEYS = ("eval_set_id", "candidate_hash", "evidence", "claim_type", "scope",
                       "answer_unit", "answer_match", "source_license")
_OPTIONAL_PAPER_KEYS = ("title", "year", "publication_date")


#: an echoed value is cut to this many characters: a 5,000-digit "trial" is one line, not 22
MAX_SHOWN = 60
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut to :data:`MAX_SHOWN` characters."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else f"{text[:MAX_SHOWN - 1]}… ({len(text)} characters)"


def identifier(value: Any, *, path: str, line: int | None, field: str) -> str:
    """A user-supplied id or label as text; control characters (NUL, escape, newline…) are refused,
    since the value is copied into file names, CSV cells, Markdown tables and terminal output."""
    text = str(value)
    bad = _CONTROL.search(text)
    if bad:
        raise InputError(f"control character U+{ord(bad.group()):04X} in {shown(text)}", path=path, line=line,
                         field=field)
    return text


def item_json(item: BaseModel) -> dict[str, Any]:
    """An item as a JSON object in model field order, with empty optional additions left out."""
    data = item.model_dump(mode="json")
    for key in _OPTIONAL_ITEM_KEYS:
        if data.get(key) is None:
            data.pop(key, None)
    paper = data.get("paper") or {}
    for key in _OPTIONAL_PAPER_KEYS:
        if paper.get(key) is None:
            paper.pop(key, None)
    return data


def jsonl_bytes(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False, allow_nan=False) + "\n"
                   for r in records).encode("utf-8")


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, ensure_ascii=False, indent=2, allow_nan=False) + "\n").encode("utf-8")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def nesting_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in a JSON text (brackets inside strings not counted)."""
    brackets = _NOT_BRACKET.sub(b"", _STRING.sub(b"", raw))
    return max(accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


def decode_json(raw: bytes, path: Path, line: int | None) -> Any:
    """Strict UTF-8 and JSON (no NaN, no duplicate keys, bounded depth) or an :class:`InputError`."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"invalid UTF-8 at byte {exc.start}", path=str(path), line=line) from None
    if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH and nesting_depth(raw) > MAX_JSON_DEPTH:
        raise InputError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels", path=str(path), line=line)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except json.JSONDecodeError as exc:
        # some of json's messages end in " at", expecting its own ": line L column C (char N)"
        raise InputError(f"invalid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}", path=str(path),
                         line=line) from None
    except RecursionError:  # the depth check above should make this unreachable
        raise InputError("JSON nested too deeply to read", path=str(path), line=line) from None
    except ValueError as exc:
        raise InputError(f"invalid JSON: {exc}", path=str(path), line=line) from None


def iter_jsonl_lenient(path: Path, *, max_line_bytes: int = MAX_LINE_BYTES, skip_blank: bool = False
                       ) -> Iterator[tuple[int, dict[str, Any] | InputError]]:
    """Yield ``(line number, object or the error of that line)``; a validator keeps going past a
    bad line. Reading stops after an over-long line, since its end cannot be found cheaply.
    Blank lines are errors unless ``skip_blank`` (files written by other tools)."""
    with path.open("rb") as fh:
        lineno = 0
        while True:
            raw = fh.readline(max_line_bytes + 1)
            if not raw:
                return
            lineno += 1
            if len(raw) > max_line_bytes:
                yield lineno, InputError(f"line is longer than {max_line_bytes} bytes; "
                                         "the rest of the file was not read", path=str(path),
                                         line=lineno)
                return
            if not raw.endswith(b"\n"):
                # a last line without a newline is how a cut-off write looks
                yield lineno, InputError("truncated line (no newline at end of file)",
                                         path=str(path), line=lineno)
                return
            body = raw.rstrip(b"\r\n")
            if not body.strip() and skip_blank:
                continue
            if not body.strip():
                yield lineno, InputError("empty line", path=str(path), line=lineno)
                continue
            try:
                obj = decode_json(body, path, lineno)
            except InputError as exc:
                yield lineno, exc
                continue
            if not isinstance(obj, dict):
                yield lineno, InputError(f"expected a JSON object, got {type(obj).__name__}",
                                         path=str(path), line=lineno)
                continue
            yield lineno, obj


def iter_jsonl(path: Path, *, max_line_bytes: int = MAX_LINE_BYTES, skip_blank: bool = False
               ) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each line; the first bad line raises InputError."""
    for lineno, obj in iter_jsonl_lenient(path, max_line_bytes=max_line_bytes, skip_blank=skip_blank):
        if isinstance(obj, InputError):
            raise obj
        yield lineno, obj


def load_json(path: Path, *, max_bytes: int = MAX_JSON_BYTES) -> Any:
    size = path.stat().st_size
    if size > max_bytes:
        raise InputError(f"file is larger than {max_bytes} bytes", path=str(path))
    return decode_json(path.read_bytes(), path, None)
