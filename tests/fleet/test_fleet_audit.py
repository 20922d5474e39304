"""`launch.sh audit` on the four-node test bed (fleetbed.py): a fleet started from the plan audits clean, and
each hand change is reported at its profile key and nothing else; `spark-compile audit` reads the same
captures to the same verdict. The stand-in docker answers `docker inspect` with Docker's own record of the
generated `docker run` (support.docker_engine, held to the real CLI by tests/test_audit_docker.py).

One fleet serves the module; each test undoes its hand change, in file order."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetbed import NODES, FleetBed, node_ip
from test_fleet_ops import _missing, wait_for

from support.docker_engine import inspect_record
from support.tools import docker_create_request

pytestmark = pytest.mark.fleet

OPERATIONS = """\
  health_timeout_seconds: 20
  watchdog: {interval_seconds: 5, fail_threshold: 2, probe_timeout_seconds: 2, ready_timeout_seconds: 20,
             audit: true}
"""
MATCH = "fleet matches fleet-test production-1.7.1\n"


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetBed]:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    fleet = FleetBed(tmp_path_factory.mktemp("audit"))
    try:
        fleet.up(OPERATIONS)
        for command in (["install"], ["start"]):
            result = fleet.launch(*command)
            assert result.returncode == 0, result.stdout + result.stderr
        yield fleet
    finally:
        fleet.close()


def audit(bed: FleetBed, *args: str) -> tuple[int, str]:
    result = bed.launch("audit", *args)
    assert result.stderr == ""
    return result.returncode, result.stdout


def restart(bed: FleetBed, rank: int) -> None:
    unit = bed.plan["unit"]
    result = bed.ssh(rank, f"systemctl stop {unit} && systemctl start {unit} && sleep 1 && systemctl is-active {unit}")
    assert result.stdout.strip() == "active", result.stdout + result.stderr


def installed(bed: FleetBed, rank: int, name: str) -> Path:
    if name.endswith(".service"):
        return bed.tmp / "nodes" / f"r{rank}" / "systemd" / name
    return bed.node_fs(rank) / "etc" / "fleet-test" / name


def container_file(bed: FleetBed, rank: int) -> Path:
    return bed.node_fs(rank) / "state" / "containers" / f"{bed.plan['container_name']}.json"


def test_a_fleet_started_from_the_plan_audits_clean(bed: FleetBed) -> None:
    assert audit(bed) == (0, MATCH)
    code, out = audit(bed, "--format", "json")
    assert (code, json.loads(out)["status"], json.loads(out)["differences"]) == (0, "match", [])


def test_the_stand_ins_record_is_dockers_for_the_same_docker_run(bed: FleetBed) -> None:
    """The head's record against the real docker CLI's create request for the argv it was given (fake daemon)."""
    argv = next(rec["argv"] for rec in reversed(bed.records(0)) if rec["tool"] == "docker"
                and rec["argv"][:1] == ["run"] and "--node-rank" in rec["argv"])
    # The env files as the node sees them: its T/fs is this machine's T/nodes/r0/fs.
    local = [word.replace(str(bed.fs), str(bed.node_fs(0))) if word.startswith(str(bed.fs)) else word
             for word in argv]
    real = docker_create_request(["docker", *local])
    data = json.loads(container_file(bed, 0).read_text())
    record = data["inspect"]
    expected = inspect_record(real["name"], real["body"], data["image"], pid=record["State"]["Pid"],
                              hostname=record["Config"]["Hostname"], container_id=record["Id"])
    # Binds and env files name the node's own paths (T/fs), as the node's docker was given them.
    expected = json.loads(json.dumps(expected).replace(str(bed.node_fs(0)), str(bed.fs)))
    assert record == expected


def test_an_env_var_changed_in_a_running_container(bed: FleetBed) -> None:
    path = container_file(bed, 2)
    before = path.read_text()
    data = json.loads(before)
    env = data["inspect"]["Config"]["Env"]
    env[env.index("SPARK_ROCE_AR=1")] = "SPARK_ROCE_AR=0"
    path.write_text(json.dumps(data))
    try:
        assert audit(bed) == (1, 'rank 2: env SPARK_ROCE_AR is "0", plan says "1" (overlay.roce_ar)\n')
    finally:
        path.write_text(before)
    assert audit(bed) == (0, MATCH)


def test_an_image_retagged_to_another_digest(bed: FleetBed) -> None:
    running = json.loads(container_file(bed, 1).read_text())["inspect"]["Image"]
    bed.set_control(1, image_build="rebuilt")
    try:
        code, out = audit(bed)
        tagged = json.loads(bed.ssh(1, f"docker image inspect {bed.plan['image']}").stdout)[0]["Id"]
        assert (code, out) == (1, f'rank 1: image tag "{bed.plan["image"]}" is "{tagged}", plan says the running '
                                  f'container\'s "{running}" (engine.image: the next start runs another image)\n')
        restart(bed, 1)
        assert audit(bed) == (1, f'rank 1: image is "{tagged}", plan says the other ranks\' "{running}" '
                                 "(engine.image: no digest pinned)\n")
    finally:
        bed.set_control(1)
        restart(bed, 1)
    assert audit(bed) == (0, MATCH)


def test_a_rank_restarted_with_one_flag_more(bed: FleetBed) -> None:
    script = installed(bed, 3, "docker-run.sh")
    before = script.read_text()
    script.write_text(before.rstrip("\n") + " \\\n  --enable-metrics\n")
    try:
        restart(bed, 3)
        assert audit(bed) == (1, "rank 3: engine flag --enable-metrics is set, plan says unset (not in the profile)\n")
    finally:
        script.write_text(before)
        restart(bed, 3)
    assert audit(bed) == (0, MATCH)


def test_an_env_file_edited_on_disk(bed: FleetBed) -> None:
    path = installed(bed, 2, "nccl.env")
    before = path.read_bytes()
    path.write_bytes(before.replace(b"NCCL_DEBUG=WARN", b"NCCL_DEBUG=INFO"))
    planned = next(f["sha256"] for f in plan_files(bed, 2) if f["path"].endswith("/nccl.env"))
    try:
        found = hashlib.sha256(path.read_bytes()).hexdigest()
        assert audit(bed) == (1, f"rank 2: file {bed.fs}/etc/fleet-test/nccl.env is sha256 {found[:12]}, plan says "
                                 f"sha256 {planned[:12]} (generated 2-spark-2/nccl.env)\n")
    finally:
        path.write_bytes(before)
    assert audit(bed) == (0, MATCH)


def test_a_unit_file_edited(bed: FleetBed) -> None:
    unit = bed.plan["unit"]
    path = installed(bed, 0, unit)
    before = path.read_bytes()
    path.write_bytes(before + b"# hand edit\n")
    planned = next(f["sha256"] for f in plan_files(bed, 0) if f["path"].endswith(unit))
    try:
        found = hashlib.sha256(path.read_bytes()).hexdigest()
        assert audit(bed) == (1, f"rank 0: file /etc/systemd/system/{unit} is sha256 {found[:12]}, plan says "
                                 f"sha256 {planned[:12]} (generated 0-spark-0/{unit})\n")
    finally:
        path.write_bytes(before)
    assert audit(bed) == (0, MATCH)


def test_the_watchdog_disabled(bed: FleetBed) -> None:
    timer = "sglang-fleet-test-watchdog.timer"
    bed.ssh(0, f"systemctl disable --now {timer}")
    try:
        assert audit(bed) == (1, f'rank 0: watchdog timer {timer} is "inactive", plan says "active" '
                                 "(operations.watchdog.enabled)\n")
    finally:
        bed.ssh(0, f"systemctl enable --now {timer}")
    assert audit(bed) == (0, MATCH)


def test_spark_compile_audit_agrees_on_the_same_captures(bed: FleetBed, tmp_path: Path) -> None:
    path = container_file(bed, 1)
    before = path.read_text()
    data = json.loads(before)
    data["inspect"]["HostConfig"]["Privileged"] = True
    path.write_text(json.dumps(data))
    saved = tmp_path / "captures"
    try:
        launched = audit(bed, "--save", str(saved))
    finally:
        path.write_text(before)
    assert launched == (1, "rank 1: HostConfig.Privileged is true, plan says unset (not in the profile)\n")
    assert sorted(p.name for p in saved.iterdir()) == [f"rank{r}-spark-{r}.audit" for r in range(NODES)]
    compiled = subprocess.run([sys.executable, "-m", "spark_compile.cli", "audit", str(bed.tmp / "fleet-test.yaml"),
                               "--inspect", str(saved)], capture_output=True, text=True, timeout=120, check=False)
    assert (compiled.returncode, compiled.stdout) == launched
    # launch.sh postmortem keeps the same captures beside the logs.
    postmortem = tmp_path / "postmortem"
    result = bed.launch("postmortem", str(postmortem))
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = subprocess.run([sys.executable, "-m", "spark_compile.cli", "audit", str(bed.tmp / "fleet-test.yaml"),
                               "--inspect", str(postmortem)], capture_output=True, text=True, timeout=120,
                              check=False)
    assert (compiled.returncode, compiled.stdout) == (0, MATCH)


def test_the_watchdog_audits_a_relaunch_and_logs_each_difference(bed: FleetBed) -> None:
    """operations.watchdog.audit: a hand edit that a relaunch carries into the container is a finding."""
    log = bed.node_fs(0) / "logs" / "watchdog.log"
    env_file = installed(bed, 2, "nccl.env")
    before = env_file.read_bytes()
    out = (bed.tmp / "watchdog-audit.out").open("w")
    script = bed.tmp / "fs" / "etc" / "fleet-test" / "fleet" / "watchdog.sh"
    watchdog = bed.on_head(["bash", str(script), "loop"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(log, r"armed: first fully passing check", 30)
        env_file.write_bytes(before.replace(b"NCCL_DEBUG=WARN", b"NCCL_DEBUG=INFO"))
        found = hashlib.sha256(env_file.read_bytes()).hexdigest()
        planned = next(f["sha256"] for f in plan_files(bed, 2) if f["path"].endswith("/nccl.env"))
        os.kill(bed.unit_pid(0), 9)
        text = wait_for(log, r"audit FINDING: the relaunched fleet differs from the plan", 120)
        relaunch = text.split("the fleet is healthy again\n", 1)[1]
        findings = [line.split("]: ", 1)[1] for line in relaunch.splitlines()[:3]]
        assert findings == [
            f"  rank 2: file {bed.fs}/etc/fleet-test/nccl.env is sha256 {found[:12]}, plan says sha256 "
            f"{planned[:12]} (generated 2-spark-2/nccl.env)",
            '  rank 2: env NCCL_DEBUG is "INFO", plan says "WARN" (nccl.debug)',
            "audit FINDING: the relaunched fleet differs from the plan (the lines above; launch.sh audit)"]
    finally:
        watchdog.kill()
        watchdog.wait(timeout=10)
        out.close()
        env_file.write_bytes(before)
    restart(bed, 2)
    assert audit(bed) == (0, MATCH)


def test_usage_is_64(bed: FleetBed) -> None:
    result = bed.launch("audit", "--format", "yaml")
    assert result.returncode == 64
    assert result.stdout == ""


def test_an_unreachable_node_is_exit_2_and_named(bed: FleetBed) -> None:
    """Last: rank 3's sshd stays down."""
    bed.kill_sshd(3)
    assert audit(bed) == (2, f"rank 3 (spark-3): unreachable: ssh: connect to host {node_ip(3)} port 22: "
                             "Connection refused\n")


def plan_files(bed: FleetBed, rank: int) -> list[dict[str, str]]:
    expected = json.loads((bed.out / "fleet" / "audit.json").read_text())
    files: list[dict[str, str]] = expected["ranks"][rank]["files"]
    return files

