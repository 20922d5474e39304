"""Broken manifests are caught: each mutation of the generated LeaderWorkerSet fails the schema that owns
the field (strict PodTemplateSpec, our LWS v1 schema) or the target's own checks (the SC5xx rules)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from k8s_support import compile_profile, lws_errors, objects, pod_template_errors

Lws = dict[str, Any]
MANIFEST_RULES = ("SC501", "SC502", "SC503", "SC504")


@pytest.fixture(scope="module")
def lws(tmp_path_factory: pytest.TempPathFactory) -> Lws:
    return objects(compile_profile(tmp_path_factory.mktemp("mutations")))["leaderworkerset.yaml"]


@pytest.fixture(scope="module")
def checks() -> Callable[[Lws], list[str]]:
    """What the manifest rules (SC501-SC504) find on a manifest, as 'SCxxx: message', run as the rules stage runs
    them on the reference profile and its plan, the Context's manifest replaced by the one given."""
    from spark_compile.pipeline import planned, validate
    from spark_compile.rules.registry import CHECKS, Context
    from spark_compile.stages.resolve import resolve

    from k8s_support import K8S_PROFILE

    reference = planned(validate(resolve(K8S_PROFILE)))
    profile, plan = reference.profile, reference.plan

    def run(manifest: Lws) -> list[str]:
        context = Context(profile, plan, lambda path: True)
        context.manifest = manifest
        return [f"{rule_id}: {hit.message}" for rule_id, check in CHECKS if rule_id in MANIFEST_RULES
                for hit in check(context)]

    return run


def _mutant(lws: Lws, change: Callable[[Lws], None]) -> Lws:
    mutant = copy.deepcopy(lws)
    change(mutant)
    return mutant


def _worker(lws: Lws) -> dict[str, Any]:
    template: dict[str, Any] = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    return template


def _leader_container(lws: Lws) -> dict[str, Any]:
    container: dict[str, Any] = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    return container


def test_the_generated_manifest_is_clean(lws: Lws, checks: Callable[[Lws], list[str]]) -> None:
    assert lws_errors(lws) == [] and checks(lws) == []


def test_misspelt_fields_are_caught(lws: Lws) -> None:
    pod = _mutant(lws, lambda m: _worker(m)["spec"].update(hostNetwrok=True))
    assert "hostNetwrok" in pod_template_errors(_worker(pod))
    mount = _mutant(lws, lambda m: _worker(m)["spec"]["containers"][0]["volumeMounts"][0].update(readonly=True))
    assert "readonly" in pod_template_errors(_worker(mount))
    envelope = _mutant(lws, lambda m: m["spec"]["leaderWorkerTemplate"].update(restartPolicyy="None"))
    assert any("restartPolicyy" in e for e in lws_errors(envelope))
    top = _mutant(lws, lambda m: m["spec"].update(startupPolicyy="LeaderCreated"))
    assert any("startupPolicyy" in e for e in lws_errors(top))


def test_wrong_enums_are_caught(lws: Lws) -> None:
    for where, field, value in ((("spec", "leaderWorkerTemplate"), "restartPolicy", "Always"),
                                (("spec",), "startupPolicy", "LeaderStarted"),
                                (("spec", "rolloutStrategy"), "type", "Recreate")):
        def change(m: Lws, where: tuple[str, ...] = where, field: str = field, value: str = value) -> None:
            node = m
            for key in where:
                node = node[key]
            node[field] = value

        errors = lws_errors(_mutant(lws, change))
        assert any(repr(value) in e and "is not one of" in e for e in errors), (field, errors)
    pod = _mutant(lws, lambda m: _worker(m)["spec"]["containers"][0].update(imagePullPolicy="Sometimes"))
    assert "Sometimes" in pod_template_errors(_worker(pod))


def test_a_string_where_a_number_belongs_is_caught(lws: Lws) -> None:
    size = _mutant(lws, lambda m: m["spec"]["leaderWorkerTemplate"].update(size="4"))
    assert any("'4' is not of type 'integer'" in e for e in lws_errors(size))
    grace = _mutant(lws, lambda m: _worker(m)["spec"].update(terminationGracePeriodSeconds="60"))
    assert "terminationGracePeriodSeconds" in pod_template_errors(_worker(grace))
    zero = _mutant(lws, lambda m: m["spec"]["leaderWorkerTemplate"].update(size=0))
    assert any("0 is less than the minimum of 1" in e for e in lws_errors(zero))


