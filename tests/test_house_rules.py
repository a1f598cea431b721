"""House rules as tests: one exception tree, docs that cannot drift from the code, explicit ``__all__``.

Each check reads the code itself (the settings model, the rule registry, the Typer app, the build
plan, the module files), so a new setting, rule id, command, stage, exception class or module
that breaks a rule fails here with its name. Fast: every module is imported once, no subprocess.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, get_args, get_origin

import typer.main
from pydantic import BaseModel

import arcticqa
from arcticqa import errors
from arcticqa.config import ROLES, Settings
from arcticqa.rules import all_rules

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "arcticqa"

# Modules that are not importable library code: ``__main__`` runs the CLI when imported, and the
# Alembic migration scripts (no ``__init__``, loaded by path) are outside the walk anyway.
_NOT_IMPORTED = {"arcticqa.__main__"}


def _arcticqa_modules() -> list[ModuleType]:
    """Every module of the ``arcticqa`` package, imported (which also declares every rule)."""
    names = [m.name for m in pkgutil.walk_packages(arcticqa.__path__, "arcticqa.")]
    return [arcticqa, *(importlib.import_module(n) for n in sorted(names) if n not in _NOT_IMPORTED)]


MODULES = _arcticqa_modules()


def _docs_text() -> str:
    files = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    return "\n".join(f.read_text(encoding="utf-8") for f in files)


DOCS = _docs_text()


# -- the exception tree -------------------------------------------------------------------------

def _exception_classes() -> Iterator[tuple[str, type[BaseException]]]:
    for module in MODULES:
        for obj in vars(module).values():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                yield module.__name__, obj


def _drawn_tree() -> dict[str, str | None]:
    """class name -> the parent the ``errors`` docstring draws it under (None at the root)."""
    doc = errors.__doc__ or ""
    block = doc.split("::", 1)[1] if "::" in doc else ""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []  # (column of the name, name) of the open branches
    for line in block.splitlines():
        if line.strip() and not line[0].isspace():
            break  # the indented drawing ended
        m = re.match(r"^([\s│├└─]*)([A-Z]\w+)", line)
        if not m:
            continue
        column, name = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= column:
            stack.pop()
        parents[name] = stack[-1][1] if stack else None
        stack.append((column, name))
    return parents


def test_every_public_exception_class_lives_in_arcticqa_errors() -> None:
    elsewhere = [f"{module}.{cls.__name__}" for module, cls in _exception_classes()
                 if module != "arcticqa.errors" and not cls.__name__.startswith("_")]
    assert not elsewhere, f"exception classes outside arcticqa/errors.py: {elsewhere}"


def test_module_private_exceptions_are_named_in_the_errors_docstring() -> None:
    # control-flow signals that never leave their module may stay there, but not unseen
    private = [cls.__name__ for module, cls in _exception_classes()
               if module != "arcticqa.errors" and cls.__name__.startswith("_")]
    assert private, "the walk found no module-private exception (it should find _Retry)"
    unnamed = [name for name in private if f"``{name}``" not in (errors.__doc__ or "")]
    assert not unnamed, f"private exceptions the errors docstring does not name: {unnamed}"


def test_the_errors_docstring_draws_the_real_tree() -> None:
    drawn = _drawn_tree()
    defined = {cls.__name__: cls for module, cls in _exception_classes() if module == "arcticqa.errors"}
    assert set(drawn) == set(defined), (f"not drawn: {sorted(set(defined) - set(drawn))}; "
                                        f"drawn but not defined: {sorted(set(drawn) - set(defined))}")
    wrong = {}
    for name, cls in defined.items():
        base = cls.__bases__[0]
        actual_parent = None if base is Exception else base.__name__
        if drawn[name] != actual_parent:
            wrong[name] = f"drawn under {drawn[name]}, subclasses {actual_parent}"
    assert not wrong, wrong
    assert set(errors.__all__) == set(defined)


# -- docs drift -------------------------------------------------------------------------------------

def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model a field holds directly, or as the values of a dict (``models``)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) is dict:
        value = get_args(annotation)[1]
        if inspect.isclass(value) and issubclass(value, BaseModel):
            return value
    return None


def _settings_keys() -> list[tuple[str, str]]:
    """(section, key) for every setting a user can write; section "" is the top level."""
    keys: list[tuple[str, str]] = []
    for name, field in Settings.model_fields.items():
        if name == "config_path":
            continue  # the loader sets it (the file's path); no user writes it, a file or variable that does is refused
        model = _model_of(field.annotation)
        if model is not None:
            keys += [(name, key) for key in model.model_fields]
        elif name == "roles":
            keys += [("roles", role) for role in ROLES]
        else:
            keys.append(("", name))
    return keys


def _documented_settings() -> set[tuple[str, str]]:
    """(section, key) pairs the docs show: TOML example lines under their table header, plus
    ``section.key`` and ``ARCTICQA_SECTION__KEY`` mentions in the text."""
    seen: set[tuple[str, str]] = set()
    for block in re.findall(r"```toml\n(.*?)```", DOCS, flags=re.S):
        section = ""
        for line in block.splitlines():
            header = re.match(r"\s*\[([\w.]+)\]", line)
            if header:
                section = header.group(1).split(".")[0]
                continue
            key = re.match(r"\s*([a-z_]\w*)\s*=", line)
            if key:
                seen.add((section, key.group(1)))
    for section, key in re.findall(r"\b([a-z_]+)\.([a-z_][a-z0-9_]*)\b", DOCS):
        seen.add((section, key))
    for section, key in re.findall(r"ARCTICQA_([A-Z_]+?)__([A-Z0-9_]+)", DOCS):
        seen.add((section.lower(), key.lower()))
    return seen


def test_every_settings_key_is_documented() -> None:
    keys = _settings_keys()
    assert len(keys) > 60 and ("build", "batch_size") in keys and ("models", "base_url") in keys
    documented = _documented_settings()
    missing = [f"{s}.{k}" if s else k for s, k in keys if (s, k) not in documented]
    assert not missing, f"settings keys no page under README.md/docs/ documents: {missing}"


def test_every_rule_id_is_documented() -> None:
    ids = [r.id for r in all_rules()]
    assert len(ids) > 70  # every stage, gate and release module was imported and declared its rules
    missing = [i for i in ids if not re.search(rf"(?<![\w.]){re.escape(i)}(?![\w])", DOCS)]
    assert not missing, f"rule ids no page under README.md/docs/ documents: {missing}"


def _command_paths() -> list[str]:
    paths: list[str] = []

    def walk(cmd: Any, path: tuple[str, ...]) -> None:
        subs = getattr(cmd, "commands", {})
        if path and not getattr(cmd, "hidden", False):
            paths.append(" ".join(path))
        for name, sub in subs.items():
            walk(sub, (*path, name))

    from arcticqa.cli import app

    walk(typer.main.get_command(app), ())
    return paths


def test_every_cli_command_is_documented() -> None:
    commands = _command_paths()
    assert "build" in commands and "validate-release" in commands
    missing = [c for c in commands if not re.search(rf"arcticqa {re.escape(c)}(?![\w-])", DOCS)]
    assert not missing, f"commands no page under README.md/docs/ shows as 'arcticqa COMMAND': {missing}"


def test_every_build_stage_and_stage_module_is_documented() -> None:
    from arcticqa.pipeline.stages import BUILD_STAGES

    names = ["discover", *(s.name for s in BUILD_STAGES)]
    names += [p.stem for p in (PACKAGE / "stages").glob("*.py") if p.stem != "__init__"]
    assert "construct" in names and "findings" in names
    missing = sorted({n for n in names if f"`{n}`" not in DOCS and f"stages/{n}.py" not in DOCS})
    assert not missing, f"build stages no page under README.md/docs/ names: {missing}"


# -- __all__ ------------------------------------------------------------------------------------------

def _python_files() -> list[Path]:
    # Alembic's migration scripts are loaded by path, never imported by name
    return sorted(p for root in (PACKAGE, REPO / "flows") for p in root.rglob("*.py")
                  if "migrations" not in p.parts)


def _declared_all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            assert node.value is not None
            return list(ast.literal_eval(node.value))
    return None


def test_every_module_has_a_docstring_and_declares_all() -> None:
    files = _python_files()
    assert len(files) > 100
    no_all, no_doc = [], []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _declared_all(tree) is None:
            no_all.append(str(path.relative_to(REPO)))
        if ast.get_docstring(tree) is None:
            no_doc.append(str(path.relative_to(REPO)))
    assert not no_all, f"modules without __all__: {no_all}"
    assert not no_doc, f"modules without a docstring: {no_doc}"


def test_every_name_in_all_exists() -> None:
    flows = [importlib.import_module(f"flows.{p.stem}" if p.stem != "__init__" else "flows")
             for p in sorted((REPO / "flows").glob("*.py"))]
    wrong = [f"{m.__name__}.{name}" for m in [*MODULES, *flows] for name in getattr(m, "__all__", [])
             if not hasattr(m, name)]
    assert not wrong, f"__all__ names that the module does not define: {wrong}"
    counted = sum(len(getattr(m, "__all__", [])) for m in MODULES)
    assert counted > 300  # the walk really reached the modules


# -- imports ------------------------------------------------------------------------------------

def _function_level_project_imports(path: Path) -> Iterator[tuple[int, bool]]:
    """(line, explained) for each import of a project module inside a function of ``path``.

    Explained means a comment on the import's line or directly above the run of import lines it
    belongs to: the reason (a fast ``--help``, an optional extra, a heavy import only one path
    needs) is written where the import is.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    for func in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                targets = ["." if node.level else (node.module or "")]
            else:
                continue
            if not any(t == "." or t.split(".")[0] in {"arcticqa", "flows"} for t in targets):
                continue
            row = node.lineno - 1
            while row > 0 and lines[row - 1].strip().startswith(("import ", "from ")):
                row -= 1
            explained = "#" in lines[node.lineno - 1] or (row > 0 and lines[row - 1].strip().startswith("#"))
            yield node.lineno, explained


