"""The release window, driven for real (same bed as test_fleet_ops.py: namespaces, real sshd, stand-ins):
production up; `launch.sh window CANDIDATE` stops it, starts the candidate on its test port, runs the gate
from the operator's box and restores production on every exit path: a gate that passes, a gate that fails,
a deadline that runs out mid-gate, a TERM to the window, and a KILL (finished by `launch.sh window
--restore` after `launch.sh status` names the half-finished window)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleetbed import NODES, FleetBed, run
from test_fleet_ops import _missing

from support.fleet_install import install

pytestmark = pytest.mark.fleet

OPERATIONS = """\
  health_timeout_seconds: 30
  smoke: {needle_tokens: [2000], request_timeout_seconds: 30}
"""
ARITH = "What is 17 times 23? Reply with the number only."
WINDOW_TIMEOUT = 400
GATE_REACHED_AFTER: list[int] = []  # seconds the passing window took to reach its gate


def candidate_yaml(name: str, deadline: int) -> str:
    return f"""extends: fleet-test.yaml
name: {name}
release: candidate-1.8
engine: {{port: 8888}}
operations:
  window:
    deadline_seconds: {deadline}
    memory_interval_seconds: 1
    bench_tolerance: 0.6
    bench_runs: 1
    checks:
      - {{name: arith, prompt: "{ARITH}", expect: "391"}}
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetBed]:
    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    fleet = FleetBed(tmp_path_factory.mktemp("window"))
    try:
        fleet.up(OPERATIONS, control={"canned": {ARITH: "391"}})
        compile_candidate(fleet, "fleet-cand", 600)
        for args in (("install",), ("start",)):
            result = fleet.launch(*args)
            assert result.returncode == 0, result.stdout + result.stderr
        yield fleet
    finally:
        fleet.close()


def compile_candidate(bed: FleetBed, name: str, deadline: int) -> None:
    """Compile the candidate beside production and install it, as production is (FleetBed.deploy)."""
    (bed.tmp / f"{name}.yaml").write_text(candidate_yaml(name, deadline))
    run([sys.executable, "-m", "spark_compile.cli", str(bed.tmp / f"{name}.yaml"), "--out",
         str(bed.tmp / "generated")], timeout=120)
    install(bed.tmp / "generated" / name, bed.deploy / name)


def candidate(bed: FleetBed, name: str = "fleet-cand") -> str:
    return str(bed.deploy / name)


def verdicts(bed: FleetBed) -> Path:
    return bed.tmp / "verdicts"


def window(bed: FleetBed, name: str = "fleet-cand") -> subprocess.CompletedProcess[str]:
    return bed.launch("window", candidate(bed, name), "--verdict-dir", str(verdicts(bed)), timeout=WINDOW_TIMEOUT)


def verdict(bed: FleetBed, name: str = "fleet-cand") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((verdicts(bed) / f"{name}.verdict.json").read_text())
    return data


def pointer(bed: FleetBed) -> Path:
    return bed.fs / "logs" / "window-current"


