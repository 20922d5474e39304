"""Issue 18, data loss (items 9-13): the write stage never adopts, drops or deletes what it did not write."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import child_profile, run_main

from conftest import REFERENCE_PROFILE, ROOT
from support.tools import require_tool


# -- data loss ------------------------------------------------------------------------------------------
def test_item_09_foreign_directory_is_not_adopted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / "dsv41-4spark").mkdir(parents=True)
    readme = out / "dsv41-4spark" / "README.md"
    readme.write_text("hand-written\n")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "did not write" in outcome.err
    assert readme.read_text() == "hand-written\n"
    assert sorted(p.name for p in out.iterdir()) == ["dsv41-4spark"]


def test_item_10_foreign_directories_and_modes_are_kept(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    (target / "notes").mkdir()
    (target / "notes").chmod(0o700)
    (target / "0-spark-0").chmod(0o700)
    changed = child_profile(tmp_path, {"engine": {"port": 8888}}, relocate=False)
    assert run_main("compile", str(changed), "--out", str(out), "--force").code == 0
    assert (target / "notes").is_dir() and (target / "notes").stat().st_mode & 0o777 == 0o700
    assert (target / "0-spark-0").stat().st_mode & 0o777 == 0o700
    assert "--port 8888" in (target / "0-spark-0" / "docker-run.sh").read_text()


def test_item_11_files_created_during_a_compile_survive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile.stages import write

    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    real_stage = write._stage

    def stage_while_someone_writes(*args: object) -> None:
        real_stage(*args)  # type: ignore[arg-type]
        if args[1] != target:  # the compile's second tree, fleet_scripts/
            return
        (target / "0-spark-0" / "operator.log").write_text("written during the compile\n")
        (target / "late").mkdir()
        (target / "late" / "x").write_text("x\n")

    monkeypatch.setattr(write, "_stage", stage_while_someone_writes)
    changed = child_profile(tmp_path, {"engine": {"port": 8888}}, relocate=False)
    assert run_main("compile", str(changed), "--out", str(out), "--force").code == 0
    assert (target / "0-spark-0" / "operator.log").read_text() == "written during the compile\n"
    assert (target / "late" / "x").read_text() == "x\n"
    assert not list(out.glob(".dsv41-4spark.*"))


def test_item_12_target_that_is_a_file_or_a_symlink(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "dsv41-4spark").write_text("the user's file\n")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "is not a directory" in outcome.err
    assert (out / "dsv41-4spark").read_text() == "the user's file\n"
    (out / "dsv41-4spark").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep\n")
    (out / "dsv41-4spark").symlink_to(elsewhere)
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "symlink" in outcome.err
    assert sorted(p.name for p in elsewhere.iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in out.iterdir()) == ["dsv41-4spark"]  # no staging left behind


def test_item_13_enospc_removes_the_staging_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile.stages import write

    real = write._write_new
    count = {"n": 0}

    def fill_up(path: Path, artifact: object) -> None:
        count["n"] += 1
        if count["n"] > 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, artifact)  # type: ignore[arg-type]

    monkeypatch.setattr(write, "_write_new", fill_up)
    out = tmp_path / "out"
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(out))
    assert outcome.code == 2 and "No space left on device" in outcome.err
    assert list(out.iterdir()) == []


def test_item_13_enospc_on_a_full_tmpfs(tmp_path: Path) -> None:
    """The real thing: a 120 KiB tmpfs in a private mount namespace (root and unshare, as CI has)."""
    unshare = require_tool("unshare")
    mount = tmp_path / "small"
    mount.mkdir()
    script = (f"mount -t tmpfs -o size=120k none {mount} || exit 99; "
              f"{sys.executable} -m spark_compile.cli {REFERENCE_PROFILE} --out {mount}/out; echo rc=$?; "
              f"ls -A {mount}/out")
    proc = subprocess.run([unshare, "-m", "sh", "-c", script], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    if proc.returncode == 99 or "Operation not permitted" in proc.stderr:
        if os.environ.get("CI"):
            pytest.fail(f"cannot mount a tmpfs: {proc.stderr}")
        pytest.skip("needs root to mount a tmpfs")
    assert "No space left on device" in proc.stderr
    assert proc.stdout == "rc=2\n"  # and `ls -A out` printed nothing: no staging directory is left
