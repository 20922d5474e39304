"""The code stays ruff-clean and passes mypy --strict (with the pydantic plugin), in CI like anywhere."""

from __future__ import annotations

import shutil
import subprocess
import sys

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
    """mypy runs on the source folders as they are (pyproject's `files`); spark_compile.* imports resolve
    through the installed package, so no tree is built for it."""
    command = [*_tool("mypy"), "--no-incremental", "compiler", "spec", "overlay"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues found" in result.stdout