def test_a_missing_worker_template_is_caught(lws: Lws, checks: Callable[[Lws], list[str]]) -> None:
    mutant = _mutant(lws, lambda m: m["spec"]["leaderWorkerTemplate"].pop("workerTemplate"))
    assert any("'workerTemplate' is a required property" in e for e in lws_errors(mutant))
    assert "SC501: the LeaderWorkerSet has no workerTemplate" in checks(mutant)


@pytest.mark.parametrize(("name", "change", "expected"), [
    ("probed env", lambda m: _worker(m)["spec"]["containers"][0].setdefault("env", []).append(
        {"name": "NCCL_IB_GID_INDEX", "value": "3"}), "sets NCCL_IB_GID_INDEX, which differs per node"),
    ("host ip", lambda m: _worker(m)["spec"]["containers"][0]["args"].extend(["--host", "192.0.2.12"]),
     "names spark-1's address 192.0.2.12"),
    ("node name", lambda m: _worker(m)["spec"].update(nodeName="spark-2"), "pins nodeName 'spark-2'"),
    ("selector", lambda m: _worker(m)["spec"].update(nodeSelector={"kubernetes.io/hostname": "spark-3"}),
     "names node spark-3"),
])
def test_a_node_specific_value_in_a_template_is_caught(lws: Lws, checks: Callable[[Lws], list[str]], name: str,
                                                        change: Callable[[Lws], None], expected: str) -> None:
    mutant = _mutant(lws, change)
    assert pod_template_errors(_worker(mutant)) == ""  # valid Kubernetes: only our rule knows it is wrong
    assert any(p.startswith("SC503") and expected in p for p in checks(mutant)), (name, checks(mutant))


def test_leader_port_probes_and_policy_are_checked(lws: Lws, checks: Callable[[Lws], list[str]]) -> None:
    no_probe = _mutant(lws, lambda m: _leader_container(m).pop("startupProbe"))
    assert "SC502: the leader has no startup probe on /health of the API port" in checks(no_probe)
    no_port = _mutant(lws, lambda m: _leader_container(m).pop("ports"))
    assert any(p.startswith("SC502: the leader does not expose the API port 8210") for p in checks(no_port))
    live = _mutant(lws, lambda m: _leader_container(m).update(livenessProbe={"tcpSocket": {"port": "api"}}))
    assert any(p.startswith("SC502: the leader has a liveness probe") for p in checks(live))
    ready = _mutant(lws, lambda m: m["spec"].update(startupPolicy="LeaderReady"))
    assert lws_errors(ready) == []  # a valid LWS value, yet it deadlocks this engine
    assert any(p.startswith("SC502: startupPolicy LeaderReady deadlocks") for p in checks(ready))


def test_size_gpus_and_memory_are_checked(lws: Lws, checks: Callable[[Lws], list[str]]) -> None:
    size = _mutant(lws, lambda m: m["spec"]["leaderWorkerTemplate"].update(size=3))
    assert "SC501: LeaderWorkerSet size is 3, the fleet has 4 nodes" in checks(size)
    gpus = _mutant(lws, lambda m: _worker(m)["spec"]["containers"][0]["resources"]["limits"].update(
        {"nvidia.com/gpu": "2"}))
    assert any(p.startswith("SC501: the worker pod asks for nvidia.com/gpu '2'") for p in checks(gpus))

    def big_shm(m: Lws) -> None:
        next(v for v in _worker(m)["spec"]["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] = "113Gi"

    assert "SC504: the worker pod: /dev/shm size 113Gi exceeds the memory limit 112Gi" in checks(_mutant(lws, big_shm))
    huge = _mutant(lws, lambda m: _worker(m)["spec"]["containers"][0]["resources"]["limits"].update(memory="128G"))
    assert any(p.startswith("SC504: the worker pod: memory limit 128G is not below") for p in checks(huge))


def test_mutants_of_the_files_on_disk_fail_check_generated(tmp_path: Path) -> None:
    from conftest import run_cli
    from k8s_support import K8S_PROFILE

    out = compile_profile(tmp_path)
    lws_file = out / "k8s" / "leaderworkerset.yaml"
    lws_file.write_text(lws_file.read_text().replace("size: 4", "size: 3"))
    result = run_cli("check", "--generated", "--out", str(tmp_path / "generated"), str(K8S_PROFILE))
    assert result.returncode == 1
    assert f"{lws_file}: differs from what {K8S_PROFILE} produces" in result.stdout
