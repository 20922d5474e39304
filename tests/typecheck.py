"""Type-check the installed namespace with mypy --strict.

setuptools maps compiler/, spec/, overlay/ and templates/ onto one package, spark_compile; mypy cannot
follow that mapping (editable installs use an import hook), so this builds the same tree from symlinks
in a temporary folder and checks `-p spark_compile` there.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAPPING = {"": "compiler", "spec": "spec", "overlay": "overlay", "templates": "templates"}


def build_tree(target: Path) -> Path:
    """A spark_compile package of symlinks under target; returns its parent for MYPYPATH."""
    package = target / "spark_compile"
    package.mkdir()
    for entry in (ROOT / "compiler").iterdir():
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for sub, folder in MAPPING.items():
        if sub:
            (package / sub).symlink_to(ROOT / folder)
    return target


def main() -> int:
    """Run mypy --strict (the project's config) on the mapped package; exit with mypy's status."""
    with tempfile.TemporaryDirectory(prefix="spark-mypy-") as tmp:
        tree = build_tree(Path(tmp))
        cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "-p", "spark_compile"]
        return subprocess.run(cmd, cwd=tree, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main())
