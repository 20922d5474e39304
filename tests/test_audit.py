"""The fleet audit's comparison (spark_compile.fleet.audit, shipped as fleet/audit.py) on captures made here: the
reference fleet as Docker records its generated `docker run` (support.docker_engine), then one hand change
at a time. Whole messages; `spark-compile audit` and the shipped audit.py must print the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_compile.common.errors import EXIT_DOWN, EXIT_FINDINGS, EXIT_OK
from spark_compile.fleet import audit

from conftest import REFERENCE_PROFILE, ROOT, run_cli
from support.docker_engine import create_request, image_record, inspect_record
from support.fleet_install import installed_fleet

GENERATED = ROOT / "generated" / "dsv41-4spark"
SCRIPTS = ROOT / "generated" / "fleet_scripts"
PLAN = json.loads((GENERATED / "plan.json").read_text())
EXPECTED = json.loads((GENERATED / "fleet" / "audit.json").read_text())
INSTALL = "/etc/spark-compile/dsv41-4spark"
RUNTIME = "/run/spark-compile/dsv41-4spark/runtime.env"
IMAGE = PLAN["image"]


def section(name: str, data: bytes | str, status: int = 0) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return f"{name} {status} {len(raw)}\n".encode() + raw + b"\n"


def container(rank: int, argv: list[str] | None = None, build: str = "") -> dict[str, Any]:
    """docker inspect of rank's container as the daemon records the plan's (or this) docker run."""
    directory = GENERATED / PLAN["ranks"][rank]["directory"]

    def env_file(path: str) -> list[str]:
        if path == RUNTIME:
            return ["NCCL_IB_GID_INDEX=3", "B12X_ROCE_GID_INDEX=3"]
        text = (directory / Path(path).name).read_text()
        return [line for line in text.splitlines() if line and not line.startswith("#")]

    name, body = create_request((argv or PLAN["ranks"][rank]["docker_argv"])[2:], env_file)
    return inspect_record(name, body, image_record(IMAGE, build), pid=100 + rank, hostname=f"spark-{rank}",
                          container_id=f"{rank:064x}")


def sums(rank: int, **changed: str) -> str:
    directory = GENERATED / PLAN["ranks"][rank]["directory"]
    lines = []
    for item in EXPECTED["ranks"][rank]["files"]:
        digest = changed.get(Path(item["path"]).name, item["sha256"])
        assert (directory / Path(item["path"]).name).is_file()
        lines.append(f"{digest}  {item['path']}")
    return "\n".join(lines) + "\n"


def capture(rank: int, record: dict[str, Any] | None = None, *, unit: str = "active\n", sha: str | None = None,
            timer: str = "active\n", lock: int = 0, tag_build: str = "", running_build: str = "") -> bytes:
    record = record or container(rank, build=running_build)
    parts = [audit.MAGIC, section("rank", str(rank)), section("node", f"spark-{rank}"),
             section("container", json.dumps([record])),
             section("image", json.dumps([image_record(IMAGE, tag_build)])),
             section("container_image", json.dumps([image_record(IMAGE, running_build)])),
             section("unit_state", unit, 0 if unit == "active\n" else 3), section("sha256", sha or sums(rank))]
    if rank == 0:
        parts += [section("watchdog_timer", timer, 0 if timer == "active\n" else 3),
                  section("watchdog_lock", "1767225600-42\n" if lock == 0 else "cat: no such file\n", lock)]
    return b"".join(parts)


def fleet(tmp: Path, **override: bytes) -> Path:
    for rank in range(4):
        data = override.get(f"r{rank}", capture(rank))
        (tmp / f"rank{rank}-spark-{rank}.audit").write_bytes(data)
    return tmp


def audit_cli(directory: Path, *extra: str) -> tuple[int, str, str]:
    result = run_cli("audit", str(REFERENCE_PROFILE), "--inspect", str(directory), *extra)
    return result.returncode, result.stdout, result.stderr


def shipped(directory: Path, *extra: str) -> tuple[int, str, str]:
    """The shipped audit.py (generated/fleet_scripts/) as launch.sh runs it, with the profile's audit.json."""
    plan = GENERATED / "fleet" / "audit.json"
    result = subprocess.run([sys.executable, str(SCRIPTS / "audit.py"), "--plan", str(plan), *extra, str(directory)],
                            capture_output=True, text=True, check=False, timeout=60)
    return result.returncode, result.stdout, result.stderr


