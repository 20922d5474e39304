"""What the Kubernetes target's rules check on the manifest the plan produces (and the tests on mutants).

Each check takes the LeaderWorkerSet object as built (or as a test broke it) and returns problems, each
with the rule it breaks and the profile path to blame, so spec/rules/k8s.py can place it in the profile.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_compile.k8s import API_PORT_NAME, PROBED, bound_ranks, host_volumes, lws_options, settings
from spark_compile.launch_plan import LaunchPlan
from spark_compile.spec.hardware import HARDWARE

if TYPE_CHECKING:
    from spark_compile.spec.model import Profile

_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_QUANTITY = re.compile(r"^([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")


@dataclass(frozen=True)
class Problem:
    """One broken rule: its id, the profile path to blame, and what is wrong."""

    rule: str
    path: tuple[str | int, ...]
    message: str


def quantity_bytes(text: Any) -> int | None:
    """Bytes of a memory quantity such as 112Gi; None when it is not one (the schema reports that)."""
    match = _QUANTITY.match(str(text))
    return int(match.group(1)) * _UNITS[match.group(2) or ""] if match else None


def templates(lws: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """("leader"|"worker", PodTemplateSpec) of the set, the worker's first."""
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    for role, key in (("worker", "workerTemplate"), ("leader", "leaderTemplate")):
        if isinstance(lwt.get(key), dict):
            yield role, lwt[key]


def _engine(template: dict[str, Any]) -> dict[str, Any]:
    containers = template.get("spec", {}).get("containers") or [{}]
    return containers[0] if isinstance(containers[0], dict) else {}


def check_shape(lws: dict[str, Any], profile: Profile) -> Iterator[Problem]:
    """SC501-SC502: the group's size and the GPUs it fills; the leader's port, probes and start policy."""
    nodes = len(profile.fleet.nodes)
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    if lwt.get("size") != nodes:
        yield Problem("SC501", ("fleet", "nodes"), f"LeaderWorkerSet size is {lwt.get('size')!r}, the fleet has "
                      f"{nodes} nodes")
    if "workerTemplate" not in lwt:
        yield Problem("SC501", ("kubernetes",), "the LeaderWorkerSet has no workerTemplate")
    gpus = HARDWARE[profile.hardware].gpus_per_node
    tp, size = profile.engine.parallel.tp, lwt.get("size")
    if isinstance(size, int) and tp != size * gpus:
        yield Problem("SC501", ("engine", "parallel", "tp"), f"tp {tp} is not size {size} x {gpus} GPU(s) per pod")
    for role, template in templates(lws):
        asked = _engine(template).get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if asked != str(gpus):
            yield Problem("SC501", ("hardware",), f"the {role} pod asks for nvidia.com/gpu {asked!r}, each node "
                          f"has {gpus}")
        if "livenessProbe" in _engine(template):
            yield Problem("SC502", ("kubernetes",), f"the {role} has a liveness probe: any restart recreates the "
                          "whole group, and a boot outlasts it")
    yield from _check_leader(lws, profile)


def _check_leader(lws: dict[str, Any], profile: Profile) -> Iterator[Problem]:
    if lws.get("spec", {}).get("startupPolicy") == "LeaderReady":
        yield Problem("SC502", ("kubernetes", "startup_policy"), "startupPolicy LeaderReady deadlocks: the leader "
                      "becomes ready only once the workers it waits for have joined")
    leader = dict(templates(lws)).get("leader")
    if leader is None:
        yield Problem("SC502", ("kubernetes",), "the LeaderWorkerSet has no leaderTemplate for rank 0")
        return
    container = _engine(leader)
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports", []) if isinstance(p, dict)}
    if ports.get(API_PORT_NAME) != profile.engine.port:
        yield Problem("SC502", ("engine", "port"), f"the leader does not expose the API port {profile.engine.port} "
                      f"as {API_PORT_NAME!r}")
    probe = container.get("startupProbe", {}).get("httpGet", {})
    if probe.get("path") != "/health" or probe.get("port") != API_PORT_NAME:
        yield Problem("SC502", ("kubernetes",), "the leader has no startup probe on /health of the API port")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _node_words(profile: Profile) -> tuple[re.Pattern[str], dict[str, str]]:
    """One pattern finding any node's name or fabric address as a whole word, and what each word means."""
    words = {n.name: f"node {n.name}" for n in profile.fleet.nodes}
    words.update({n.fabric_ip: f"{n.name}'s address {n.fabric_ip}" for n in profile.fleet.nodes})
    alternatives = "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9._/-])(?:{alternatives})(?![A-Za-z0-9._/-])"), words


