"""A fleet whose API listens on the head's loopback only (engine.host 127.0.0.1), with an image of this
project's own overlay (operations.image_check.mode: cli): start, verify, smoke and the watchdog must all
reach the API, by running on the head. Same bed as test_fleet_ops.py (root, namespaces, real sshd)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from fleetbed import NODES, FleetBed
from test_fleet_ops import _missing

pytestmark = pytest.mark.fleet

OPERATIONS = """\
  health_timeout_seconds: 20
  image_check: {mode: cli}
  verify: {hooks_armed: null}
  watchdog: {interval_seconds: 5, fail_threshold: 2, probe_timeout_seconds: 2, ready_timeout_seconds: 6}
  smoke: {needle_tokens: [2000], request_timeout_seconds: 20}
engine: {host: 127.0.0.1}
"""


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetBed]:
    import os

    reason = _missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    fleet = FleetBed(tmp_path_factory.mktemp("loopback"))
    try:
        yield fleet.up(OPERATIONS, control={"image_kind": "ours"})
    finally:
        fleet.close()


def test_start_with_the_projects_overlay_cli_waits_for_health_on_the_head(bed: FleetBed) -> None:
    install = bed.launch("install")
    assert install.returncode == 0, install.stdout + install.stderr
    result = bed.launch("start")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert out.count("overlay-ok (registry 1.7.1; knows all") == NODES, out
    assert "health OK after" in out and "http://127.0.0.1:8210/health (on the head)" in out
    status = bed.launch("status").stdout
    assert "head API http://127.0.0.1:8210/health (on the head): 200" in status, status
    # From the operator's box the loopback address is not the head's: only ssh reaches it.
    direct = bed.operator("curl", "-sS", "-m", "3", "http://127.0.0.1:8210/health")
    assert direct.returncode != 0


def test_verify_reaches_the_api_and_expects_the_hooks_this_overlay_arms(bed: FleetBed) -> None:
    result = bed.operator("bash", str(bed.out / "fleet" / "verify.sh"), "--timeout", "10")
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    env = (bed.out / "fleet" / "fleet.env").read_text()
    armed = re.search(r"^rank_hooks=\((\d+) ", env, re.MULTILINE)
    assert armed and int(armed.group(1)) not in (0, 21)
    assert f"PASS rank 0 (spark-0): overlay: {armed.group(1)} hooks armed" in out
    assert "PASS head: health OK after" in out


def test_smoke_runs_on_the_head(bed: FleetBed) -> None:
    result = bed.operator(sys.executable, str(bed.out / "fleet" / "smoke.py"), "--only", "count,needle",
                          timeout=60)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert re.search(r"^PASS count: ", out, re.MULTILINE) and re.search(r"^PASS needle-2000: ", out, re.MULTILINE)


def test_watchdog_probes_the_loopback_api(bed: FleetBed) -> None:
    script = bed.tmp / "fs" / "etc" / "fleet-test" / "fleet" / "watchdog.sh"
    check = bed.on_head(["bash", str(script), "check"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = check.communicate(timeout=60)
    assert check.returncode == 0, out
    assert "armed: first fully passing check (/health 200, chat probe answered)" in out
    stop = bed.launch("stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr
