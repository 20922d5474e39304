"""container.* and kubernetes.*: how every rank's container is run, by docker or as a LeaderWorkerSet."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from spark_compile.spec.checks import (
    check_rdma_resource,
)
from spark_compile.spec.fields import (
    AbsPath,
    CpuSet,
    DeviceSpec,
    DockerSize,
    DockerUser,
    GpuSpec,
    HomePath,
    ImageRef,
    Name,
    Seconds,
    SecurityOpt,
    UlimitName,
    UlimitValue,
    Word,
)
from spark_compile.spec.section import Section

Restart = Literal["no", "on-failure", "always", "unless-stopped"]


class ContainerMount(Section):
    """A host directory or file bind-mounted into every rank's container."""

    source: AbsPath = Field(description="Absolute path on the node.")
    target: AbsPath = Field(description="Absolute path inside the container.")
    read_only: bool = Field(True, description="Mount read-only (the default); false to let the engine write.")


class Container(Section):
    """docker run options of every rank's container."""

    memory: DockerSize | None = Field(None, description="--memory limit.")
    memory_swap: DockerSize | None = Field(None, description="--memory-swap limit (equal to memory: no swap).")
    shm_size: DockerSize | None = Field(None, description="--shm-size.")
    ulimits: dict[UlimitName, UlimitValue] = Field({}, description="--ulimit name=soft[:hard].")
    oom_score_adj: Annotated[int, Field(ge=-1000, le=1000)] | None = Field(None, description="--oom-score-adj.")
    cap_add: list[Annotated[str, Field(pattern=r"^[A-Z_]{1,64}$")]] = Field([], description="--cap-add capabilities.")
    devices: list[DeviceSpec] = Field([], description="--device host[:container] paths.")
    gpus: GpuSpec = Field("all", description="--gpus.")
    rdma_access: bool | None = Field(
        None,
        description="Give the container the RDMA devices: --device /dev/infiniband, --cap-add IPC_LOCK, --ulimit "
        "memlock=-1. Unset: yes on roce and infiniband fabrics, no on tcp and on one node without a fabric; "
        "entries of devices, cap_add and ulimits add to it or override its memlock.",
    )
    privileged: bool = Field(False, description="--privileged (every device and capability; prefer rdma_access).")
    user: DockerUser | None = Field(None, description="--user name|uid[:group|gid] of the engine's process.")
    security_opt: list[SecurityOpt] = Field([], description="--security-opt values, e.g. seccomp=unconfined.")
    cpuset_cpus: CpuSet | None = Field(None, description="--cpuset-cpus, e.g. 0-19.")
    remove: bool = Field(False, description="--rm: docker removes the container when it exits (the unit also does).")
    detach: bool = Field(
        False,
        description="-d: the container runs detached and docker-run.sh waits for it (docker wait), so the unit "
        "still supervises it; its log stays with docker's log driver (`docker logs`), not the journal.",
    )
    network: Word = Field("host", description="--network.")
    ipc: Word | None = Field("host", description="--ipc.")
    cache_dir: HomePath = Field(
        ".cache",
        description="Writable cache directory on the node, mounted at /root/.cache (HF_HOME's default parent, so "
        "a hub id's downloads land in <cache_dir>/huggingface); relative to the node's home. A mount at "
        "/root/.cache/huggingface (an existing HF cache) nests inside it.",
    )
    restart: Restart = Field(
        "no",
        description="The unit's restart policy (systemd supervises the container; docker's own --restart stays no). "
        "Multi-node fleets recover fleet-wide through the watchdog, so `no`.",
    )
    stop_timeout: Seconds = Field(60, description="Seconds the unit gives the container to stop before it is killed.")
    mounts: list[ContainerMount] = Field(
        [],
        description="Further bind mounts (a model cache, a config directory, a patched source tree); read-only "
        "unless read_only: false. A child profile patches them by target (`- !delete /target`, `- !replace {...}`).",
    )




K8sName = Annotated[str, Field(pattern=r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$")]
K8sLabel = Annotated[str, Field(pattern=r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}"
                                        r"[A-Za-z0-9])?$")]
K8sLabelValue = Annotated[str, Field(pattern=r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")]


class KubernetesRdma(Section):
    """How pods reach /dev/infiniband."""

    mode: Literal["hostpath", "device-plugin"] = Field(
        "hostpath",
        description="hostpath: mount /dev/infiniband from the node (needs a privileged container); device-plugin: "
        "request one unit of `resource` from an RDMA shared-device plugin.",
    )
    resource: K8sLabel | None = Field(
        None,
        description="device-plugin only: the extended resource name, e.g. rdma/rdma_shared_device_a.",
    )

    _resource_for_plugin = model_validator(mode="after")(check_rdma_resource)


class Kubernetes(Section):
    """The Kubernetes target: a LeaderWorkerSet (one group, one pod per node) under generated/<profile>/k8s/."""

    name: K8sName | None = Field(
        None,
        description="Name of the LeaderWorkerSet, its Service and ConfigMap (DNS-1035, at most 40 characters: pod "
        "and StatefulSet names are built from it); defaults to the profile name.",
    )
    namespace: Name = Field("default", description="Namespace of every object.")
    image: ImageRef | None = Field(
        None,
        description="Image of the pods, pinned by digest (name@sha256:...); defaults to engine.image.",
    )
    rdma: KubernetesRdma = Field(default_factory=KubernetesRdma, description="RDMA device access.")
    memory: DockerSize | None = Field(
        None,
        description="Memory limit (and request) of each pod; defaults to container.memory.",
    )
    shm_size: DockerSize | None = Field(
        None,
        description="Size limit of /dev/shm (an emptyDir in memory); defaults to container.shm_size.",
    )
    service_type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP",
        description="Type of the Service in front of the leader's API.",
    )
    restart_policy: Literal["RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"] = Field(
        "RecreateGroupOnPodRestart",
        description="LWS group restart policy: a rank restarted alone re-joins a dying rendezvous, so the group is "
        "recreated.",
    )
    startup_policy: Literal["LeaderCreated", "LeaderReady"] = Field(
        "LeaderCreated",
        description="LWS startup policy; LeaderReady deadlocks (the leader's /health needs the workers).",
    )
    node_selector: dict[K8sLabel, K8sLabelValue] = Field(
        {},
        description="Labels every node of the fleet carries (the same on all nodes: nothing per node).",
    )
