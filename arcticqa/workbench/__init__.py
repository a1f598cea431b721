"""The expert review workbench: a small local web app (``arcticqa review serve``).

An interface, like the CLI: it sits above :mod:`arcticqa.review` (plans, items, verdict rules)
and :mod:`arcticqa.store` and is imported only by ``arcticqa.cli``. It lives in its own
top-level package rather than under ``arcticqa.review`` so the review domain stays importable
without FastAPI and the layer contract can name the web app as an interface.
"""

from __future__ import annotations

from arcticqa.workbench.app import check_bind, create_app, serve

__all__ = ["create_app", "check_bind", "serve"]