def check_uniform(lws: dict[str, Any], plan: LaunchPlan, profile: Profile) -> Iterator[Problem]:
    """SC503: nothing in either template names a node, a node's address, or a value probed per node."""
    first = lws_options(plan.ranks[0])
    known = set(first)
    for rank in plan.ranks[1:]:
        for option, words in zip(rank.engine_options, lws_options(rank), strict=False):
            if words not in known:
                yield Problem("SC503", option.source or ("fleet", "nodes", rank.rank), f"rank {rank.rank}'s "
                              f"{option.flag} {' '.join(option.values)} differs from rank 0's: the template is "
                              "the same for every rank")
        if len(rank.engine_options) != len(first):
            yield Problem("SC503", ("fleet", "nodes", rank.rank), f"rank {rank.rank} has other engine flags than "
                          "rank 0")
    _, mount_problems = host_volumes(plan)
    yield from (Problem("SC503", origin or ("model",), text) for origin, text in mount_problems)
    fabric = profile.fleet.fabric
    pinned = fabric is not None and fabric.kind == "roce" and (
        fabric.gid_index != "probe" or any(n.gid_index not in (None, "probe") for n in profile.fleet.nodes))
    if pinned:
        yield Problem("SC503", ("fleet", "fabric", "gid_index"), "a pinned RoCE GID index is per node and drifts: "
                      "the Kubernetes target probes it on each node at start")
    pattern, meaning = _node_words(profile)
    for role, template in templates(lws):
        spec = template.get("spec", {})
        if "nodeName" in spec:
            yield Problem("SC503", ("kubernetes",), f"the {role} template pins nodeName {spec['nodeName']!r}")
        for env in _engine(template).get("env", []):
            if isinstance(env, dict) and env.get("name") in PROBED:
                yield Problem("SC503", ("kubernetes",), f"the {role} template sets {env['name']}, which differs per "
                              "node: the entrypoint probes it")
        named = {word for text in set(_strings(template)) for word in pattern.findall(text)}
        for word in sorted(named):
            yield Problem("SC503", ("kubernetes",), f"the {role} template names {meaning[word]}: the same "
                          "template runs on every node")


def check_memory(lws: dict[str, Any], profile: Profile) -> Iterator[Problem]:
    """SC504: /dev/shm inside the pod's memory limit, the limit below the node's memory."""
    node_gb = HARDWARE[profile.hardware].memory_gb
    path = ("kubernetes", "memory") if profile.kubernetes and profile.kubernetes.memory else ("container", "memory")
    found: dict[tuple[tuple[str | int, ...], str], list[str]] = {}
    for role, template in templates(lws):
        limit = _engine(template).get("resources", {}).get("limits", {}).get("memory")
        shm = next((v.get("emptyDir", {}).get("sizeLimit") for v in template.get("spec", {}).get("volumes", [])
                    if isinstance(v, dict) and v.get("name") == "dshm"), None)
        limit_b, shm_b = quantity_bytes(limit), quantity_bytes(shm)
        if limit_b is not None and limit_b >= node_gb * 10**9:
            key = (path, f"memory limit {limit} is not below the node's {node_gb} GB")
        elif shm_b is not None and limit_b is not None and shm_b > limit_b:
            key = (("kubernetes", "shm_size"), f"/dev/shm size {shm} exceeds the memory limit {limit}")
        elif shm_b is not None and limit_b is None and shm_b >= node_gb * 10**9:
            key = (("kubernetes", "shm_size"), f"/dev/shm size {shm} is not below the node's {node_gb} GB")
        else:
            continue
        found.setdefault(key, []).append(role)
    for (where, text), roles in found.items():
        yield Problem("SC504", where, f"the {' and '.join(roles)} pod{'s' * (len(roles) > 1)}: {text}")


def check_settings(plan: LaunchPlan, profile: Profile) -> Iterator[Problem]:
    """SC505-SC507: image digest, ranks tied to nodes, unsupported secrets."""
    conf = settings(profile)
    if "@sha256:" not in conf.image:
        where = ("kubernetes", "image") if profile.kubernetes and profile.kubernetes.image else ("engine", "image")
        yield Problem("SC505", where, f"image {conf.image} is pinned by tag only: a tag can move between the pulls "
                      "of two nodes")
    bound = bound_ranks(plan, profile)
    if bound:
        ranks = ", ".join(f"{r} ({p.node})" for r, p in bound.items())
        yield Problem("SC506", ("model", "engram", "local_dir"), f"ranks {ranks} read Engram rows copied to one node; "
                      "LWS may place a rank on any node, and the entrypoint stops a rank that lands elsewhere")
    if profile.secrets.api_key is not None:
        yield Problem("SC507", ("secrets", "api_key"), "secrets.api_key is not supported by the Kubernetes target yet")
