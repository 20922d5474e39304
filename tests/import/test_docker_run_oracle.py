"""compiler/importer/docker_run.py reads a `docker run` line as the docker CLI does: generated lines of
switches, bundles, `--x=v`, `-xVALUE` and env options are sent by the real docker CLI to a fake daemon, and
the image, the container command and the environment it creates must be what the importer found. The
importer's refusals are compared whole."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_compile.common.errors import InputError
from spark_compile.importer.docker_run import launches, parse_env_file, read_source
from spark_compile.importer.source import Leftover, Origin

from support.tools import FakeDockerd, create_env, docker_create_request

NAMES = st.sampled_from(["A", "B_1", "NCCL_DEBUG", "X"])
VALUES = st.text(st.sampled_from("az09=:/,. -"), max_size=6)
# Each option as the script writes it (a list of words); the env it sets, when it sets one.
SWITCH = st.sampled_from([["-d"], ["-i"], ["-t"], ["-it"], ["-dit"], ["--rm"], ["--init"], ["--privileged"],
                          ["--sig-proxy=false"], ["-P"]])
VALUED = st.sampled_from([["--name", "sglang"], ["--name=sglang"], ["-v", "/a:/b"], ["-v/c:/d:ro"],
                          ["--volume=/e:/f"], ["--shm-size", "16g"], ["--ipc", "host"], ["--ipc=host"],
                          ["--network", "host"], ["--ulimit", "memlock=-1"], ["-w", "/work"], ["-w/work"],
                          ["--cap-add", "IPC_LOCK"], ["-p", "30000:30000"], ["-p8000:8000"],
                          ["--gpus", "all"], ["--label", "a=b"]])
ENGINE = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "2"]


def _env_option(spelling: str, name: str, value: str) -> tuple[list[str], tuple[str, str]]:
    """An env option in one of docker's spellings, and the (name, value) it sets."""
    words = {"-e": ["-e", f"{name}={value}"], "--env": ["--env", f"{name}={value}"],
             "--env=": [f"--env={name}={value}"], "-eX": [f"-e{name}={value}"]}[spelling]
    return words, (name, value)


ENV = st.builds(_env_option, st.sampled_from(["-e", "--env", "--env=", "-eX"]), NAMES, VALUES)
NO_ENV = st.one_of(SWITCH, VALUED).map(lambda words: (words, None))
OPTIONS = st.lists(st.one_of(NO_ENV, ENV), max_size=8)


