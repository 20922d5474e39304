"""Issue 37 (hostile input, round 3): each test names the defect it holds down and asserts what the user or
the consumer gets. The `import --trace` sandbox's own tests live in tests/import/test_import_trace.py."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import assert_handled, child_profile, peak_rss_mib, run_main
from items import findings

import spark_compile
from spark_compile.commands import error_log
from spark_compile.common.errors import EXIT_INTERRUPTED
from spark_compile.fleet.audit import MAX_CAPTURE
from spark_compile.spec.checks import INT64_MAX, MAX_FLEET_NODES, MAX_PARALLEL
from spark_compile.stages.load import MAX_NODES
from spark_compile.stages.resolve import extends_roots

from conftest import REFERENCE_PROFILE


# -- resources: a bound is a finding with the limit, never a hang --------------------------------------
@pytest.mark.parametrize("field", ["tp", "ep", "pp", "dp"])
def test_parallel_size_of_10_pow_40_is_a_finding_not_a_loop(tmp_path: Path, field: str) -> None:
    profile = child_profile(tmp_path, {"engine": {"parallel": {field: 10**40}}})
    outcome = run_main("check", str(profile))
    assert_handled(outcome)
    assert outcome.code == 1
    assert [f[2:] for f in findings(outcome)] == [
        ("SC109", f"engine.parallel.{field}: must be at most {MAX_PARALLEL}, got {10**40}")]


def test_a_count_past_int64_is_a_finding(tmp_path: Path) -> None:
    # bash arithmetic (the watchdog counts failures against it) wraps past int64.
    profile = child_profile(tmp_path, {"operations": {"watchdog": {"fail_threshold": INT64_MAX + 1}}})
    outcome = run_main("check", str(profile))
    assert_handled(outcome)
    assert [f[2:] for f in findings(outcome)] == [
        ("SC109", f"operations.watchdog.fail_threshold: must be at most {INT64_MAX}, got {INT64_MAX + 1}")]


def test_more_fleet_nodes_than_the_bound_is_a_finding(tmp_path: Path) -> None:
    # 100,000 nodes were accepted; every per-rank output grows with them.
    nodes = [{"name": f"n{i}", "fabric_ip": f"10.{i >> 8}.{i & 255}.1"} for i in range(MAX_FLEET_NODES + 1)]
    profile = child_profile(tmp_path, {"fleet": {"nodes": nodes}})
    outcome = run_main("check", str(profile))
    assert_handled(outcome)
    expected = f"fleet.nodes: takes at most {MAX_FLEET_NODES} item(s), got a list"
    assert [f[2:] for f in findings(outcome)] == [("SC109", expected)]


def test_audit_inspect_never_holds_a_sparse_capture_in_memory(tmp_path: Path) -> None:
    empty, sparse = tmp_path / "empty", tmp_path / "sparse"
    empty.mkdir()
    sparse.mkdir()
    with (sparse / "rank0-spark-0.audit").open("wb") as handle:
        handle.truncate(10 << 30)  # 10 GiB that are never read: the size refuses it
    _, floor = peak_rss_mib(["audit", str(REFERENCE_PROFILE), "--inspect", str(empty)], tmp_path)
    outcome, peak = peak_rss_mib(["audit", str(REFERENCE_PROFILE), "--inspect", str(sparse)], tmp_path)
    assert outcome.code == 4
    assert outcome.err.splitlines()[-1] == (
        f"spark-compile: error: {sparse / 'rank0-spark-0.audit'}: cannot be read: larger than {MAX_CAPTURE} bytes")
    assert peak - floor < MAX_CAPTURE / 4 / (1 << 20), (floor, peak)  # nothing of the capture was read


_ALIAS_BOMB = "runtime: sglang\nmodel: m\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)) + (
    "defaults: {served_model_name: *a8}\ncommand: python3 -m sglang.launch_server --model-path {model}\n")


def test_import_of_a_sparkrun_recipe_with_an_alias_bomb_is_an_error_with_the_bound(tmp_path: Path) -> None:
    recipe = tmp_path / "bomb.yaml"
    recipe.write_text(_ALIAS_BOMB)
    assert len(_ALIAS_BOMB) < 2048
    outcome = run_main("import", str(recipe), "--hosts", "10.0.0.1", "--architecture", "LlamaForCausalLM")
    assert (outcome.code, outcome.out) == (2, "")
    assert outcome.err == (f"spark-compile: error: {recipe}: the recipe expands to more than {MAX_NODES} values "
                           "(YAML anchors and aliases); write the values out instead of aliasing them\n")


_RUN = ("docker run --gpus all -v /m:/m lmsysorg/sglang:v0.5.23 python3 -m sglang.launch_server --model-path /m "
        "--tp-size 2 --nnodes 2 --node-rank {} --dist-init-addr 10.0.0.1:20000\n")


@pytest.mark.parametrize("rank", ["\u00b2", "\u0661", "1" * 40])
def test_a_unicode_digit_in_node_rank_is_a_usage_error_not_exit_3(tmp_path: Path, rank: str) -> None:
    source = tmp_path / "run.sh"
    source.write_text(_RUN.format(0) + _RUN.format(rank))
    outcome = run_main("import", str(source), "--hosts", "10.0.0.1,10.0.0.2", "--architecture", "LlamaForCausalLM",
                       "--fabric", "tcp", "--interface", "eth0")
    assert_handled(outcome)
    assert (outcome.code, outcome.out) == (2, "")
    assert outcome.err.splitlines()[-1] == (
        f"spark-compile: error: {source}:2: --node-rank {rank!r}: expected a node rank of ASCII digits (0, 1, ...); "
        "fix the source's --node-rank")


def test_history_never_reads_a_profile_symlinked_outside_the_repository(tmp_path: Path) -> None:
    outside = tmp_path / "outside.yaml"
    outside.write_text("name: secret-token-do-not-print\n")
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "1.0.yaml").symlink_to(outside)
    outcome = run_main("history", str(repo))
    assert (outcome.code, outcome.out) == (2, "")
    assert outcome.err == (f"spark-compile: error: {repo / '1.0.yaml'} leads to {outside}, outside the repository "
                           f"({', '.join(extends_roots(repo / 'profile.yaml'))}): history reads only the "
                           "repository's profiles; remove the link or copy the profile in\n")


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_the_traceback_log_in_the_user_cache_never_hangs_on_a_fifo_nor_follows_a_link(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    # The one file spark-compile keeps in ~/.cache (there is no other cache any more).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "spark-compile"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    planted = folder / error_log.LOG_NAME
    if kind == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(victim)
    assert error_log.write_log("Traceback ...\n") is None
    assert victim.read_text() == "keep\n"
    assert stat.S_ISFIFO(os.lstat(planted).st_mode) if kind == "fifo" else planted.is_symlink()


# -- left from before --------------------------------------------------------------------------------
_PROBE = Path(__file__).with_name("interrupt_probe.py")
_SCRIPT = Path(sys.executable).with_name("spark-compile")  # the console script pip made from [project.scripts]


def _interrupted_at(at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(_PROBE), str(_SCRIPT), str(at), "check", str(REFERENCE_PROFILE)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_ctrl_c_in_the_first_40_ms_prints_no_traceback() -> None:
    # The first 40 ms are the package's imports before main() takes over: a SIGINT at each of them (a count,
    # not a delay) is the one line and 130. Before the package's first line the interpreter is its own.
    whole = _interrupted_at(0)
    assert whole.stderr.startswith("imports: "), whole.stderr
    count = int(whole.stderr.split()[-1])
    points = sorted({*range(1, 13), *range(13, count + 1, max(1, count // 12))})
    for at in points:
        proc = _interrupted_at(at)
        assert (proc.returncode, proc.stderr) == (EXIT_INTERRUPTED, "spark-compile: interrupted\n"), (at, proc.stderr)


@pytest.mark.parametrize("delay_ms", [0, 5, 10, 20, 40, 80])
def test_a_ctrl_c_soon_after_spawn_is_the_line_and_130_or_the_signal(delay_ms: int) -> None:
    # Sent without waiting for the process: before the interpreter's start-up sets its own handler, SIGINT's
    # default action ends the process (-SIGINT, which a shell reports as 130); no traceback of ours after that.
    proc = subprocess.Popen([str(_SCRIPT), "check", str(REFERENCE_PROFILE)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(delay_ms / 1000)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    package = Path(spark_compile.__file__).parent
    assert str(package) not in err and str(package.resolve()) not in err, err  # no frame of ours
    # Earlier than the package's first line only the interpreter's start-up (io, site: "<frozen ...>" frames) and
    # pip's console script can be running: what Python prints then is its own, and not ours to word.
    frames = re.findall(r'File "([^"]+)"', err)
    startup = bool(frames) and all(f.startswith("<frozen ") or f == str(_SCRIPT) for f in frames)
    assert proc.returncode in (EXIT_INTERRUPTED, -signal.SIGINT) or startup, (proc.returncode, err)