def assert_production_restored(bed: FleetBed) -> None:
    production = bed.plan["unit"]
    assert [bed.unit_state(rank, production) for rank in range(NODES)] == ["active"] * NODES
    assert all(bed.unit_state(rank, f"sglang-{name}.service") != "active" for rank in range(NODES)
               for name in ("fleet-cand", "fleet-short"))
    health = bed.operator("curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                          "http://10.213.0.11:8210/health")
    assert health.stdout == "200"
    assert not pointer(bed).exists()
    # launch.sh start enabled the production watchdog again.
    assert (bed.node_fs(0) / "logs" / "sglang-fleet-test-watchdog.lock").exists()


def candidate_on_test_port(bed: FleetBed) -> bool:
    requests = bed.node_fs(0) / "state" / "requests.jsonl"
    return requests.exists() and any(
        json.loads(line)["path"] == "/v1/chat/completions" for line in requests.read_text().splitlines())


def test_a_window_that_passes_restores_production_and_writes_the_verdict(bed: FleetBed) -> None:
    result = window(bed)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "s: stopping production (fleet-test)" in out
    assert "gate: " in out and " 0 FAIL" in out
    GATE_REACHED_AFTER.append(int(re.search(r"window \+(\d+)s: gate", out).group(1)))  # type: ignore[union-attr]
    found = verdict(bed)
    assert found["result"] == "PASS" and found["production_restored"] is True, found
    assert found["release"] == "candidate-1.8"
    written = hashlib.sha256((bed.tmp / "fleet-cand.yaml").read_bytes()).hexdigest()
    assert found["profile_sha256"] == written  # the candidate's own file, as the operator commits it
    assert [Path(s["path"]).name for s in found["profile_sources"]] == [
        "fleet-cand.yaml", "fleet-test.yaml", "dsv41-4spark.yaml"]
    names = {check["name"] for check in found["checks"]}
    assert {"count", "long-prefill-stress", "buried-facts", "multi-answer", "bench", "operator-arith"} <= names
    assert found["failed"] == [] and found["bench"]["tokens_per_s"] > 0
    assert sorted(found["memory"]["nodes"]) == [f"spark-{r}" for r in range(NODES)]
    assert all(m["samples"] >= 1 and m["peak_used_gib"] == 99 for m in found["memory"]["nodes"].values())
    markdown = (verdicts(bed) / "fleet-cand.verdict.md").read_text()
    assert "| long-prefill-stress | PASS |" in markdown and "| spark-3 | 99 | 20 |" in markdown
    assert_production_restored(bed)
    assert candidate_on_test_port(bed)
    saved = sorted(p.name for p in (Path(found["files"]) / "candidate").iterdir())
    # The postmortem keeps each rank's log and its audit capture (launch.sh postmortem).
    assert saved == sorted(f"rank{r}-spark-{r}.{kind}" for r in range(NODES) for kind in ("audit", "log"))
    assert "== journalctl -u sglang-fleet-cand.service" in (Path(found["files"]) / "candidate" /
                                                          "rank0-spark-0.log").read_text()


def test_a_window_whose_gate_fails_says_which_check_and_why(bed: FleetBed) -> None:
    bed.set_control(0, canned={ARITH: "391"}, wrong_fact=True)
    try:
        result = window(bed)
    finally:
        bed.set_control(0, canned={ARITH: "391"})
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    found = verdict(bed)
    assert found["result"] == "FAIL" and found["failed"] == ["buried-facts"], found
    assert "1 gate check(s) failed" in found["reason"]
    assert len(found["why"]) == 1 and found["why"][0].startswith("buried-facts: 0/8 facts found; wanted 'Bramble'")
    assert "got 'I could not tell.'" in found["why"][0]
    # The bench compared with the previous (passing) verdict.
    bench = next(c for c in found["checks"] if c["name"] == "bench")
    assert bench["figures"]["baseline_from"].startswith("fleet-cand@"), bench
    assert_production_restored(bed)


def test_a_deadline_that_runs_out_mid_gate_restores_production(bed: FleetBed) -> None:
    # The deadline leaves 20 s of gate after the time the passing window took to reach its gate; the gate
    # is held by a slow API, so the deadline runs out while it runs.
    deadline = GATE_REACHED_AFTER[0] + 20
    compile_candidate(bed, "fleet-short", deadline)
    bed.set_control(0, canned={ARITH: "391"}, chat_delay=300)
    try:
        result = window(bed, "fleet-short")
    finally:
        bed.set_control(0, canned={ARITH: "391"})
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    found = verdict(bed, "fleet-short")
    assert found["result"] == "ABORTED" and f"deadline of {deadline} s ran out" in found["reason"], found
    gate_at = int(re.search(r"window \+(\d+)s: gate", out).group(1))  # type: ignore[union-attr]
    ended_at = int(re.search(r"window \+(\d+)s: the deadline", out).group(1))  # type: ignore[union-attr]
    assert gate_at < deadline <= ended_at, out
    assert found["production_restored"] is True
    assert_production_restored(bed)


def start_window(bed: FleetBed) -> subprocess.Popen[str]:
    """A window left running in the background, held in its gate by a slow API."""
    bed.set_control(0, canned={ARITH: "391"}, chat_delay=300)
    proc = subprocess.Popen(["ip", "netns", "exec", bed.switch, "bash", str(bed.out / "fleet" / "launch.sh"),
                             "window", candidate(bed), "--verdict-dir", str(verdicts(bed))],
                            stdout=(bed.tmp / "window-background.out").open("w"), stderr=subprocess.STDOUT,
                            text=True, env=bed.env())
    deadline = time.monotonic() + WINDOW_TIMEOUT
    while time.monotonic() < deadline:
        log = pointer(bed).read_text() if pointer(bed).exists() else ""
        gate_out = Path(next((line[4:] for line in log.splitlines() if line.startswith("dir=")), "/nonexistent"))
        if (gate_out / "gate").exists():
            time.sleep(2)
            return proc
        assert proc.poll() is None, (bed.tmp / "window-background.out").read_text()
        time.sleep(1)
    raise AssertionError("the window never reached its gate")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signalled_window_restores_production_by_its_trap(bed: FleetBed, sig: signal.Signals) -> None:
    # TERM: a kill; INT: Ctrl-C; HUP: the operator's ssh session died.
    proc = start_window(bed)
    try:
        proc.send_signal(sig)
        proc.wait(timeout=WINDOW_TIMEOUT)
        out = (bed.tmp / "window-background.out").read_text()
    finally:
        bed.set_control(0, canned={ARITH: "391"})
    assert proc.returncode == 2, out
    assert f"s: the window was interrupted ({sig.name}): restoring production" in out
    found = verdict(bed)
    assert found["result"] == "ABORTED" and found["production_restored"] is True
    assert_production_restored(bed)


def test_a_killed_window_is_noticed_by_status_and_restored(bed: FleetBed) -> None:
    proc = start_window(bed)
    try:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        status = bed.launch("status")
        assert "release window HALF-FINISHED" in status.stdout, status.stdout
        assert "run launch.sh window --restore" in status.stdout
        refused = window(bed)
        assert refused.returncode == 64 and "refusing to start another window" in refused.stderr
        result = bed.launch("window", "--restore", timeout=WINDOW_TIMEOUT)
    finally:
        bed.set_control(0, canned={ARITH: "391"})
    out = result.stdout + result.stderr
    assert result.returncode == 2, out
    found = verdict(bed)
    assert found["result"] == "ABORTED" and "died before restoring production" in found["reason"]
    assert_production_restored(bed)
    assert "release window" not in bed.launch("status").stdout


def test_a_node_out_of_reach_leaves_production_down_says_so_and_restore_finishes(bed: FleetBed) -> None:
    proc = start_window(bed)
    node_log = bed.tmp / "nodes" / "r3" / "sshd.log"
    try:
        bed.kill_sshd(3)  # node 3's ssh dies mid-gate
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=WINDOW_TIMEOUT)
        out = (bed.tmp / "window-background.out").read_text()
        assert proc.returncode == 3, out
        assert "production was NOT restored" in out and "cannot ssh to root@10.213.0.14" in out
        found = verdict(bed)
        assert found["production_restored"] is False and found["result"] == "ABORTED"
        assert "release window HALF-FINISHED" in bed.launch("status").stdout
    finally:
        bed.set_control(0, canned={ARITH: "391"})
        node_log.write_text("")
        bed._sshd(3)  # the node is back
    result = bed.launch("window", "--restore", timeout=WINDOW_TIMEOUT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert verdict(bed)["production_restored"] is True
    assert_production_restored(bed)


def test_a_candidate_named_as_production_is_refused_before_anything_stops(bed: FleetBed) -> None:
    # A shipped release keeps production's name: compiled and installed apart, it still names production's unit.
    (bed.tmp / "release-1.8.yaml").write_text(candidate_yaml("fleet-test", 600))
    run([sys.executable, "-m", "spark_compile.cli", str(bed.tmp / "release-1.8.yaml"), "--out",
         str(bed.tmp / "generated-release")], timeout=120)
    install(bed.tmp / "generated-release" / "fleet-test", bed.deploy / "release-1.8")
    before = [bed.unit_pid(rank) for rank in range(NODES)]
    for extra in ((), ("--dry-run",)):
        result = bed.launch("window", candidate(bed, "release-1.8"), "--verdict-dir", str(verdicts(bed)), *extra)
        assert (result.returncode, result.stdout) == (64, ""), result.stderr
        assert result.stderr.startswith(f"window: refusing candidate {bed.deploy / 'release-1.8'}: it shares with "
                                        "production (fleet-test):\n  profile fleet-test\n  unit sglang-fleet-test"
                                        ".service\n"), result.stderr
    # Production never stopped and its watchdog stays enabled.
    assert [bed.unit_pid(rank) for rank in range(NODES)] == before
    assert_production_restored(bed)


@pytest.mark.parametrize("gate", ["passes", "fails"])
def test_the_same_release_renamed_as_the_refusal_says_runs_its_window(bed: FleetBed, gate: str) -> None:
    if gate == "passes":
        compile_candidate(bed, "fleet-test-window", 600)  # the refusal's hint: name: fleet-test-window
    bed.set_control(0, canned={ARITH: "391"}, wrong_fact=gate == "fails")
    try:
        result = window(bed, "fleet-test-window")
    finally:
        bed.set_control(0, canned={ARITH: "391"})
    assert result.returncode == (0 if gate == "passes" else 1), result.stdout + result.stderr
    found = verdict(bed, "fleet-test-window")
    assert found["result"] == ("PASS" if gate == "passes" else "FAIL") and found["production_restored"] is True
    assert_production_restored(bed)
    assert all(bed.unit_state(rank, "sglang-fleet-test-window.service") != "active" for rank in range(NODES))


def test_the_candidates_watchdog_never_acts_on_the_production_watchdog_lock(bed: FleetBed) -> None:
    """The window installs the candidate with its watchdog timer, and the restore arms production's watchdog.
    The candidate's watchdog, run on the head as its timer runs it, must not take that for its own enabling
    (it would then probe its own stopped API and relaunch the candidate over production)."""
    result = window(bed)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (bed.tmp / "nodes" / "r0" / "systemd" / "sglang-fleet-cand-watchdog.timer").exists()
    lock = bed.node_fs(0) / "logs" / "sglang-fleet-test-watchdog.lock"
    armed, before = lock.read_text(), [bed.unit_pid(rank) for rank in range(NODES)]
    script = bed.tmp / "fs" / "etc" / "fleet-cand" / "fleet" / "watchdog.sh"
    for _ in range(3):  # more than one check: a head found exited is relaunched at the next one
        check = bed.on_head(["bash", str(script), "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out, _ = check.communicate(timeout=120)
        assert (check.returncode, out) == (0, "")  # no lock of its own: it stands idle, says nothing
    assert [bed.unit_pid(rank) for rank in range(NODES)] == before and lock.read_text() == armed
    assert not (bed.node_fs(0) / "logs" / "sglang-fleet-cand-watchdog.state").exists()
    assert_production_restored(bed)
