"""The inventory of SGLang's judgements (spec/catalogs/sglang-judgements-0.5.23.md) is the installed SGLang's.

The table is regenerated from the engine venv's SGLang source (AST, no import) and must equal the committed one:
a new raise, assert or resolution declaration, a new hook or a removed one fails here, naming the rows. The
hand-kept parts (the static rules per site, the judgements the scan cannot see) must name real sites and rules.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from sglang_parse import engine_python

pytestmark = pytest.mark.engine

VERSION = "0.5.23"
COMMITTED = ROOT / "spec" / "catalogs" / f"sglang-judgements-{VERSION}.md"


@pytest.fixture(scope="module")
def package() -> Path:
    """The engine venv's sglang package directory (found without importing it)."""
    proc = subprocess.run([engine_python(), "-I", "-c", "import importlib.util; "
                           "print(importlib.util.find_spec('sglang').submodule_search_locations[0])"],
                          capture_output=True, text=True, check=True)
    return Path(proc.stdout.strip())


def rows(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.startswith("| `")}


def test_the_table_lists_every_judgement_of_the_installed_sglang(package: Path) -> None:
    from spark_compile.spec.generators.sglang_judgements import catalog_dests, render, sites

    fresh = render(VERSION, sites(package, catalog_dests(VERSION)))
    committed = COMMITTED.read_text(encoding="utf-8")
    unlisted, stale = sorted(rows(fresh) - rows(committed)), sorted(rows(committed) - rows(fresh))
    assert (unlisted, stale) == ([], []), "SGLang makes judgements the table does not list (or no longer makes " \
        "listed ones); regenerate with `python -m spark_compile.spec.generators.sglang_judgements <sglang dir> " \
        "--out spec/catalogs` and review the coverage"
    assert fresh == committed


def test_static_coverage_names_real_sites_and_rules(package: Path) -> None:
    from spark_compile.rules import load_all
    from spark_compile.spec.generators.sglang_judgements import BEYOND, STATIC, catalog_dests, functions, sites

    found = {site.where for site in sites(package, catalog_dests(VERSION))}
    assert set(STATIC) <= found
    rules = load_all()
    named = {r for ids in STATIC.values() for r in ids} | {
        word.strip(";,") for _, covered in BEYOND.values() for word in covered.split() if word.startswith("SC")}
    assert named <= set(rules), named - set(rules)
    for where in BEYOND:
        rel, qualname = where.split(":")
        tree = ast.parse((package / rel).read_text(encoding="utf-8"))
        if qualname == "*":
            assert any(isinstance(n, (ast.Raise, ast.Assert)) for n in ast.walk(tree)), where
        else:
            assert qualname in {name for name, _ in functions(tree)}, where


def test_the_readme_links_the_table() -> None:
    assert f"spec/catalogs/sglang-judgements-{VERSION}.md" in (ROOT / "README.md").read_text(encoding="utf-8")
