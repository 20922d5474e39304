"""The audit compares against what Docker really records: the real docker CLI's create request for each
generated `docker run` (through the fake daemon) is what support.docker_engine (the fleet stand-in's
docker) builds, and the daemon's record made from it audits clean against fleet/audit.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from spark_compile.fleet import audit

from conftest import ROOT
from support.docker_engine import create_request, env_file_lines, image_record, inspect_record
from support.tools import docker_create_request

PROFILES = ("dsv41-4spark", "qwen3-2spark-tcp", "qwen3-1spark", "gpt-oss-1spark", "qwen3-235b-2spark")


def local_argv(profile: str, rank: dict[str, Any], tmp: Path) -> list[str]:
    """The rank's docker argv with its env files read from generated/ (runtime.env: what preflight writes)."""
    runtime = tmp / "runtime.env"
    runtime.write_text("".join(f"{name}=3\n" for name in rank["runtime_env"]))
    folder = ROOT / "generated" / profile / rank["directory"]
    argv = list(rank["docker_argv"])
    for i, word in enumerate(argv[:-1]):
        if word == "--env-file":
            name = Path(argv[i + 1]).name
            argv[i + 1] = str(runtime if name == "runtime.env" else folder / name)
    return argv


def cases() -> list[tuple[str, int]]:
    return [(profile, rank["rank"]) for profile in PROFILES
            for rank in json.loads((ROOT / "generated" / profile / "plan.json").read_text())["ranks"]]


@pytest.mark.parametrize(("profile", "rank_number"), cases())
def test_the_stand_in_builds_the_request_the_docker_cli_sends(profile: str, rank_number: int, tmp_path: Path) -> None:
    plan = json.loads((ROOT / "generated" / profile / "plan.json").read_text())
    argv = local_argv(profile, plan["ranks"][rank_number], tmp_path)
    real = docker_create_request(argv)
    name, body = create_request(argv[2:], env_file_lines)
    assert (name, body) == (real["name"], real["body"])


@pytest.mark.parametrize("gpus", ["all", "1", "device=0", '"device=0,1"', "device=0,1"])
def test_the_stand_in_reads_gpus_as_the_docker_cli_does(gpus: str) -> None:
    argv = ["docker", "run", "--name", "x", "--gpus", gpus, "img"]
    real = docker_create_request(argv)
    assert create_request(argv[2:], env_file_lines) == (real["name"], real["body"])


def section(name: str, text: str, status: int = 0) -> bytes:
    return f"{name} {status} {len(text.encode())}\n".encode() + text.encode() + b"\n"


@pytest.mark.parametrize(("profile", "rank_number"), cases())
def test_dockers_record_of_the_generated_run_audits_clean(profile: str, rank_number: int, tmp_path: Path) -> None:
    generated = ROOT / "generated" / profile
    plan = json.loads((generated / "plan.json").read_text())
    expected = json.loads((generated / "fleet" / "audit.json").read_text())
    rank = plan["ranks"][rank_number]
    real = docker_create_request(local_argv(profile, rank, tmp_path))
    image = image_record(plan["image"])
    record = inspect_record(real["name"], real["body"], image, pid=1, hostname="node", container_id="c" * 64)
    sums = "".join(f"{hashlib.sha256((generated / rank['directory'] / Path(f['path']).name).read_bytes()).hexdigest()}"
                   f"  {f['path']}\n" for f in expected["ranks"][rank_number]["files"])
    capture = (audit.MAGIC + section("rank", str(rank_number)) + section("node", rank["node"])
               + section("container", json.dumps([record]))
               + section("image", json.dumps([image])) + section("container_image", json.dumps([image]))
               + section("unit_state", "active\n") + section("sha256", sums)
               + section("watchdog_timer", "active\n") + section("watchdog_lock", "1-2\n"))
    differences, down = audit.compare(expected, {rank_number: audit.parse_capture(capture, "capture")})
    assert [d.line() for d in differences] == []
    assert rank_number not in [d.rank for d in down]
