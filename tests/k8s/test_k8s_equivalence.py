"""Rank by rank, a pod of the reference profile's LeaderWorkerSet (`--target kubernetes`) execs the engine
with the argv and environment the docker target gives the same rank, except for what LWS supplies. The
docker side is read off the real docker CLI's create request; the pod side is the generated entrypoint
run by bash (kubelet-expanded args, the ConfigMap mounted, a fake sysfs) with a stand-in launcher
recording what it was exec'd with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from conftest import REFERENCE_PROFILE
from k8s_support import compile_profile, fake_fib_trie, fake_sysfs, objects, run_pod
from support.tools import create_env, docker_create_request

GID = 3
SHELL_VARS = {"PATH", "PWD", "SHLVL", "_", "RECORD_DIR", "OLDPWD"}
EXAMPLES = REFERENCE_PROFILE.parent / "examples"


class Compiled:
    """A shipped profile compiled once with --target kubernetes, the docker target's install and runtime
    folders moved under tmp (the only change to the profile)."""

    def __init__(self, root: Path, base: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.etc, self.run = root / "etc", root / "run"
        self.out = compile_profile(root, f"deploy:\n  install_dir: {self.etc}\n  runtime_dir: {self.run}\n",
                                   "--target", "kubernetes", base=base)
        self.name = self.out.name
        self.leader = f"{self.name}-0.{self.name}.default"  # LWS_LEADER_ADDRESS: <set>-<group>.<set>.<namespace>
        self.plan: dict[str, Any] = json.loads((self.out / "plan.json").read_text())
        self.objects = objects(self.out)
        runtime = self.run / self.name / "runtime.env"
        runtime.parent.mkdir(parents=True)
        runtime.write_text(f"NCCL_IB_GID_INDEX={GID}\nB12X_ROCE_GID_INDEX={GID}\n")

    def docker_body(self, rank: dict[str, Any]) -> dict[str, Any]:
        """The create request the real docker CLI sends for the rank's docker argv, its env files installed."""
        target = self.etc / self.name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.out / rank["directory"], target)
        body: dict[str, Any] = docker_create_request(rank["docker_argv"])["body"]
        return body

    def container(self, rank: int) -> dict[str, Any]:
        lwt = self.objects["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]
        template = lwt["leaderTemplate"] if rank == 0 else lwt["workerTemplate"]
        container: dict[str, Any] = template["spec"]["containers"][0]
        return container

    def pod(self, rank: int, ip: str, work: Path, **lws: str) -> tuple[Any, list[str], dict[str, str]]:
        """Run rank's pod on the node whose fabric address (or, without a fabric, host IP) is ``ip``."""
        env = {"LWS_LEADER_ADDRESS": self.leader, "LWS_GROUP_SIZE": str(len(self.plan["ranks"])),
               "LWS_WORKER_INDEX": str(rank), **lws}
        fabric = self.kind()
        if fabric == "roce":
            root = fake_sysfs(work / "fs", ip, index=GID)
        elif fabric is None:
            root, env["NODE_IP"] = work / "fs", ip  # what the kubelet puts in NODE_IP from status.hostIP
        else:
            root = fake_fib_trie(work / "fs", (ip,))
        return run_pod(self.objects["configmap.yaml"]["data"], self.container(rank), env, root, work)

    def kind(self) -> str | None:
        env = self.plan["ranks"][0]["env"]
        if "NCCL_NET" not in env:
            return None
        return "roce" if "NCCL_IB_ROCE_VERSION_NUM" in env else "tcp"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    return Compiled(tmp_path_factory.mktemp("equivalence"), REFERENCE_PROFILE)


@pytest.mark.parametrize("base", [REFERENCE_PROFILE, EXAMPLES / "two-node-tcp.yaml", EXAMPLES / "single-node.yaml",
                                  EXAMPLES / "gpt-oss-120b-1spark.yaml", EXAMPLES / "glm-4.5-air-fp8-2spark-tcp.yaml"],
                         ids=lambda p: p.stem)
def test_each_pod_execs_what_docker_runs_for_its_rank(base: Path, tmp_path: Path) -> None:
    compiled = Compiled(tmp_path / "compiled", base)
    ranks = compiled.plan["ranks"]
    for rank in ranks:
        body = compiled.docker_body(rank)
        proc, argv, env = compiled.pod(rank["rank"], rank["fabric_ip"], tmp_path / str(rank["rank"]))
        assert proc.returncode == 0, proc.stderr
        # docker: --entrypoint python3, then the launcher's arguments and the engine flags as Cmd.
        assert body["Entrypoint"] == ["python3"] and len(argv) == len(body["Cmd"])
        differs = [(theirs_prev, theirs, ours) for theirs_prev, theirs, ours in
                   zip(["", *body["Cmd"]], body["Cmd"], argv, strict=False) if theirs != ours]
        if len(ranks) > 1:
            # The one LWS-supplied value that differs: the leader's address (a DNS name, not rank 0's IP).
            port = body["Cmd"][body["Cmd"].index("--dist-init-addr") + 1].rpartition(":")[2]
            dist = f"{ranks[0]['fabric_ip']}:{port}"
            assert differs == [("--dist-init-addr", dist, f"{compiled.leader}:{port}")], rank["rank"]
            assert argv[argv.index("--node-rank") + 1] == str(rank["rank"])
            assert argv[argv.index("--nnodes") + 1] == str(len(ranks))
        else:
            assert differs == [] and "--nnodes" not in argv
        # The environment: every variable docker gives the container, the probed ones found on the node.
        pod_env = {k: v for k, v in env.items() if k not in SHELL_VARS and not k.startswith("LWS_")}
        assert pod_env == create_env(body), rank["rank"]
        assert pod_env["HOST_IP"] == rank["fabric_ip"]
        assert (pod_env.get("NCCL_IB_GID_INDEX") == str(GID)) == (compiled.kind() == "roce")


def test_the_pods_run_the_image_docker_runs(compiled: Compiled) -> None:
    body = compiled.docker_body(compiled.plan["ranks"][0])
    assert compiled.container(0)["image"] == compiled.container(1)["image"] == body["Image"]


def test_a_tcp_node_with_two_addresses_in_the_subnet_stops(tmp_path: Path) -> None:
    compiled = Compiled(tmp_path / "compiled", EXAMPLES / "two-node-tcp.yaml")
    root = fake_fib_trie(tmp_path / "fs", ("198.51.100.1", "198.51.100.9"))
    env = {"LWS_LEADER_ADDRESS": compiled.leader, "LWS_GROUP_SIZE": "2", "LWS_WORKER_INDEX": "1"}
    proc, argv, _ = run_pod(compiled.objects["configmap.yaml"]["data"], compiled.container(1), env, root, tmp_path)
    assert proc.returncode == 1 and argv == []
    assert "has 2 addresses in 198.51.100.0/28 (198.51.100.1 198.51.100.9); it needs exactly one" in proc.stderr


def test_a_node_bound_rank_on_another_node_stops_with_both_names(compiled: Compiled, tmp_path: Path) -> None:
    # Rank 2 reads Engram rows copied to spark-2 (192.0.2.13); here it landed on spark-1's address.
    proc, argv, _ = compiled.pod(2, "192.0.2.12", tmp_path)
    assert proc.returncode == 1 and argv == []
    assert "rank 2 reads Engram rows copied to spark-2 (192.0.2.13) but runs on 192.0.2.12" in proc.stderr


def test_the_checkpoint_holder_rank_runs_on_any_node(compiled: Compiled, tmp_path: Path) -> None:
    # Rank 1 reads its rows from the shared checkpoint, so any fleet address will do.
    proc, argv, env = compiled.pod(1, "192.0.2.14", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert env["HOST_IP"] == "192.0.2.14" and argv


def test_the_probe_refuses_what_it_cannot_trust(compiled: Compiled, tmp_path: Path) -> None:
    cases = {
        "outside": ("198.51.100.7", {}, "no RoCE v2 GID of an address in 192.0.2.0/24 on rocep1s0f0"),
        "size": ("192.0.2.11", {"LWS_GROUP_SIZE": "5"}, "LWS_GROUP_SIZE is '5' but the profile has 4 nodes"),
        "index": ("192.0.2.11", {"LWS_WORKER_INDEX": "x"}, "LWS_WORKER_INDEX is 'x'"),
    }
    for name, (ip, lws, message) in cases.items():
        proc, argv, _ = compiled.pod(0, ip, tmp_path / name, **lws)
        assert proc.returncode == 1 and argv == [], name
        assert message in proc.stderr, (name, proc.stderr)


def test_a_missing_hca_is_named_with_those_present(compiled: Compiled, tmp_path: Path) -> None:
    from k8s_support import run_pod

    sysfs = fake_sysfs(tmp_path / "fs", "192.0.2.11", extra_hcas=("mlx5_1",))
    env = {"LWS_LEADER_ADDRESS": compiled.leader, "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": "0"}
    proc, argv, _ = run_pod(compiled.objects["configmap.yaml"]["data"], compiled.container(0), env, sysfs, tmp_path)
    assert proc.returncode == 1 and argv == []
    assert "RDMA device roceP2p1s0f0 is not on this node (present: mlx5_1 rocep1s0f0)" in proc.stderr
