"""Stand-ins for what the product talks to: deterministic offline roles, an OpenAI-compatible
server on 127.0.0.1 (with a provider's limits: :mod:`.limits`), a Semantic Scholar Graph API
(:mod:`.s2`), a scripted model and synthetic papers.

The demo and the default settings build with the offline roles (:mod:`.offline`); tests and
benchmarks use the rest. Layer: above ``llm/``, ``gates/``, ``geo/`` and ``text/`` (which it may
use); nothing in ``llm/`` imports it (``tests/test_house_rules.py`` checks). The gateway gets
the offline roles from whoever opens it. Nothing is re-exported: import the submodule.
"""

__all__: list[str] = []
