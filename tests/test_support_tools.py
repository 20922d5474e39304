"""Self-tests of tests/support: each helper run with its real tool on hand-written samples."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from support.fake_dockerd import FakeDockerd
from support.tools import (
    ToolError,
    bash_argv,
    bash_docker_calls,
    create_env,
    docker_create_request,
    docker_env_file,
    docker_parse_ok,
    require_tool,
    shellcheck,
    systemd_environment,
    systemd_verify,
)

# The reference rank-0 command (tests/fixtures/reference/dsv41-4spark-rank0.txt), placeholders filled and the
# two comment lines inside the continuation left out.
REFERENCE_RANK0 = r"""docker run -d --name sgldsv41 --restart no --network host --ipc host --cap-add IPC_LOCK --gpus all \
  --shm-size 32g --memory 112g --memory-swap 112g --ulimit memlock=-1:-1 --ulimit stack=67108864 \
  --device /dev/infiniband:/dev/infiniband --oom-score-adj 500 \
  -v /srv/hf/dsv41:/models/repo:ro -v /srv/cache:/root/.cache \
  -v /srv/engram/rank0:/engram-local:ro -e SPARK_ENGRAM_DIR=/engram-local \
  -e SPARK_ENGRAM_MODE=hostnode -e SPARK_ENGRAM_EARLY=1 -e SPARK_ENGRAM_PREFETCH=1 -e SPARK_PAGE_CACHE_RELEASE=1 \
  -e SPARK_LATE_TAIL_SKIP=1 -e SPARK_LATE_TAIL_SKIP_ALL=1 -e SPARK_SM120_REAL_HEADS=1 -e SPARK_ENGRAM_THREADS=64 -e SPARK_ENGRAM_MAX_IDS=65536 -e SPARK_MXFP8_BACKEND=b12x \
  -e SPARK_SERVED_ALIASES=deepseek-v4-flash,dsv41 \
  -e SPARK_ROCE_AR=1 -e SPARK_ROCE_AR_MAX=1MB -e SPARK_ROCE_AG_MAX=16MB \
  -e B12X_ROCE_HCA=rocep1s0f0,roceP2p1s0f0 -e B12X_ROCE_GID_INDEX=3 -e B12X_ROCE_SPIN_LIMIT=300000000 \
  -e SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=0 -e SGLANG_FLASHINFER_MOE_FUSED_FINALIZE=0 -e SGLANG_DSV41_REASONING_EFFORT=100 \
  -e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False -e CUDA_DEVICE_ORDER=PCI_BUS_ID -e HOST_IP=192.0.2.11 \
  -e NCCL_NET=IB -e NCCL_IB_DISABLE=0 -e NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0 -e NCCL_SOCKET_IFNAME=enp1s0f0np0 -e GLOO_SOCKET_IFNAME=enp1s0f0np0 \
  -e NCCL_IB_ROCE_VERSION_NUM=2 -e NCCL_IB_ADDR_FAMILY=AF_INET -e NCCL_IB_ADDR_RANGE=192.0.2.0/24 -e NCCL_IB_SUBNET_PREFIX_LEN=24 -e NCCL_IB_GID_INDEX=3 \
  -e NCCL_CROSS_NIC=1 -e NCCL_IB_MERGE_NICS=0 -e NCCL_IB_SUBNET_AWARE_ROUTING=1 -e NCCL_CUMEM_ENABLE=0 -e NCCL_P2P_DISABLE=1 -e NCCL_SHM_DISABLE=1 \
  -e NCCL_BUFFSIZE=1048576 -e NCCL_LL128_BUFFSIZE=262144 -e NCCL_PROTO=^LL128 -e NCCL_MAX_NCHANNELS=8 \
  --entrypoint python3 aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1 -m sglang.launch_server \
    --model-path /models/repo/snapshots/0123abcd --served-model-name deepseek-v4.1-flash --trust-remote-code --load-format safetensors \
    --tp 4 --ep-size 4 --nnodes 4 --node-rank 0 --dist-init-addr 192.0.2.11:20100 --host 0.0.0.0 --port 8210 \
    --attention-backend dsv4 --moe-runner-backend flashinfer_mxfp4 --fp8-gemm-backend flashinfer_cutlass \
    --mem-fraction-static 0.80 --chunked-prefill-size 2048 --context-length 524288 --max-running-requests 16 --cuda-graph-max-bs-decode 16 \
    --random-seed 0 --enable-decoder-swa-bounded-replay --speculative-algorithm DSPARK --speculative-dspark-block-size 5 \
    --tool-call-parser deepseekv41 --reasoning-parser deepseek-v41 --watchdog-timeout 1800 --min-free-slots-delay 1 \
    --default-chat-template-kwargs '{"thinking":true}'
