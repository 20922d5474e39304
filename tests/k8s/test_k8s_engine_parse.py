"""The pods' engine argv, as the kubelet expands it for each rank, parses with SGLang 0.5.23's own parser
into the namespace the docker target's argv gives that rank, except --dist-init-addr's host."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE
from k8s_support import compile_profile, kubelet_expand, objects

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from sglang_parse import engine_argv_of, engine_python, parse_engine_argvs_full

pytestmark = pytest.mark.engine
LEADER = "dsv41-4spark-0.dsv41-4spark.default"


def test_pod_argv_parses_like_the_docker_argv(tmp_path: Path) -> None:
    python = engine_python()
    out = compile_profile(tmp_path, "", "--target", "kubernetes", base=REFERENCE_PROFILE)
    ranks = json.loads((out / "plan.json").read_text())["ranks"]
    lwt = objects(out)["leaderworkerset.yaml"]["spec"]["leaderWorkerTemplate"]
    pods = []
    for rank in ranks:
        template = lwt["leaderTemplate"] if rank["rank"] == 0 else lwt["workerTemplate"]
        env = {"LWS_LEADER_ADDRESS": LEADER, "LWS_GROUP_SIZE": str(len(ranks)), "LWS_WORKER_INDEX": str(rank["rank"])}
        args = [kubelet_expand(a, env) for a in template["spec"]["containers"][0]["args"]]
        pods.append(engine_argv_of(args))
    dockers = [engine_argv_of(rank["docker_argv"]) for rank in ranks]
    results = parse_engine_argvs_full(pods + dockers, python)
    for index, (pod, docker) in enumerate(zip(results[:len(ranks)], results[len(ranks):], strict=True)):
        assert "error" not in pod, f"rank {index}: sglang refused the pod argv: {pod.get('error')}"
        assert pod["abbreviations"] == {}
        ours, theirs = pod["namespace"], docker["namespace"]
        assert ours["node_rank"] == index and ours["nnodes"] == len(ranks)
        assert ours["dist_init_addr"] == f"{LEADER}:20100"
        assert {k: v for k, v in ours.items() if k != "dist_init_addr"} == \
            {k: v for k, v in theirs.items() if k != "dist_init_addr"}, index