@settings(max_examples=12, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(OPTIONS, st.booleans())
def test_the_importer_reads_image_command_and_env_as_docker_does(
        options: list[tuple[list[str], tuple[str, str] | None]], container: bool) -> None:
    argv = ["docker", *(["container"] if container else []), "run",
            *(word for words, _ in options for word in words), "lmsysorg/sglang:v0.5.23", *ENGINE]
    left: list[Leftover] = []
    (launch,) = launches(shlex.join(["sudo", *argv]) + "\n", "run.sh", Path("/nonexistent"), left)
    body = docker_create_request(argv)["body"]
    assert launch.image is not None and launch.image.text == body["Image"]
    assert [word.text for word in launch.command] == body["Cmd"]
    assert {name: value for name, value, _ in launch.env} == create_env(body)
    assert [name for name, _, _ in launch.env] == [env[0] for _, env in options if env is not None]
    assert left == []


def test_env_file_lines_are_taken_literally_as_docker_takes_them(tmp_path: Path) -> None:
    env = tmp_path / "engine.env"
    env.write_text("# a comment\n\n  A='quoted'  \nB=x=y\nC\n  # indented comment\nD=\n")
    left: list[Leftover] = []
    assert parse_env_file(env, "engine.env", left) == [
        ("A", "'quoted'  ", Origin("engine.env", 3)), ("B", "x=y", Origin("engine.env", 4)),
        ("D", "", Origin("engine.env", 7))]
    assert left == [Leftover(Origin("engine.env", 5), "C", "the value comes from the launching shell's "
                             "environment, which the source does not show; set it in engine.env (or secrets.env "
                             "for a secret)")]
    with FakeDockerd() as daemon:
        body = docker_create_request(["docker", "run", "--env-file", str(env), "img"], daemon=daemon)["body"]
    assert create_env(body) == {"A": "'quoted'  ", "B": "x=y", "D": ""}  # C: from the CLI's environment


def test_an_env_file_option_reads_the_file_beside_the_source(tmp_path: Path) -> None:
    (tmp_path / "engine.env").write_text("NCCL_DEBUG=INFO\n")
    left: list[Leftover] = []
    text = ("docker run --env-file engine.env --env-file=/nonexistent/x.env -e FROM_SHELL -e A=$B -e C=1 img "
            "python3 -m sglang.launch_server\n")
    (launch,) = launches(text, "run.sh", tmp_path, left)
    assert [(name, value, str(origin)) for name, value, origin in launch.env] == [
        ("NCCL_DEBUG", "INFO", "engine.env:1"), ("C", "1", "run.sh:1")]
    assert [(str(item.origin), item.text, item.why) for item in left] == [
        ("run.sh:1", "--env-file /nonexistent/x.env", "the env file is not readable next to the source"),
        ("run.sh:1", "-e FROM_SHELL", "the value comes from the launching shell's environment, which the source "
                                      "does not show; set it in engine.env (or secrets.env for a secret)"),
        ("run.sh:1", "-e A=$B", "'A=$B' is expanded by the shell; its value is not in the source (import the "
                                "script with --trace)")]


def test_only_docker_run_lines_are_launches_and_other_containers_are_noted() -> None:
    notes: list[str] = []
    text = ("docker pull img:1\ndocker ps\n/usr/bin/docker run --rm img:1 nvidia-smi\n"
            "env X=1 docker container run img:2 sglang serve --model-path /m\n")
    found = launches(text, "run.sh", Path("/"), [], notes)
    assert [(str(launch.origin), launch.image.text if launch.image else None) for launch in found] == [
        ("run.sh:4", "img:2")]
    assert notes == ["run.sh:3: a docker run of img:1 that starts no SGLang server; not imported"]
    assert [word.text for word in found[0].words][:2] == ["run", "img:2"]  # the command from `run` onwards


@pytest.mark.parametrize(("text", "message"), [
    ("docker run --name\n", "run.sh:1: docker option --name needs a value and the line ends"),
    ("docker run -it \\\n  -v\n", "run.sh:2: docker option -v needs a value and the line ends"),
    ("docker run --rm -d\n", "run.sh:1: docker run names no image"),
    ("x\n\ndocker run\n", "run.sh:3: docker run names no image"),
])
def test_a_cut_docker_line_is_refused_with_its_place(text: str, message: str) -> None:
    with pytest.raises(InputError) as refused:
        launches(text, "run.sh", Path("/"), [])
    assert str(refused.value) == message


def test_a_lone_dash_ends_the_options_as_the_image_word() -> None:
    """`-` is no option (docker would take it as the image name): the option loop stops there."""
    (launch,) = launches("docker run --rm - python3 -m sglang.launch_server\n", "f", Path("/"), [])
    assert launch.image is not None and launch.image.text == "-"


def test_read_source_refuses_what_is_no_launcher(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    big = tmp_path / "big.sh"
    with big.open("wb") as handle:
        handle.truncate((4 << 20) + 1)  # sparse: no 4 MB written
    for path, message in ((tmp_path / "dir", f"{tmp_path}/dir: not a regular file"),
                          (tmp_path / "none.sh", f"{tmp_path}/none.sh: not a regular file"),
                          (big, f"{big}: larger than 4194304 bytes; not a launcher or recipe")):
        with pytest.raises(InputError) as refused:
            read_source(path)
        assert str(refused.value) == message
    latin = tmp_path / "latin.sh"
    latin.write_bytes(b"echo caf\xe9\n")
    assert read_source(latin) == "echo caf\ufffd\n"  # undecodable bytes are replaced, never fatal
