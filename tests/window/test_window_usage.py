"""launch.sh window refuses what it cannot run before touching any node: no candidate, a folder that is
not an installed profile (a generated one before fleet_scripts/install.py), a candidate compiled for
production's port instead of its window's test port. An ssh stand-in that records every call shows no node
was contacted. Production and candidates are installed as an operator installs them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import ROOT

from support.fleet_install import install, installed_fleet

REFERENCE = ROOT / "generated" / "dsv41-4spark"


@pytest.fixture(scope="module")
def production(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_fleet(REFERENCE, tmp_path_factory.mktemp("production") / "dsv41-4spark")


def window(production: Path, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    shim, calls = tmp_path / "bin", tmp_path / "calls"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text(f"#!/bin/sh\necho ssh \"$@\" >> {calls}\nexit 255\n")
    (shim / "ssh").chmod(0o755)
    env = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "SPARK_LAUNCH_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run(["bash", str(production / "launch.sh"), "window", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, check=False)
    return proc, calls


def _candidate(tmp_path: Path, text: str) -> Path:
    """A release of the reference named apart from production (its own folder and unit), compiled and installed."""
    profile = tmp_path / "cand.yaml"
    profile.write_text(f"extends: {os.path.relpath(ROOT / 'spec' / 'profiles' / 'dsv41-4spark.yaml', tmp_path)}\n"
                       f"name: cand\nrelease: candidate-1.8\n{text}")
    compiled = subprocess.run([sys.executable, "-m", "spark_compile.cli", str(profile), "--out", str(tmp_path / "gen"),
                               "--root", str(ROOT)], capture_output=True, text=True, check=False)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    return install(tmp_path / "gen" / "cand", tmp_path / "deploy" / "cand")


def test_a_candidate_on_production_port_is_refused_with_the_fix(production: Path, tmp_path: Path) -> None:
    proc, calls = window(production, tmp_path, str(_candidate(tmp_path, "")))
    assert proc.returncode == 64, proc.stdout + proc.stderr
    assert "the candidate serves on port 8210, its window's test port is 8888" in proc.stderr
    assert "engine.port: 8888" in proc.stderr
    assert not calls.exists() and not (tmp_path / "logs" / "window-current").exists()


def test_a_folder_that_is_no_installed_profile_is_refused(production: Path, tmp_path: Path) -> None:
    for folder in (tmp_path, REFERENCE):  # nothing, and a generated folder not installed yet
        proc, calls = window(production, tmp_path, str(folder))
        assert proc.returncode == 64
        assert proc.stderr == (f"window: {folder} is not an installed profile folder (no fleet/launch.sh, "
                               "fleet/gate.py): install the candidate first (python3 fleet_scripts/install.py "
                               "CANDIDATE DEST)\n")
        assert not calls.exists()


def test_no_candidate_prints_the_usage(production: Path, tmp_path: Path) -> None:
    proc, _ = window(production, tmp_path)
    assert proc.returncode == 64
    assert proc.stderr == ("launch.sh: window needs the candidate's installed folder (or --restore) (launch.sh "
                           "--help lists every command and its options)\n")


def test_restore_without_a_window_says_so(production: Path, tmp_path: Path) -> None:
    proc, calls = window(production, tmp_path, "--restore")
    assert proc.returncode == 0, proc.stderr
    assert "no window to restore" in proc.stdout
    assert not calls.exists()


def test_dry_run_prints_the_whole_window_and_touches_nothing(production: Path, tmp_path: Path) -> None:
    cand = _candidate(tmp_path, "engine: {port: 8888}\n")
    proc, calls = window(production, tmp_path, str(cand), "--dry-run", "--verdict-dir", str(tmp_path / "verdicts"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:6] == [
        "window dry run: production dsv41-4spark (production-1.7.1) -> candidate cand (candidate-1.8) on port 8888;"
        " no node is contacted",
        "  1. disarm the watchdog on rank 0 (spark-0)",
        "  2. deadline 6600 s (then: restore production); free -g on every node every 15 s",
        "  3. stop production, the head first: ranks 0 1 2 3 (sglang-dsv41-4spark.service)",
        f"  4. install the candidate: {cand}/fleet/launch.sh install",
        f"  5. start the candidate without a watchdog (SPARK_WINDOW=1): {cand}/fleet/launch.sh start, which runs:",
    ]
    assert "       DRY RUN of 'launch.sh start' for cand (candidate-1.8): no node is contacted." in lines
    assert f"  6. the gate: {cand}/fleet/gate.py (bench baseline: none yet in {tmp_path / 'verdicts'})" in lines
    assert lines[-1].endswith(f"write the verdict {tmp_path / 'verdicts'}/cand.verdict.json and .md")
    # Nothing contacted, nothing written: no ssh call, no window pointer, no log, no verdict folder.
    assert not calls.exists() and not (tmp_path / "logs").exists() and not (tmp_path / "verdicts").exists()
