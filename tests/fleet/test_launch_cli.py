"""launch.sh's command line, run for real on an installed reference profile: --help, every refused option named
before anything runs or any log is written, the dry runs' smoke gate, and a release window refusing a candidate
that shares production's name (the fleet bed drives the window itself: test_window.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, run_cli
from support.fleet_install import install, installed_fleet

HINT = " (launch.sh --help lists every command and its options)\n"


def _compile(root: Path, name: str, yaml: str) -> Path:
    """``yaml`` extending the reference, compiled into its own output root and installed into root/deploy-NAME."""
    profile = root / f"{name}.yaml"
    profile.write_text(f"extends: {os.path.relpath(REFERENCE_PROFILE, root)}\n{yaml}")
    result = run_cli(str(profile), "--out", str(root / f"out-{name}"))
    assert result.returncode == 0, result.stdout + result.stderr
    compiled = root / f"out-{name}" / (yaml.split("name: ", 1)[1].split("\n", 1)[0] if "name: " in yaml
                                       else "dsv41-4spark")
    return install(compiled, root / f"deploy-{name}")


@pytest.fixture(scope="module")
def deploy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Production (the reference, installed) with two candidates on the window's port beside it."""
    root = tmp_path_factory.mktemp("launch-cli")
    result = run_cli(str(REFERENCE_PROFILE), "--out", str(root / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    installed_fleet(root / "out" / "dsv41-4spark", root / "production")
    _compile(root, "same", "engine: {port: 8888}\n")  # a shipped release as it is: name dsv41-4spark
    _compile(root, "renamed", "name: dsv41-4spark-window\nengine: {port: 8888}\n")  # the refusal's fix, applied
    return root


def launch(deploy: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(deploy / "production" / "fleet" / "launch.sh"), *args], capture_output=True,
                          text=True, check=False, timeout=60, cwd=deploy,
                          env={"PATH": os.environ["PATH"], "HOME": str(deploy / "home"), "LANG": "C.UTF-8",
                               "SPARK_LAUNCH_LOG_DIR": str(deploy / "logs"), **env})


def test_help_prints_the_header_on_stdout_and_exits_0(deploy: Path) -> None:
    for word in ("--help", "-h", "help"):
        result = launch(deploy, word)
        assert (result.returncode, result.stderr) == (0, "")
        assert result.stdout.startswith("launch.sh: start, stop and inspect the fleet described by fleet.env")
        assert "Exit status (start): 0 done;" in result.stdout


@pytest.mark.parametrize(("args", "message"), [
    (("start", "--bogus"), "start: unknown option --bogus"),
    (("start", "--dry-run", "--no-wait"), "start: unknown option --dry-run"),
    (("start", "--health-timeout"), "--health-timeout needs seconds (a whole number, at most 604800)"),
    (("start", "--health-timeout", "1; id"), "--health-timeout needs seconds (a whole number, at most 604800)"),
    (("start", "--health-timeout", "9" * 400), "--health-timeout needs seconds (a whole number, at most 604800)"),
    (("restart", "--now"), "start: unknown option --now"),
    (("stop", "--force"), "stop takes no option or argument, not --force"),
    (("preflight", "x"), "preflight takes no option or argument, not x"),
    (("postmortem", "--dir"), "postmortem takes at most a folder, not --dir"),
    (("audit", "--verbose", "1"), "audit: unknown option --verbose"),
    (("audit", "--format", "yaml"), "audit: --format is text or json, not yaml"),
    (("window", "--bogus"), "window: --bogus before the candidate's folder (launch.sh window CANDIDATE "
                            "[--verdict-dir DIR] [--dry-run])"),
    (("strat",), "unknown command strat"),
    # a control character reaches the terminal escaped, as one shell word (fleet-lib.sh's shown)
    (("start", "\x1b[31m"), "start: unknown option $'\\E[31m'"),
    (("audit", "--format", "a\nb"), "audit: --format is text or json, not $'a\\nb'"),
    (("\x1b]0;x\x07",), "unknown command $'\\E]0;x\\a'"),
])
def test_a_refused_command_line_is_named_and_nothing_runs(deploy: Path, args: tuple[str, ...], message: str) -> None:
    result = launch(deploy, *args)
    assert (result.returncode, result.stdout, result.stderr) == (64, "", f"launch.sh: {message}{HINT}")
    assert not (deploy / "logs").exists()  # no run log, no banner


def test_no_command_prints_the_header_as_a_usage_error(deploy: Path) -> None:
    result = launch(deploy)
    assert (result.returncode, result.stdout) == (64, "")
    assert result.stderr.startswith("launch.sh: start, stop and inspect")


def test_start_dry_run_is_the_dry_run_and_shows_the_smoke_gate_before_the_watchdog(deploy: Path) -> None:
    dry = launch(deploy, "--dry-run")
    assert dry.returncode == 0 and launch(deploy, "start", "--dry-run").stdout == dry.stdout
    tail = dry.stdout.split("\n4. Wait for ", 1)[1]
    smoke = str(deploy / "production" / "fleet" / "smoke.py")
    assert tail == (
        "http://192.0.2.11:8210/health (at most 2400 s).\n"
        f"5. The smoke checks: python3 {smoke} against http://192.0.2.11:8210; any failure stops here\n"
        "   (exit 5) with the watchdog NOT enabled (launch.sh arm once they pass).\n"
        "6. Only when every smoke check passed: enable the watchdog on spark-0 (lock /home/spark/sgl-logs/"
        "sglang-dsv41-4spark-watchdog.lock):\n"
        "   sglang-dsv41-4spark-watchdog.timer checks every 60 s and arms after its first fully passing check.\n")
    assert not (deploy / "logs").exists()


def test_a_same_named_candidate_is_refused_with_the_rename_that_fixes_it(deploy: Path) -> None:
    for extra in ((), ("--dry-run",)):
        result = launch(deploy, "window", str(deploy / "deploy-same"), *extra)
        assert (result.returncode, result.stdout) == (64, "")
        assert result.stderr == (
            f"window: refusing candidate {deploy / 'deploy-same'}: it shares with production (dsv41-4spark):\n"
            "  profile dsv41-4spark\n"
            "  unit sglang-dsv41-4spark.service\n"
            "  install_dir /etc/spark-compile/dsv41-4spark\n"
            "  fleet_install_dir /etc/spark-compile/dsv41-4spark/fleet\n"
            "  watchdog_service sglang-dsv41-4spark-watchdog.service\n"
            "  watchdog_timer sglang-dsv41-4spark-watchdog.timer\n"
            "  watchdog_lock /home/spark/sgl-logs/sglang-dsv41-4spark-watchdog.lock\n"
            "  watchdog_state /home/spark/sgl-logs/sglang-dsv41-4spark-watchdog.state\n"
            "  compile the candidate under its own name (add 'name: dsv41-4spark-window' to its profile, beside "
            "its engine.port), install it into a folder of its own (python3 fleet_scripts/install.py "
            "dsv41-4spark-window DEST) and run launch.sh window DEST\n")
    assert not (deploy / "logs").exists()


def test_production_itself_is_refused_as_a_candidate(deploy: Path) -> None:
    result = launch(deploy, "window", str(deploy / "production"), "--dry-run")
    assert result.returncode == 64
    assert result.stderr.endswith(f"  folder {deploy / 'production'} (production runs from it)\n"
                                  "  compile the candidate under its own name (add 'name: dsv41-4spark-window' to "
                                  "its profile, beside its engine.port), install it into a folder of its own "
                                  "(python3 fleet_scripts/install.py dsv41-4spark-window DEST) and run launch.sh "
                                  "window DEST\n")


def test_the_renamed_candidate_s_window_and_its_nested_plan_agree_there_is_no_watchdog(deploy: Path) -> None:
    result = launch(deploy, "window", str(deploy / "deploy-renamed"), "--dry-run")
    assert (result.returncode, result.stderr) == (0, "")
    out = result.stdout
    assert "5. start the candidate without a watchdog (SPARK_WINDOW=1)" in out
    assert ("       5. No smoke checks and no watchdog: a release window's candidate (SPARK_WINDOW=1); the window "
            "runs\n          its gate next.\n  6. the gate: ") in out
    assert "enable the watchdog" not in out.split("  6. the gate: ", 1)[0]


def test_a_rank_s_preflight_sh_usage_is_64_as_the_fleet_s(deploy: Path) -> None:
    script = deploy / "production" / "0-spark-0" / "preflight.sh"
    result = subprocess.run(["bash", str(script), "gpu"], capture_output=True, text=True, check=False, timeout=30)
    assert (result.returncode, result.stdout, result.stderr) == (64, "", f"usage: {script} gpu-free|gid|runtime\n")
