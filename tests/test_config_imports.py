"""``arcticqa/config.py`` sits at the foundation layer: it imports no project module but
``errors`` and ``rules``, so every layer may load settings without pulling in what is above."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import arcticqa.config

ALLOWED = {"arcticqa.errors", "arcticqa.rules"}


def _project_imports(source: str) -> set[str]:
    """Every ``arcticqa`` module an import statement names, at module level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # a relative import is always a project import
                names.add("." * node.level + (node.module or ""))
            elif node.module:
                names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names
                                          if node.module == "arcticqa"}
    return {n for n in names if n == "arcticqa" or n.startswith(("arcticqa.", "."))}


def test_config_imports_no_project_module_but_errors_and_rules() -> None:
    found = _project_imports(Path(arcticqa.config.__file__).read_text(encoding="utf-8"))
    assert found <= ALLOWED, sorted(found - ALLOWED)


def test_the_import_check_sees_imports_inside_functions() -> None:
    source = "from arcticqa.errors import ConfigError\n\ndef f():\n    from arcticqa.text import fetch\n"
    assert _project_imports(source) == {"arcticqa.errors", "arcticqa.text"}


def test_loading_config_loads_no_other_project_module() -> None:
    # in a fresh interpreter: this test process has imported half the project already
    code = ("import sys, arcticqa.config\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('arcticqa.'))))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert set(done.stdout.split()) <= {"arcticqa.config"} | ALLOWED, done.stdout
