"""The Kubernetes target: one LeaderWorkerSet group (a pod per node), a Service for the leader's API, a
ConfigMap with each rank's env files and the start-time probe, and a kustomization, from the launch plan.

The pod templates are uniform: what differs by rank comes from the ConfigMap by LWS_WORKER_INDEX, what
differs by node (RoCE GID index, fabric address, HCAs present) is probed by the entrypoint at start.
Objects are plain dicts serialised by PyYAML, so every value is quoted by the serialiser, never by hand.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Any

from spark_compile.common.errors import InputError
from spark_compile.common.quoting import env_file
from spark_compile.spec.container_model import Kubernetes
from spark_compile.spec.hardware import HARDWARE
from spark_compile.spec.model import Profile
from spark_compile.stages.launch_plan import LaunchPlan, Mount, ProfilePath, RankPlan
from spark_compile.stages.plan import rdma_access

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"  # set by the LWS controller on every pod of the set
ROLE_LABEL = "spark-compile/role"
CONFIG_HASH = "spark-compile/config-sha256"
CONFIG_DIR = "/etc/spark-compile"
ENTRYPOINT = "entrypoint.sh"
CONTAINER = "sglang"
API_PORT_NAME = "api"
PROBE_PERIOD = 10  # seconds between two startup/readiness probes of the leader
PROBED = ("HOST_IP", "NCCL_IB_GID_INDEX", "B12X_ROCE_GID_INDEX")  # found on the node by the entrypoint
LWS_ARGS = {"--nnodes": "$(LWS_GROUP_SIZE)", "--node-rank": "$(LWS_WORKER_INDEX)"}
FILES = ("configmap.yaml", "service.yaml", "leaderworkerset.yaml")
CONFIGMAP_LIMIT = 1 << 20  # bytes: the API server refuses a larger ConfigMap
_SIZE_UNITS = {"": "", "k": "Ki", "m": "Mi", "g": "Gi", "t": "Ti", "p": "Pi"}
# docker --security-opt values with a securityContext twin; others have none (SC508).
SECURITY_OPTS: dict[str, dict[str, Any]] = {
    "seccomp=unconfined": {"seccompProfile": {"type": "Unconfined"}},
    "apparmor=unconfined": {"appArmorProfile": {"type": "Unconfined"}},
    "no-new-privileges": {"allowPrivilegeEscalation": False},
    "no-new-privileges:true": {"allowPrivilegeEscalation": False},
    "no-new-privileges=true": {"allowPrivilegeEscalation": False},
}


@dataclass(frozen=True, slots=True)
class Settings:
    """The kubernetes section with every default filled in from the rest of the profile."""

    name: str
    namespace: str
    image: str
    memory: str | None  # a Kubernetes quantity
    shm_size: str | None
    rdma_mode: str
    rdma_resource: str | None
    service_type: str
    restart_policy: str
    startup_policy: str
    node_selector: dict[str, str]
    gpus: int
    rdma: bool  # the fabric uses RDMA devices (roce, infiniband): /dev/infiniband or the plugin's resource
    startup_failures: int  # startup probe failures allowed: the launcher's health timeout / PROBE_PERIOD


def quantity(docker_size: str | None) -> str | None:
    """A docker size (112g, 32gb, 1TiB: binary units) as a Kubernetes quantity (112Gi)."""
    if docker_size is None:
        return None
    digits = docker_size.rstrip("bBiI")
    unit = digits[-1].lower() if not digits[-1].isdigit() else ""
    return (digits[:-1] if unit else digits) + _SIZE_UNITS[unit]


def numeric_user(user: str | None) -> tuple[int, int | None] | None:
    """container.user as (uid, gid) when both parts are numbers, the only form a securityContext takes."""
    if user is None:
        return None
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        return None
    return int(uid), int(gid) if gid else None


def settings(profile: Profile) -> Settings:
    """The effective settings of the target (defaults when the profile has no kubernetes section)."""
    k8s = profile.kubernetes or Kubernetes()
    box = profile.container
    return Settings(
        name=k8s.name or profile.name, namespace=k8s.namespace, image=k8s.image or profile.engine.image,
        memory=quantity(k8s.memory or box.memory), shm_size=quantity(k8s.shm_size or box.shm_size),
        rdma_mode=k8s.rdma.mode, rdma_resource=k8s.rdma.resource, service_type=k8s.service_type,
        restart_policy=k8s.restart_policy, startup_policy=k8s.startup_policy, node_selector=dict(k8s.node_selector),
        gpus=HARDWARE[profile.hardware].gpus_per_node,
        rdma=rdma_access(profile),
        startup_failures=math.ceil(profile.operations.health_timeout_seconds / PROBE_PERIOD),
    )


def kubelet_literal(value: str) -> str:
    """``value`` as a command/args item the kubelet passes through unchanged: it expands $(VAR), and $$ is $."""
    return value.replace("$", "$$")


def lws_options(rank: RankPlan) -> list[tuple[str, ...]]:
    """The rank's engine options as kubelet args: the values LWS supplies become $(LWS_*) references, every
    other word is escaped for the kubelet."""
    options: list[tuple[str, ...]] = []
    for option in rank.engine_options:
        if option.flag in LWS_ARGS:
            options.append((option.flag, LWS_ARGS[option.flag]))
        elif option.flag == "--dist-init-addr":
            port = option.values[0].rpartition(":")[2]
            options.append((option.flag, f"$(LWS_LEADER_ADDRESS):{port}"))
        else:
            options.append(tuple(kubelet_literal(word) for word in option.words))
    return options


def lws_engine_argv(rank: RankPlan) -> list[str]:
    """The engine argv every pod gets (the same for every rank when the templates are uniform)."""
    return [word for option in lws_options(rank) for word in option]


def config_env(rank: RankPlan) -> dict[str, tuple[tuple[str, str], ...]]:
    """The rank's env files as the ConfigMap holds them: every value except those probed on the node."""
    return {f"rank-{rank.rank}.{env_file.name}": tuple((n, v) for n, v in env_file.values if n not in PROBED)
            for env_file in rank.env_files}


