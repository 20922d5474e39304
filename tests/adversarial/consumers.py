"""Run every real consumer on a compiled profile directory and check it reads what the plan says.

Consumers: bash -n (every script), bash running docker-run.sh (argv recorded by a shim), the docker CLI
against the fake daemon (the create request), docker's --env-file parser, systemd's EnvironmentFile=
parser, systemd-analyze verify (rank and watchdog units), and launch.sh --dry-run under bash (nothing
it prints may run: a canary file must not appear and ssh must never be called).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from support.fleet_install import installed_fleet
from support.tools import (
    bash_argv,
    docker_create_request,
    docker_env_file,
    require_tool,
    systemd_environment,
    systemd_verify,
)

CANARY = Path("/tmp/spark-compile-pwned")
CONSUMERS = ("bash -n", "bash (docker-run.sh with a docker shim)", "docker CLI + fake dockerd",
             "docker --env-file", "systemd EnvironmentFile=", "systemd-analyze verify", "launch.sh --dry-run",
             "YAML parser (Kubernetes manifests)")
DOCKER_UNIT = "[Unit]\nDescription=Docker stand-in\n[Service]\nExecStart=/usr/bin/dockerd\n"


def check_scripts_parse(target: Path) -> None:
    bash = require_tool("bash")
    for script in sorted(target.rglob("*.sh")):
        proc = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (script, proc.stderr)


def check_docker_run(target: Path, rank: dict[str, Any], runtime_env: Path | None, install_dir: str,
                     docker: str) -> None:
    if runtime_env is not None:
        runtime_env.parent.mkdir(parents=True, exist_ok=True)
        runtime_env.write_text("NCCL_IB_GID_INDEX=3\nB12X_ROCE_GID_INDEX=3\n")
    installed = Path(install_dir)
    if installed.exists():
        shutil.rmtree(installed)
    shutil.copytree(target / rank["directory"], installed)  # as the README says: the rank's folder
    argv = bash_argv(installed / "docker-run.sh", shim_dir=Path(docker).parent)
    assert argv == rank["docker_argv"]
    body = docker_create_request(argv)["body"]
    assert body["Cmd"][-len(rank["engine_argv"]):] == rank["engine_argv"]


def check_env_files(target: Path, rank: dict[str, Any]) -> None:
    for name, values in rank["env_files"].items():
        text = (target / rank["directory"] / name).read_text()
        assert docker_env_file(text) == values, name
        assert systemd_environment(text) == values, name


def check_units(target: Path, plan: dict[str, Any], rank: dict[str, Any]) -> None:
    units = {plan["unit"]: (target / rank["directory"] / plan["unit"]).read_text(), "docker.service": DOCKER_UNIT}
    assert systemd_verify(units, extra_executables=[]) == ""
    fleet = target / "fleet"
    watchdog = {p.name: p.read_text() for p in fleet.glob("*.service")} | {p.name: p.read_text()
                                                                            for p in fleet.glob("*.timer")}
    if watchdog:
        assert systemd_verify(watchdog, extra_executables=[]) == ""


def check_dry_run(target: Path, tmp: Path) -> None:
    shim = tmp / "shim"
    shim.mkdir(exist_ok=True)
    calls = tmp / "ssh-calls"
    for tool in ("ssh", "curl", "scp"):
        (shim / tool).write_text(f"#!/bin/sh\necho {tool} >> {calls}\nexit 1\n")
        (shim / tool).chmod(0o755)
    env = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "LANG": "C.UTF-8"}
    # Installed as an operator runs it, each time into a new folder (an install never overwrites).
    fleet = installed_fleet(target, Path(tempfile.mkdtemp(prefix="deploy-", dir=tmp)) / target.name)
    proc = subprocess.run(["bash", str(fleet / "launch.sh"), "--dry-run"], capture_output=True,
                          text=True, env=env, check=False, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert not calls.exists()


def check_manifests(target: Path) -> None:
    """The Kubernetes manifests, when the profile builds them, read back by a YAML parser."""
    import yaml

    for manifest in sorted((target / "k8s").glob("*.yaml")) if (target / "k8s").is_dir() else []:
        assert [doc for doc in yaml.safe_load_all(manifest.read_text()) if doc is not None], manifest


def check_all(target: Path, plan: dict[str, Any], tmp: Path, runtime_env: Path | None) -> None:
    """Every consumer on rank 0 (every rank's files come from the same templates and quoting)."""
    CANARY.unlink(missing_ok=True)
    rank = plan["ranks"][0]
    check_scripts_parse(target)
    docker = f"{tmp}/bin/docker"
    inside = plan["install_dir"].startswith(f"{tmp}/") and str(runtime_env or tmp).startswith(str(tmp))
    if inside and f"exec {docker} run" in (target / rank["directory"] / "docker-run.sh").read_text():
        check_docker_run(target, rank, runtime_env, plan["install_dir"], docker)  # never writes outside tmp
    check_env_files(target, rank)
    check_units(target, plan, rank)
    check_dry_run(target, tmp)
    check_manifests(target)
    assert not CANARY.exists(), "a generated script ran a command hidden in a profile value"