# The fleet scripts' codes (audit.py, launch.sh audit) and spark-compile's for the same verdict (README.md, "Exit
# codes"): spark-compile's 2 is usage, so a rank down is 4 there.
TOOL_CODE = {audit.EXIT_MATCH: EXIT_OK, audit.EXIT_DRIFT: EXIT_FINDINGS, audit.EXIT_DOWN: EXIT_DOWN}


def both(directory: Path, *extra: str) -> tuple[int, str]:
    """The shipped audit.py's exit code and output, which `spark-compile audit` must give on the same captures
    (its code as TOOL_CODE maps it)."""
    compiled, ran = audit_cli(directory, *extra), shipped(directory, *extra)
    assert compiled[:2] == (TOOL_CODE[ran[0]], ran[1]), (compiled, ran)
    return ran[0], ran[1]


def with_env(record: dict[str, Any], name: str, value: str | None) -> dict[str, Any]:
    env = [e for e in record["Config"]["Env"] if not e.startswith(f"{name}=")]
    record["Config"]["Env"] = env + ([f"{name}={value}"] if value is not None else [])
    return record


def test_the_plan_as_docker_records_it_matches(tmp_path: Path) -> None:
    assert both(fleet(tmp_path)) == (0, "fleet matches dsv41-4spark production-1.7.1\n")


def test_an_env_value_changed_names_its_profile_key(tmp_path: Path) -> None:
    directory = fleet(tmp_path, r2=capture(2, with_env(container(2), "SPARK_ROCE_AR", "0")))
    assert both(directory) == (1, 'rank 2: env SPARK_ROCE_AR is "0", plan says "1" (overlay.roce_ar)\n')


def test_an_env_var_added_or_removed(tmp_path: Path) -> None:
    record = with_env(with_env(container(1), "SPARK_LOOKUP_DRAFT", "1"), "NCCL_DEBUG", None)
    assert both(fleet(tmp_path, r1=capture(1, record))) == (1, (
        'rank 1: env NCCL_DEBUG is unset, plan says "WARN" (nccl.debug)\n'
        'rank 1: env SPARK_LOOKUP_DRAFT is "1", plan says unset (not in the profile)\n'))


def test_a_secret_value_is_never_shown(tmp_path: Path) -> None:
    record = with_env(container(3), "HF_TOKEN", "hf_" + "a" * 34)
    record = with_env(record, "NOTE", "sk-" + "b" * 30)
    code, out = both(fleet(tmp_path, r3=capture(3, record)))
    assert (code, out) == (1, "rank 3: env HF_TOKEN is (redacted), plan says unset (not in the profile)\n"
                              "rank 3: env NOTE is (redacted), plan says unset (not in the profile)\n")


def test_one_engine_flag_more_and_one_changed(tmp_path: Path) -> None:
    argv = [*PLAN["ranks"][2]["docker_argv"], "--enable-metrics"]
    argv[argv.index("--mem-fraction-static") + 1] = "0.85"
    assert both(fleet(tmp_path, r2=capture(2, container(2, argv)))) == (1, (
        "rank 2: engine flag --enable-metrics is set, plan says unset (not in the profile)\n"
        'rank 2: engine flag --mem-fraction-static is "0.85", plan says "0.80" (engine.limits.mem_fraction_static)\n'))


def test_docker_settings_changed_by_hand(tmp_path: Path) -> None:
    argv = list(PLAN["ranks"][0]["docker_argv"])
    at = argv.index("--shm-size")
    argv[at + 1] = "16g"
    argv[at:at] = ["--privileged", "--cap-add", "SYS_ADMIN", "--user", "1000"]
    bind = argv.index("/srv/engram-local/dsv41:/engram-local:ro")
    del argv[bind - 1:bind + 1]
    assert both(fleet(tmp_path, r0=capture(0, container(0, argv)))) == (1, (
        'rank 0: HostConfig.ShmSize is 17179869184, plan says 34359738368 (container.shm_size)\n'
        'rank 0: HostConfig.CapAdd CAP_SYS_ADMIN is "CAP_SYS_ADMIN", plan says unset (not in the profile)\n'
        'rank 0: HostConfig.Binds /engram-local is unset, plan says "/srv/engram-local/dsv41:/engram-local:ro" '
        "(model.engram.local_dir)\n"
        "rank 0: HostConfig.Privileged is true, plan says unset (not in the profile)\n"
        "rank 0: Config.User is \"1000\", plan says the image's unset (not in the profile)\n"))


