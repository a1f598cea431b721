"""Model providers behind the gateway, chosen by a model config's ``provider`` string.

- ``openai`` (:mod:`.openai`): any OpenAI-compatible endpoint, through instructor and the openai
  SDK; its exceptions become ours in :mod:`.openai_errors`, its Batch API mode is
  :mod:`.openai_batch`;
- ``offline`` (:mod:`.offline`): deterministic functions handed in by the caller.

The gateway sees only :class:`~arcticqa.llm.providers.base.Provider`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from arcticqa.errors import ConfigError
from arcticqa.llm.batch import BatchLedger
from arcticqa.llm.providers.base import Provider
from arcticqa.llm.providers.offline import OfflineProvider, OfflineRole

__all__ = ["PROVIDERS", "open_provider"]

#: the ``provider`` strings a model config may name
PROVIDERS = ("openai", "offline")


def open_provider(name: str, *, ledger: BatchLedger, batch_dir: Path, run_id: str | None = None,
                  offline_roles: Mapping[str, OfflineRole] | None = None) -> Provider:
    """The provider called ``name``, ready for the gateway to use (and ``aclose``)."""
    if name == "offline":
        return OfflineProvider(offline_roles or {})
    if name == "openai":
        # Imported here, not at the top: the openai SDK and instructor take ~1 s to import, which
        # a build whose roles are all offline (the demo, the default settings) never needs.
        from arcticqa.llm.providers.openai import OpenAIProvider

        return OpenAIProvider(ledger=ledger, batch_dir=batch_dir, run_id=run_id)
    raise ConfigError(f"unknown model provider {name!r}; expected one of {', '.join(PROVIDERS)}")
