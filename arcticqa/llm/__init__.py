"""The only place that talks to models: roles, prompt files, the gateway (cache, retries, budget,
``llm_call`` records), batch mode, the offline provider and the OpenAI-compatible stand-in server.

Nothing is re-exported: callers import the submodule they need (``arcticqa.llm.gateway``, ...).
"""

__all__: list[str] = []
