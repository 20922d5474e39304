"""Issue 18, internal errors and blow-ups (14-17), limits consumers enforce (21-23), silent or confusing
input (24): each test names its item."""

from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import child_profile, run_main
from items import check_text, findings
from items import extends_reference as _extends

from conftest import REFERENCE_PROFILE, ROOT


# -- internal errors, hangs, blow-ups -------------------------------------------------------------------
@pytest.mark.parametrize(("text", "rule"), [
    ("name: !!python/name:os.system x\n", "SC105"),
    ("name: !!python/str x\n", "SC105"),
    ("name: !!python/bytes eA==\n", "SC105"),
    ("!!python/str name: x\n", "SC105"),
    ("name: &a [*a]\n", "SC108"),
    ("name: x\nengine: {port: " + "9" * 5000 + "}\n", "SC109"),
    ('extends: "a\\0b.yaml"\n', "SC113"),
    ("extends: loop.yaml\n", "SC112"),  # a symlink to itself: "leads nowhere", not a hang or exit 3
    ("EXTENDS\nfleet: {nodes: [{name: [a]}]}\n", "SC102"),
    ("EXTENDS\nfleet: {nodes: [{name: {a: 1}}]}\n", "SC102"),
    ("EXTENDS\nengine: {launcher: []}\n", "SC109"),
])
def test_item_14_no_internal_error(text: str, rule: str, tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")
    outcome = check_text(tmp_path, text.replace("EXTENDS\n", _extends(tmp_path)))
    assert outcome.code == 1
    assert rule in {g[2] for g in findings(outcome)}


def _reads_of_non_regular_files(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every os.read the program makes of something other than a regular file (a FIFO blocks, /dev/zero never
    ends): a refusal "at once" is one that never reads such a file."""
    reads: list[int] = []
    real_read = os.read

    def read(fd: int, size: int) -> bytes:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            reads.append(fd)
        return real_read(fd, size)

    monkeypatch.setattr(os, "read", read)
    return reads


def test_item_15_fifo_and_dev_zero_are_refused_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "profile.yaml"
    os.mkfifo(fifo)
    reads = _reads_of_non_regular_files(monkeypatch)
    for path in (fifo, Path("/dev/zero")):
        outcome = run_main("check", str(path))
        assert outcome.code == 2 and "not a regular file" in outcome.err
    big = tmp_path / "big.yaml"
    with big.open("wb") as handle:
        handle.truncate(1 << 30)  # sparse: a gigabyte that must not be read whole
    outcome = run_main("check", str(big))
    assert outcome.code == 1 and "SC108" in outcome.out
    # The write stage reads what it finds in the output directory the same way.
    target = tmp_path / "out" / "dsv41-4spark"
    target.mkdir(parents=True)
    os.mkfifo(target / "MANIFEST.json")
    outcome = run_main("compile", str(REFERENCE_PROFILE), "--out", str(tmp_path / "out"))
    assert outcome.code == 2
    assert reads == []


def test_item_16_many_bad_keys_are_each_reported(tmp_path: Path) -> None:
    many = tmp_path / "many.yaml"
    many.write_text("name: x\n" + "".join(f"k{i}: 1\n" for i in range(20_000)))
    outcome = run_main("check", str(many))
    assert outcome.out.count(" SC101 ") == 20_000
    wide = tmp_path / "wide.yaml"
    wide.write_text("name: x\nengine: {" + ", ".join(f"bad{i}: 1" for i in range(4000)) + "}\n")
    outcome = run_main("check", str(wide))
    assert outcome.out.count(" SC101 ") == 4000
    assert len(outcome.out) < 4000 * 600  # each finding quotes a bounded excerpt, not the 60 KB line


def test_item_17_interrupt_closed_stdout_and_full_disk() -> None:
    profile = str(REFERENCE_PROFILE)
    closed = subprocess.run([sys.executable, "-m", "spark_compile.cli", "check", profile], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, check=False, close_fds=True,
                            preexec_fn=lambda: os.close(1))
    assert closed.returncode == 2 and "standard output is closed" in closed.stderr
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "spark_compile.cli", "schema"], stdout=full,
                                stderr=subprocess.PIPE, text=True, check=False)
    assert result.returncode == 2 and "No space left on device" in result.stderr
    assert "Traceback" not in result.stderr
    # Ctrl-C once the program runs: each signal goes after the process says its handler is in place (the
    # interpreter's own start-up, before any of our code, aside), at a spread of points in the check.
    for delay in (0.0, 0.05, 0.15, 0.3, 0.6):
        ready, tell = os.pipe()
        proc = subprocess.Popen([sys.executable, "-m", "spark_compile.cli", "check", profile], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, pass_fds=(tell,),
                                env={**os.environ, "SPARK_COMPILE_TEST_READY_FD": str(tell)})
        os.close(tell)
        try:
            assert select.select([ready], [], [], 60)[0], "the CLI never installed its interrupt handler"
            assert os.read(ready, 1) == b"r"
        finally:
            os.close(ready)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert "Traceback" not in err
        # -SIGINT: the signal landed while the interpreter was exiting (it restores the default action then).
        assert proc.returncode in (0, 130, -signal.SIGINT), (delay, proc.returncode, err)


def test_item_17_keyboard_interrupt_in_a_stage_is_130(monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_compile.commands import run as commands

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "run", interrupted)  # the pipeline's run, which check calls per profile
    outcome = run_main("check", str(REFERENCE_PROFILE))
    assert (outcome.code, outcome.err) == (130, "spark-compile: interrupted\n")



# -- accepted by check, refused by the consumer later ---------------------------------------------------
@pytest.mark.parametrize(("yaml_text", "line"), [
    ("engine:\n  env: {MY_SITE_VAR: " + "x" * 70_000 + "}\n", 3),
    ("container:\n  gpus: some text\n", 3),
    ("container:\n  devices: [dev/null]\n", 3),
    ("container:\n  ulimits: {nofiles: 1024}\n", 3),
    ("container:\n  ulimits: {nofile: '99999999999999999999'}\n", 3),
    ("model:\n  repo: /data/a:b\n", 3),
    ("engine:\n  args: {chat-template: " + "y" * 140_000 + "}\n", 3),
    ('engine:\n  args: {chat-template: "a\\0b"}\n', 3),
])
def test_item_21_consumer_limits_are_findings(yaml_text: str, line: int, tmp_path: Path) -> None:
    outcome = check_text(tmp_path, _extends(tmp_path) + yaml_text)
    got = findings(outcome)
    assert got and got[0][0] == line, outcome.out[:2000]
    assert len(outcome.out) < 5000


@pytest.mark.parametrize("yaml_text", [
    "container:\n  stop_timeout: 1000000000000\n",
    "deploy:\n  unit_name: -x.service\n",
    "deploy:\n  unit_name: " + "u" * 300 + ".service\n",
])
def test_item_22_systemd_limits_are_findings(yaml_text: str, tmp_path: Path) -> None:
    got = findings(check_text(tmp_path, _extends(tmp_path) + yaml_text))
    assert [g[0] for g in got] == [3]


def test_item_23_aliases_without_the_overlay(tmp_path: Path) -> None:
    base = ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml"
    got = findings(check_text(tmp_path, f"extends: {os.path.relpath(base, tmp_path)}\nmodel:\n  aliases: [x]\n"))
    assert [g[:3] for g in got] == [(3, 3, "SC111")] and "dropped silently" in got[0][3]


def test_item_23_drift_sees_modes_and_explains_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert run_main("compile", str(REFERENCE_PROFILE), "--out", str(out)).code == 0
    target = out / "dsv41-4spark"
    (target / "0-spark-0" / "docker-run.sh").chmod(0o644)
    (target / "notes.txt").write_text("mine\n")
    (out / "profile.schema.json").write_text(run_main("schema").out)
    outcome = run_main("check", "--generated", "--out", str(out), str(REFERENCE_PROFILE))
    assert outcome.code == 1
    assert f"{target}/0-spark-0/docker-run.sh: mode 644, the profile produces 755" in outcome.out
    assert f"{target}/notes.txt: not generated by spark-compile (compiling keeps it): delete it" in outcome.out


# -- silent or confusing --------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["017", "5:35:0", "8_210", "0b1", "1_0.5"])
def test_item_24_yaml11_numbers_are_refused(value: str, tmp_path: Path) -> None:
    got = findings(check_text(tmp_path, _extends(tmp_path) + f"engine:\n  port: {value}\n"))
    assert [g[:3] for g in got] == [(3, 9, "SC114")]


def test_item_24_tags_deletes_messages_and_every_file(tmp_path: Path) -> None:
    tagged = findings(check_text(tmp_path, _extends(tmp_path) + "engine: !custom {port: 1}\n"))
    assert [g[:3] for g in tagged] == [(2, 9, "SC105")]
    tagged = findings(check_text(tmp_path, _extends(tmp_path) + "model:\n  aliases: !!set {a: null}\n"))
    assert [g[:3] for g in tagged] == [(3, 12, "SC105")]
    deleted = findings(check_text(tmp_path, _extends(tmp_path) + "engine:\n  prot: !delete\n"))
    assert [g[:3] for g in deleted] == [(3, 9, "SC112")]
    typed = check_text(tmp_path, _extends(tmp_path) + "fleet:\n  fabric: {gid_index: x}\n")
    assert "constrained-int" not in typed.out and ".int:" not in typed.out
    good, bad = tmp_path / "a.yaml", tmp_path / "c.yaml"
    good.write_text(_extends(tmp_path))
    bad.write_text(_extends(tmp_path) + "engine:\n  prot: 1\n")
    outcome = run_main("check", str(good), str(tmp_path / "missing.yaml"), str(bad))
    assert outcome.code == 2 and "missing.yaml: no such file" in outcome.err
    assert f"{bad}:3:3: SC101" in outcome.out and "in 2 profiles" in outcome.out


def test_item_24_description_is_escaped_in_the_readme(tmp_path: Path) -> None:
    nul = findings(check_text(tmp_path, _extends(tmp_path) + 'description: "a\\0b"\n'))
    assert [g[2] for g in nul] == ["SC113"]
    out = tmp_path / "out"
    profile = child_profile(tmp_path, {"description": "# Owned\n<img src=x onerror=alert(1)> [x](javascript:y)"})
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    readme = (out / "dsv41-4spark" / "README.md").read_text()
    assert "\\# Owned" in readme and "&lt;img src=x onerror=alert(1)&gt; \\[x\\](javascript:y)" in readme
    assert "<img" not in readme
    tab = child_profile(tmp_path, {"description": "columns:\ta\tb"})  # a tab is text, not a control character
    assert run_main("compile", str(tab), "--out", str(tmp_path / "out2")).code == 0


def test_item_23_docker_run_uses_the_configured_client(tmp_path: Path) -> None:
    client = tmp_path / "client" / "docker-client"
    client.parent.mkdir()
    client.write_text(f"#!/bin/sh\necho \"$1\" > {tmp_path}/client-called\n")
    client.chmod(0o755)
    decoy = tmp_path / "path-bin" / "docker"
    decoy.parent.mkdir()
    decoy.write_text(f"#!/bin/sh\ntouch {tmp_path}/path-docker-called\n")
    decoy.chmod(0o755)
    profile = child_profile(tmp_path, {"deploy": {"docker": str(client)}})
    out = tmp_path / "out"
    assert run_main("compile", str(profile), "--out", str(out)).code == 0
    (tmp_path / "run" / "dsv41-4spark").mkdir(parents=True)
    (tmp_path / "run" / "dsv41-4spark" / "runtime.env").write_text("NCCL_IB_GID_INDEX=3\n")
    env = {"PATH": f"{decoy.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(out / "dsv41-4spark" / "0-spark-0" / "docker-run.sh")], env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "client-called").read_text() == "run\n"
    assert not (tmp_path / "path-docker-called").exists()
