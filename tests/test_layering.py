"""How the source fits together, read from the code itself: no import cycle between folders, no dead symbol.

A folder is one of the source folders pyproject.toml maps to a package (compiler/ is spark_compile, spec/ is
spark_compile.spec, ...); a subfolder belongs to its folder. Every import counts: at module level, inside a
function, or under TYPE_CHECKING, since each is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from conftest import ROOT

# Longest package first: spark_compile.spec.x is spec/'s, not compiler/'s.
FOLDERS = {"spark_compile.spec": "spec", "spark_compile.overlay": "overlay",
           "spark_compile.templates": "templates", "spark_compile": "compiler"}
Edge = tuple[str, str]


def source_files() -> Iterator[tuple[str, Path]]:
    """(folder, file) for every Python file of the source folders."""
    for folder in sorted(set(FOLDERS.values())):
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield folder, path


def folder_of(module: str) -> str | None:
    """The source folder a module lives in; None for a module outside the project."""
    return next((folder for package, folder in FOLDERS.items()
                 if module == package or module.startswith(package + ".")), None)


def imported_modules(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every absolute module an AST imports (a `from a import b` also names a.b), with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno


def folder_edges() -> dict[Edge, list[str]]:
    """(importing folder, imported folder) → the `file:line` of each import that makes the edge."""
    edges: dict[Edge, list[str]] = {}
    for folder, path in source_files():
        for module, line in imported_modules(ast.parse(path.read_text(), str(path))):
            target = folder_of(module)
            if target is not None and target != folder:
                edges.setdefault((folder, target), []).append(f"{path.relative_to(ROOT)}:{line}")
    return edges


def find_cycle(edges: set[Edge]) -> list[str]:
    """One cycle of the directed graph as [a, b, ..., a]; [] when it has none."""
    graph: dict[str, list[str]] = {}
    for source, target in sorted(edges):
        graph.setdefault(source, []).append(target)
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(node: str, path: list[str]) -> list[str]:
        state[node] = "open"
        for nxt in graph.get(node, []):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt):], node, nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, node])):
                return found
        state[node] = "done"
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start, [])):
            return cycle
    return []


def test_no_import_cycle_between_folders() -> None:
    edges = folder_edges()
    cycle = find_cycle(set(edges))
    where = [f"{a} -> {b}: {', '.join(edges[(a, b)][:3])}" for a, b in itertools.pairwise(cycle)]
    assert cycle == [], "import cycle between folders:\n" + "\n".join(where)


def test_the_folders_are_layered_as_the_readme_says() -> None:
    """overlay/ (the runtime, shipped into the image) imports no other folder; spec/ only overlay/; compiler/
    sits on top. The rules live in compiler/rules/ because they read the plan."""
    edges = folder_edges()
    assert {edge for edge in edges if edge[1] == "compiler"} == set()
    assert {edge[1] for edge in edges if edge[0] in ("overlay", "spec")} == {"overlay"}


# compiler/'s packages, low to high: a module imports only from its own package or a lower one (the top-level
# modules pipeline and cli are places in the order too). Each __init__ says what it owns and may import.
LAYERS = ("common", "stages", "capacity", "importer", "targets", "fleet", "rules", "pipeline", "engine",
          "review", "commands", "cli")
TOP_LEVEL = {"__init__.py", "cli.py", "pipeline.py"}  # the package's marker, the entry point and the pipeline


def layer_of(module: str) -> str | None:
    """The compiler layer a spark_compile module belongs to; None outside compiler/ (spec/, overlay/, ...)."""
    parts = module.split(".")
    if folder_of(module) != "compiler" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def layer_violations(root: Path) -> list[str]:
    """`file:line: importer -> imported` for each import of compiler/ that reaches up the layers."""
    found = []
    for path in sorted((root / "compiler").rglob("*.py")):
        rel = path.relative_to(root / "compiler")
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for module, line in imported_modules(ast.parse(path.read_text(), str(path))):
            target = layer_of(module)
            if own in LAYERS and target is not None and LAYERS.index(target) > LAYERS.index(own):
                found.append(f"compiler/{rel.as_posix()}:{line}: {own} -> {target}")
    return found


def test_compiler_packages_are_layered() -> None:
    assert layer_violations(ROOT) == []


def test_a_reach_up_the_layers_is_found(tmp_path: Path) -> None:
    (tmp_path / "compiler" / "stages").mkdir(parents=True)
    (tmp_path / "compiler" / "stages" / "plan.py").write_text(
        "from spark_compile.common.errors import InputError\nfrom spark_compile.review.diff import x\n")
    assert layer_violations(tmp_path) == ["compiler/stages/plan.py:2: stages -> review"]


def test_every_module_of_compiler_sits_in_a_named_package() -> None:
    assert {p.name for p in (ROOT / "compiler").glob("*.py")} == TOP_LEVEL
    packages = {p.parent.name for p in (ROOT / "compiler").glob("*/__init__.py")}
    assert packages == set(LAYERS) - {"pipeline", "cli"}


def test_every_package_says_what_it_owns() -> None:
    """Each package's docstring names every module it holds and what it may import (a new module is placed)."""
    for init in sorted((ROOT / "compiler").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        modules = {p.stem for p in init.parent.glob("*.py")} - {"__init__"}
        assert {m for m in modules if not re.search(rf"\b{m}\b", doc)} == set(), init
        assert "import" in doc.lower(), init


# The only imports a function may make: the engine's packages, which exist only in the engine venv's interpreter
# that runs the probes (compiler/engine/resolve_probe.py, spec/generators/sglang_probe.py).
LAZY_ALLOWED = ("sglang", "torch")


def function_imports(root: Path) -> list[str]:
    """`file:line: module` of each import made inside a function of the source folders, outside LAZY_ALLOWED."""
    found = []
    for path in sorted(p for folder in ("compiler", "spec", "overlay") for p in (root / folder).rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                        ["." * node.level + (node.module or "")]
                    found += [f"{path.relative_to(root).as_posix()}:{node.lineno}: {name}" for name in names
                              if name.split(".")[0] not in LAZY_ALLOWED]
    return sorted(set(found))


def test_imports_are_at_the_top_of_modules() -> None:
    assert function_imports(ROOT) == []


def test_a_function_level_import_is_found(tmp_path: Path) -> None:
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "a.py").write_text(
        "import os\ndef f():\n    import json\n    import torch\n    from . import b\n    return json, torch, os, b\n")
    assert function_imports(tmp_path) == ["compiler/a.py:3: json", "compiler/a.py:5: ."]


def test_find_cycle_finds_one() -> None:
    assert find_cycle({("compiler", "spec"), ("spec", "compiler"), ("spec", "overlay")}) == \
        ["compiler", "spec", "compiler"]
    assert find_cycle({("a", "b"), ("b", "c"), ("c", "a")}) == ["a", "b", "c", "a"]
    assert find_cycle({("a", "b"), ("b", "c"), ("a", "c")}) == []


def test_folder_of_reads_the_package_map() -> None:
    assert [folder_of(m) for m in ("spark_compile.spec.model", "spark_compile.rules.k8s", "spark_compile",
                                   "spark_compile.overlay.hooks.x", "jinja2")] == \
        ["spec", "compiler", "compiler", "overlay", None]


# Where a caller may be besides the source folders: the benchmarks, the CI scripts, the package metadata (entry
# points), the templates (filters, the fleet's own scripts). Never tests/: a symbol only a test calls is dead.
CALLER_FILES = ("bench/*.py", ".ci/*", "pyproject.toml", "templates/**/*.j2", "templates/**/*.py",
                "templates/**/*.sh")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _references(tree: ast.AST) -> Iterator[str]:
    """Every name a module reads: names, attributes, imported names, and the words of its strings (a module
    or function named in a string is reached by import_module or getattr)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield node.name.rsplit(".", 1)[-1]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield from _WORD.findall(node.value)


def public_definitions(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """The public names a module defines at its top level; a decorated function is registered by its
    decorator (a rule's check), so its decorator is its caller."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not (
                isinstance(node, ast.FunctionDef) and node.decorator_list):
            yield node.name, node.lineno
        elif isinstance(node, ast.Assign):
            yield from ((t.id, node.lineno) for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.lineno


def dead_symbols(root: Path) -> list[str]:
    """`file:line: name` of each public top-level symbol of the source folders that nothing outside tests/
    reads (its own module's uses count)."""
    defined: list[tuple[str, Path, int]] = []
    read = Counter[str]()
    for path in sorted(path for folder in ("compiler", "spec", "overlay") for path in (root / folder).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        read.update(_references(tree))
        defined += [(name, path, line) for name, line in public_definitions(tree) if not name.startswith("_")]
    for pattern in CALLER_FILES:
        for path in root.glob(pattern):
            text = path.read_text()
            read.update(_references(ast.parse(text)) if path.suffix == ".py" else _WORD.findall(text))
    return [f"{path.relative_to(root)}:{line}: {name}" for name, path, line in defined if not read[name]]


def test_no_dead_public_symbol() -> None:
    assert dead_symbols(ROOT) == []


def test_dead_symbols_are_found(tmp_path: Path) -> None:
    (tmp_path / "compiler").mkdir()
    (tmp_path / "compiler" / "a.py").write_text(
        "import b\nUSED = 1\nUNUSED = 2\ndef run():\n    return USED + b.helper()\n"
        "def orphan():\n    pass\n@rule('SC1')\ndef check():\n    pass\nNAMED = 'x'\nLOADED = 'NAMED'\n")
    (tmp_path / "compiler" / "b.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "pyproject.toml").write_text('scripts = {x = "a:run"}\n')
    assert dead_symbols(tmp_path) == ["compiler/a.py:3: UNUSED", "compiler/a.py:6: orphan",
                                      "compiler/a.py:12: LOADED"]


def test_every_rule_module_registers() -> None:
    """Importing the rules package imports every module of compiler/rules/ (a rule module it missed would never
    run)."""
    import sys

    import spark_compile.rules  # noqa: F401 - what is tested is what importing it does

    modules = {p.stem for p in (ROOT / "compiler" / "rules").glob("*.py")} - {"__init__", "registry", "stage"}
    assert {m for m in modules if f"spark_compile.rules.{m}" not in sys.modules} == set()
