"""launch.sh window refuses what it cannot run before touching any node: no candidate, a folder that is
not a generated profile, a candidate compiled for production's port instead of its window's test port.
An ssh stand-in that records every call shows no node was contacted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gatekit import ROOT

FLEET = ROOT / "generated" / "dsv41-4spark" / "fleet"


def window(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    shim, calls = tmp_path / "bin", tmp_path / "calls"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text(f"#!/bin/sh\necho ssh \"$@\" >> {calls}\nexit 255\n")
    (shim / "ssh").chmod(0o755)
    env = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
           "SPARK_LAUNCH_LOG_DIR": str(tmp_path / "logs")}
    proc = subprocess.run(["bash", str(FLEET / "launch.sh"), "window", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=60, check=False)
    return proc, calls


def test_a_candidate_on_production_port_is_refused_with_the_fix(tmp_path: Path) -> None:
    proc, calls = window(tmp_path, str(ROOT / "generated" / "dsv41-4spark"))
    assert proc.returncode == 64, proc.stdout + proc.stderr
    assert "the candidate serves on port 8210, its window's test port is 8888" in proc.stderr
    assert "engine.port: 8888" in proc.stderr
    assert not calls.exists() and not (tmp_path / "logs" / "window-current").exists()


def test_a_folder_that_is_no_generated_profile_is_refused(tmp_path: Path) -> None:
    proc, calls = window(tmp_path, str(tmp_path))
    assert proc.returncode == 64
    assert "is not a generated profile folder" in proc.stderr
    assert not calls.exists()


def test_no_candidate_prints_the_usage(tmp_path: Path) -> None:
    proc, _ = window(tmp_path)
    assert proc.returncode == 64
    assert "launch.sh window CANDIDATE [--verdict-dir DIR]" in proc.stderr


def test_restore_without_a_window_says_so(tmp_path: Path) -> None:
    proc, calls = window(tmp_path, "--restore")
    assert proc.returncode == 0, proc.stderr
    assert "no window to restore" in proc.stdout
    assert not calls.exists()
