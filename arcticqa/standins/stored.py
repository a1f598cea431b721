"""Stored chat completions on the OpenAI-compatible stand-in, as OpenAI keeps them.

A chat completion requested with ``"store": true`` is kept once it is finished (after its
latency, whether or not the client is still there to read it), with the request's ``metadata``:
at most 16 string pairs, keys up to 64 characters, values up to 512 (a request breaking that is
refused with 400, as OpenAI does). ``GET /v1/chat/completions`` lists them (``metadata[key]=value``
filters, ``model``, ``after``, ``limit`` up to 100, ``order`` ``asc`` by default or ``desc``), and
``GET /v1/chat/completions/{id}`` returns one; nothing else is stored.
"""

from __future__ import annotations

import copy
import re
import threading
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from arcticqa.standins.batches import api_error

__all__ = ["StoredCompletions", "metadata_error"]

_LIST = re.compile(r"(?:/v1)?/chat/completions")
_ONE = re.compile(r"(?:/v1)?/chat/completions/(?P<id>[^/]+)")
_FILTER = re.compile(r"metadata\[(?P<key>[^\]]+)\]")


def metadata_error(metadata: Any) -> str | None:
    """Why a request's ``metadata`` is refused (None: it is taken)."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        return "metadata must be an object of string keys and values"
    if len(metadata) > 16:
        return f"metadata has {len(metadata)} keys; at most 16 are allowed"
    for key, value in metadata.items():
        if not isinstance(value, str):
            return f"metadata value of {key!r} must be a string"
        if len(key) > 64:
            return f"metadata key {key[:20]!r}... is longer than 64 characters"
        if len(value) > 512:
            return f"metadata value of {key!r} is longer than 512 characters"
    return None


class StoredCompletions:
    """Mixed into :class:`~arcticqa.standins.server.FakeOpenAIServer`."""

    _stored_lock: threading.Lock

    def _init_stored(self, keeps: bool) -> None:
        #: False: an endpoint that stores nothing and answers 404 to look-ups (as vLLM does)
        self.keeps_completions = keeps
        self._stored_lock = threading.Lock()
        #: completion id -> the stored chat.completion (with its request's metadata), oldest first
        self.stored: dict[str, dict[str, Any]] = {}
        #: GET requests for stored completions (list or one), to check how hard a client looks
        self.stored_lookups = 0

    def keep_completion(self, completion: dict[str, Any], body: dict[str, Any]) -> None:
        """Store ``completion`` if its request asked for that (called once it is finished)."""
        if body.get("store") is not True or not self.keeps_completions:
            return
        with self._stored_lock:
            self.stored[completion["id"]] = {**completion, "metadata": dict(body.get("metadata") or {})}

    def clear_stored(self) -> None:
        """Forget every stored completion (a fresh provider account)."""
        with self._stored_lock:
            self.stored.clear()

    def handle_stored_get(self, raw_path: str) -> tuple[int, dict[str, Any]] | None:
        """The answer to a stored-completions GET, or None when the path is not one of theirs."""
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/")
        if not self.keeps_completions and (_ONE.fullmatch(path) or _LIST.fullmatch(path)):
            return 404, api_error(f"unknown path {path}")
        if match := _ONE.fullmatch(path):
            with self._stored_lock:
                self.stored_lookups += 1
                found = copy.deepcopy(self.stored.get(match["id"]))
            if found is None:
                return 404, api_error(f"No chat completion found with id {match['id']!r}.")
            return 200, found
        if not _LIST.fullmatch(path):
            return None
        query = parse_qsl(parts.query)
        wanted = {m["key"]: v for k, v in query if (m := _FILTER.fullmatch(k))}
        options = {k: v for k, v in query if not _FILTER.fullmatch(k)}
        try:
            limit = min(max(int(options.get("limit", "20")), 1), 100)
        except ValueError:
            return 400, api_error("limit must be an integer", "invalid_type")
        order = options.get("order", "asc")
        if order not in ("asc", "desc"):
            return 400, api_error("order must be 'asc' or 'desc'", "invalid_value")
        with self._stored_lock:
            self.stored_lookups += 1
            chosen = [copy.deepcopy(c) for c in self.stored.values()
                      if all(c["metadata"].get(k) == v for k, v in wanted.items())
                      and options.get("model") in (None, c["model"])]
        if order == "desc":
            chosen.reverse()
        after = options.get("after")
        if after is not None:
            ids = [c["id"] for c in chosen]
            chosen = chosen[ids.index(after) + 1:] if after in ids else []
        page = chosen[:limit]
        return 200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                     "last_id": page[-1]["id"] if page else None, "has_more": len(chosen) > limit}
