"""`import --trace`: a launcher run in the sandbox (stand-ins, no network, read-only outside a copy of its folder,
a time limit); the docker run lines it records become the profile, and a launcher that breaks out is stopped."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from roundtrip import compare, compiled

from spark_compile.cli import main
from spark_compile.common.errors import EXIT_SANDBOX
from spark_compile.importer.mapping import ranks
from spark_compile.importer.trace import run_traced, traced_launches

FIXTURES = Path(__file__).parent / "fixtures" / "launcher"
HOSTS = "ops@192.0.2.31,ops@192.0.2.32"
FABRIC = ["--interface", "enp1s0f0np0", "--rdma-devices", "rocep1s0f0,roceP2p1s0f0"]


def test_trace_says_it_runs_the_script_and_imports_every_node(capsys: pytest.CaptureFixture[str],
                                                               tmp_path: Path) -> None:
    out = tmp_path / "gptoss.yaml"
    code = main(["import", "--trace", str(FIXTURES / "start.sh"), "--hosts", HOSTS, *FABRIC, "--architecture",
                 "GptOssForCausalLM", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert err.splitlines()[0] == (
        f"spark-compile import: --trace RUNS {FIXTURES}/start.sh in a sandbox (stand-in docker, ssh, nvidia-smi, "
        "ip, ...; no network; a throwaway HOME; read-only outside a copy of its folder; a time limit) and imports "
        "the docker run lines it records")
    data = yaml.safe_load(out.read_text())
    assert data["model"]["snapshot"] == "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"  # from the sourced config
    assert data["fleet"]["fabric"]["interface"] == "enp1s0f0np0"
    assert [f.rule for f in compiled(out).findings] == ["SC312", "SC445"]  # NCCL left at its default buffers
    assert not (FIXTURES / "progress.log").exists()


def test_traced_nodes_and_hosts() -> None:
    launches = traced_launches(FIXTURES / "start.sh", tuple(HOSTS.split(",")), {}, [], [], "enp1s0f0np0",
                               ("rocep1s0f0", "roceP2p1s0f0"))
    found = ranks(launches)
    assert [(r.rank, r.launch.ssh) for r in found] == [(0, None), (1, "ops@192.0.2.32")]
    head = [w.text for w in found[0].launch.command]
    assert head[head.index("--dist-init-addr") + 1] == "192.0.2.31:20000"  # from the stand-in `ip`
    # the sandbox's /dev has /dev/infiniband because --rdma-devices describes an RDMA machine
    assert ("--device", "/dev/infiniband") in [(f.text, v.text if v else "") for f, v in found[1].launch.options]


def test_a_tcp_fabric_shows_no_infiniband() -> None:
    (head,) = [r for r in ranks(traced_launches(FIXTURES / "start.sh", tuple(HOSTS.split(",")),
                                                {"HEAD_IP": "192.0.2.31", "IFACE": "eth0", "HCAS": ""}, [], [],
                                                fabric="tcp"))
               if r.rank == 0]
    assert "--device" not in [f.text for f, _ in head.launch.options]


def test_no_fabric_given_shows_a_spark_of_its_own() -> None:
    notes: list[str] = []
    found = ranks(traced_launches(FIXTURES / "start.sh", tuple(HOSTS.split(",")), {}, [], notes))
    env = {name: value for name, value, _ in found[1].launch.env}
    assert (env["NCCL_SOCKET_IFNAME"], env["NCCL_IB_HCA"]) == ("enp1s0f0np0", "rocep1s0f0,roceP2p1s0f0")
    assert ("--device", "/dev/infiniband") in [(f.text, v.text if v else "") for f, v in found[1].launch.options]
    assert notes[0] == (f"{FIXTURES}/start.sh: the sandbox showed the launcher a DGX Spark's own fabric: enp1s0f0np0 "
                        "and rocep1s0f0,roceP2p1s0f0 (ibdev2netdev, ip, /dev/infiniband); give --interface and "
                        "--rdma-devices when the nodes are cabled otherwise")


def test_traced_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "gptoss.yaml"
    main(["import", "--trace", str(FIXTURES / "start.sh"), "--hosts", HOSTS, *FABRIC, "--architecture",
          "GptOssForCausalLM", "-o", str(out)])
    capsys.readouterr()
    validated = compiled(out)
    launches = traced_launches(FIXTURES / "start.sh", tuple(HOSTS.split(",")), {}, [], [], "enp1s0f0np0",
                               ("rocep1s0f0", "roceP2p1s0f0"))
    for rank in ranks(launches):
        sides = compare(rank.launch, validated, rank.rank)
        assert sides.engine[0] == {}  # every flag the launcher passes reaches the compiled command
        assert sides.env[0] == {}  # and every variable
        assert sides.docker[0] == {}  # and every docker option


@pytest.mark.parametrize(("script", "why"), [
    ("writes-outside.sh", "tried to write outside its folder: ./writes-outside.sh: line 4: "
                          "/var/tmp/spark-compile-trace-escape: Read-only file system"),
    ("reaches-network.sh", "tried to reach the network: ./reaches-network.sh: connect: Network is unreachable"),
])
def test_a_launcher_that_breaks_out_is_stopped(capsys: pytest.CaptureFixture[str], tmp_path: Path, script: str,
                                               why: str) -> None:
    out = tmp_path / "x.yaml"
    code = main(["import", "--trace", str(FIXTURES / script), "--hosts", "192.0.2.1", "-o", str(out)])
    assert code == EXIT_SANDBOX
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"spark-compile: error: {FIXTURES}/{script}: stopped in the sandbox: {why} (nothing was written outside the "
        "sandbox; nothing was imported)")
    assert not Path("/var/tmp/spark-compile-trace-escape").exists()
    assert not out.exists()


def test_time_limit() -> None:
    traced = run_traced(FIXTURES / "never-ends.sh", ("192.0.2.1",), {}, limit=2)
    assert (traced.status, traced.violations) == (None, [])  # ended at the deadline, its records kept


def test_a_launcher_runs_with_its_own_interpreter() -> None:
    (launch,) = traced_launches(FIXTURES / "start.py", ("192.0.2.1",), {}, [], [])
    assert [w.text for w in launch.command][-2:] == ["--port", "8000"]
    assert launch.image is not None and launch.image.text == "lmsysorg/sglang:v0.5.23"


CABLED = """#!/bin/bash
# Two Sparks cabled port 1 to port 0: the head's fabric port is enp1s0f0np0, the worker's enp1s0f1np1.
run() {  # run RANK INTERFACE HCA
  docker run -d --name gptoss --gpus all --network host --ipc host --device /dev/infiniband --cap-add IPC_LOCK \\
    --ulimit memlock=-1 -e "NCCL_SOCKET_IFNAME=$2" -e "GLOO_SOCKET_IFNAME=$2" -e "NCCL_IB_HCA=$3" \\
    -e NCCL_IB_DISABLE=0 -e PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False lmsysorg/sglang:v0.5.23 \\
    python3 -m sglang.launch_server --model-path openai/gpt-oss-120b --tp-size 2 --nnodes 2 --node-rank "$1" \\
    --dist-init-addr 192.0.2.31:20000 --host 0.0.0.0
}
ssh ops@192.0.2.32 "$(declare -f run); run 1 enp1s0f1np1 rocep1s0f1"
run 0 enp1s0f0np0 rocep1s0f0
"""


def test_a_node_cabled_otherwise_gets_its_own_fabric_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "cabled").mkdir()
    script, out = tmp_path / "cabled" / "start.sh", tmp_path / "cabled.yaml"
    script.write_text(CABLED)
    assert main(["import", "--trace", str(script), "--hosts", HOSTS, "-o", str(out)]) == 0, capsys.readouterr().err
    nodes = yaml.safe_load(out.read_text())["fleet"]["nodes"]
    assert [(n.get("interface"), n.get("rdma_devices")) for n in nodes] == [(None, None),
                                                                          ("enp1s0f1np1", ["rocep1s0f1"])]
    planned = compiled(out)
    assert [f.rule for f in planned.findings] == ["SC312", "SC445"]  # no SC415/SC416: judged by its own fabric
    assert [r.unit.after_device for r in planned.plan.ranks] == [
        "sys-subsystem-net-devices-enp1s0f0np0.device", "sys-subsystem-net-devices-enp1s0f1np1.device"]
    for rank in ranks(traced_launches(script, tuple(HOSTS.split(",")), {}, [], [])):
        sides = compare(rank.launch, planned, rank.rank)
        assert (sides.engine[0], sides.env[0], dict(sides.docker[0])) == ({}, {}, {}), rank.rank
