"""`import --trace` of servers behind a wrapper (issue 36 item 2): a container whose command is `bash -lc "…; exec
python3 -m sglang.launch_server …"`, a server started with `docker exec` in a container left idle, and launchers
written in Python (subprocess, Popen, os.system); each traced for real in the sandbox, then compiled and compared
with the calls it recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from roundtrip import compare, compiled
from sandbox_support import launcher

from spark_compile.cli import main
from spark_compile.importer.docker_run import launches
from spark_compile.importer.mapping import ranks
from spark_compile.importer.source import Leftover
from spark_compile.importer.trace import traced_launches

IMAGE = "lmsysorg/sglang:v0.5.23"
RUN = "docker run -d --name idle --gpus all --network host --ipc host -v /srv/hf:/root/.cache/huggingface"
IDLE = f"{RUN} {IMAGE}"
SERVER = "python3 -m sglang.launch_server --model-path openai/gpt-oss-20b --host 0.0.0.0"
WRAPPED = (f"#!/bin/bash\nMODEL=openai/gpt-oss-20b\n{RUN} -e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False \\\n"
           f"  {IMAGE} bash -lc \"export SGLANG_ENABLE_JIT_DEEPGEMM=0; echo starting && MODEL=$MODEL exec python3 -m "
           "sglang.launch_server --model-path \\$MODEL --host 0.0.0.0; echo never\"\n")
PYTHON = f'''import os
import subprocess

os.system("docker pull {IMAGE}")
started = subprocess.run({IDLE.split()!r} + ["sleep", "infinity"], check=True, capture_output=True, text=True)
exec_ = ["docker", "exec", "-d", "-e", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False", started.stdout.strip()]
subprocess.Popen(exec_ + {SERVER.split()!r}).wait()
print("started")
'''


@pytest.fixture(autouse=True)
def _stage_in_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", "/tmp")  # the staging folder: /tmp is open to the sandbox's user


def _imported(capsys: pytest.CaptureFixture[str], script: Path, out: Path) -> tuple[dict[str, object], str]:
    code = main(["import", "--trace", str(script), "--hosts", "192.0.2.41", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    data: dict[str, object] = yaml.safe_load(out.read_text())
    return data, err


def _same_as_traced(script: Path, out: Path) -> None:
    """The compiled profile runs what the traced run recorded: every flag, variable and docker option."""
    (rank,) = ranks(traced_launches(script, ("192.0.2.41",), {}, [], []))
    sides = compare(rank.launch, compiled(out), 0)
    assert (sides.engine[0], sides.env[0], dict(sides.docker[0])) == ({}, {}, {})


def test_a_server_inside_bash_lc_is_the_containers_command(capsys: pytest.CaptureFixture[str],
                                                            tmp_path: Path) -> None:
    script, out = launcher(tmp_path, WRAPPED), tmp_path / "wrapped.yaml"
    data, err = _imported(capsys, script, out)
    assert (f"note: {script} [traced] call:1: the server command inside `bash -lc`'s string; imported as the "
            "container's command, the string's variables as the container's; the login shell's profile files are not "
            "read (set what they export in engine.env)") in err
    engine = data["engine"]
    assert isinstance(engine, dict)
    assert engine["env"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
                             "SGLANG_ENABLE_JIT_DEEPGEMM": "0", "MODEL": "openai/gpt-oss-20b"}
    _same_as_traced(script, out)


def test_what_else_the_string_runs_is_left_out() -> None:
    left: list[Leftover] = []
    text = (f"{IDLE} sh -c 'pip install flashinfer && python3 -m sglang.launch_server --model-path \"$M\"; "
            "rm -rf /tmp/x'\n")
    (launch,) = launches(text, "run.sh", Path("."), left)
    assert [w.text for w in launch.command][:3] == ["python3", "-m", "sglang.launch_server"]
    assert [(item.text, item.why.split(",")[0]) for item in left] == [
        ("pip install flashinfer", "the container's shell runs this before the server"),
        ("rm -rf /tmp/x", "the container's shell runs this after the server ends")]


def test_a_server_started_with_docker_exec_takes_the_runs_options(capsys: pytest.CaptureFixture[str],
                                                                  tmp_path: Path) -> None:
    script = launcher(tmp_path, f"{IDLE} sleep infinity\ndocker exec -it -e NCCL_DEBUG=WARN idle {SERVER}\n")
    data, err = _imported(capsys, script, tmp_path / "exec.yaml")
    assert (f"note: {script} [traced] call:2: the server started with docker exec in the container of {script} "
            "[traced] call:1; imported as that container's command, with its docker options and variables") in err
    assert data["container"] == {"mounts": [{"source": "/srv/hf", "target": "/root/.cache/huggingface",
                                             "read_only": False}], "detach": True}
    _same_as_traced(script, tmp_path / "exec.yaml")


def test_a_server_typed_into_a_docker_exec_shell_is_that_containers(tmp_path: Path) -> None:
    page = tmp_path / "runbook.md"
    notes: list[str] = []
    page.write_text(f"```\n{IDLE} sleep infinity\ndocker exec -it idle bash\n{SERVER}\n```\n")
    (launch,) = launches(page.read_text(), str(page), tmp_path, [], notes)
    assert launch.image is not None and (launch.image.text, [w.text for w in launch.command]) == (IMAGE,
                                                                                                   SERVER.split())
    assert notes[-1] == (f"{page}:4: the server command typed into the shell of the container started at {page}:2; "
                         "imported as that container's command")


def test_docker_exec_into_a_container_never_started_is_left_out(tmp_path: Path) -> None:
    left: list[Leftover] = []
    script = launcher(tmp_path, f"docker exec elsewhere {SERVER}\n{IDLE} sleep infinity\n")
    assert traced_launches(script, ("192.0.2.41",), {}, left, []) == []
    assert [(item.text, item.why) for item in left] == [("docker exec elsewhere", (
        "no docker run of this container comes before it in the source, so its image and options are unknown"))]


def test_docker_exec_by_the_id_docker_run_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    script = launcher(tmp_path, f'id=$({IDLE} sleep infinity)\ndocker exec "${{id:0:12}}" {SERVER}\n')
    data, _ = _imported(capsys, script, tmp_path / "by-id.yaml")
    engine = data["engine"]
    assert isinstance(engine, dict) and engine["container_name"] == "idle"
    assert data["container"] == {"mounts": [{"source": "/srv/hf", "target": "/root/.cache/huggingface",
                                             "read_only": False}], "detach": True}  # the run's -d
    _same_as_traced(script, tmp_path / "by-id.yaml")


@pytest.mark.parametrize("name", ["launch.py", "launch"])
def test_a_python_launcher_is_traced_like_a_shell_one(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      name: str) -> None:
    # launch.py: no #! line, run with python3 for its extension; launch: its #! line names the interpreter
    script = launcher(tmp_path, PYTHON if name.endswith(".py") else "#!/usr/bin/env python3\n" + PYTHON, name)
    out = tmp_path / "python.yaml"
    data, err = _imported(capsys, script, out)
    assert f"note: {script}: the traced run exited 0 and made 3 recorded call(s)" in err  # pull, run, exec
    container = data["container"]
    assert isinstance(container, dict) and container["detach"] is True  # the run's -d, whatever the exec's
    _same_as_traced(script, out)
