"""The generated fleet/ folder, checked by the real tools: shellcheck and bash -n (the static scripts with
the fleet.env they source), systemd-analyze verify, ruff, mypy --strict and the 3.11 compiler for smoke.py,
and a dry run with a recording ssh that must never be called. No namespaces or root needed (the
integration test is test_fleet_ops.py)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, ROOT, run_cli
from support.tools import require_tool, shellcheck, systemd_verify

SCRIPTS = ("fleet-lib.sh", "dry-run.sh", "window.sh", "launch.sh", "verify.sh", "watchdog.sh", "fleet.env")
STATIC = ROOT / "templates" / "fleet" / "static"


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fleet-artifacts")
    result = run_cli(str(REFERENCE_PROFILE), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    return out / "dsv41-4spark" / "fleet"


def test_committed_fleet_folder_is_current(fleet_dir: Path) -> None:
    committed = ROOT / "generated" / "dsv41-4spark" / "fleet"
    assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fleet_dir.iterdir())
    for path in fleet_dir.iterdir():
        assert (committed / path.name).read_bytes() == path.read_bytes(), path.name


def test_scripts_are_the_package_static_files(fleet_dir: Path) -> None:
    static = sorted(p.name for p in STATIC.iterdir())
    assert static == ["dry-run.sh", "engram.py", "fleet-lib.sh", "gate.py", "gate_scoring.py", "launch.sh",
                      "smoke.py", "verdict.py", "verify.sh", "watchdog.sh", "window.sh"]
    for name in static:
        assert (fleet_dir / name).read_bytes() == (STATIC / name).read_bytes(), name
        assert "{{" not in (STATIC / name).read_text(), name
    # The audit's comparison is the compiler's own module, shipped as it is (one implementation).
    assert (fleet_dir / "audit.py").read_bytes() == (ROOT / "compiler" / "audit.py").read_bytes()
    assert (fleet_dir / "audit.py").stat().st_mode & 0o111


def _profile_with_nodes(tmp_path: Path, count: int) -> Path:
    nodes = "\n".join(f"    - {{name: spark-{i}, fabric_ip: 10.9.{i // 200}.{i % 200 + 10}, ssh: root@10.9.{i // 200}."
                      f"{i % 200 + 10}, home: /root}}" for i in range(count))
    path = tmp_path / f"fleet{count}.yaml"
    path.write_text(f"""extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}
name: fleet{count}
fleet:
  fabric: {{interface: eth0, subnet: 10.9.0.0/16, rdma_devices: [rocep1s0f0]}}
  nodes:
{nodes}
engine: {{parallel: {{tp: {count}, ep: {count}}}}}
""")
    return path


def test_launch_sh_is_the_same_for_4_and_64_nodes_only_data_grows(tmp_path: Path) -> None:
    sizes = {}
    for count in (4, 64):
        result = run_cli(str(_profile_with_nodes(tmp_path, count)), "--out", str(tmp_path / "out"))
        assert result.returncode == 0, result.stdout + result.stderr
        fleet = tmp_path / "out" / f"fleet{count}" / "fleet"
        sizes[count] = {name: (fleet / name).stat().st_size for name in ("launch.sh", "fleet.env")}
        assert (fleet / "launch.sh").read_bytes() == (STATIC / "launch.sh").read_bytes()
        dry = subprocess.run(["bash", str(fleet / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                             check=False)
        assert dry.returncode == 0, dry.stderr
        assert f"== rank {count - 1}: spark-{count - 1} (worker)" in dry.stdout
    assert sizes[4]["launch.sh"] == sizes[64]["launch.sh"]
    assert sizes[64]["fleet.env"] > 10 * sizes[4]["fleet.env"] // 2


def test_python_tools_pass_mypy_strict_and_ruff() -> None:
    mypy, ruff = require_tool("mypy"), require_tool("ruff")
    tools = [str(STATIC / name) for name in ("smoke.py", "engram.py", "gate.py", "gate_scoring.py",
                                              "verdict.py")]
    # gate.py imports smoke.py and gate_scoring.py beside it, as the fleet folder has them.
    proc = subprocess.run([mypy, "--strict", "--no-incremental", "--explicit-package-bases", "--config-file",
                           "/dev/null", *tools], capture_output=True, text=True, check=False,
                          env={**os.environ, "MYPYPATH": str(STATIC)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([ruff, "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), *tools],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_scripts_pass_shellcheck_and_bash_n(fleet_dir: Path) -> None:
    bash = require_tool("bash")
    for name in SCRIPTS:
        assert shellcheck(fleet_dir / name) == "", name
        proc = subprocess.run([bash, "-n", str(fleet_dir / name)], capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, proc.stderr


def test_watchdog_units_verify_clean(fleet_dir: Path) -> None:
    units = {p.name: p.read_text() for p in fleet_dir.iterdir() if p.suffix in (".service", ".timer")}
    assert sorted(units) == ["sglang-dsv41-4spark-watchdog.service", "sglang-dsv41-4spark-watchdog.timer"]
    assert systemd_verify(units, extra_executables=[]) == ""
    service = units["sglang-dsv41-4spark-watchdog.service"]
    assert "User=spark\n" in service and "Type=oneshot\n" in service
    assert "ExecStart=/etc/spark-compile/dsv41-4spark/fleet/watchdog.sh check\n" in service


def test_smoke_is_ruff_clean_stdlib_only_python_311(fleet_dir: Path) -> None:
    smoke = fleet_dir / "smoke.py"
    ruff = require_tool("ruff")
    proc = subprocess.run([ruff, "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), str(smoke)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    tree = ast.parse(smoke.read_text(), feature_version=(3, 11))
    modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module}
    assert modules - {"__future__"} <= set(sys.stdlib_module_names), modules
    help_text = subprocess.run([sys.executable, str(smoke), "--help"], capture_output=True, text=True,
                               check=True)
    assert "reasoning-effort" in help_text.stdout


def test_dry_run_never_calls_ssh(fleet_dir: Path, tmp_path: Path) -> None:
    shim = tmp_path / "bin"
    shim.mkdir()
    calls = tmp_path / "calls"
    for tool in ("ssh", "curl", "scp"):
        (shim / tool).write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {calls}\nexit 1\n")
        (shim / tool).chmod(0o755)
    env = {"PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "LANG": "C.UTF-8"}
    proc = subprocess.run(["bash", str(fleet_dir / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert not calls.exists()
    plan = json.loads((fleet_dir.parent / "plan.json").read_text())
    positions = [proc.stdout.index(f"== rank {rank}: ") for rank in plan["start_order"]]
    assert positions == sorted(positions) and plan["start_order"] == [3, 2, 1, 0]
    assert "RoCE v2 GID index: found at start" in proc.stdout
    env = dict(line.split("=", 1) for line in (fleet_dir / "fleet.env").read_text().splitlines()
               if "=" in line and not line.startswith("#"))
    assert env["image_check"] == "sitecustomize" and env["api_via_head"] == "0"
    # Each rank's docker argv comes back from the data word for word (bash's own quoting, read by bash).
    for rank in plan["ranks"]:
        block = proc.stdout.split(f"== rank {rank['rank']}: ")[1].split("with this environment")[0]
        command = block.split("where docker-run.sh runs:\n", 1)[1]
        words = subprocess.run(["bash", "-c", 'printf "%s\\n" ' + command.replace("\\\n", " ")],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        assert words == rank["docker_argv"]


def test_unknown_command_is_a_usage_error(fleet_dir: Path) -> None:
    proc = subprocess.run(["bash", str(fleet_dir / "launch.sh"), "frobnicate"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 64
    assert "launch.sh --dry-run" in proc.stderr


HOSTILE = ["/opt/prev/stop", "$(touch PWNED)", "'; touch PWNED2; '", "a  b", "`id`", "*", "--x=\"y\" z"]


def test_fleet_env_quotes_every_value_by_construction(tmp_path: Path) -> None:
    profile = tmp_path / "hostile.yaml"
    words = ", ".join(json.dumps(word) for word in HOSTILE)
    profile.write_text(f"""extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}
