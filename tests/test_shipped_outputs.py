"""Every shipped profile (the reference and each example), compiled here, and every rank's files put before the
programs that read them on a node: bash -n and shellcheck for the rank's scripts, docker and systemd for its
env files (both must read what plan.json says), systemd-analyze for its unit; the manifest lists exactly the
files written, with their digests and modes; a second compile gives the same bytes."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, run_cli
from support.fleet_install import SCRIPTS
from support.tools import (
    create_env,
    docker_create_request,
    require_tool,
    shellcheck,
    systemd_environment,
    systemd_verify,
)

PROFILES = sorted([ROOT / "spec" / "profiles" / "dsv41-4spark.yaml",
                   *(ROOT / "spec" / "profiles" / "examples").glob("*.yaml")])
DOCKER_UNIT = "[Unit]\nDescription=Docker stand-in\n[Service]\nExecStart=/usr/bin/dockerd\n"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each shipped profile compiled once, by file name."""
    out = tmp_path_factory.mktemp("out")
    trees = {}
    for profile in PROFILES:
        before = set(out.iterdir())
        result = run_cli(str(profile.relative_to(ROOT)), "--out", str(out))
        assert result.returncode == 0, result.stdout + result.stderr
        (tree,) = {path for path in set(out.iterdir()) - before if path.name != SCRIPTS}  # not the shared scripts
        trees[profile.name] = tree
    return trees


def _plan(tree: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((tree / "plan.json").read_text())
    return data


def _ids(profile: Path) -> str:
    return profile.stem


@pytest.mark.parametrize("profile", PROFILES, ids=_ids)
def test_every_rank_script_parses_and_passes_shellcheck(compiled: dict[str, Path], profile: Path) -> None:
    tree = compiled[profile.name]
    bash = require_tool("bash")
    scripts = [tree / rank["directory"] / name for rank in _plan(tree)["ranks"]
               for name in ("docker-run.sh", "preflight.sh") if (tree / rank["directory"] / name).exists()]
    assert scripts
    for script in scripts:
        proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
        assert (proc.returncode, proc.stderr) == (0, ""), script
        assert shellcheck(script) == "", script


@pytest.mark.parametrize("profile", PROFILES, ids=_ids)
def test_docker_and_systemd_read_every_env_file_as_the_plan_says(compiled: dict[str, Path], profile: Path) -> None:
    tree = compiled[profile.name]
    for rank in _plan(tree)["ranks"]:
        files = {name: tree / rank["directory"] / name for name in rank["env_files"]}
        for name, path in files.items():
            assert systemd_environment(path.read_text()) == rank["env_files"][name], (rank["directory"], name)
        # One docker run reads all the rank's env files, as the rank's docker-run.sh passes them.
        merged = {key: value for values in rank["env_files"].values() for key, value in values.items()}
        assert len(merged) == sum(len(values) for values in rank["env_files"].values()), "a name in two files"
        argv = ["docker", "run", *(word for path in files.values() for word in ("--env-file", str(path))), "img"]
        assert create_env(docker_create_request(argv)["body"]) == merged, rank["directory"]


@pytest.mark.parametrize("profile", PROFILES, ids=_ids)
def test_every_rank_unit_verifies_clean(compiled: dict[str, Path], profile: Path) -> None:
    tree = compiled[profile.name]
    plan = _plan(tree)
    for rank in plan["ranks"]:
        unit = (tree / rank["directory"] / plan["unit"]).read_text()
        assert systemd_verify({plan["unit"]: unit, "docker.service": DOCKER_UNIT}, extra_executables=[]) == "", \
            rank["directory"]


@pytest.mark.parametrize("profile", PROFILES, ids=_ids)
def test_the_manifest_lists_exactly_the_files_with_digest_and_mode(compiled: dict[str, Path],
                                                                    profile: Path) -> None:
    tree = compiled[profile.name]
    manifest = json.loads((tree / "MANIFEST.json").read_text())
    on_disk = {str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()} - {"MANIFEST.json"}
    assert set(manifest["files"]) == on_disk
    for name, entry in manifest["files"].items():
        path = tree / name
        assert entry == {"mode": f"{path.stat().st_mode & 0o777:o}",
                         "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}, name
    assert manifest["profile"] == _plan(tree)["profile"] == tree.name


@pytest.mark.parametrize("profile", PROFILES, ids=_ids)
def test_each_ranks_docker_run_script_holds_the_plans_argv(compiled: dict[str, Path], profile: Path) -> None:
    """The docker argv plan.json records is what each rank's script runs, word for word, as bash reads it."""
    tree = compiled[profile.name]
    bash = require_tool("bash")
    for rank in _plan(tree)["ranks"]:
        script = (tree / rank["directory"] / "docker-run.sh").read_text()
        command = script[script.index("\nexec ") + len("\nexec "):]  # the last command, with its continuations
        out = subprocess.run([bash, "-c", f"printf '%s\\0' {command}"], capture_output=True, check=True).stdout
        words = [word.decode() for word in out.split(b"\0")[:-1]]
        assert words[1:] == rank["docker_argv"][1:], rank["directory"]
        assert words[-len(rank["engine_argv"]):] == rank["engine_argv"], rank["directory"]


def test_a_second_compile_gives_the_same_bytes(compiled: dict[str, Path], tmp_path: Path) -> None:
    for profile in PROFILES:
        result = run_cli(str(profile.relative_to(ROOT)), "--out", str(tmp_path))
        assert result.returncode == 0, result.stderr
        again = tmp_path / compiled[profile.name].name
        first = compiled[profile.name]
        assert _digests(again) == _digests(first), profile.name


def _digests(tree: Path) -> dict[str, str]:
    return {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tree.rglob("*")) if p.is_file()}
