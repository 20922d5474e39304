"""The installed distribution holds every package and data file the source tree has."""

from __future__ import annotations

import tomllib

from conftest import ROOT

MAPPING = {"compiler": "spark_compile", "spec": "spark_compile.spec", "overlay": "spark_compile.overlay",
           "templates": "spark_compile.templates"}


def test_every_source_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    assert config["package-dir"] == {v: k for k, v in MAPPING.items()}
    found = set()
    for folder, package in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *rel.parts]))
    assert found == listed


def test_non_editable_install_runs_a_check(tmp_path: object) -> None:
    import subprocess
    import sys
    from pathlib import Path

    target = Path(str(tmp_path)) / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(target), str(ROOT)], check=True, capture_output=True)
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-m", "spark_compile.cli", "check", "spec/profiles/dsv41-4spark.yaml"],
                            cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("\n0 errors, 2 warnings in 1 profile\n") and " SC312 " in result.stdout
    compiled = subprocess.run([sys.executable, "-m", "spark_compile.cli", "spec/profiles/dsv41-4spark.yaml",
                               "--out", str(Path(str(tmp_path)) / "out")], cwd=ROOT, env=env, capture_output=True,
                              text=True, check=False)
    assert compiled.returncode == 0, compiled.stderr
