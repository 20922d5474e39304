"""Every artifact, proven by the real tool that consumes it: bash and shellcheck, systemd-analyze,
systemd's EnvironmentFile= parser and the docker CLI (against a fake Engine API)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REFERENCE_PROFILE, ROOT, run_cli
from reference_command import engine_pairs, reference_argv
from support.tools import (
    bash_argv,
    docker_create_request,
    docker_env_file,
    require_tool,
    shellcheck,
    systemd_environment,
    systemd_verify,
)

GID = "3"
# The nodes run Docker's own unit; the fake root needs a stand-in for Requires=docker.service to resolve.
DOCKER_UNIT = "[Unit]\nDescription=Docker stand-in\n[Service]\nExecStart=/usr/bin/dockerd\n"


class Fleet:
    """The reference profile compiled with its install and runtime folders moved under a temp dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.etc, self.run = root / "etc", root / "run"
        self.bin = root / "bin"  # deploy.docker: where bash_argv puts its docker shim
        child = root / "profile.yaml"
        child.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, root)}\n"
                         f"deploy:\n  install_dir: {self.etc}\n  runtime_dir: {self.run}\n"
                         f"  docker: {self.bin}/docker\n")
        result = run_cli(str(child), "--out", str(root / "generated"))
        assert result.returncode == 0, result.stdout + result.stderr
        self.out = root / "generated" / "dsv41-4spark"
        self.plan: dict[str, Any] = __import__("json").loads((self.out / "plan.json").read_text())
        (self.run / "dsv41-4spark").mkdir(parents=True)
        (self.run / "dsv41-4spark" / "runtime.env").write_text(
            f"NCCL_IB_GID_INDEX={GID}\nB12X_ROCE_GID_INDEX={GID}\n")

    def install(self, rank: dict[str, Any]) -> Path:
        """Copy one rank's folder to its install dir, as the README says; return that dir."""
        target = self.etc / "dsv41-4spark"
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.out / rank["directory"], target)
        return target


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return Fleet(tmp_path_factory.mktemp("fleet"))


def _ranks(fleet: Fleet) -> list[dict[str, Any]]:
    return list(fleet.plan["ranks"])


def test_scripts_pass_shellcheck_and_bash_n(fleet: Fleet) -> None:
    bash = require_tool("bash")
    scripts = sorted(fleet.out.glob("*-spark-*/*.sh"))  # the fleet/ scripts have their own tests
    assert len(scripts) == 8
    for script in scripts:
        assert shellcheck(script) == "", script
        assert subprocess.run([bash, "-n", str(script)], capture_output=True, check=False).returncode == 0


def test_docker_run_script_runs_exactly_the_plan_argv(fleet: Fleet) -> None:
    for rank in _ranks(fleet):
        installed = fleet.install(rank)
        assert bash_argv(installed / "docker-run.sh", shim_dir=fleet.bin) == rank["docker_argv"]


def test_docker_run_script_refuses_to_start_without_runtime_env(fleet: Fleet, tmp_path: Path) -> None:
    from support.tools import ToolError

    runtime = fleet.run / "dsv41-4spark" / "runtime.env"
    saved = runtime.read_text()
    runtime.unlink()
    try:
        with pytest.raises(ToolError, match=r"runtime\.env is missing"):
            bash_argv(fleet.install(_ranks(fleet)[0]) / "docker-run.sh", shim_dir=fleet.bin)
    finally:
        runtime.write_text(saved)


def test_units_verify_clean(fleet: Fleet) -> None:
    for rank in _ranks(fleet):
        unit = fleet.out / rank["directory"] / "sglang-dsv41-4spark.service"
        units = {unit.name: unit.read_text(), "docker.service": DOCKER_UNIT}
        assert systemd_verify(units, extra_executables=[]) == ""


def test_unit_verification_catches_a_broken_unit(fleet: Fleet) -> None:
    unit = fleet.out / "0-spark-0" / "sglang-dsv41-4spark.service"
    broken = unit.read_text().replace("TimeoutStopSec=", "TimeoutStopSecs=")
    units = {unit.name: broken, "docker.service": DOCKER_UNIT}
    assert "Unknown key 'TimeoutStopSecs' in section [Service]" in systemd_verify(units, extra_executables=[])