"""  # noqa: E501
REFERENCE_ARGV = shlex.split(REFERENCE_RANK0.replace("\\\n", " "))
REFERENCE_ENV = [REFERENCE_ARGV[i + 1] for i, a in enumerate(REFERENCE_ARGV) if a == "-e"]

RANK_UNIT = """\
[Unit]
Description=SGLang DeepSeek-V4.1 rank 0
Documentation=man:sglang-nonexistent(8) https://example.invalid/dsv41
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
EnvironmentFile=/etc/spark/rank0.env
ExecStartPre=-/usr/bin/docker rm -f sgldsv41
ExecStart=/etc/spark/rank0/docker-run.sh
ExecStop=/usr/bin/docker stop -t 60 sgldsv41
Restart=on-failure
RestartSec=10
TimeoutStartSec=900
LimitMEMLOCK=infinity

[Install]
WantedBy=multi-user.target
"""


# -- docker --------------------------------------------------------------------------------------------
def test_reference_rank0_create_body() -> None:
    req = docker_create_request(REFERENCE_ARGV)
    body, host = req["body"], req["body"]["HostConfig"]
    assert req["name"] == "sgldsv41"
    assert body["Image"] == "aidendle94/sparkrun-sglang-dsv41-gb10:production-1.7.1"
    assert body["Entrypoint"] == ["python3"]
    assert body["Cmd"][:2] == ["-m", "sglang.launch_server"]
    assert body["Cmd"][-2:] == ["--default-chat-template-kwargs", '{"thinking":true}']
    assert set(body["Env"]) == set(REFERENCE_ENV)
    assert "NCCL_PROTO=^LL128" in body["Env"]
    assert host["ShmSize"] == 34359738368  # 32g
    assert host["Memory"] == host["MemorySwap"] == 120259084288  # 112g
    assert {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]} == {
        "memlock": (-1, -1),
        "stack": (67108864, 67108864),
    }
    assert host["CapAdd"] == ["CAP_IPC_LOCK"]  # docker CLI 28 adds the CAP_ prefix itself
    assert host["Devices"] == [
        {"PathOnHost": "/dev/infiniband", "PathInContainer": "/dev/infiniband", "CgroupPermissions": "rwm"}
    ]  # --device works against the fake daemon
    assert host["Binds"] == [
        "/srv/cache:/root/.cache",
        "/srv/engram/rank0:/engram-local:ro",
        "/srv/hf/dsv41:/models/repo:ro",
    ]  # sorted by docker_create_request
    assert (host["NetworkMode"], host["IpcMode"], host["OomScoreAdj"]) == ("host", "host", 500)
    assert host["RestartPolicy"] == {"Name": "no", "MaximumRetryCount": 0}
    assert host["DeviceRequests"] == [
        {"Driver": "", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]], "Options": {}}
    ]  # --gpus all


def test_fake_dockerd_records_the_protocol() -> None:
    docker = require_tool("docker")
    with FakeDockerd() as d:
        proc = subprocess.run(
            [docker, "run", "-d", "--name", "x", "busybox", "true"],
            env=d.env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == ""
        seen = [(r.method, r.path) for r in d.requests]
        creates = d.creates
    assert ("HEAD", "/_ping") in seen
    assert ("POST", "/containers/create") in seen
    assert any(m == "POST" and p.endswith("/start") for m, p in seen)
    assert all(not p.startswith("/v1.") for _, p in seen)  # version prefix stripped ...
    assert {r.version for r in d.requests if r.path == "/containers/create"} == {"1.50"}  # ... and kept
    assert creates[0]["name"] == "x" and creates[0]["body"]["Cmd"] == ["true"]
    assert proc.stdout.strip() == f"{1:064x}"  # `run -d` prints the Id the fake daemon made up


def test_docker_create_request_without_detach_and_relative_env_file(tmp_path: Path) -> None:
    (tmp_path / "rank0.env").write_text("A=1\n")
    req = docker_create_request(["docker", "run", "--rm", "--env-file", "rank0.env", "busybox"], cwd=tmp_path)
    assert req["body"]["HostConfig"]["AutoRemove"] is True
    assert req["body"]["Env"] == ["A=1"]
    assert req["name"] is None


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--shm-size", "32q", "invalid suffix"),
        ("--gpus", "everything", "gpus"),
        ("--ulimit", "memlock=lots", "ulimit"),
    ],
)
def test_docker_create_request_reports_parse_errors(flag: str, value: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        docker_create_request(["docker", "run", "-d", flag, value, "busybox"])


def test_docker_parse_ok() -> None:
    no_device = [a for a in REFERENCE_ARGV if a not in ("--device", "/dev/infiniband:/dev/infiniband")]
    assert docker_parse_ok(no_device) == (True, docker_parse_ok(no_device)[1])
    ok, err = docker_parse_ok(REFERENCE_ARGV)  # the documented trap: --device needs the server's OS
    assert not ok and "unknown server OS" in err
    assert docker_parse_ok(["docker", "run", "--memory", "112gb", "busybox"])[0]  # "gb" is a valid suffix
    ok, err = docker_parse_ok(["docker", "run", "--memory", "112q", "busybox"])
    assert not ok and "--memory" in err and "invalid suffix" in err
    ok, err = docker_parse_ok(["docker", "run", "--no-such-flag", "busybox"])
    assert not ok and "unknown flag" in err


# -- env files: the two real parsers disagree on quoting -----------------------------------------------
QUIRKS = "QUOTED=\"a b\"\nSINGLE='x'\nTRAIL=v  \nDOLLAR=$HOME\nEMPTY=\nHASH=a #b\nBACKSLASH=a\\b\n"


def test_env_file_quirks_docker_keeps_quotes_systemd_strips_them() -> None:
    docker = docker_env_file(QUIRKS)
    systemd = systemd_environment(QUIRKS)
    assert docker == {
        "QUOTED": '"a b"',
        "SINGLE": "'x'",
        "TRAIL": "v  ",
        "DOLLAR": "$HOME",
        "EMPTY": "",
        "HASH": "a #b",
        "BACKSLASH": "a\\b",
    }
    assert systemd == {
        "QUOTED": "a b",
        "SINGLE": "x",
        "TRAIL": "v",
        "DOLLAR": "$HOME",
        "EMPTY": "",
        "HASH": "a #b",
        "BACKSLASH": "ab",
    }
    same = {k for k in docker if docker[k] == systemd[k]}
    assert same == {"DOLLAR", "EMPTY", "HASH"}  # `$` is literal to both: no expansion in either reader


@pytest.mark.parametrize(
    ("text", "docker", "systemd"),
    [
        ("A= lead\n", {"A": " lead"}, {"A": "lead"}),  # leading blanks of a value: docker keeps them
        ("\ufeffA=1\n", {"A": "1"}, {}),  # a BOM: docker strips it, systemd reads key "\ufeffA" (invalid)
        ("A=1\r\nB=2\r\n", {"A": "1", "B": "2"}, {"A": "1", "B": "2"}),  # CRLF: both drop the CR
        ("A=x=y\n", {"A": "x=y"}, {"A": "x=y"}),
    ],
)
def test_env_file_more_differences(text: str, docker: dict[str, str], systemd: dict[str, str]) -> None:
    assert docker_env_file(text) == docker
    assert systemd_environment(text) == systemd


def test_reference_env_means_the_same_to_docker_and_systemd() -> None:
    text = "".join(f"{item}\n" for item in REFERENCE_ENV)
    expected = dict(item.split("=", 1) for item in REFERENCE_ENV)
    assert docker_env_file(text) == expected
    assert systemd_environment(text) == expected


def test_env_file_export_prefix_docker_refuses_systemd_ignores() -> None:
    with pytest.raises(ToolError, match="contains whitespaces"):
        docker_env_file("export A=1\n")
    with pytest.raises(ToolError, match="contains whitespaces"):
        docker_env_file("A\t=1\n")  # systemd: A=1
    warnings: list[str] = []
    assert systemd_environment("export A=1\nB=2\n", warnings=warnings) == {"B": "2"}
    assert len(warnings) == 1 and "export A" in warnings[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('A="x\\"y\\\\z\\$w\\`v"\n', {"A": 'x"y\\z$w`v'}),  # \ escapes only " \ $ ` inside "..."
        ('A="a\\nb"\n', {"A": "a\\nb"}),  # ... and keeps other backslashes
        ('A="line1\nline2"\n', {"A": "line1\nline2"}),  # a newline inside quotes is kept
        ("A=one\\\ntwo\n", {"A": "onetwo"}),  # continuation line
        ("A='$X \\ \"q\"'\n", {"A": '$X \\ "q"'}),  # single quotes: everything literal
        ('A="${X:-y} $$ $"\n', {"A": "${X:-y} $$ $"}),  # no variable expansion at all
        ("  A  =   v  w  \n", {"A": "v  w"}),  # whitespace around key and value trimmed
        ("A=\"x\"'y'z\n", {"A": "xyz"}),  # quoted parts concatenate
        ("A=1\nA=\n", {"A": ""}),  # the last assignment wins, even an empty one
        ("A=\"\"\nB=''\nC=\n", {"A": "", "B": "", "C": ""}),
        ("# c\n; c\nA=1 # not a comment\n", {"A": "1 # not a comment"}),
        ("A\nB=2\n1X=3\nC-D=4\n", {"B": "2"}),  # no '=', invalid names: dropped
        ('A="tab\there\x01\x7f\u00e9"\n', {"A": "tab\there\x01\x7f\u00e9"}),
        ("A=no-newline-at-eof", {"A": "no-newline-at-eof"}),
    ],
)
def test_systemd_environment_parser_rules(text: str, expected: dict[str, str]) -> None:
    assert systemd_environment(text) == expected


ENOENT = "No such file or directory"


# -- systemd units --------------------------------------------------------------------------------------
def test_systemd_verify_clean_unit_is_silent() -> None:
    # Documentation=man: of a page this machine lacks: silent only because of --man=no.
    assert systemd_verify({"sgl-rank0.service": RANK_UNIT}, extra_executables=["/usr/bin/docker"]) == ""


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("Restart=on-failure", "Restrat=on-failure", "Unknown key 'Restrat' in section [Service]"),
        ("RestartSec=10", "RestartSec=10 fortnights", "Failed to parse sec value"),
        ("Type=exec", "Type=exce", "Failed to parse service type"),
        ("Restart=on-failure", "Restart=sometimes", "Failed to parse service restart specifier"),
        ("[Service]", "[Servise]", "Unknown section 'Servise'"),
        (
            "ExecStart=/etc/spark/rank0/docker-run.sh",
            'ExecStart=/usr/bin/docker run "x',
            "Unbalanced quoting",
        ),
        (
            "Wants=network-online.target",
            "Requires=spark-missing.service",
            "Unit spark-missing.service not found",
        ),
    ],
)
def test_systemd_verify_catches(old: str, new: str, message: str) -> None:
    assert old in RANK_UNIT
    out = systemd_verify({"sgl-rank0.service": RANK_UNIT.replace(old, new)}, extra_executables=[])
    assert message in out
    assert "/tmp/" not in out  # the throwaway root is not in the messages


def test_systemd_verify_missing_executable_without_auto_stubs() -> None:
    out = systemd_verify(
        {"sgl-rank0.service": RANK_UNIT}, extra_executables=["/usr/bin/docker"], stub_unit_executables=False
    )
    assert out == "sgl-rank0.service: Command /etc/spark/rank0/docker-run.sh is not executable: " + ENOENT


def test_systemd_verify_template_and_instance() -> None:
    template = RANK_UNIT.replace("rank0", "%i")
    assert systemd_verify({"sgl@.service": template}, extra_executables=[]) == ""
    units = {"sgl@rank0.service": template}
    out = systemd_verify(units, extra_executables=["/usr/bin/docker"], stub_unit_executables=False)
    assert out == "sgl@rank0.service: Command /etc/spark/rank0/docker-run.sh is not executable: " + ENOENT
    bad = template.replace("RestartSec=10", "RestartSec=x")
    assert "Failed to parse sec value" in systemd_verify({"sgl@.service": bad}, extra_executables=[])


def test_systemd_verify_calls_do_not_leak_into_each_other() -> None:
    needs_b = RANK_UNIT.replace("Wants=network-online.target", "Requires=b.service")
    b_unit = "[Service]\nExecStart=/opt/b/run\n"
    assert systemd_verify({"a.service": needs_b, "b.service": b_unit}, extra_executables=[]) == ""
    assert "Unit b.service not found" in systemd_verify({"a.service": needs_b}, extra_executables=[])
    out = systemd_verify({"b.service": b_unit}, extra_executables=[], stub_unit_executables=False)
    assert out == "b.service: Command /opt/b/run is not executable: " + ENOENT


def test_systemd_verify_drop_in_is_read() -> None:
    units = {"sgl-rank0.service": RANK_UNIT, "sgl-rank0.service.d/10-x.conf": "[Service]\nNiceness=5\n"}
    assert "Unknown key 'Niceness'" in systemd_verify(units, extra_executables=[])


# -- shell ----------------------------------------------------------------------------------------------
def test_shellcheck(tmp_path: Path) -> None:
    good = tmp_path / "good.sh"
    good.write_text('#!/usr/bin/env bash\nset -euo pipefail\nargs=(--name "x y")\ndocker run "${args[@]}"\n')
    assert shellcheck(good) == ""
    bad = tmp_path / "bad.sh"
    bad.write_text('#!/usr/bin/env bash\nARGS="--name x"\ndocker run $ARGS\n')
    assert "SC2086" in shellcheck(bad)  # info level: reported, no severity threshold raised
    sourced = tmp_path / "main.sh"
    (tmp_path / "lib.sh").write_text("# shellcheck shell=bash\nNAME=x\n")
    sourced.write_text('#!/usr/bin/env bash\n. ./lib.sh\necho "$NAME"\n')
    assert shellcheck(sourced) == ""  # -x follows the source (SC1091 otherwise)


TRICKY_ARGS = ["a b", "line1\nline2", "", "'single'", '"double"', "$HOME", "*", "back\\slash", "-e", "é"]


def test_bash_argv_round_trips_every_argument(tmp_path: Path) -> None:
    script = tmp_path / "docker-run.sh"
    argv = ["docker", "run", "-d", *TRICKY_ARGS]
    script.write_text(f"#!/usr/bin/env bash\nset -eu\ndocker rm -f x || true\nexec {shlex.join(argv)}\n")
    script.chmod(0o755)
    assert bash_argv(script) == argv
    assert bash_docker_calls(script) == [["docker", "rm", "-f", "x"], argv]


def test_bash_argv_shim_dir_stubs_args_and_non_executable(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"  # not executable: run with bash
    script.write_text('gid=$(probe-gid)\ndocker run -e "GID=$gid" -e "RANK=$1" img\n')
    argv = bash_argv(script, shim_dir=tmp_path / "bin", args=["0"], stubs={"probe-gid": "3"})
    assert argv == ["docker", "run", "-e", "GID=3", "-e", "RANK=0", "img"]
    assert os.access(tmp_path / "bin" / "docker", os.X_OK)
    (tmp_path / "none.sh").write_text("true\n")
    with pytest.raises(ToolError, match="never ran docker"):
        bash_argv(tmp_path / "none.sh")
    (tmp_path / "fail.sh").write_text("exit 3\n")
    with pytest.raises(ToolError, match="exit 3"):
        bash_argv(tmp_path / "fail.sh")


def test_script_to_create_request_pipeline(tmp_path: Path) -> None:
    script = tmp_path / "docker-run.sh"
    script.write_text(f"#!/usr/bin/env bash\nexec {shlex.join(REFERENCE_ARGV)}\n")
    script.chmod(0o755)
    assert shellcheck(script) == ""
    argv = bash_argv(script)
    assert argv == REFERENCE_ARGV
    first, second = docker_create_request(argv), docker_create_request(REFERENCE_ARGV)
    assert set(first["body"].pop("Env")) == set(second["body"].pop("Env"))  # -e order is random
    assert first == second


def test_env_order_and_precedence(tmp_path: Path) -> None:
    (tmp_path / "r.env").write_text("A=file1\nA=file2\nB=file\n")
    many = [x for i in range(12) for x in ("-e", f"V{i:02d}=x")]
    body = docker_create_request(
        ["docker", "run", "--env-file", "r.env", "-e", "B=cli1", "-e", "B=cli2", *many, "busybox"],
        cwd=tmp_path,
    )["body"]
    assert body["Env"][:3] == ["A=file1", "A=file2", "B=file"]  # the file verbatim, duplicates kept
    assert sorted(body["Env"][3:]) == sorted(["B=cli2", *many[1::2]])  # -e: last of a key only
    assert create_env(body) == {"A": "file2", "B": "cli2", **{f"V{i:02d}": "x" for i in range(12)}}


# -- require_tool ---------------------------------------------------------------------------------------
def test_require_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.access(require_tool("bash"), os.X_OK)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no-such-tool-xyz"):
        require_tool("no-such-tool-xyz")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="no-such-tool-xyz"):
        require_tool("no-such-tool-xyz")
