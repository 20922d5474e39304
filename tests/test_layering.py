"""How the source folders fit together, read from the code itself: no import cycle between folders.

A folder is one of the source folders pyproject.toml maps to a package (compiler/ is spark_compile, spec/ is
spark_compile.spec, ...); a subfolder belongs to its folder. Every import counts: at module level, inside a
function, or under TYPE_CHECKING, since each is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import itertools
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


def test_find_cycle_finds_one() -> None:
    assert find_cycle({("compiler", "spec"), ("spec", "compiler"), ("spec", "overlay")}) == \
        ["compiler", "spec", "compiler"]
    assert find_cycle({("a", "b"), ("b", "c"), ("c", "a")}) == ["a", "b", "c", "a"]
    assert find_cycle({("a", "b"), ("b", "c"), ("a", "c")}) == []


def test_folder_of_reads_the_package_map() -> None:
    assert [folder_of(m) for m in ("spark_compile.spec.model", "spark_compile.rules.k8s", "spark_compile",
                                   "spark_compile.overlay.hooks.x", "jinja2")] == \
        ["spec", "compiler", "compiler", "overlay", None]