@dataclass(frozen=True, slots=True)
class Volume:
    """A hostPath volume of the uniform template: name, node path, container path, and its hostPath type."""

    name: str
    source: str
    target: str
    read_only: bool
    kind: str  # Directory: every rank uses it; DirectoryOrCreate: writable, or used by some ranks only


POD_MOUNTS = (CONFIG_DIR, "/dev/shm", "/dev/infiniband")  # the pod's own volumes: no bind mount may use them


def _volume_name(target: str, taken: set[str]) -> str:
    # A DNS label: cut, then stripped, so a cut never leaves a trailing '-' (the API server refuses one).
    base = re.sub(r"[^a-z0-9]+", "-", target.lower()).strip("-")[:50].rstrip("-") or "root"
    name, n = base, 1
    while name in taken or name in ("config", "dshm", "infiniband"):
        name, n = f"{base}-{n}", n + 1
    taken.add(name)
    return name


def host_volumes(plan: LaunchPlan) -> tuple[list[Volume], list[tuple[ProfilePath, str]]]:
    """Every rank's bind mounts as one list of hostPath volumes, and why any cannot be uniform (with the
    profile path behind the mount)."""
    by_target: dict[str, list[tuple[int, Mount]]] = {}
    for rank in plan.ranks:
        for mount in rank.mounts:
            by_target.setdefault(mount.target, []).append((rank.rank, mount))
    volumes: list[Volume] = []
    problems: list[tuple[ProfilePath, str]] = []
    taken: set[str] = set()
    for target, uses in by_target.items():
        sources = {(m.source, m.read_only) for _, m in uses}
        if len(sources) > 1:
            shown = "; ".join(f"rank {r}: {m.source}" for r, m in uses)
            odd = next(m for _, m in uses if (m.source, m.read_only) != (uses[0][1].source, uses[0][1].read_only))
            problems.append((odd.origin, f"{target} is mounted from a different node path per rank ({shown})"))
        mount = uses[0][1]
        kind = "Directory" if mount.read_only and len(uses) == len(plan.ranks) else "DirectoryOrCreate"
        volumes.append(Volume(_volume_name(target, taken), mount.source, target, mount.read_only, kind))
    return volumes, problems


def bound_ranks(plan: LaunchPlan, profile: Profile) -> dict[int, RankPlan]:
    """Ranks whose data lives on one node (a node-local Engram copy) of a fleet with a fabric: the entrypoint
    checks they run at that node's fabric address."""
    if profile.fleet.fabric is None:
        return {}
    return {r.rank: r for r in plan.ranks if r.engram is not None and r.engram.source == "local"}


