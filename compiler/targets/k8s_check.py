"""What the Kubernetes target's rules check on the manifest the plan produces (and the tests on mutants).

Each check is one rule's (rules/k8s.py): it takes the LeaderWorkerSet object as built (or as a test broke it)
and returns problems, each with the profile path to blame, so the rule can place it in the profile.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.model import Profile
from spark_compile.stages.engine_options import api_bind
from spark_compile.stages.launch_plan import LaunchPlan
from spark_compile.targets.k8s import (
    API_PORT_NAME,
    CONFIGMAP_LIMIT,
    POD_MOUNTS,
    PROBED,
    configmap_data,
    configmap_problem,
    host_volumes,
    lws_options,
    settings,
)
from spark_compile.targets.k8s_render import entrypoint_text

_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
          "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_QUANTITY = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|k|M|G|T)?")


@dataclass(frozen=True, slots=True)
class Problem:
    """What breaks the check's rule: the profile path to blame, and what is wrong."""

    path: tuple[str | int, ...]
    message: str
    hint: str = ""  # when this problem's fix is not the rule's own hint


def quantity_bytes(text: Any) -> int | None:
    """Bytes of a memory quantity such as 112Gi; None when it is not one (the schema reports that)."""
    match = _QUANTITY.fullmatch(str(text))
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


def check_size(lws: dict[str, Any], profile: Profile) -> Iterator[Problem]:
    """SC501: the group's size and the GPUs it fills."""
    nodes = len(profile.fleet.nodes)
    lwt = lws.get("spec", {}).get("leaderWorkerTemplate", {})
    if lwt.get("size") != nodes:
        yield Problem(("fleet", "nodes"), f"LeaderWorkerSet size is {lwt.get('size')!r}, the fleet has "
                      f"{nodes} nodes")
    if "workerTemplate" not in lwt:
        yield Problem(("kubernetes",), "the LeaderWorkerSet has no workerTemplate")
    gpus = HARDWARE[profile.hardware].gpus_per_node
    tp, pp, size = profile.engine.parallel.tp or 1, profile.engine.parallel.pp or 1, lwt.get("size")
    if isinstance(size, int) and tp * pp != size * gpus:
        got = f"tp {tp} x pp {pp}" if pp > 1 else f"tp {tp}"
        yield Problem(("engine", "parallel", "tp"), f"{got} is not size {size} x {gpus} GPU(s) per pod")
    for role, template in templates(lws):
        asked = _engine(template).get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if asked != str(gpus):
            yield Problem(("hardware",), f"the {role} pod asks for nvidia.com/gpu {asked!r}, each node "
                          f"has {gpus}")


