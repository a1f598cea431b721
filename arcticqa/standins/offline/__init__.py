"""The offline roles: deterministic, rule-based stand-ins for every model role.

A baseline for trying the pipeline without an API key and for tests, not a substitute for an
LLM. :data:`arcticqa.standins.offline.roles.OFFLINE_ROLES` maps each role to its function; the
build runner hands it to the gateway's offline provider (:mod:`arcticqa.llm.providers.offline`).
"""

__all__: list[str] = []
