"""Issue 37: the fleet scripts' one writer (fleet-lib.sh replace_file) and their bounded reads, driven on an
installed fleet folder with an ssh stand-in (no node is reached). Each test names the defect it holds down."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT
from support.fleet_install import installed_fleet

REFERENCE = ROOT / "generated" / "dsv41-4spark"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_fleet(REFERENCE, tmp_path_factory.mktemp("fleet") / "dsv41-4spark")


def _env(tmp_path: Path, ssh: str) -> dict[str, str]:
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "ssh").write_text(ssh)
    (shim / "ssh").chmod(0o755)
    return {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path), "LANG": "C.UTF-8",
            "SPARK_LAUNCH_LOG_DIR": str(tmp_path / "logs")}


def _launch(fleet: Path, tmp_path: Path, *args: str, ssh: str = "#!/bin/sh\nexit 255\n",
            script: str = "launch.sh") -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(fleet / script), *args], capture_output=True, text=True,
                          env=_env(tmp_path, ssh), cwd=tmp_path, timeout=120, check=False)


def _plant(folder: Path, names: list[str], victim: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).symlink_to(victim)


def _rank_files(suffix: str) -> list[str]:
    nodes = [f"spark-{rank}" for rank in range(4)]
    return [f"rank{rank}-{node}{suffix}" for rank, node in enumerate(nodes)]


def test_launch_audit_save_never_writes_through_a_planted_symlink(fleet: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    save = tmp_path / "save"
    _plant(save, [*_rank_files(".audit"), *_rank_files(".audit.tmp")], victim)
    proc = _launch(fleet, tmp_path, "audit", "--save", str(save))
    assert victim.read_text() == "keep\n"
    assert proc.stderr.count("it is not a regular file (a symlink, a device, a folder)") == 4, proc.stderr
    assert all((save / name).is_symlink() for name in _rank_files(".audit"))


def test_launch_postmortem_never_writes_through_a_planted_symlink(fleet: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    folder = tmp_path / "pm"
    _plant(folder, [*_rank_files(".log"), *_rank_files(".audit"), *_rank_files(".audit.tmp")], victim)
    proc = _launch(fleet, tmp_path, "postmortem", str(folder))
    assert victim.read_text() == "keep\n"
    assert proc.stderr.count("it is not a regular file (a symlink, a device, a folder)") == 8, proc.stderr


def test_launch_audit_save_writes_each_capture_whole(fleet: Path, tmp_path: Path) -> None:
    save = tmp_path / "save"
    _launch(fleet, tmp_path, "audit", "--save", str(save))
    assert sorted(p.name for p in save.iterdir()) == sorted(_rank_files(".audit"))  # no temporary left
    assert (save / "rank1-spark-1.audit").read_text().startswith("spark-audit 1\n")


def test_window_restore_with_a_newline_in_a_pointer_path_never_signals_every_process(fleet: Path,
                                                                                    tmp_path: Path) -> None:
    # A candidate path holding "\nstep=1" forged the pointer's step line: `kill -TERM -- -1` (and timer=0:
    # `kill -- -0`, the caller's process group). Run in a PID namespace and a session of its own, so that on
    # a broken script the signals reach only the sentinel below.
    if shutil.which("unshare") is None or subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork",
                                                          "true"], check=False).returncode != 0:
        pytest.skip("no PID namespace (unshare) on this machine")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "window-current").write_text("pid=999999999\nstarted=1790000000\ncandidate=/x\nstep=1\ntimer=0\n"
                                         f"verdicts={tmp_path / 'v'}\nlog=\ndir={tmp_path / 'w'}\n")
    script = 'sleep 600 & s=$!; bash "$1" window --restore; kill -0 "$s" && echo SENTINEL-ALIVE; kill "$s"'
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--pid", "--fork", "setsid", "--wait", "bash",
                           "-c", script, "t",
                           str(fleet / "launch.sh")], capture_output=True, text=True,
                          env=_env(tmp_path, "#!/bin/sh\nexit 255\n"), cwd=tmp_path, timeout=300, check=False)
    assert "SENTINEL-ALIVE" in proc.stdout, proc.stdout + proc.stderr


# Every node answers over the ssh stand-in with the same boot log: weights loaded, no CUDA-graph line.
_NODE_SSH = "#!/bin/bash\nexec bash -c \"${@: -1}\"\n"
_BOOT_LOG = "Load weight end. type=X, dtype=bf16, avail mem=80.0 GB, mem usage=40.5 GB.\nThe server is fired up\n"


def _verify(fleet: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = _env(tmp_path, _NODE_SSH)
    shim = tmp_path / "bin"
    tools = {"curl": "printf 200", "systemctl": "exit 0", "journalctl": f"printf %s '{_BOOT_LOG}'"}
    for name, body in tools.items():
        (shim / name).write_text(f"#!/bin/sh\n{body}\n")
        (shim / name).chmod(0o755)
    return subprocess.run(["bash", str(fleet / "verify.sh"), "--timeout", "1", *args], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, check=False)


def test_verify_goes_on_past_a_rank_whose_log_lacks_a_cuda_graph_line(fleet: Path, tmp_path: Path) -> None:
    proc = _verify(fleet, tmp_path)
    measured = [line.split(":")[0] for line in proc.stdout.splitlines() if line.startswith("MEASURED ")]
    assert measured == [f"MEASURED rank {rank} (spark-{rank})" for rank in range(4)], proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1].startswith("verify: ")


def _special(path: Path, kind: str) -> None:
    if kind == "fifo":
        os.mkfifo(path)
    else:
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("mknod is not permitted here")


@pytest.mark.parametrize("kind", ["device", "fifo", "symlink"])
def test_verify_calibrate_never_replaces_a_device_node(fleet: Path, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "pins.yaml"
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    if kind == "symlink":
        target.symlink_to(victim)
    else:
        _special(target, kind)
    before = os.lstat(target)
    proc = _verify(fleet, tmp_path, "--calibrate", str(target))
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert victim.read_text() == "keep\n"
    assert f"refusing to write {target}: it is not a regular file (a symlink, a device, a folder)" in proc.stderr
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".pins")] == []


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_verdict_write_never_writes_through_a_planted_file_and_never_hangs_on_one(fleet: Path, tmp_path: Path,
                                                                                   kind: str) -> None:
    verdicts, victim = tmp_path / "verdicts", tmp_path / "victim"
    verdicts.mkdir()
    victim.write_text("keep\n")
    planted = verdicts / "dsv41-4spark.verdict.json"
    if kind == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(victim)
    gate = tmp_path / "gate.fifo"
    os.mkfifo(gate)  # the gate's output named by a hostile window: read as nothing, never waited on
    argv = ["--dir", str(verdicts), "--candidate", str(fleet.parent), "--gate", str(gate), "--memory", "/dev/zero",
            "--nodes", "spark-0", "--result", "PASS", "--reason", "r", "--restored", "1", "--started", "0",
            "--stopped", "1"]
    proc = subprocess.run(["python3", str(fleet / "verdict.py"), "write", *argv], capture_output=True, text=True,
                          check=False, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2 and "not a regular file: not replaced" in proc.stderr, proc.stderr
    assert victim.read_text() == "keep\n"
    assert stat.S_ISFIFO(os.lstat(planted).st_mode) if kind == "fifo" else planted.is_symlink()