def test_files_unit_and_watchdog(tmp_path: Path) -> None:
    edited = "0" * 64
    directory = fleet(tmp_path, r0=capture(0, timer="inactive\n", lock=1),
                      r3=capture(3, unit="failed\n", sha=sums(3, **{"overlay.env": edited})))
    assert both(directory) == (1, (
        'rank 0: watchdog timer sglang-dsv41-4spark-watchdog.timer is "inactive", plan says "active" '
        "(operations.watchdog.enabled)\n"
        "rank 0: watchdog lock /home/spark/sgl-logs/sglang-dsv41-4spark-watchdog.lock is absent, "
        "plan says present (operations.watchdog.enabled; launch.sh start writes it)\n"
        "rank 3: file /etc/spark-compile/dsv41-4spark/overlay.env is sha256 000000000000, plan says sha256 "
        f"{EXPECTED['ranks'][3]['files'][3]['sha256'][:12]} (generated 3-spark-3/overlay.env)\n"
        'rank 3: unit sglang-dsv41-4spark.service is "failed", plan says "active" (launch.sh start)\n'))


def test_an_image_rebuilt_under_the_same_tag(tmp_path: Path) -> None:
    other = image_record(IMAGE, "rebuilt")["Id"]
    ours = image_record(IMAGE)["Id"]
    # Rank 1 re-tagged and restarted; rank 2 re-tagged, still running the old image.
    directory = fleet(tmp_path, r1=capture(1, tag_build="rebuilt", running_build="rebuilt"),
                      r2=capture(2, tag_build="rebuilt"))
    assert both(directory) == (1, (
        f'rank 1: image is "{other}", plan says the other ranks\' "{ours}" (engine.image: no digest pinned)\n'
        f'rank 2: image tag "{IMAGE}" is "{other}", plan says the running container\'s "{ours}" '
        "(engine.image: the next start runs another image)\n"))


def test_unreachable_and_not_running_are_exit_2_and_named(tmp_path: Path) -> None:
    stopped = container(1)
    stopped["State"].update(Status="exited", Running=False)
    unreachable = audit.MAGIC + section("rank", "2") + section("node", "spark-2") + section(
        "unreachable", "ssh: connect to host 192.0.2.13 port 22: Connection refused\n", 255)
    directory = fleet(tmp_path, r1=capture(1, stopped), r2=unreachable)
    (directory / "rank3-spark-3.audit").unlink()
    code, out = both(directory)
    assert (code, out) == (2, (
        'rank 1 (spark-1): container sgldsv41 is not running (status "exited")\n'
        "rank 2 (spark-2): unreachable: ssh: connect to host 192.0.2.13 port 22: Connection refused\n"
        f"rank 3 (spark-3): no capture in {directory}\n"))


@pytest.mark.parametrize("data", [
    b"", b"spark-audit 1\n", b"spark-audit 1\nrank 0 999999999\n0\n", b"{}",
    b"spark-audit 1\nrank 0 1\n0\ncontainer 0 5\n[[[[[\n",
    b"spark-audit 1\nrank 0 1\n0\ncontainer 0 3\n\x1b[2\n" + section("sha256", "\x1b]0;pwned\x07  /x\n"),
    b"spark-audit 1\nrank 0 1\n0\n" + section("container", "[" * 100000 + "]" * 100000),
    b"spark-audit 1\nrank 0 1\n0\n" + section("container", json.dumps([{"State": {"Running": True},
                                                                        "Config": {"Env": 5, "Cmd": "x"}}])),
])
def test_hostile_captures_never_crash_and_print_no_control_characters(tmp_path: Path, data: bytes) -> None:
    fleet(tmp_path, r0=data)
    code, out, err = audit_cli(tmp_path)
    assert code in (EXIT_FINDINGS, EXIT_DOWN), out + err
    assert "Traceback" not in err and "internal error" not in err
    assert not any(ord(c) < 32 and c != "\n" for c in out + err)
    ran = shipped(tmp_path)
    assert (TOOL_CODE[ran[0]], ran[1]) == (code, out)


def test_json_format_for_monitoring(tmp_path: Path) -> None:
    directory = fleet(tmp_path, r2=capture(2, with_env(container(2), "SPARK_ROCE_AR", "0")))
    code, out = both(directory, "--format", "json")
    assert code == 1
    assert json.loads(out) == {
        "profile": "dsv41-4spark", "release": "production-1.7.1", "status": "drift", "exit": 1, "down": [],
        "differences": [{"rank": 2, "subject": "env SPARK_ROCE_AR", "found": '"0"', "planned": '"1"',
                         "source": "overlay.roce_ar",
                         "line": 'rank 2: env SPARK_ROCE_AR is "0", plan says "1" (overlay.roce_ar)'}]}