def check_leader(lws: dict[str, Any], profile: Profile) -> Iterator[Problem]:
    """SC502: no liveness probe; the leader's port, startup probe and start policy."""
    for role, template in templates(lws):
        if "livenessProbe" in _engine(template):
            yield Problem(("kubernetes",), f"the {role} has a liveness probe: any restart recreates the "
                          "whole group, and a boot outlasts it")
    if lws.get("spec", {}).get("startupPolicy") == "LeaderReady":
        yield Problem(("kubernetes", "startup_policy"), "startupPolicy LeaderReady deadlocks: the leader "
                      "becomes ready only once the workers it waits for have joined")
    leader = dict(templates(lws)).get("leader")
    if leader is None:
        yield Problem(("kubernetes",), "the LeaderWorkerSet has no leaderTemplate for rank 0")
        return
    container = _engine(leader)
    bind = api_bind(profile)
    if ipaddress.IPv4Address(bind).is_loopback:
        unset = " (engine.host unset: SGLang's default)" if profile.engine.host is None else ""
        yield Problem(("engine", "host"), f"the API binds "
                      f"{bind}{unset}: the kubelet's probes and the Service reach the pod's own address",
                      "set engine.host: 0.0.0.0 (the pod's own address is where the probes call)")
    ports = {p.get("name"): p.get("containerPort") for p in container.get("ports", []) if isinstance(p, dict)}
    if ports.get(API_PORT_NAME) != profile.engine.port:
        yield Problem(("engine", "port"), f"the leader does not expose the API port {profile.engine.port} "
                      f"as {API_PORT_NAME!r}")
    probe = container.get("startupProbe", {}).get("httpGet", {})
    if probe.get("path") != "/health" or probe.get("port") != API_PORT_NAME:
        yield Problem(("kubernetes",), "the leader has no startup probe on /health of the API port")


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
                yield Problem(option.source or ("fleet", "nodes", rank.rank), f"rank {rank.rank}'s "
                              f"{option.flag} {' '.join(option.values)} differs from rank 0's: the template is "
                              "the same for every rank")
        if len(rank.engine_options) != len(first):
            yield Problem(("fleet", "nodes", rank.rank), f"rank {rank.rank} has other engine flags than "
                          "rank 0")
    _, mount_problems = host_volumes(plan)
    yield from (Problem(origin or ("model",), text) for origin, text in mount_problems)
    fabric = profile.fleet.fabric
    pinned = fabric is not None and fabric.kind == "roce" and (
        fabric.gid_index != "probe" or any(n.gid_index not in (None, "probe") for n in profile.fleet.nodes))
    if pinned:
        yield Problem(("fleet", "fabric", "gid_index"), "a pinned RoCE GID index is per node and drifts: "
                      "the Kubernetes target probes it on each node at start",
                      "set fleet.fabric.gid_index: probe (and remove the nodes' own gid_index)")
    pattern, meaning = _node_words(profile)
    for role, template in templates(lws):
        spec = template.get("spec", {})
        if "nodeName" in spec:
            yield Problem(("kubernetes",), f"the {role} template pins nodeName {spec['nodeName']!r}")
        for env in _engine(template).get("env", []):
            if isinstance(env, dict) and env.get("name") in PROBED:
                yield Problem(("kubernetes",), f"the {role} template sets {env['name']}, which differs per "
                              "node: the entrypoint probes it")
        named = {word for text in set(_strings(template)) for word in pattern.findall(text)}
        for word in sorted(named):
            yield Problem(("kubernetes",), f"the {role} template names {meaning[word]}: the same "
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
        yield Problem(where, f"the {' and '.join(roles)} pod{'s' * (len(roles) > 1)}: {text}")


ENTRYPOINT_ROOM = 256 << 10  # far above the rendered entrypoint (its template is under 6 KB)
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")


def check_objects(lws: dict[str, Any], plan: LaunchPlan, profile: Profile) -> Iterator[Problem]:
    """SC509: what the API server refuses in the objects as built: a mount at one of the pod's own paths or
    twice at one path, a volume name that is not a DNS label, a ConfigMap over its size limit."""
    reserved = {m.target: m for rank in plan.ranks for m in rank.mounts if m.target in POD_MOUNTS}
    for target, mount in sorted(reserved.items()):
        yield Problem(mount.origin or ("container", "mounts"), f"{target} is where every pod mounts its "
                      "own volume (the config, /dev/shm or the HCAs): a bind mount there is a duplicate mountPath")
    for role, template in templates(lws):
        paths = [m.get("mountPath") for m in _engine(template).get("volumeMounts", []) if isinstance(m, dict)]
        for path in sorted({p for p in paths if paths.count(p) > 1 and p not in POD_MOUNTS}, key=str):
            yield Problem(("container", "mounts"), f"the {role} pod mounts two volumes at {path}")
        for volume in template.get("spec", {}).get("volumes", []):
            if not _DNS_LABEL.fullmatch(str(volume.get("name", ""))):
                yield Problem(("container", "mounts"), f"volume name {volume.get('name')!r} of the "
                              f"{role} pod is not a DNS label (a-z, 0-9 and '-', 63 at most, no '-' at an end)")
    # The entrypoint is a few KB: only a ConfigMap near the limit is worth rendering it.
    data = configmap_data(plan, "")
    if sum(len(key) + len(value.encode()) for key, value in data.items()) + ENTRYPOINT_ROOM > CONFIGMAP_LIMIT:
        problem = configmap_problem(plan, settings(profile), configmap_data(plan, entrypoint_text(plan, profile)))
        if problem:
            yield Problem(("fleet", "nodes"), problem)
