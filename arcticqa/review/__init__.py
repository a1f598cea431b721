"""Expert review: a seeded sample of items, reviewers' verdicts, and the error rate they measure.

``plan`` draws and extends the sample, ``items`` reads what a reviewer judges from the store,
``stats`` holds the estimators, ``report`` turns verdicts into the residual error rate, false
rejections, agreement and what the gates missed (``arcticqa review sample|report``; the
browser workbench of ``arcticqa review serve`` is :mod:`arcticqa.workbench`).
"""

from __future__ import annotations

__all__: list[str] = []
