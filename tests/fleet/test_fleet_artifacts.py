"""The generated fleet/ folder, installed with the shared fleet_scripts/ as an operator installs it, checked
by the real tools: shellcheck and bash -n (the static scripts with the fleet.env they source),
systemd-analyze verify, ruff, mypy --strict and the 3.11 compiler for the Python tools, and a dry run with a
recording ssh that must never be called. No namespaces or root needed (the integration test is
test_fleet_ops.py)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, REFERENCE_WARNINGS, ROOT, run_cli
from support.fleet_install import SCRIPTS as SCRIPTS_DIR
from support.fleet_install import installed_fleet
from support.tools import require_tool, shellcheck, systemd_verify

SCRIPTS = ("fleet-lib.sh", "dry-run.sh", "window.sh", "launch.sh", "verify.sh", "watchdog.sh", "fleet.env")
STATIC = ROOT / "templates" / "fleet" / "static"
PYTHON_TOOLS = ("smoke.py", "engram.py", "engram_rows.py", "gate.py", "gate_scoring.py", "verdict.py", "audit.py",
                "fleet_io.py", "install.py")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output root of the reference profile compiled here: dsv41-4spark/ and fleet_scripts/."""
    out = tmp_path_factory.mktemp("fleet-artifacts")
    result = run_cli(str(REFERENCE_PROFILE), "--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.fixture(scope="module")
def fleet_dir(compiled: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_fleet(compiled / "dsv41-4spark", tmp_path_factory.mktemp("deploy") / "dsv41-4spark")


def test_committed_fleet_folder_and_scripts_are_current(compiled: Path) -> None:
    for folder in ("dsv41-4spark/fleet", SCRIPTS_DIR):
        committed, fresh = ROOT / "generated" / folder, compiled / folder
        assert sorted(p.name for p in committed.iterdir()) == sorted(p.name for p in fresh.iterdir())
        for path in fresh.iterdir():
            assert (committed / path.name).read_bytes() == path.read_bytes(), path.name


def test_a_profile_folder_holds_data_and_the_scripts_live_once(compiled: Path, fleet_dir: Path) -> None:
    data = ["README.md", "audit.json", "fleet.env", "fleet.json", "sglang-dsv41-4spark-watchdog.service",
            "sglang-dsv41-4spark-watchdog.timer"]
    assert sorted(p.name for p in (compiled / "dsv41-4spark" / "fleet").iterdir()) == data
    static = sorted(p.name for p in STATIC.iterdir())
    assert static == ["dry-run.sh", "engram.py", "fleet-lib.sh", "fleet_io.py", "gate.py", "gate_scoring.py",
                      "launch.sh", "smoke.py", "verdict.py", "verify.sh", "watchdog.sh", "window.sh"]
    shared = compiled / SCRIPTS_DIR
    # The audit's comparison and the Engram arithmetic are the compiler's own modules, shipped as they are.
    sources = {name: STATIC / name for name in static} | {
        "audit.py": ROOT / "compiler" / "fleet" / "audit.py",
        "engram_rows.py": ROOT / "compiler" / "common" / "engram_rows.py"}
    for name, source in sources.items():
        assert (shared / name).read_bytes() == source.read_bytes() == (fleet_dir / name).read_bytes(), name
        assert "{{" not in source.read_text(), name
    assert sorted(p.name for p in fleet_dir.iterdir()) == sorted([*data, *sources])
    assert sorted(p.name for p in shared.iterdir()) == sorted([*sources, "install.py", "MANIFEST.json", "README.md"])
    assert (fleet_dir / "audit.py").stat().st_mode & 0o111
    assert (fleet_dir / "engram_rows.py").stat().st_mode & 0o777 == 0o644


def test_the_scripts_manifest_holds_every_sha256_and_the_profile_s_its_own_files(compiled: Path) -> None:
    shared = json.loads((compiled / SCRIPTS_DIR / "MANIFEST.json").read_text())
    own = json.loads((compiled / "dsv41-4spark" / "MANIFEST.json").read_text())
    assert shared["compiler"] == own["compiler"] and shared["compiler"].startswith("spark-compile ")
    assert sorted(shared) == ["compiler", "files", "scripts"]
    listed = sorted(p.name for p in (compiled / SCRIPTS_DIR).iterdir() if p.name != "MANIFEST.json")
    assert sorted(shared["files"]) == listed
    assert shared["scripts"] == [name for name in listed if name not in ("README.md", "install.py")]
    for name, entry in shared["files"].items():
        path = compiled / SCRIPTS_DIR / name
        assert entry == {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                         "mode": f"{path.stat().st_mode & 0o777:o}"}, name
    # A fix to a script changes fleet_scripts/ only: no profile's manifest names the scripts.
    assert sorted(own) == ["compiler", "files", "profile", "sources"]
    assert not any(path.startswith("fleet/") and path[6:] in shared["scripts"] for path in own["files"])


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
        assert not (fleet / "launch.sh").exists()
        installed = installed_fleet(fleet.parent, tmp_path / "deploy" / f"fleet{count}")
        sizes[count] = {name: (installed / name).stat().st_size for name in ("launch.sh", "fleet.env")}
        assert (installed / "launch.sh").read_bytes() == (STATIC / "launch.sh").read_bytes()
        dry = subprocess.run(["bash", str(installed / "launch.sh"), "--dry-run"], capture_output=True, text=True,
                             check=False)
        assert dry.returncode == 0, dry.stderr
        assert f"== rank {count - 1}: spark-{count - 1} (worker)" in dry.stdout
    assert sizes[4]["launch.sh"] == sizes[64]["launch.sh"]
    assert sizes[64]["fleet.env"] > 10 * sizes[4]["fleet.env"] // 2


def test_python_tools_pass_mypy_strict_and_ruff(compiled: Path) -> None:
    mypy, ruff = require_tool("mypy"), require_tool("ruff")
    shared = compiled / SCRIPTS_DIR
    tools = [str(shared / name) for name in PYTHON_TOOLS]
    # gate.py imports smoke.py and gate_scoring.py beside it, engram.py engram_rows.py, as the fleet folder has them.
    proc = subprocess.run([mypy, "--strict", "--no-incremental", "--explicit-package-bases", "--config-file",
                           "/dev/null", *tools], capture_output=True, text=True, check=False,
                          env={**os.environ, "MYPYPATH": str(shared)})
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


def test_python_tools_are_stdlib_only_python_311(compiled: Path, fleet_dir: Path) -> None:
    for name in PYTHON_TOOLS:
        tree = ast.parse((compiled / SCRIPTS_DIR / name).read_text(), feature_version=(3, 11))
        modules = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                   for alias in node.names}
        modules |= {node.module.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}
        # Beside each other in the fleet folder: gate.py imports smoke.py and gate_scoring.py, engram.py its rows,
        # the scripts fleet_io.py.
        siblings = {"__future__", "smoke", "gate_scoring", "engram_rows", "fleet_io"}
        assert modules - siblings <= set(sys.stdlib_module_names), name
    smoke = fleet_dir / "smoke.py"
    help_text = subprocess.run([sys.executable, str(smoke), "--help"], capture_output=True, text=True,
                               check=True)
    assert "reasoning-effort" in help_text.stdout
    # engram.py finds engram_rows.py beside it, in the installed folder as in fleet_scripts/.
    for folder in (fleet_dir, compiled / SCRIPTS_DIR):
        help_text = subprocess.run([sys.executable, str(folder / "engram.py"), "--help"], capture_output=True,
                                   text=True, check=True)
        assert help_text.stdout.startswith("usage: engram.py [-h] {rows,copy,verify}")


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
    assert (proc.returncode, proc.stderr) == (
        64, "launch.sh: unknown command frobnicate (launch.sh --help lists every command and its options)\n")


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
    installed = installed_fleet(fleet.parent, tmp_path / "deploy" / "hostile")
    dry = subprocess.run(["bash", str(installed / "launch.sh"), "--dry-run"], capture_output=True, text=True,
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


def test_the_drift_check_covers_the_shared_scripts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_cli(str(REFERENCE_PROFILE), "--out", str(out)).returncode == 0
    check = ("check", "--generated", "--out", str(out), str(REFERENCE_PROFILE))
    assert run_cli(*check).returncode == 0
    shared = out / SCRIPTS_DIR
    (shared / "launch.sh").write_text((shared / "launch.sh").read_text().replace("set -euo pipefail", "set -eu"))
    (shared / "smoke.py").unlink()
    (shared / "verify.sh").chmod(0o644)
    (shared / "hotfix.sh").write_text("echo hi\n")
    result = run_cli(*check)
    assert result.returncode == 1
    compiler = json.loads((shared / "MANIFEST.json").read_text())["compiler"]
    assert result.stdout[result.stdout.index("0 errors"):] == (
        f"0 errors, {len(REFERENCE_WARNINGS)} warnings in 1 profile\n"  # the reference's own
        f"{shared}/hotfix.sh: not generated by spark-compile (compiling keeps it): delete it or move it out of the "
        "generated directory\n"
        f"{shared}/launch.sh: differs from what {compiler} produces\n"
        f"{shared}/smoke.py: missing ({compiler} produces it)\n"
        f"{shared}/verify.sh: mode 644, {compiler} produces 755\n"
        f"drift: 4 files stale; run `spark-compile` on {REFERENCE_PROFILE} and commit the result\n")
    # A compile puts the scripts back and keeps the file it did not write, which alone is left to say.
    assert run_cli(str(REFERENCE_PROFILE), "--out", str(out)).returncode == 0
    after = run_cli(*check).stdout
    assert after[after.index("0 errors"):].splitlines()[1:] == [
        f"{shared}/hotfix.sh: not generated by spark-compile (compiling keeps it): delete it or move it out of the "
        "generated directory",
        f"drift: 1 file stale; run `spark-compile` on {REFERENCE_PROFILE} and commit the result"]