name: hostile
operations:
  previous_stack: {{stop: [{words}], relaunch: [{words}]}}
""")
    result = run_cli(str(profile), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    fleet = tmp_path / "out" / "hostile" / "fleet"
    assert shellcheck(fleet / "fleet.env") == ""
    read = subprocess.run(["bash", "-c", 'source "$1"; printf "%s\\0" "${prev_stop[@]}"; printf "%s\\0" "$prev_unit"',
                           "bash", str(fleet / "fleet.env")], capture_output=True, cwd=tmp_path, check=True)
    assert read.stdout.decode().split("\0")[:-1] == [*HOSTILE, ""]
    assert not list(tmp_path.glob("PWNED*"))
    dry = subprocess.run(["bash", str(fleet / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                         cwd=tmp_path, check=False)
    assert dry.returncode == 0, dry.stderr
    assert "2. Cutover: run /opt/prev/stop \\$\\(touch\\ PWNED\\)" in dry.stdout
    assert not list(tmp_path.glob("PWNED*"))


def _fleet_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and line[0] != "#")


def test_verify_expects_a_line_only_where_its_hook_is_armed(tmp_path: Path) -> None:
    profile = tmp_path / "quiet.yaml"
    profile.write_text(f"""extends: {os.path.relpath(REFERENCE_PROFILE, tmp_path)}
name: quiet
overlay: {{roce_ar: false, roce_ag: false, mxfp8_backend: cutlass}}
engine: {{backends: {{fp8_gemm: null}}}}
model: {{aliases: []}}
operations: {{verify: {{hooks_armed: null}}}}
""")
    result = run_cli(str(profile), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    quiet = _fleet_env(tmp_path / "out" / "quiet" / "fleet" / "fleet.env")
    reference = _fleet_env(ROOT / "generated" / "dsv41-4spark" / "fleet" / "fleet.env")
    assert (reference["expect_roce"], reference["expect_mxfp8"], reference["expect_aliases"]) == (
        "1", "1", "'deepseek-v4-flash,dsv41-flash'")
    assert (quiet["expect_roce"], quiet["expect_mxfp8"], quiet["expect_aliases"]) == ("0", "0", "''")
    # Unpinned, the count is what this project's overlay arms: three hooks fewer than the reference's flags.
    assert reference["rank_hooks"] == "(21 21 21 21)"
    assert quiet["rank_hooks"] == "(12 12 12 12)"
