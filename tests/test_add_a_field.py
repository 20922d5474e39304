"""Adding a field to the profile is one edit of spec/model.py plus the one regenerate command.

In a scratch copy of the project the CLI accepts the new field at once: the check path validates with the
model itself, so nothing derived from it is kept between runs. `regenerate --check` names what the edit
left stale (the JSON Schema) until `regenerate` runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

FOLDERS = ("compiler", "spec", "overlay", "templates", "generated")
DEPLOY_END = '''        description="Preflight: seconds between two looks for a free GPU.",
    )
'''
NEW_FIELD = '''    motd: Text | None = Field(None, description="A line for the nodes' message of the day.")
'''


def _scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the project and the environment that imports spark_compile from it (the same layout as
    the strict editable install: a package folder of links into the copy)."""
    repo = tmp_path / "repo"
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, repo / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)  # a profile's parent must lie in its repository
    package = tmp_path / "import" / "spark_compile"
    package.mkdir(parents=True)
    for entry in (repo / "compiler").iterdir():
        (package / entry.name).symlink_to(entry)
    for folder in ("spec", "overlay", "templates"):
        (package / folder).symlink_to(repo / folder)
    env = {key: value for key, value in os.environ.items() if key != "ENGINE_PYTHON"}
    env.update(PYTHONPATH=str(tmp_path / "import"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return repo, env


def _run(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=300)


def test_a_new_field_is_one_edit_and_one_command(tmp_path: Path) -> None:
    repo, env = _scratch(tmp_path)
    profile = repo / "motd.yaml"
    profile.write_text("extends: spec/profiles/dsv41-4spark.yaml\ndeploy:\n  motd: hello\n", encoding="utf-8")
    where = _run(env, repo, "spark_compile.cli", "--version")
    assert where.returncode == 0, where.stderr

    before = _run(env, repo, "spark_compile.cli", "check", "motd.yaml")
    assert before.returncode == 1
    assert "motd.yaml:3:3: SC101 error: unknown key 'motd' in deploy" in before.stdout.splitlines(), before.stdout

    model = repo / "spec" / "model.py"
    text = model.read_text(encoding="utf-8")
    assert text.count(DEPLOY_END) == 1
    model.write_text(text.replace(DEPLOY_END, DEPLOY_END + NEW_FIELD), encoding="utf-8")

    after = _run(env, repo, "spark_compile.cli", "check", "motd.yaml")
    assert after.returncode == 0, after.stdout + after.stderr
    assert "0 errors, 2 warnings in 1 profile" in after.stdout.splitlines()

    stale = _run(env, repo, "spark_compile.commands.regenerate", "--check")
    assert stale.returncode == 1
    assert ("generated/profile.schema.json: differs from `spark-compile schema` (rewrite it: spark-compile schema > "
            "generated/profile.schema.json)") in stale.stdout.splitlines()
    assert stale.stderr.splitlines()[-1] == \
        "regenerate: stale: generated/; run `python -m spark_compile.commands.regenerate`"
    regenerated = _run(env, repo, "spark_compile.commands.regenerate")
    assert regenerated.returncode == 0, regenerated.stdout + regenerated.stderr
    assert '"motd": {' in (repo / "generated" / "profile.schema.json").read_text(encoding="utf-8")
    current = _run(env, repo, "spark_compile.commands.regenerate", "--check")
    assert current.returncode == 0, current.stdout + current.stderr
    assert current.stdout.splitlines()[-1] == (
        "regenerate: current: spec/overlay_section.py, the NCCL catalog, generated/")
    accepted = _run(env, repo, "spark_compile.cli", "check", "motd.yaml")  # and still, after the command
    assert (accepted.returncode, accepted.stdout.splitlines()[-1]) == (0, "0 errors, 2 warnings in 1 profile")
    # The regenerated tree is the copy's own: the project's checkout is untouched.
    assert '"motd"' not in (ROOT / "generated" / "profile.schema.json").read_text(encoding="utf-8")
