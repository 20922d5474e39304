"""Our LeaderWorkerSet v1 schema agrees with the upstream CRD (field names, required fields, enums and bounds
at every envelope object, from tests/k8s/fixtures/lws-v1-crd-facts.json) and is stricter than it
(additionalProperties: false); a manifest using every envelope field passes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from k8s_support import LWS_SCHEMA, lws_errors

FACTS = Path(__file__).resolve().parent / "fixtures" / "lws-v1-crd-facts.json"


def _ours_at(path: str) -> dict[str, Any]:
    schema = json.loads(LWS_SCHEMA.read_text())
    node: dict[str, Any] = schema
    for key in [k for k in path.split(".") if k]:
        node = node["properties"][key]
        while "$ref" in node:
            node = {**schema["$defs"][node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    while "$ref" in node:
        node = {**schema["$defs"][node["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def test_schema_agrees_with_the_upstream_crd_at_every_envelope_object() -> None:
    facts = json.loads(FACTS.read_text())["paths"]
    assert len(facts) > 30
    for path, fact in facts.items():
        ours = _ours_at("" if path == "." else path)
        if "properties" in fact:
            assert sorted(ours["properties"]) == fact["properties"], path
            assert ours["additionalProperties"] is False, path
        if "required" in fact and path != ".":
            assert sorted(ours.get("required", [])) == fact["required"], path
        if "enum" in fact:
            assert ours["enum"] == fact["enum"], path
        for bound in ("minimum", "maximum"):
            if bound in fact:
                assert ours[bound] == fact[bound], (path, bound)


def _full() -> dict[str, Any]:
    pod = {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "set", "namespace": "ns", "labels": {"x": "y"}, "annotations": {"k": "v"}},
        "spec": {
            "replicas": 2, "startupPolicy": "LeaderCreated", "networkConfig": {"subdomainPolicy": "UniquePerReplica"},
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": {"partition": 1, "maxUnavailable": "25%", "maxSurge": 1}},
            "leaderWorkerTemplate": {
                "size": 4, "restartPolicy": "RecreateGroupAfterStart", "leaderTemplate": pod, "workerTemplate": pod,
                "subGroupPolicy": {"subGroupPolicyType": "LeaderExcluded", "subGroupSize": 3},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}],
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
            },
        },
        "status": {"conditions": [], "readyReplicas": 2, "updatedReplicas": 2, "replicas": 2,
                   "hpaPodSelector": "a=b", "observedGeneration": 3},
    }


def test_every_envelope_field_is_accepted() -> None:
    assert lws_errors(_full()) == []


def test_what_the_crd_would_prune_is_refused() -> None:
    full = _full()
    full["spec"]["leaderWorkerTemplate"]["subGroupPolicy"]["subGroupSizes"] = 3
    full["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] = "one"
    errors = lws_errors(full)
    assert any("subGroupSizes" in e for e in errors) and any("'one'" in e for e in errors), errors
