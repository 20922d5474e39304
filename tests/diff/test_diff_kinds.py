"""The diff over rendered files: each kind of profile field shows in the artifacts, no-ops exit 0, a rename
shows once. GNU diff on the two compiled trees is the independent witness of which files changed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from spark_compile.pipeline import planned, validate
from spark_compile.review.artifact_diff import UNSET, Grouped, ProfileDiff
from spark_compile.review.diff import diff_profiles
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, ROOT, run_cli

UNIT = "sglang-dsv41-4spark.service"
ALL = (0, 1, 2, 3)


def _profiles(tmp_path: Path, child: str) -> tuple[Path, Path]:
    base = tmp_path / "base.yaml"
    shutil.copy(REFERENCE_PROFILE, base)
    changed = tmp_path / "changed.yaml"
    changed.write_text("extends: base.yaml\n" + child)
    return base, changed


def _diff(tmp_path: Path, child: str) -> ProfileDiff:
    base, changed = _profiles(tmp_path, child)
    old, new = planned(validate(resolve(base))), planned(validate(resolve(changed)))
    assert not [f for f in (*old.findings, *new.findings) if f.severity == "error"], new.findings
    return diff_profiles(old, new)


def _find(result: ProfileDiff, file: str, key: str) -> list[Grouped]:
    return [g for g in result.artifacts.changes if g.change.file == file and g.change.key == key]


def _changed_files(result: ProfileDiff) -> set[str]:
    dirs = {0: "0-spark-0", 1: "1-spark-1", 2: "2-spark-2", 3: "3-spark-3"}
    return {g.change.file if g.shared else f"{dirs[rank]}/{g.change.file}"
            for g in result.artifacts.changes for rank in (g.ranks or (0,))}


def _gnu_diff_files(tmp_path: Path, base: Path, changed: Path, name: str = "dsv41-4spark") -> set[str]:
    """The files GNU diff finds different between the two compiled trees (MANIFEST.json and fleet/audit.json
    aside: both restate the other files, and the diff shows the changes they restate)."""
    for side, profile in (("a", base), ("b", changed)):
        result = run_cli("compile", str(profile), "--out", str(tmp_path / side))
        assert result.returncode == 0, result.stderr
    proc = subprocess.run(["diff", "-rq", f"a/{name}", f"b/{name}"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    found = set()
    for line in proc.stdout.splitlines():
        path = line.split(" and ")[0].removeprefix(f"Files a/{name}/")
        if path not in ("MANIFEST.json", "fleet/audit.json"):
            found.add(path)
    return found


CASES = {
    "engine flag": "engine:\n  limits:\n    max_running_requests: 24\n",
    "env var": "engine:\n  env:\n    CUDA_DEVICE_ORDER: FASTEST_FIRST\n",
    "container option": "container:\n  stop_timeout: 61\n",
    "unit option": "deploy:\n  gpu_wait_tries: 12\n",
    "fleet node": "fleet:\n  nodes:\n"
                  "    - {name: spark-2, fabric_ip: 192.0.2.23, ssh: spark@192.0.2.23, home: /home/spark}\n",
    "operations setting": "operations:\n  watchdog:\n    interval_seconds: 90\n",
}


@pytest.mark.parametrize("kind", CASES)
def test_every_changed_file_is_in_the_artifacts_section(tmp_path: Path, kind: str) -> None:
    result = _diff(tmp_path, CASES[kind])
    assert not result.identical and result.artifacts.changes
    base, changed = tmp_path / "base.yaml", tmp_path / "changed.yaml"
    assert _changed_files(result) == _gnu_diff_files(tmp_path, base, changed)


def test_engine_flag(tmp_path: Path) -> None:
    result = _diff(tmp_path, CASES["engine flag"])
    [line] = [g for g in _find(result, "docker-run.sh", "") if "--max-running-requests" in (g.change.new or "")]
    assert line.ranks == ALL
    # The decode graph batch follows the request cap (a derived flag): one block of two lines.
    assert (line.change.old, line.change.new) == (
        "  --max-running-requests 16 \\\n  --cuda-graph-max-bs-decode 16 \\",
        "  --max-running-requests 24 \\\n  --cuda-graph-max-bs-decode 24 \\")
    assert result.sources[line.change].startswith("engine.limits.max_running_requests")
    # plan.json's engine argv restates the docker argv's change: the diff lists it once, under docker_argv.
    [argv] = [g for g in _find(result, "plan.json", "ranks[].docker_argv") if "--max-running" in (g.change.new or "")]
    assert (argv.ranks, argv.change.new) == (ALL, "--max-running-requests 24")
    assert not _find(result, "plan.json", "ranks[].engine_argv")


def test_env_var(tmp_path: Path) -> None:
    [change] = _find(_diff(tmp_path, CASES["env var"]), "engine.env", "CUDA_DEVICE_ORDER")
    assert (change.ranks, change.change.old, change.change.new) == (ALL, "PCI_BUS_ID", "FASTEST_FIRST")


def test_container_stop_timeout_changes_every_unit(tmp_path: Path) -> None:
    result = _diff(tmp_path, CASES["container option"])
    [stop] = _find(result, UNIT, "[Service] ExecStop")
    [timeout] = _find(result, UNIT, "[Service] TimeoutStopSec")
    assert stop.ranks == timeout.ranks == ALL
    assert (stop.change.old, stop.change.new) == ("/usr/bin/docker stop --time 60 sgldsv41",
                                                  "/usr/bin/docker stop --time 61 sgldsv41")
    assert (timeout.change.old, timeout.change.new) == ("90", "91")
    assert [c.path for c in result.profile] == ["container.stop_timeout"]
    assert (result.profile[0].old, result.profile[0].new) == ("60 (default)", 61)


def test_unit_option(tmp_path: Path) -> None:
    [start] = _find(_diff(tmp_path, CASES["unit option"]), UNIT, "[Service] TimeoutStartSec")
    assert start.ranks == ALL and start.change.old == "180" and int(start.change.new or 0) > 180


def test_fleet_node_changes_only_its_rank(tmp_path: Path) -> None:
    result = _diff(tmp_path, CASES["fleet node"])
    [host] = _find(result, "engine.env", "HOST_IP")
    assert (host.ranks, host.change.old, host.change.new) == ((2,), "192.0.2.13", "192.0.2.23")
    assert result.sources[host.change] == "fleet.nodes[2].fabric_ip"


def test_operations_setting_changes_the_watchdog_timer(tmp_path: Path) -> None:
    result = _diff(tmp_path, CASES["operations setting"])
    [timer] = _find(result, "fleet/sglang-dsv41-4spark-watchdog.timer", "[Timer] OnUnitInactiveSec")
    assert (timer.ranks, timer.change.old, timer.change.new) == ((), "60", "90")


def test_setting_a_key_to_its_default_exits_0_and_says_no_effect(tmp_path: Path) -> None:
    base, changed = _profiles(tmp_path, "container:\n  stop_timeout: 60\n")
    result = run_cli("diff", base.name, changed.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == (
        "profile: 1 change (no effect: the rendered files are byte-identical)\n"
        "  container.stop_timeout: 60 (default) → 60  (changed.yaml:3)\n"
        "    no effect on the rendered files\n"
        "artifacts: 0 changes (byte-identical)\n"
    )


def test_a_rename_shows_once_and_renamed_files_are_matched(tmp_path: Path) -> None:
    base, changed = _profiles(tmp_path, "name: dsv41-canary\n")
    result = run_cli("diff", "--unified", base.name, changed.name, cwd=tmp_path)
    assert result.returncode == 1
    summary = result.stdout.split("--- ")[0]
    assert summary.startswith(
        "profile: 1 change\n"
        "  name: dsv41-4spark → dsv41-canary  (changed.yaml:2)\n"
        "    every path follows (")
    assert summary.endswith("6 files renamed)\nartifacts: 0 changes besides 1 rename\n")
    assert summary.count("dsv41-canary") == 1
    assert ("--- a/0-spark-0/sglang-dsv41-4spark.service\n+++ b/0-spark-0/sglang-dsv41-canary.service\n"
            in result.stdout)
    assert "/dev/null" not in result.stdout


def test_rename_with_a_real_change_shows_both(tmp_path: Path) -> None:
    result = _diff(tmp_path, "name: dsv41-canary\ncontainer:\n  stop_timeout: 61\n")
    [fold] = result.artifacts.folds
    assert (fold.path, fold.old, fold.new) == ("name", "dsv41-4spark", "dsv41-canary")
    [stop] = _find(result, "sglang-dsv41-canary.service", "[Service] ExecStop")
    assert stop.ranks == ALL and stop.change.new == "/usr/bin/docker stop --time 61 sgldsv41"


def test_a_revision_starting_with_a_dash_is_refused(tmp_path: Path) -> None:
    base, _ = _profiles(tmp_path, "")
    result = run_cli("diff", "--", "--output=x:base.yaml", str(base), cwd=tmp_path)
    assert result.returncode == 2
    assert "may not start with '-'" in result.stderr and not (tmp_path / "x").exists()


def test_kubernetes_only_setting_shows_in_the_manifests(tmp_path: Path) -> None:
    shutil.copy(REFERENCE_PROFILE, tmp_path / "base.yaml")
    k8s = (ROOT / "tests" / "k8s" / "profiles" / "dsv41-k8s.yaml").read_text()
    (tmp_path / "k8s.yaml").write_text(k8s.replace("extends: ../../../spec/profiles/dsv41-4spark.yaml",
                                                   "extends: base.yaml"))
    (tmp_path / "changed.yaml").write_text("extends: k8s.yaml\nkubernetes:\n  namespace: serving\n")
    old, new = planned(validate(resolve(tmp_path / "k8s.yaml"))), planned(validate(resolve(tmp_path / "changed.yaml")))
    result = diff_profiles(old, new)
    files = {g.change.file for g in result.artifacts.changes}
    assert files == {"k8s/configmap.yaml", "k8s/leaderworkerset.yaml", "k8s/service.yaml", "k8s/README.md"}
    [namespace] = _find(result, "k8s/service.yaml", "metadata.namespace")
    assert (namespace.ranks, namespace.change.old, namespace.change.new) == ((), "inference", "serving")
    assert _changed_files(result) == _gnu_diff_files(tmp_path, tmp_path / "k8s.yaml", tmp_path / "changed.yaml",
                                                     "dsv41-k8s")


def test_a_delete_is_cited_at_the_line_of_the_file_that_deletes(tmp_path: Path) -> None:
    result = _diff(tmp_path, "engine:\n  env:\n    SGLANG_FLASHINFER_MOE_FUSED_FINALIZE: !delete\n")
    [change] = result.profile
    assert (change.path, change.old, change.new) == ("engine.env.SGLANG_FLASHINFER_MOE_FUSED_FINALIZE", "0", UNSET)
    assert (change.old_origin, change.new_origin) == (f"{tmp_path / 'base.yaml'}:84", f"{tmp_path / 'changed.yaml'}:4")
