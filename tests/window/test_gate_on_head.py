"""A candidate whose API listens on the head's loopback: gate.py runs itself on the head over ssh (as
smoke.py does), with its options and the API key on ssh's stdin. An ssh stand-in on PATH runs the remote
command here, in a gate folder that plays the head's installed fleet folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gatekit import fake_api, gate_folder


def test_gate_runs_on_the_head_for_a_loopback_api(tmp_path: Path) -> None:
    head = tmp_path / "head-fleet"
    calls = tmp_path / "ssh-calls"
    shim = tmp_path / "bin"
    shim.mkdir()
    # ssh [options] TARGET COMMAND: record, then run COMMAND as the head's login shell would.
    (shim / "ssh").write_text(f'#!/bin/bash\nprintf "%s\\n" "$@" > {calls}\neval "${{@: -1}}"\n')
    (shim / "ssh").chmod(0o755)
    with fake_api(tmp_path, {}) as (port, _):
        folder = gate_folder(head, host="127.0.0.1", port=port, via_head=True, head_ssh="spark@192.0.2.11",
                             fleet_install_dir=str(head), needle_tokens=[2000])
        env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "SPARK_API_KEY": "k-123"}
        env.pop("SPARK_ON_HEAD", None)
        options = ["--only", "count", "--baseline-tps", "10", "--baseline-ttft", "1"]
        proc = subprocess.run([sys.executable, str(folder / "gate.py"), *options],
                              capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    argv = calls.read_text().splitlines()
    assert "spark@192.0.2.11" in argv
    remote = argv[-1]
    assert f"{head}/gate.py --only count --baseline-tps 10 --baseline-ttft 1" in remote
    assert "k-123" not in " ".join(argv)  # the key travels on stdin, never in a command line
    record = next(json.loads(line.removeprefix("GATE-RESULT ")) for line in proc.stdout.splitlines()
                  if line.startswith("GATE-RESULT "))
    assert record["name"] == "count" and record["result"] == "PASS"


@pytest.mark.parametrize("script", ["smoke.py", "gate.py"])
@pytest.mark.parametrize("options", [["--help"], ["--no-such-option"], ["--port", "x"]], ids=["help", "bad", "type"])
def test_smoke_help_never_contacts_the_head_nor_sends_the_key(tmp_path: Path, script: str,
                                                               options: list[str]) -> None:
    # `smoke.py --help` went to the head over ssh with the API key on its stdin.
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "ssh").write_text(f"#!/bin/sh\ncat > {tmp_path / 'ssh-stdin'}\necho \"$@\" > {tmp_path / 'ssh-calls'}\n")
    (shim / "ssh").chmod(0o755)
    folder = gate_folder(tmp_path / "fleet", host="127.0.0.1", port=9, via_head=True, head_ssh="spark@192.0.2.11",
                         fleet_install_dir=str(tmp_path / "fleet"))
    env = {**os.environ, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}", "SPARK_API_KEY": "k-123"}
    env.pop("SPARK_ON_HEAD", None)
    proc = subprocess.run([sys.executable, str(folder / script), *options], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    assert proc.returncode == (0 if options == ["--help"] else 2), proc.stderr
    assert (proc.stdout if options == ["--help"] else proc.stderr).startswith(f"usage: {script} ")
    assert not (tmp_path / "ssh-calls").exists() and not (tmp_path / "ssh-stdin").exists()
    assert "k-123" not in proc.stdout + proc.stderr
