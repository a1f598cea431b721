"""The small hierarchy of named exceptions every arcticqa module raises.

Per-paper and per-item failures are *recorded* (stage_run status + error) rather than raised
through the flow; these exceptions are what a stage raises for the runner to record, and what
the CLI turns into a clear message and a non-zero exit (``exit_code``, 2 for bad input).

The tree (``tests/test_house_rules.py`` checks that it draws every class defined here under its
real base class, and that every public exception class of ``arcticqa`` is defined here)::

    ArcticQAError                     exit 1
    ├── ConfigError                   exit 2
    ├── InputError                    exit 2
    │   └── OutputError               exit 2
    ├── StoreError                    exit 1
    │   ├── StoreUnavailable          exit 1
    │   └── StoreMissing              exit 2
    ├── LLMError                      exit 1
    │   ├── LLMTransportError
    │   ├── LLMOutputError
    │   ├── LLMAuthError
    │   ├── LLMRequestError
    │   ├── BudgetExceeded
    │   └── StoredLookupUnavailable
    ├── StageError                    exit 1
    │   ├── UnknownSpanError
    │   ├── ClaimedElsewhere
    │   └── S2RequestError
    │       ├── S2TransientError
    │       └── S2TokenRejected
    ├── BuildFailed                   exit 1
    │   └── FailureThresholdExceeded
    └── EndpointUnreachable           exit 1

Module-private control-flow signals (``_Retry``, ``_Outcome`` in ``text/fetch.py``, ``_Reject`` in
``geo/coordinates.py``, ``_Unreadable`` in ``standins/passthrough.py``, ``_TooLarge`` and
``_Disconnected`` in ``workbench/guard.py``, ``_BadRequest`` in ``workbench/app.py``) never leave
their module and stay there.
"""

from __future__ import annotations

__all__ = [
    "ArcticQAError",
    "ConfigError",
    "InputError",
    "OutputError",
    "StoreError",
    "StoreMissing",
    "StoreUnavailable",
    "LLMError",
    "LLMTransportError",
    "LLMOutputError",
    "LLMAuthError",
    "LLMRequestError",
    "BudgetExceeded",
    "StoredLookupUnavailable",
    "StageError",
    "UnknownSpanError",
    "ClaimedElsewhere",
    "S2RequestError",
    "S2TransientError",
    "S2TokenRejected",
    "BuildFailed",
    "FailureThresholdExceeded",
    "EndpointUnreachable",
]


class ArcticQAError(Exception):
    """Base class of every error arcticqa raises on purpose."""

    exit_code = 1


class ConfigError(ArcticQAError):
    """The settings (TOML file, environment, CLI) are invalid or incomplete."""

    exit_code = 2


class InputError(ArcticQAError):
    """A user-supplied file is malformed. Names the file, line and field."""

    exit_code = 2

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.path, self.line, self.field = path, line, field
        where = ":".join(str(p) for p in (path, line) if p is not None)
        prefix = f"{where}: " if where else ""
        suffix = f" (field '{field}')" if field else ""
        super().__init__(f"{prefix}{message}{suffix}")


class OutputError(InputError):
    """An output target cannot be written: it holds work arcticqa did not write (and no
    ``--overwrite``), or the operating system refused (read-only, name too long, not a folder,
    disk full). Names the path."""


class StoreError(ArcticQAError):
    """The evidence store cannot be opened, migrated or written."""


class StoreUnavailable(StoreError):
    """The store's server went away and did not come back within ``store.busy_timeout_s`` (or
    reconnecting is off): nothing can be written, so writers stop rather than retry one by one."""


class StoreMissing(StoreError):
    """A command that only reads found no store: bad input (wrong folder or missing ``-c``)."""

    exit_code = 2


class LLMError(ArcticQAError):
    """A model call did not produce a usable result."""


class LLMTransportError(LLMError):
    """The endpoint never produced an answer (connection, timeout, 429/5xx after retries)."""


class LLMOutputError(LLMError):
    """The endpoint answered, but the output could not be validated (after bounded re-asks)."""


class LLMAuthError(LLMError):
    """The endpoint refused the credentials (HTTP 401/403): asking again cannot help."""


class LLMRequestError(LLMError):
    """The endpoint refused the request itself (HTTP 400/404/422: unknown model, bad parameter)."""


class BudgetExceeded(LLMError):
    """The per-run spending cap is reached; no new paid calls are started."""


class StoredLookupUnavailable(LLMError):
    """The endpoint cannot list stored completions (``recover_in_flight``): requests sent before
    are sent again."""


class StageError(ArcticQAError):
    """A stage could not run for a reason that is not a rejection (e.g. missing upstream output)."""


class UnknownSpanError(StageError):
    """A span id that the document does not have, or whose stored text no longer matches."""


class ClaimedElsewhere(StageError):
    """A construction step is being run by another live worker (this attempt gives way)."""


class S2RequestError(StageError):
    """Semantic Scholar answered a request with an error (or not at all)."""

    def __init__(self, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        self.status, self.retry_after = status, retry_after
        super().__init__(message)


class S2TransientError(S2RequestError):
    """A failure worth retrying: 429, 5xx, transport error, or an empty non-final page."""


class S2TokenRejected(S2RequestError):
    """The server refused a continuation token (expired or unknown)."""


class BuildFailed(ArcticQAError):
    """The build stopped on purpose: more than the allowed share of a batch failed at a stage."""


class FailureThresholdExceeded(BuildFailed):
    """More than ``failure_threshold`` of a batch failed: something systemic is wrong."""


class EndpointUnreachable(ArcticQAError):
    """An endpoint a command needs (a model's ``base_url``, Semantic Scholar) does not answer or
    refuses the key, found before any work started (nothing was changed)."""