def test_json_exit_is_the_printing_commands_own_code(tmp_path: Path) -> None:
    """A rank not captured: audit.py says 2 and `spark-compile audit` 4, each in its exit status and its JSON."""
    directory = fleet(tmp_path)
    (directory / "rank3-spark-3.audit").unlink()
    compiled, ran = audit_cli(directory, "--format", "json"), shipped(directory, "--format", "json")
    assert (compiled[0], ran[0]) == (EXIT_DOWN, audit.EXIT_DOWN) == (4, 2)
    ours, theirs = json.loads(compiled[1]), json.loads(ran[1])
    assert (ours.pop("exit"), theirs.pop("exit"), ours["status"]) == (4, 2, "down")
    assert ours == theirs


def test_usage(tmp_path: Path) -> None:
    assert audit_cli(tmp_path / "absent")[0] == 2
    assert shipped(tmp_path, "--format", "yaml")[0] == 64
    err = audit_cli(tmp_path / "absent")[2]
    assert err.endswith(f"spark-compile: error: {tmp_path / 'absent'}: not a folder of captures (launch.sh audit "
                   "--save DIR or launch.sh postmortem DIR writes one)\n"), err


def test_a_node_redacts_secrets_before_its_capture_leaves_it(tmp_path: Path) -> None:
    """node_audit_redacted (fleet-lib.sh) with fleet.env's patterns, on docker inspect JSON holding secrets."""
    env = ['HF_TOKEN=hf_abc\\"def', "my_api_key=x", "NOTE=sk-" + "b" * 30, "PATH=/bin", "SPARK_ROCE_AR=1"]
    inspect = tmp_path / "inspect.json"
    inspect.write_text(json.dumps([{"Config": {"Env": env}}], indent=4))
    script = 'source "$1" && node_audit_redacted "$audit_secret_names" "$audit_secret_values" cat "$2"'
    fleet = installed_fleet(GENERATED, tmp_path / "deploy")  # fleet-lib.sh sources the fleet.env beside it
    result = subprocess.run(["bash", "-c", script, "audit", str(fleet / "fleet-lib.sh"), str(inspect)],
                            capture_output=True, text=True, check=False, timeout=30)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"Config": {"Env": [
        "HF_TOKEN=(redacted)", "my_api_key=(redacted)", "NOTE=(redacted)", "PATH=/bin", "SPARK_ROCE_AR=1"]}}]


def test_captures_of_another_fleet_are_named(tmp_path: Path) -> None:
    other = capture(1).replace(b"node 0 7\nspark-1\n", b"node 0 7\nspark-9\n")
    extra = audit.MAGIC + section("rank", "7") + section("node", "spark-7")
    directory = fleet(tmp_path, r1=other)
    (directory / "rank7-spark-7.audit").write_bytes(extra)
    assert both(directory) == (2, 'rank 1 (spark-1): the capture is of node "spark-9"\n'
                                  "rank 7 (spark-7): captured, but the plan has no such rank\n")


def test_a_hand_added_secret_flag_is_redacted(tmp_path: Path) -> None:
    argv = [*PLAN["ranks"][0]["docker_argv"], "--api-key", "s3cr3t-value"]
    assert both(fleet(tmp_path, r0=capture(0, container(0, argv)))) == (
        1, "rank 0: engine flag --api-key (a secret) is (redacted), plan says unset (not in the profile)\n")


def test_an_image_pinned_by_digest_must_carry_it(tmp_path: Path) -> None:
    plan = json.loads(json.dumps(EXPECTED))
    pinned = "sha256:" + "ab" * 32
    plan["image"]["digest"] = pinned
    running = image_record(IMAGE)["RepoDigests"][0].split("@")[1]
    captures = {rank: audit.parse_capture(capture(rank), f"rank {rank}") for rank in range(4)}
    captures[2].sections["container_image"] = (0, json.dumps([{**image_record(IMAGE), "RepoDigests": [
        f"aidendle94/sparkrun-sglang-dsv41-gb10@{pinned}"]}]).encode())
    differences, down = audit.compare(plan, captures)
    assert down == []
    assert [d.line() for d in differences] == [
        f'rank {rank}: image digest is "{running}", plan says "{pinned}" (engine.image)' for rank in (0, 1, 3)]