def test_env_files_mean_the_plan_to_docker_and_systemd(fleet: Fleet) -> None:
    for rank in _ranks(fleet):
        for name, values in rank["env_files"].items():
            text = (fleet.out / rank["directory"] / name).read_text()
            assert docker_env_file(text) == values, (rank["rank"], name)
            assert systemd_environment(text) == values, (rank["rank"], name)


def test_container_equals_the_reference_command(fleet: Fleet) -> None:
    rank0 = _ranks(fleet)[0]
    installed = fleet.install(rank0)
    ours = docker_create_request(bash_argv(installed / "docker-run.sh", shim_dir=fleet.bin))["body"]
    ref_argv = [a.replace("<probed>", GID) for a in reference_argv()]
    theirs = docker_create_request(ref_argv)["body"]
    # The one documented engine difference: --tp is argparse's abbreviation of --tp-size.
    theirs["Cmd"] = ["--tp-size" if a == "--tp" else a for a in theirs["Cmd"]]
    # The one documented environment difference: NCCL_DEBUG=WARN, set as the peer launcher sets it (the
    # nccl preset says why).
    assert set(ours["Env"]) == {*theirs["Env"], "NCCL_DEBUG=WARN"}
    for key in ("Entrypoint", "Image"):
        assert ours[key] == theirs[key], key
    # argparse does not care about flag order; compare the engine flags as a mapping.
    assert engine_pairs(ours["Cmd"]) == engine_pairs(theirs["Cmd"])
    assert ours["Cmd"][:2] == theirs["Cmd"][:2] == ["-m", "sglang.launch_server"]
    for key in ("ShmSize", "Memory", "MemorySwap", "Ulimits", "CapAdd", "Devices", "Binds", "NetworkMode",
                "IpcMode", "RestartPolicy", "OomScoreAdj", "DeviceRequests", "Mounts"):
        assert ours["HostConfig"].get(key) == theirs["HostConfig"].get(key), key
    assert ours["HostConfig"]["ShmSize"] == 32 << 30
    assert ours["HostConfig"]["Memory"] == 112 << 30


def test_manifest_lists_every_file_with_its_digest(fleet: Fleet) -> None:
    import hashlib
    import json

    manifest = json.loads((fleet.out / "MANIFEST.json").read_text())
    files = {str(p.relative_to(fleet.out)) for p in fleet.out.rglob("*") if p.is_file()} - {"MANIFEST.json"}
    assert set(manifest["files"]) == files
    for path, entry in manifest["files"].items():
        assert entry["sha256"] == hashlib.sha256((fleet.out / path).read_bytes()).hexdigest()
    assert manifest["compiler"].startswith("spark-compile ")
    assert [s["path"] for s in manifest["sources"]][-1].endswith("spec/profiles/dsv41-4spark.yaml")


def test_nccl_debug_is_the_profiles_to_set_or_leave_out(tmp_path: Path) -> None:
    from spark_compile.common.findings import has_errors
    from spark_compile.pipeline import planned, run

    for value, line in (("INFO", "NCCL_DEBUG=INFO"), ("off", None)):
        profile = tmp_path / f"{value}.yaml"
        profile.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}\nnccl: {{debug: {value}}}\n")
        done = planned(run(profile, root=ROOT))
        assert not has_errors(done.findings)
        nccl_env = next(f for f in done.plan.ranks[0].env_files if f.name == "nccl.env")
        names = {name: f"{name}={v}" for name, v in nccl_env.values}
        assert names.get("NCCL_DEBUG") == line


def test_b12x_hca_list_is_credited_to_the_rdma_devices() -> None:
    # Written because overlay.roce_ar is on, but its value is fleet.fabric.rdma_devices: a change there shows it.
    plan = json.loads((ROOT / "generated" / "dsv41-4spark" / "plan.json").read_text())
    assert {rank["sources"]["env"]["B12X_ROCE_HCA"] for rank in plan["ranks"]} == {"fleet.fabric.rdma_devices"}
