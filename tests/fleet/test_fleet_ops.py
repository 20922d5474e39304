"""The generated fleet operations, driven for real: launch.sh over real ssh to four namespaced nodes.

One fleet (see fleetbed.py) serves the whole module; the tests run in file order and each leaves the
fleet as the next expects it. Needs root, iproute2 (ip netns), OpenSSH server and client, nsenter and
unshare, curl: `bash .ci/setup-fleet` installs them. Missing pieces fail the test when CI is set.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetbed import NODES, PREVIOUS_UNIT, FleetBed

pytestmark = pytest.mark.fleet

OPERATIONS = """\
  health_timeout_seconds: 20
  watchdog: {interval_seconds: 5, fail_threshold: 2, probe_timeout_seconds: 2, busy_grace_seconds: 8,
             ready_timeout_seconds: 6, relaunch_limit: 2, reset_after_seconds: 8}
  smoke: {needle_tokens: [2000, 600000], request_timeout_seconds: 20}
  previous_stack: {unit: vllm-prev.service}
"""
NEEDS = ("ip", "ssh", "ssh-keygen", "nsenter", "unshare", "curl", "bash", "tar", "flock")


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "the fleet test needs root (network namespaces, bind mounts)"
    for tool in NEEDS:
        if shutil.which(tool) is None:
            return f"{tool} not found (run: bash .ci/setup-fleet)"
    if not os.access("/usr/sbin/sshd", os.X_OK):
        return "/usr/sbin/sshd not found (run: bash .ci/setup-fleet)"
    return None


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetBed]:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    fleet = FleetBed(tmp_path_factory.mktemp("fleet"))
    try:
        yield fleet.up(OPERATIONS)
    finally:
        fleet.close()


def unit_records(bed: FleetBed, unit: str | None = None) -> list[tuple[float, int, str]]:
    """(time, rank, verb) of every start/stop of a unit (default: the rank unit), over all nodes."""
    unit = unit or bed.plan["unit"]
    return sorted((rec["t"], rank, rec["argv"][0]) for rank in range(NODES) for rec in bed.records(rank)
                  if rec["tool"] == "systemctl" and rec["argv"][:1] in (["start"], ["stop"])
                  and rec["argv"][-1] == unit)


def starts(bed: FleetBed) -> list[tuple[float, int]]:
    """(time, rank) of every `systemctl start` of the rank unit, over all nodes."""
    return [(t, rank) for t, rank, verb in unit_records(bed) if verb == "start"]


def unit_actions(bed: FleetBed) -> list[str]:
    """rank:start / rank:stop of every rank-unit action, in time order over all nodes."""
    return [f"{rank}:{verb}" for _, rank, verb in unit_records(bed)]


def previous_states(bed: FleetBed) -> list[str]:
    return [bed.unit_state(rank, PREVIOUS_UNIT) for rank in range(NODES)]


def start_previous(bed: FleetBed) -> None:
    """The previous stack running on every node, as before a cutover."""
    for rank in range(NODES):
        bed.ssh(rank, f"systemctl start {PREVIOUS_UNIT}")
    assert previous_states(bed) == ["active"] * NODES


def wait_for(path: Path, pattern: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = path.read_text() if path.exists() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError(f"{pattern!r} not in {path} after {timeout} s:\n{text}")


def test_dry_run_contacts_no_node(bed: FleetBed) -> None:
    connections = bed.sshd_connections()
    result = bed.launch("--dry-run")
    assert result.returncode == 0, result.stdout + result.stderr
    assert bed.sshd_connections() == connections
    assert all(not bed.records(rank) for rank in range(NODES))
    out = result.stdout
    headers = [int(n) for n in re.findall(r"^== rank (\d+):", out, re.MULTILINE)]
    assert headers == [3, 2, 1, 0]
    assert out.count("RoCE v2 GID index: found at start") == NODES
    for rank in bed.plan["ranks"]:
        assert f"--node-rank {rank['rank']} \\" in out
        assert f"HOST_IP={rank['fabric_ip']}" in out


def test_install_copies_every_rank_and_the_watchdog(bed: FleetBed) -> None:
    result = bed.launch("install")
    assert result.returncode == 0, result.stdout + result.stderr
    unit = bed.plan["unit"]
    for rank in range(NODES):
        node = bed.tmp / "nodes" / f"r{rank}"
        assert (node / "fs" / "etc" / "fleet-test" / "docker-run.sh").stat().st_mode & 0o111
        assert (node / "systemd" / unit).read_text() == (
            bed.out / bed.plan["ranks"][rank]["directory"] / unit).read_text()
        assert ["daemon-reload"] in [r["argv"] for r in bed.records(rank) if r["tool"] == "systemctl"]
    head = bed.tmp / "nodes" / "r0"
    assert (head / "fs" / "etc" / "fleet-test" / "fleet" / "watchdog.sh").exists()
    assert (head / "systemd" / "sglang-fleet-test-watchdog.timer").exists()
    assert ["enable", "--now", "sglang-fleet-test-watchdog.timer"] in [r["argv"] for r in bed.records(0)]


def test_preflight_problems_abort_before_the_cutover(bed: FleetBed) -> None:
    start_previous(bed)
    (bed.node_fs(0) / "engram" / "engram-local.json").rename(bed.node_fs(0) / "engram" / "away.json")
    config = next((bed.node_fs(2) / "models" / "snapshots").iterdir()) / "config.json"
    original = config.read_text()
    config.write_text(json.dumps({"text_config": {"engram_layer_ids": [1, 14],
                                                  "engram_num_embeddings": [384006169, 384016682]}}))
    bed.set_control(1, image_kind="stock")
    bed.set_control(2, image_missing=True)
    bed.set_control(3, overlay_lacks=["SPARK_ENGRAM_PREFETCH", "SPARK_ROCE_AG_MAX"])
    try:
        result = bed.launch("start")
    finally:
        (bed.node_fs(0) / "engram" / "away.json").rename(bed.node_fs(0) / "engram" / "engram-local.json")
        config.write_text(original)
        for rank in (1, 2, 3):
            bed.set_control(rank)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert re.search(r"^ABORT: rank 0: rows-MISSING: .*engram-local\.json", out, re.MULTILINE)
    # A stock image: no sitecustomize, or the system's, which names none of the overlay's variables.
    assert re.search(r"^ABORT: rank 1: overlay-MISMATCH: (cannot read its sitecustomize: no sitecustomize on the "
                     r"image python path|the image's overlay \(sitecustomize .*\) does not know SPARK_ENGRAM_DIR )",
                     out, re.MULTILINE), out
    assert re.search(r"^ABORT: rank 2: image-MISSING", out, re.MULTILINE)
    assert re.search(r"^ABORT: rank 2: tables-MISMATCH: \S+/config\.json gives Engram rows 1:384006169,"
                     r"14:384016682, the profile says 1:384006168,14:384016682 \(model\.engram\.tables\)$", out,
                     re.MULTILINE), out
    assert "rank 3 (spark-3): tables-ok" in out
    assert re.search(r"^ABORT: rank 3: overlay-MISMATCH: .*does not know SPARK_ENGRAM_PREFETCH SPARK_ROCE_AG_MAX:",
                     out, re.MULTILINE)
    assert "rank 1 (spark-1): rows-ok" in out and "rank 3 (spark-3): image-ok" in out
    assert "gpu: checked after the previous stack is stopped" in out
    assert out.rstrip().endswith("ABORT preflight (nothing was stopped or started)")
    assert unit_actions(bed) == []
    assert previous_states(bed) == ["active"] * NODES
    assert [verb for _, _, verb in unit_records(bed, PREVIOUS_UNIT)] == ["start"] * NODES


def test_start_passes_the_production_overlay_cuts_over_then_starts_workers_first(bed: FleetBed) -> None:
    result = bed.launch("start")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    # The production image's kind of overlay (a sitecustomize, no CLI) passes the check on every node.
    for rank in range(NODES):
        assert re.search(rf"^rank {rank} \(spark-{rank}\): overlay-ok \(sitecustomize .*/image/peer/"
                         r"sitecustomize\.py; knows all 1[56] SPARK_\* names", out, re.MULTILINE), out
    # The cutover: the previous stack stopped on every node after the last preflight look, before any start.
    checks = [rec["t"] for rank in range(NODES) for rec in bed.records(rank)
              if rec["tool"] == "docker" and rec["argv"][:1] == ["run"] and "-c" in rec["argv"]]
    stops = [t for t, _, verb in unit_records(bed, PREVIOUS_UNIT) if verb == "stop"]
    assert len(checks) >= NODES and len(stops) == NODES
    assert max(checks) < min(stops) and max(stops) < min(t for t, _ in starts(bed))
    assert previous_states(bed) == ["inactive"] * NODES
    assert [rank for _, rank in starts(bed)] == [3, 2, 1, 0]
    order = re.findall(r"^rank (\d) \(spark-\d\): systemctl start", out, re.MULTILINE)
    assert [int(n) for n in order] == [3, 2, 1, 0]
    assert "health OK after" in out and "smoke checks passed: watchdog enabled" in out
    assert out.index("smoke checks before enabling the watchdog") > out.index("health OK after")
    for rank in bed.plan["ranks"]:
        runs = [r["argv"] for r in bed.records(rank["rank"])
                if r["tool"] == "docker" and r["argv"][:1] == ["run"] and "--rm" not in r["argv"]]
        assert ["docker", *runs[-1]] == rank["docker_argv"]
    runtime = (bed.node_fs(2) / "run" / "fleet-test" / "runtime.env").read_text()
    assert "NCCL_IB_GID_INDEX=3" in runtime
    # Each run writes its own log where the operator runs it.
    log = re.search(r"^launch.sh start \(fleet-test production-1.7.1\); log: (\S+)$", out, re.MULTILINE)
    assert log and Path(log.group(1)).read_text().rstrip().endswith(
        "smoke checks passed: watchdog enabled on rank 0 (spark-0): it arms after its first fully passing check")
    status = bed.launch("status")
    assert status.stdout.count("sglang-fleet-test.service active") == NODES, status.stdout
    assert "/health: 200" in status.stdout
    assert "watchdog (sglang-fleet-test-watchdog.timer on rank 0 (spark-0)): enabled" in status.stdout


def test_start_refuses_a_running_fleet(bed: FleetBed) -> None:
    before = unit_actions(bed)
    result = bed.launch("start", "--no-wait")
    assert result.returncode == 1
    assert "ALREADY-RUNNING" in result.stdout and "nothing was stopped or started" in result.stdout
    assert unit_actions(bed) == before


def verify(bed: FleetBed) -> subprocess.CompletedProcess[str]:
    return bed.operator("bash", str(bed.out / "fleet" / "verify.sh"), "--timeout", "10")


def test_verify_reads_the_boot_lines_of_every_rank(bed: FleetBed) -> None:
    result = verify(bed)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "FAIL" not in out
    for rank in range(NODES):
        who = f"PASS rank {rank} (spark-{rank}):"
        assert f"{who} RoCE collectives on: world=4" in out
        assert f"{who} overlay: 21 hooks armed" in out
        assert f"{who} MXFP8 dense GEMMs routed to b12x" in out
        assert f"{who} Engram layer 14 gather 980.5 us per call (at most 2000)" in out
        assert f"{who} free -g: 20 GiB available (at least 4)" in out
    rows = "engram layer 14: rank 1/4 owns rows [96004170, 192008341) of 384016682"
    assert f"PASS rank 1 (spark-1): {rows}" in out
    assert "KV pool 5245184 tokens (full_token=5245184, expected 4200000-6600000)" in out
    # Measured against predicted: the predictions are the reference's own (weights estimated from config.json).
    assert ("MEASURED rank 1 (spark-1): weights 77.01 (predicted 77.45, -0.6%) GiB; draft 2.50 (predicted 2.02, "
            "+23.8%) GiB; available_bytes 9.70 (predicted 9.78, -0.8%) GiB; bytes_per_full_token 1673.31 "
            "(predicted 1673.31, +0.0%); full_token 5540352 (predicted 5591040, -0.9%); CUDA graphs 0.84 GiB") in out
    assert "PASS rank 0 (spark-0): Served-model aliases: deepseek-v4-flash,dsv41-flash" in out
    assert "PASS rank 0 (spark-0): The server is fired up and ready to roll!" in out


def test_verify_calibrate_writes_pins_that_predict_the_fleet(bed: FleetBed) -> None:
    pins = bed.tmp / "calibration.yaml"
    result = bed.operator("bash", str(bed.out / "fleet" / "verify.sh"), "--timeout", "10", "--calibrate", str(pins))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"calibration written to {pins}" in result.stdout
    assert pins.read_text() == (
        "# Measured by verify.sh on the booted fleet of fleet-test: fold these pins into the profile's model\n"
        "# section, so that the next compile predicts this fleet's memory from them (GiB, in rank order).\n"
        "model:\n"
        "  weights_per_rank: [77.01, 77.01, 77.01, 77.01]\n"
        "  draft_weights_per_rank: [2.50, 2.50, 2.50, 2.50]\n"
        "  pre_load_available_per_rank: [110.94, 111.51, 111.51, 111.51]\n"
        "  cuda_graph_per_rank: [0.84, 0.84, 0.84, 0.84]\n")
    child = bed.tmp / "fleet-test-calibrated.yaml"
    child.write_text("extends: fleet-test.yaml\n" + pins.read_text())
    done = subprocess.run([sys.executable, "-m", "spark_compile.cli", "plan", str(child), "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    plan = json.loads(done.stdout)
    ranks = plan["capacity"]["ranks"]
    # Folded in, the pins make the compile predict what the boot logged: SGLang sizes every rank from the
    # minimum over ranks (the head's 110.94 GiB), so each rank's full_token is within 5 % of the head's boot.
    assert ranks[1]["terms"]["mem_available"]["source"] == "pinned: model.pre_load_available_per_rank[1]"
    assert all(abs(r["full_token"] - 5245184) <= 0.05 * 5245184 for r in ranks), [r["full_token"] for r in ranks]


def smoke(bed: FleetBed, *args: str) -> subprocess.CompletedProcess[str]:
    return bed.operator(sys.executable, str(bed.out / "fleet" / "smoke.py"), *args, timeout=60)


def test_smoke_passes_then_fails_on_wrong_answers(bed: FleetBed) -> None:
    result = smoke(bed)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for name in ("count", "needle-2000", "image", "tool-call", "thinking", "reasoning-effort"):
        assert re.search(rf"^PASS {name}: ", out, re.MULTILINE), (name, out)
    skip = r"^SKIP needle-600000: 600000 tokens is above the context length 524288"
    assert re.search(skip, out, re.MULTILINE)
    bed.set_control(0, wrong=True)
    try:
        result = smoke(bed, "--only", "count,needle,image,tool-call,reasoning-effort")
    finally:
        bed.set_control(0)
    out = result.stdout
    assert result.returncode == 5, out + result.stderr
    assert re.search(r"^FAIL count: '1, 2, .*12, 14, ", out, re.MULTILINE)
    assert re.search(r"^FAIL image: 'The number is 1537\.'", out, re.MULTILINE)
    assert "FAIL reasoning-effort" in out and "(identical: the effort was ignored)" in out


def test_arm_enables_the_watchdog_only_after_the_smoke_checks_pass(bed: FleetBed) -> None:
    lock = bed.node_fs(0) / "logs" / "sglang-fleet-test-watchdog.lock"
    lock.unlink()  # as if started with --no-wait: nothing armed yet
    bed.set_control(0, wrong=True)
    try:
        refused = bed.launch("arm")
    finally:
        bed.set_control(0)
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert re.search(r"^FAIL count: ", refused.stdout, re.MULTILINE)
    assert refused.stdout.rstrip().endswith(
        "ABORT: the smoke checks FAILED: the watchdog is NOT enabled (launch.sh arm once they pass)")
    assert not lock.exists()
    armed = bed.launch("arm")
    assert armed.returncode == 0, armed.stdout + armed.stderr
    assert armed.stdout.rstrip().endswith(
        "smoke checks passed: watchdog enabled on rank 0 (spark-0): it arms after its first fully passing check")
    assert lock.exists()


def test_watchdog_relaunches_an_exited_head_resets_after_a_healthy_spell_then_gives_up(bed: FleetBed) -> None:
    log = bed.node_fs(0) / "logs" / "watchdog.log"
    out = open(bed.tmp / "watchdog.out", "w")  # noqa: SIM115
    script = bed.tmp / "fs" / "etc" / "fleet-test" / "fleet" / "watchdog.sh"
    watchdog = bed.on_head(["bash", str(script), "loop"], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(log, r"armed: first fully passing check", 20)
        bed.set_control(0, chat_delay=3)
        wait_for(log, r"busy \(\d+ s of 8 s grace\)", 15)
        bed.set_control(0)
        os.kill(bed.unit_pid(0), 9)
        text = wait_for(log, r"relaunch 1/2: the fleet is healthy again", 60)
        # A head whose unit exited is relaunched at the first check that sees it, not after 2 failures.
        assert re.search(r"check failed \(2/2\): the head exited: sglang-fleet-test.service is not running", text)
        assert "check failed (1/2)" not in text
        postmortems = list((bed.node_fs(0) / "logs" / "postmortem").iterdir())
        assert len(postmortems) == 1 and len(list(postmortems[0].glob("rank*.log"))) == NODES
        assert [rank for _, rank in starts(bed)][-4:] == [3, 2, 1, 0]
        # 8 s healthy since the relaunch: the relaunch is forgotten, the limit counts afresh.
        text = wait_for(log, r"relaunch count reset \(was 1/2\)", 30)
        bed.set_control(0, health=503)
        text = wait_for(log, r"GIVING UP", 120)
        assert re.search(r"check failed \(1/2\): /health answered 503", text)
        assert "relaunch 1/2 FAILED (launch.sh start exit 2)" in text.split("relaunch count reset")[1]
        assert "relaunch 2/2 FAILED (launch.sh start exit 2)" in text
        assert text.count(": launch.sh stop\n") == 3
        status = bed.launch("status").stdout
        assert re.search(r"watchdog .*: enabled; armed=1 failures=2 relaunches=2 gave_up=1", status), status
        bed.set_control(0)
        stop = bed.launch("stop")
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert re.search(r"watchdog on rank 0 \(spark-0\) was armed: disarmed", stop.stdout)
        assert not (bed.node_fs(0) / "logs" / "sglang-fleet-test-watchdog.lock").exists()
        assert unit_actions(bed)[-4:] == ["0:stop", "1:stop", "2:stop", "3:stop"]
        wait_for(log, r"standing down: no lock", 15)
    finally:
        watchdog.kill()
        watchdog.wait(timeout=10)
        out.close()
        bed.set_control(0)


BOOT_FAULTS: dict[int, dict[str, Any]] = {
    0: {"full_token": 9000000, "drop": ["Served-model aliases", "The server is fired up"]},
    1: {"hooks": 20, "gather_us": 4100},
    2: {"drop": ["RoCE collectives on", "MXFP8 dense GEMMs", "engram layer 14"], "free_gib": 2},
    3: {"drop": ["overlay: ", "Engram shards", "Engram local"]},
}


def test_verify_fails_on_each_missing_or_out_of_range_line(bed: FleetBed) -> None:
    for rank, faults in BOOT_FAULTS.items():
        bed.set_control(rank, **faults)
    try:
        start = bed.launch("start")
        assert start.returncode == 0, start.stdout + start.stderr
        result = verify(bed)
    finally:
        for rank in BOOT_FAULTS:
            bed.set_control(rank)
        bed.launch("stop")
    out = result.stdout
    fails = re.findall(r"^FAIL (.*)$", out, re.MULTILINE)
    expected = [
        "rank 0 (spark-0): KV pool full_token=9000000 is outside 4200000-6600000",
        "rank 0 (spark-0): expected 'Served-model aliases ...', found: nothing",
        "rank 0 (spark-0): expected 'The server is fired up', found: nothing",
        "rank 1 (spark-1): expected 'overlay: 21 hooks armed', found: overlay: 20 import hooks armed",
        "rank 1 (spark-1): Engram layer 1 gather 4100 us per call, above 2000 (the Engram stall?)",
        "rank 1 (spark-1): Engram layer 14 gather 4100 us per call, above 2000 (the Engram stall?)",
        "rank 2 (spark-2): expected 'engram layer 14: rank 2/4 owns rows [192008341, 288012511) of 384016682', "
        "found: nothing",
        "rank 2 (spark-2): expected 'MXFP8 dense GEMMs routed', found: nothing",
        "rank 2 (spark-2): expected 'RoCE collectives on: world=4', found: nothing",
        "rank 2 (spark-2): free -g: 2 GiB available, below 4: host memory is the GPU's",
        "rank 3 (spark-3): expected 'overlay: 21 hooks armed', found: nothing",
        "rank 3 (spark-3): expected 'Engram ... layer=1 ... gather_us_per_call=U', found: nothing",
        "rank 3 (spark-3): expected 'Engram ... layer=14 ... gather_us_per_call=U', found: nothing",
    ]
    assert sorted(fails) == sorted(expected), out
    assert result.returncode == len(expected), out + result.stderr
    assert "PASS rank 3 (spark-3): RoCE collectives on: world=4" in out


def test_exit_codes_2_not_healthy_and_3_head_exited_then_rollback_restores_the_previous_stack(
        bed: FleetBed) -> None:
    start_previous(bed)
    bed.set_control(0, health=503)
    try:
        slow = bed.launch("start", "--health-timeout", "3")
    finally:
        bed.set_control(0)
    assert slow.returncode == 2, slow.stdout + slow.stderr
    assert "not healthy after 3 s" in slow.stdout and "ABORT: the head never became healthy" in slow.stdout
    assert bed.launch("stop").returncode == 0
    start_previous(bed)
    bed.set_control(0, head_exit=True)
    try:
        failed = bed.launch("start")
    finally:
        bed.set_control(0)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    assert "ABORT: the head exited while booting" in failed.stdout
    assert previous_states(bed) == ["inactive"] * NODES
    rollback = bed.launch("rollback")
    out = rollback.stdout
    assert rollback.returncode == 0, out + rollback.stderr
    assert out.rstrip().endswith("rollback done: the previous stack is back")
    assert previous_states(bed) == ["active"] * NODES
    assert all(bed.unit_state(rank, bed.plan["unit"]) != "active" for rank in range(NODES))
    stop_then_start = [(verb, rank) for _, rank, verb in unit_records(bed, PREVIOUS_UNIT)][-NODES:]
    assert stop_then_start == [("start", 3), ("start", 2), ("start", 1), ("start", 0)]
    assert re.search(r"^launch.sh rollback \(fleet-test production-1.7.1\); log: \S+launch-rollback-", out,
                     re.MULTILINE)