def _project_sources() -> list[Path]:
    files = [*PACKAGE.rglob("*.py"), *(REPO / "flows").rglob("*.py")]
    return sorted(f for f in files if "migrations" not in f.parts)


def test_function_level_imports_of_the_project_say_why() -> None:
    silent = [f"{f.relative_to(REPO)}:{line}" for f in _project_sources()
              for line, explained in _function_level_project_imports(f) if not explained]
    assert not silent, ("imports of arcticqa/flows inside a function need a comment saying why "
                        f"(or move them to the top of the module): {silent}")


def test_the_import_rule_sees_a_silent_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    x = 1\n    from arcticqa.config import Settings\n"
                     "def g():\n    # why: heavy\n    from arcticqa import errors\n    import arcticqa.rules\n",
                     encoding="utf-8")
    assert list(_function_level_project_imports(probe)) == [(3, False), (6, True), (7, True)]


def test_no_importlib_loads_of_project_packages() -> None:
    loads = []
    for f in _project_sources():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in {"import_module", "__import__"}):
                loads.append(f"{f.relative_to(REPO)}:{node.lineno}")
    assert not loads, f"project modules are imported with import statements, not importlib: {loads}"


# -- settings are passed, not read from the environment -----------------------------------------------

#: every read of the process environment under ``arcticqa/``, by file and enclosing function, with why
#: it is not a read of settings. Settings are the ``Settings`` object the entry point loaded and handed
#: down; the CLI's loader is the one place that hands the environment to it.
ENVIRONMENT_READS = {
    ("arcticqa/cli/app.py", "load_cli_settings"):
        "the CLI's loader: $ARCTICQA_CONFIG names the file, ARCTICQA_* override it (the one place)",
    ("arcticqa/config.py", "ModelConfig.api_key"):
        "an API key, by the variable name a model config names (keys are never settings)",
    ("arcticqa/config.py", "DiscoverySettings.api_key"):
        "the Semantic Scholar key, by the variable name [discovery] api_key_env names",
    ("arcticqa/pipeline/preflight.py", "probe"):
        "an endpoint's API key, by the variable name its model config names",
    ("arcticqa/text/isolate.py", "_child_env"):
        "the extraction child's environment: locale, temp dir, search paths, and no API key",
    ("arcticqa/integrations/inspect_task.py", "user_path"):
        "$PWD: the folder the user typed a relative -T path in (inspect chdirs to the task's folder)",
    ("arcticqa/store/db.py", "_committed"):
        "ARCTICQA_TEST_EXIT_AFTER_COMMIT: the crash hook tests/test_kill_windows.py sets in a build's child",
    ("arcticqa/cli/prefect.py", "prefect_homes"):
        "PREFECT_HOME: Prefect's own variable, where the shared server's state file is",
    ("arcticqa/cli/prefect.py", "start"):
        "PREFECT_API_URL: Prefect's own variable; with a server of the user's own there is none to start",
}

