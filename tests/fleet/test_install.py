"""fleet_scripts/install.py: a compiled profile and the shared scripts, checked by sha256, into a new folder
that is whole or absent; every refusal installs nothing and says why, whole."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, run_cli


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled")
    result = run_cli(str(REFERENCE_PROFILE), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture
def root(compiled: Path, tmp_path: Path) -> Path:
    """A copy of the compiled output root this test may change."""
    shutil.copytree(compiled, tmp_path / "out")
    return tmp_path / "out"


def install(root: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(root / "fleet_scripts" / "install.py"), *map(str, args)],
                          capture_output=True, text=True, check=False, timeout=60)


def refused(root: Path, dest: Path, reason: str) -> None:
    proc = install(root, root / "dsv41-4spark", dest)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"install.py: nothing installed: {reason}\n")
    assert not any(p.name.startswith(f".{dest.name}.install-") for p in dest.parent.iterdir())


def test_installs_the_profile_and_the_scripts_byte_for_byte(compiled: Path, tmp_path: Path) -> None:
    dest = tmp_path / "deploy" / "dsv41-4spark"
    proc = install(compiled, compiled / "dsv41-4spark", dest)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((compiled / "dsv41-4spark" / "MANIFEST.json").read_text())
    scripts = json.loads((compiled / "fleet_scripts" / "MANIFEST.json").read_text())["scripts"]
    expected = {**{path: compiled / "dsv41-4spark" / path for path in [*manifest["files"], "MANIFEST.json"]},
                **{f"fleet/{name}": compiled / "fleet_scripts" / name for name in scripts}}
    found = {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    assert found == set(expected)
    for path, source in expected.items():
        assert (dest / path).read_bytes() == source.read_bytes(), path
        assert (dest / path).stat().st_mode & 0o777 == source.stat().st_mode & 0o777, path
    assert proc.stdout == (f"installed {compiled / 'dsv41-4spark'} into {dest}: {len(expected)} files, each with "
                           f"its manifest's sha256; next: {dest / 'fleet' / 'launch.sh'} --dry-run\n")
    assert {oct(p.stat().st_mode & 0o777) for p in dest.rglob("*") if p.is_dir()} == {"0o755"}
    assert os.stat(dest).st_mode & 0o777 == 0o755
    dry = subprocess.run(["bash", str(dest / "fleet" / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                         check=False, timeout=60)
    assert dry.returncode == 0 and "DRY RUN of 'launch.sh start' for dsv41-4spark" in dry.stdout, dry.stderr


def test_an_empty_dest_folder_is_used_and_a_full_one_refused(root: Path, tmp_path: Path) -> None:
    dest = tmp_path / "empty"
    dest.mkdir()
    assert install(root, root / "dsv41-4spark", dest).returncode == 0
    refused(root, dest, f"{dest} exists: install into a new folder (an install is a fresh, checked copy)")


def test_a_hand_edited_profile_file_installs_nothing(root: Path, tmp_path: Path) -> None:
    env = root / "dsv41-4spark" / "0-spark-0" / "engine.env"
    env.write_text(env.read_text() + "SGLANG_X=1\n")
    refused(root, tmp_path / "dest", f"{env} is not the file {root / 'dsv41-4spark' / 'MANIFEST.json'} lists (its "
            "sha256 differs): recompile the profile, do not edit generated files")
    assert not (tmp_path / "dest").exists()


def test_a_hand_edited_script_installs_nothing(root: Path, tmp_path: Path) -> None:
    launch = root / "fleet_scripts" / "launch.sh"
    launch.write_text(launch.read_text().replace("set -euo pipefail", "set -eu", 1))
    refused(root, tmp_path / "dest", f"{launch} is not the file {root / 'fleet_scripts' / 'MANIFEST.json'} lists "
            "(its sha256 differs): recompile the profile, do not edit generated files")


def test_a_profile_of_another_compiler_version_installs_nothing(root: Path, tmp_path: Path) -> None:
    path = root / "dsv41-4spark" / "MANIFEST.json"
    data = json.loads(path.read_text())
    version = data["compiler"]
    path.write_text(json.dumps({**data, "compiler": "spark-compile 0.1.0"}))
    shared = root / "fleet_scripts"
    refused(root, tmp_path / "dest", f"{root / 'dsv41-4spark'} was compiled by spark-compile 0.1.0, the scripts in "
            f"{shared} by {version}: compile the profile again (spark-compile PROFILE --out {root}), so its data "
            "and the scripts come from one compiler")


def test_a_manifest_path_that_leaves_dest_is_refused(root: Path, tmp_path: Path) -> None:
    path = root / "dsv41-4spark" / "MANIFEST.json"
    data = json.loads(path.read_text())
    data["files"]["../escape"] = {"sha256": "0" * 64, "mode": "644"}
    path.write_text(json.dumps(data))
    refused(root, tmp_path / "dest", f"{path} lists '../escape', a path outside the folder")
    assert not (tmp_path / "escape").exists()


def test_a_folder_spark_compile_did_not_write_is_refused(root: Path, tmp_path: Path) -> None:
    (root / "dsv41-4spark" / "MANIFEST.json").unlink()
    proc = install(root, root / "dsv41-4spark", tmp_path / "dest")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"install.py: nothing installed: {root / 'dsv41-4spark'} has no readable "
                                  "MANIFEST.json (")
    assert proc.stderr.endswith("): give a folder spark-compile wrote\n")


def test_usage_is_64(root: Path) -> None:
    proc = install(root, root / "dsv41-4spark")
    assert proc.returncode == 64
    assert proc.stderr == ("usage: install.py [-h] profile_dir dest\n"
                           "install.py: the following arguments are required: dest\n")