def _container(plan: LaunchPlan, profile: Profile, conf: Settings, volumes: list[Volume]) -> dict[str, Any]:
    mounts: list[dict[str, Any]] = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                                    {"name": "dshm", "mountPath": "/dev/shm"}]
    mounts += [{"name": v.name, "mountPath": v.target, **({"readOnly": True} if v.read_only else {})}
               for v in volumes]
    if conf.rdma and conf.rdma_mode == "hostpath":
        mounts.append({"name": "infiniband", "mountPath": "/dev/infiniband"})
    limits: dict[str, str] = {"nvidia.com/gpu": str(conf.gpus)}
    if conf.memory is not None:
        limits["memory"] = conf.memory
    if conf.rdma and conf.rdma_resource is not None:
        limits[conf.rdma_resource] = "1"
    return _engine_container(plan, profile, conf, mounts, limits)


def _security(rank0: RankPlan, profile: Profile, conf: Settings) -> dict[str, Any]:
    """The securityContext: privileged, the plan's capabilities (IPC_LOCK with RDMA access), user, options."""
    box = profile.container
    security: dict[str, Any] = {}
    # A hostPath /dev/infiniband is usable only with the device cgroup open.
    if box.privileged or (conf.rdma and conf.rdma_mode == "hostpath"):
        security["privileged"] = True
    capabilities = [o.values[0] for o in rank0.docker_options if o.flag == "--cap-add"]
    if capabilities:
        security["capabilities"] = {"add": capabilities}
    user = numeric_user(box.user)
    if user is not None:
        security["runAsUser"] = user[0]
        if user[1] is not None:
            security["runAsGroup"] = user[1]
    for option in box.security_opt:
        security.update(SECURITY_OPTS.get(option, {}))
    return security


def _engine_container(plan: LaunchPlan, profile: Profile, conf: Settings, mounts: list[dict[str, Any]],
                      limits: dict[str, str]) -> dict[str, Any]:
    rank0 = plan.ranks[0]
    security = _security(rank0, profile, conf)
    container: dict[str, Any] = {
        "name": CONTAINER, "image": conf.image, "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", f"{CONFIG_DIR}/{ENTRYPOINT}"],
        "args": [*(kubelet_literal(a) for a in rank0.launcher), *lws_engine_argv(rank0)],
    }
    env = [{"name": name, "valueFrom": {"secretKeyRef": {"name": f"{conf.name}-secrets", "key": name}}}
           for name in profile.secrets.env]
    if profile.fleet.fabric is None:  # one node, no fabric to probe: HOST_IP is the node's address
        env.append({"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
    if env:
        container["env"] = env
    container.update(resources={"limits": limits, "requests": dict(limits)}, securityContext=security,
                     volumeMounts=mounts)
    return container


def _pod_volumes(conf: Settings, volumes: list[Volume]) -> list[dict[str, Any]]:
    shm: dict[str, Any] = {"medium": "Memory"}
    if conf.shm_size is not None:
        shm["sizeLimit"] = conf.shm_size
    items: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": f"{conf.name}-config", "defaultMode": 0o555}},
        {"name": "dshm", "emptyDir": shm},
    ]
    items += [{"name": v.name, "hostPath": {"path": v.source, "type": v.kind}} for v in volumes]
    if conf.rdma and conf.rdma_mode == "hostpath":
        items.append({"name": "infiniband", "hostPath": {"path": "/dev/infiniband", "type": "Directory"}})
    return items


def pod_template(plan: LaunchPlan, profile: Profile, conf: Settings, role: str, config_sha: str) -> dict[str, Any]:
    """The leader's or the workers' PodTemplateSpec; they differ only in the leader's port and probes."""
    volumes, _ = host_volumes(plan)
    container = _container(plan, profile, conf, volumes)
    if role == "leader":
        health = {"httpGet": {"path": "/health", "port": API_PORT_NAME}, "periodSeconds": PROBE_PERIOD,
                  "timeoutSeconds": 5}
        container["ports"] = [{"name": API_PORT_NAME, "containerPort": profile.engine.port, "protocol": "TCP"}]
        # No liveness probe: any restart recreates the whole group (a boot takes minutes).
        container["startupProbe"] = {**health, "failureThreshold": conf.startup_failures}
        container["readinessProbe"] = {**health, "failureThreshold": 3}
    spec: dict[str, Any] = {
        "hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet",
        "hostIPC": profile.container.ipc == "host", "enableServiceLinks": False,
        "terminationGracePeriodSeconds": profile.container.stop_timeout,
    }
    if conf.node_selector:
        spec["nodeSelector"] = dict(sorted(conf.node_selector.items()))
    spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {LWS_NAME_LABEL: conf.name}}, "topologyKey": "kubernetes.io/hostname"},
    ]}}
    spec.update(containers=[container], volumes=_pod_volumes(conf, volumes))
    labels = {"app.kubernetes.io/name": "sglang", "app.kubernetes.io/instance": conf.name, ROLE_LABEL: role}
    return {"metadata": {"labels": labels, "annotations": {CONFIG_HASH: config_sha}}, "spec": spec}