_ENV_FUNCS = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def _environment_reads(path: Path) -> Iterator[tuple[str, int]]:
    """(enclosing function's qualified name, line) of each use of ``os.environ`` and its kin in
    ``path`` (``os.environ``, ``os.getenv``, ``from os import environ`` and the names it binds)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "os"
                for alias in node.names if alias.name in _ENV_FUNCS}

    def visit(node: ast.AST, scope: tuple[str, ...]) -> Iterator[tuple[str, int]]:
        for child in ast.iter_child_nodes(node):
            inner = (*scope, child.name) if isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else scope
            if isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name) \
                    and child.value.id == "os" and child.attr in _ENV_FUNCS:
                yield ".".join(scope) or "<module>", child.lineno
            elif isinstance(child, ast.Name) and child.id in imported:
                yield ".".join(scope) or "<module>", child.lineno
            yield from visit(child, inner)

    yield from visit(tree, ())


def test_no_module_reads_the_environment_for_settings() -> None:
    found: dict[tuple[str, str], list[int]] = {}
    for f in _project_sources():
        if f.is_relative_to(PACKAGE):
            for scope, line in _environment_reads(f):
                found.setdefault((str(f.relative_to(REPO)), scope), []).append(line)
    unexplained = [f"{file}:{lines[0]} ({scope})" for (file, scope), lines in sorted(found.items())
                   if (file, scope) not in ENVIRONMENT_READS]
    assert not unexplained, (
        "modules under arcticqa/ take settings from the Settings object handed down, not from os.environ "
        "(the CLI's loader, arcticqa/cli/app.py load_cli_settings, is the one place that reads it); a read "
        f"that is not a setting needs its reason in ENVIRONMENT_READS: {unexplained}")


def test_the_environment_rule_sees_every_spelling(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom os import environ as env, getenv\n"
                     "class C:\n    def f(self):\n        return os.environ.get('ARCTICQA_X')\n"
                     "def g():\n    return os.getenv('ARCTICQA_Y'), env['Z'], getenv('W')\n"
                     "SIZE = os.environ['ARCTICQA_BUILD__BATCH_SIZE']\n", encoding="utf-8")
    assert sorted(_environment_reads(probe)) == [("<module>", 8), ("C.f", 5), ("g", 7), ("g", 7), ("g", 7)]


def test_settings_read_no_source_but_what_they_are_handed() -> None:
    # Settings(...) takes only its arguments: load_settings merges the file, the environment it is
    # handed and the overrides, so a library caller never picks up a stray ARCTICQA_* variable
    sources = Settings.settings_customise_sources(Settings, *(object() for _ in range(4)))
    assert len(sources) == 1
