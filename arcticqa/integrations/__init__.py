"""Bridges to evaluation harnesses people already run (interface layer).

- :mod:`arcticqa.integrations.inspect_task`: ArcticAbstain as an inspect_ai task
  (``inspect eval arcticqa/integrations/inspect_task.py -T release=DIR --model ...``);
- :mod:`arcticqa.integrations.inspect_log`: inspect logs of that task turned into the external
  response lines ``arcticqa evaluate score`` reads (``--from-inspect-log``).

Both need the optional ``inspect`` extra (``pip install -e ".[inspect]"``), so nothing here is
imported by this package itself, and nothing in arcticqa imports it except the CLI.
"""

from __future__ import annotations

__all__: list[str] = []
