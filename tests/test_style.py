"""The code stays ruff-clean and passes mypy --strict (with the pydantic plugin), in CI like anywhere, and binds
each module-level name once."""

from __future__ import annotations

import ast
import functools
import operator
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT


def _tool(module: str) -> list[str]:
    if shutil.which(module) is None and subprocess.run([sys.executable, "-m", module, "--version"],
                                                       capture_output=True, check=False).returncode != 0:
        pytest.fail(f"{module} is not installed (it is a dev dependency: pip install -e '.[dev]')")
    return [sys.executable, "-m", module]


def test_ruff_is_clean() -> None:
    result = subprocess.run([*_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    """mypy runs on the source folders and tests/ as they are (pyproject's `files`); spark_compile.* imports
    resolve through the installed package, so no tree is built for it. (The fleet's static Python is checked
    as the fleet folder holds it: tests/fleet/test_fleet_artifacts.py.)"""
    command = [*_tool("mypy"), "--no-incremental"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found" in result.stdout


def module_bindings(body: list[ast.stmt]) -> Counter[str]:
    """How often each name is bound at a module's top level (assignments, def, class); the branches of an if
    or a try are alternatives, so a name set in each counts once; @overload signatures do not count."""
    found = Counter[str]()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            overload = any(ast.unparse(d).endswith("overload") for d in node.decorator_list)
            found[node.name] += 0 if overload else 1
        elif isinstance(node, ast.Assign | ast.AnnAssign) and (not isinstance(node, ast.AnnAssign) or node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found.update(n.id for t in targets for n in ast.walk(t)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
        elif isinstance(node, ast.If):
            found.update(module_bindings(node.body) | module_bindings(node.orelse))
        elif isinstance(node, ast.Try):
            branches = [module_bindings(node.body), *(module_bindings(h.body) for h in node.handlers)]
            found.update(functools.reduce(operator.or_, branches))
            found.update(module_bindings([*node.orelse, *node.finalbody]))
    return found


def twice_bound(root: Path) -> list[str]:
    """`file: name` for every module-level name bound twice in a Python file of the project."""
    found = []
    tops = [p for p in root.iterdir() if not p.name.startswith(".") and p.name not in ("build", "generated")
            and not p.name.endswith(".egg-info")]  # not venvs, caches or build trees
    for path in sorted(p for top in tops for p in ([top] if top.is_file() else top.rglob("*.py"))
                       if p.suffix == ".py"):
        counts = module_bindings(ast.parse(path.read_text(), str(path)).body)
        found += [f"{path.relative_to(root)}: {name}" for name, count in sorted(counts.items()) if count > 1]
    return found


def test_no_module_level_name_is_assigned_twice() -> None:
    """The second binding silently wins (spec/checks.py once held two copies of its regexes)."""
    assert twice_bound(ROOT) == []


def test_twice_bound_finds_a_second_binding(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import re\nA = re.compile('a')\nB = 1\nA = re.compile('b')\ndef f(): pass\n"
                                   "f = 2\nif B:\n    C = 1\nelse:\n    C = 2\ntry:\n    D = 1\nexcept ImportError:\n"
                                   "    D = None\n")
    assert twice_bound(tmp_path) == ["m.py: A", "m.py: f"]