def _meta(conf: Settings, name: str) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "sglang", "app.kubernetes.io/instance": conf.name,
              "app.kubernetes.io/managed-by": "spark-compile"}
    return {"name": name, "namespace": conf.namespace, "labels": labels}


def leaderworkerset(plan: LaunchPlan, profile: Profile, conf: Settings, config_sha: str) -> dict[str, Any]:
    """The LeaderWorkerSet: one group of len(nodes) pods; the leader is rank 0."""
    return {
        "apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": _meta(conf, conf.name),
        "spec": {
            "replicas": 1, "startupPolicy": conf.startup_policy,
            # One group on a fleet without spare nodes: an update takes it down, then brings it back.
            "rolloutStrategy": {"type": "RollingUpdate",
                                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}},
            "leaderWorkerTemplate": {
                "size": len(plan.ranks), "restartPolicy": conf.restart_policy,
                "leaderTemplate": pod_template(plan, profile, conf, "leader", config_sha),
                "workerTemplate": pod_template(plan, profile, conf, "worker", config_sha),
            },
        },
    }


def service(profile: Profile, conf: Settings) -> dict[str, Any]:
    """The Service in front of the leader's API (LWS makes its own headless Service named after the set)."""
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": _meta(conf, f"{conf.name}-api"),
        "spec": {"type": conf.service_type, "selector": {LWS_NAME_LABEL: conf.name, ROLE_LABEL: "leader"},
                 "ports": [{"name": API_PORT_NAME, "port": profile.engine.port, "targetPort": API_PORT_NAME,
                            "protocol": "TCP"}]},
    }


def configmap_data(plan: LaunchPlan, entrypoint: str) -> dict[str, str]:
    """The ConfigMap's data: the entrypoint and every rank's env files."""
    data = {ENTRYPOINT: entrypoint}
    for rank in plan.ranks:
        data.update((key, env_file(pairs)) for key, pairs in config_env(rank).items())
    return data


def configmap_problem(plan: LaunchPlan, conf: Settings, data: dict[str, str]) -> str | None:
    """Why the API server would refuse the ConfigMap (over its size limit), or None; the check and the
    compile both ask this."""
    size = sum(len(key) + len(value.encode()) for key, value in data.items())
    if size <= CONFIGMAP_LIMIT:
        return None
    return (f"the ConfigMap {conf.name}-config would take {size} bytes, over the {CONFIGMAP_LIMIT} Kubernetes "
            f"allows: {len(plan.ranks)} ranks' env files do not fit one ConfigMap")


def configmap(plan: LaunchPlan, conf: Settings, entrypoint: str) -> dict[str, Any]:
    """The ConfigMap: the entrypoint and every rank's env files, keys sorted."""
    data = configmap_data(plan, entrypoint)
    problem = configmap_problem(plan, conf, data)
    if problem:
        raise InputError(problem)
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(conf, f"{conf.name}-config"),
            "data": dict(sorted(data.items()))}


def config_digest(config: dict[str, Any]) -> str:
    """sha256 of the ConfigMap's data: in the pod templates, so a changed env file rolls the group."""
    text = "".join(f"{key}\0{value}\0" for key, value in sorted(config["data"].items()))
    return hashlib.sha256(text.encode()).hexdigest()


def kustomization() -> dict[str, Any]:
    """kustomization.yaml: `kubectl apply -k` applies the folder."""
    return {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": list(FILES)}


def subnet_numbers(subnet: str) -> tuple[int, int]:
    """The fabric subnet as (network, mask) integers for the entrypoint's shell arithmetic."""
    net = ipaddress.IPv4Network(subnet)
    return int(net.network_address), int(net.netmask)


def manifests(plan: LaunchPlan, profile: Profile, entrypoint: str) -> dict[str, dict[str, Any]]:
    """Every object by file name under k8s/ (the kustomization included)."""
    conf = settings(profile)
    config = configmap(plan, conf, entrypoint)
    return {
        "configmap.yaml": config, "service.yaml": service(profile, conf),
        "leaderworkerset.yaml": leaderworkerset(plan, profile, conf, config_digest(config)),
        "kustomization.yaml": kustomization(),
    }
