"""Deployments other than the reference, each artifact proven by its real consumer: every shipped example
(one node, two nodes over TCP, RoCE with a draft model, eight nodes over RoCE, ...) and each fabric kind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, run_cli
from support.tools import (
    bash_argv,
    docker_create_request,
    docker_env_file,
    require_tool,
    shellcheck,
    systemd_environment,
    systemd_verify,
)

DOCKER_UNIT = "[Unit]\nDescription=Docker stand-in\n[Service]\nExecStart=/usr/bin/dockerd\n"
EXAMPLES = ROOT / "spec" / "profiles" / "examples"
# One profile per fabric kind, and every shipped example.
DEPLOYMENTS = {
    **{example.stem: example for example in sorted(EXAMPLES.glob("*.yaml"))},
    "infiniband": ROOT / "tests" / "profiles" / "positive" / "llama-2node-infiniband.yaml",
    "roce-pinned-gid": ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml",
}


class Compiled:
    """A profile compiled with its install and runtime folders moved under a temp dir, runtime.env faked."""

    def __init__(self, profile: Path, root: Path) -> None:
        self.etc, self.run = root / "etc", root / "run"
        self.bin = root / "bin"  # deploy.docker, where bash_argv puts its docker shim
        child = root / "profile.yaml"
        child.write_text(f"extends: {os.path.relpath(profile, root)}\n"
                         f"deploy:\n  install_dir: {self.etc}\n  runtime_dir: {self.run}\n"
                         f"  docker: {self.bin}/docker\n")
        result = run_cli(str(child), "--out", str(root / "generated"))
        assert result.returncode == 0, result.stdout + result.stderr
        self.plan: dict[str, Any] = json.loads(run_cli("plan", str(child)).stdout)
        self.name = self.plan["profile"]
        self.out = root / "generated" / self.name
        runtime = {name for rank in self.plan["ranks"] for name in rank["runtime_env"]}
        (self.run / self.name).mkdir(parents=True)
        (self.run / self.name / "runtime.env").write_text("".join(f"{name}=3\n" for name in sorted(runtime)))

    def install(self, rank: dict[str, Any]) -> Path:
        """Copy one rank's folder to its install dir, as the README says."""
        import shutil

        target: Path = self.etc / self.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.out / rank["directory"], target)
        return target


@pytest.fixture(scope="module", params=sorted(DEPLOYMENTS))
def compiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    return Compiled(DEPLOYMENTS[request.param], tmp_path_factory.mktemp(request.param))


def test_rank_scripts_pass_shellcheck_and_bash_n(compiled: Compiled) -> None:
    bash = require_tool("bash")
    scripts = sorted(p for rank in compiled.plan["ranks"] for p in (compiled.out / rank["directory"]).glob("*.sh"))
    assert len(scripts) == 2 * len(compiled.plan["ranks"])
    for script in scripts:
        assert shellcheck(script) == "", script
        assert subprocess.run([bash, "-n", str(script)], capture_output=True, check=False).returncode == 0


def test_docker_run_runs_the_plan_argv_and_the_docker_cli_parses_it(compiled: Compiled) -> None:
    for rank in compiled.plan["ranks"]:
        argv = bash_argv(compiled.install(rank) / "docker-run.sh", shim_dir=compiled.bin)
        assert argv == rank["docker_argv"]
        body = docker_create_request(argv)["body"]
        binds = body["HostConfig"]["Binds"]
        # The docker CLI sends binds in its own order; what matters is that each mount arrives whole.
        expected = [f"{m['source']}:{m['target']}" + (":ro" if m["read_only"] else "") for m in rank["mounts"]]
        assert sorted(binds) == sorted(expected)


def test_units_verify_clean(compiled: Compiled) -> None:
    for rank in compiled.plan["ranks"]:
        unit = compiled.out / rank["directory"] / compiled.plan["unit"]
        assert systemd_verify({unit.name: unit.read_text(), "docker.service": DOCKER_UNIT}, extra_executables=[]) == ""


def test_env_files_mean_the_plan_to_docker_and_systemd(compiled: Compiled) -> None:
    for rank in compiled.plan["ranks"]:
        written = sorted(p.name for p in (compiled.out / rank["directory"]).glob("*.env"))
        assert written == sorted(rank["env_files"])  # an empty env file is neither written nor mounted
        for name, values in rank["env_files"].items():
            assert values, name
            text = (compiled.out / rank["directory"] / name).read_text()
            assert docker_env_file(text) == values == systemd_environment(text), (rank["rank"], name)


def test_profile_without_limits_writes_none_of_their_flags() -> None:
    """two-node-tcp states nothing under engine.limits: SGLang's defaults apply, no flag is written."""
    from spark_compile.stages.engine_options import TYPED_FLAGS

    plan = json.loads(run_cli("plan", str(EXAMPLES / "two-node-tcp.yaml")).stdout)
    limit_flags = {flag for flag, source in TYPED_FLAGS.items() if source[:2] == ("engine", "limits")}
    assert len(limit_flags) == 7
    for rank in plan["ranks"]:
        assert limit_flags.isdisjoint(rank["engine_argv"]), rank["engine_argv"]
        assert "--cuda-graph-max-bs-decode" not in rank["engine_argv"]


def test_fabric_kinds_have_their_own_nccl_environment() -> None:
    def nccl(profile: Path) -> dict[str, str]:
        plan = json.loads(run_cli("plan", str(profile)).stdout)
        return dict(plan["ranks"][1]["env_files"]["nccl.env"])

    tcp, ib = nccl(DEPLOYMENTS["two-node-tcp"]), nccl(DEPLOYMENTS["infiniband"])
    roce = nccl(ROOT / "spec" / "profiles" / "dsv41-4spark.yaml")
    assert (tcp["NCCL_NET"], tcp["NCCL_IB_DISABLE"]) == ("Socket", "1")
    assert not any(name.startswith("NCCL_IB_") and name != "NCCL_IB_DISABLE" for name in tcp)
    assert (ib["NCCL_NET"], ib["NCCL_IB_HCA"]) == ("IB", "mlx5_0")
    assert not {"NCCL_IB_GID_INDEX", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_RANGE"} & set(ib)
    assert roce["NCCL_IB_ROCE_VERSION_NUM"] == "2" and roce["NCCL_IB_ADDR_RANGE"] == "192.0.2.0/24"


def test_only_roce_probes_a_gid(compiled: Compiled) -> None:
    for rank in compiled.plan["ranks"]:
        preflight = (compiled.out / rank["directory"] / "preflight.sh").read_text()
        assert ("find_gid()" in preflight) == (rank["roce_hca"] is not None)
        assert ("NCCL_IB_GID_INDEX" in rank["runtime_env"]) == (rank["roce_hca"] is not None
                                                                 and rank["gid_index"] is None)


def test_examples_are_committed_in_generated() -> None:
    result = run_cli("check", "--generated", *(str(p) for p in sorted(EXAMPLES.glob("*.yaml"))))
    assert result.returncode == 0, result.stdout + result.stderr
