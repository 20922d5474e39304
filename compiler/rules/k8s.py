"""SC5xx: the Kubernetes target (LeaderWorkerSet), checked on the manifest the plan produces.

Runs only for profiles that enable the target. The manifest checks live beside the builder (k8s_check) and
read the Context's manifest, which the tests replace with mutated ones; these rules place the findings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from spark_compile.rules.registry import Context, Hit, rule
from spark_compile.targets.k8s import SECURITY_OPTS, bound_ranks, numeric_user
from spark_compile.targets.k8s_check import (
    Problem,
    check_leader,
    check_memory,
    check_objects,
    check_size,
    check_uniform,
)

_DOC_FACTS = "(LWS v1 API: kubernetes-sigs/lws api/leaderworkerset/v1; SGLang's Kubernetes deployment notes.)"


def _hits(problems: Iterable[Problem], hint: str) -> Iterator[Hit]:
    """The problems a check finds on the profile's manifest, with its own hint or the rule's."""
    return (Hit(problem.path, problem.message, problem.hint or hint) for problem in problems)


@rule("SC501", "error", "LeaderWorkerSet size is the node count; tp = size x GPUs per node",
      "One group holds one pod per node: size = len(fleet.nodes), the leader is rank 0, the workers come from "
      "the workerTemplate. Each pod asks for every GPU of its node (nvidia.com/gpu = the hardware's GPUs per "
      f"node, 1 on a GB10), and tp covers them all: tp = size x GPUs per node. {_DOC_FACTS}",
      "engine: {parallel: {tp: 8}}   # 4 GB10 pods", "engine: {parallel: {tp: 4}}")
def group_shape(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    tp = len(ctx.profile.fleet.nodes) * ctx.hardware.gpus_per_node
    yield from _hits(check_size(ctx.manifest, ctx.profile),
                     f"set engine.parallel.tp: {tp} (nodes x GPUs per node)")


@rule("SC502", "error", "the leader exposes the API with a startup probe; no liveness probe; LeaderCreated",
      "The Service reaches the leader's API port; a startup probe on /health gives the boot "
      "operations.health_timeout_seconds. A liveness probe would restart a busy engine, and any restart "
      "recreates the whole group. startupPolicy LeaderReady deadlocks: the leader's /health needs the workers, "
      "which LeaderReady starts only once the leader is ready.",
      "kubernetes: {startup_policy: LeaderReady}", "kubernetes: {startup_policy: LeaderCreated}")
def leader_serves(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    yield from _hits(check_leader(ctx.manifest, ctx.profile), "keep startup_policy LeaderCreated")


@rule("SC503", "error", "nothing node-specific in the pod templates",
      "LWS runs the same template on every node. Values that differ by node (the RoCE GID index, the fabric "
      "address) are probed by the entrypoint at start, which also checks the HCAs are there; values that differ "
      "by rank come from the ConfigMap. A pinned GID index, a mount whose node path differs by rank, or a "
      "node's name or address in a template cannot be expressed; GID indexes were seen moving from 3 to 4 "
      "within 30 minutes.",
      "fleet: {fabric: {gid_index: 3}}", "fleet: {fabric: {gid_index: probe}}")
def uniform_templates(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    yield from _hits(check_uniform(ctx.manifest, ctx.plan, ctx.profile),
                     "let the entrypoint probe per-node values; keep paths the same on every node")


@rule("SC509", "error", "objects the Kubernetes API server accepts",
      "The check builds the objects the compile writes and refuses what the API server would: a bind mount at "
      "one of the pod's own paths (/etc/spark-compile, /dev/shm, /dev/infiniband) or two at one path (a "
      "duplicate mountPath), a volume name that is not a DNS label, and a ConfigMap over 1 MiB (every rank's "
      "env files live in one; about a thousand ranks fill it).",
      "container: {mounts: [{source: /srv/shm, target: /dev/shm}]}",
      "container: {mounts: [{source: /srv/data, target: /mnt/data}]}")
def objects_accepted(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    yield from _hits(check_objects(ctx.manifest, ctx.plan, ctx.profile),
                     "mount elsewhere, or split the fleet into groups of fewer ranks")


@rule("SC504", "error", "shm and memory limits within the node's memory",
      "/dev/shm is an emptyDir in memory whose pages are charged to the pod, so its sizeLimit must fit inside "
      "the pod's memory limit, and that limit must stay below the node's memory (on a GB10, also the GPU's).",
      "kubernetes: {memory: 128g}   # GB10", "kubernetes: {memory: 112g, shm_size: 32g}")
def memory_within_node(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    yield from _hits(check_memory(ctx.manifest, ctx.profile),
                     "set container.memory and container.shm_size (or kubernetes.memory / shm_size)")


@rule("SC505", "warning", "image pinned by digest for Kubernetes",
      "Each node pulls the image itself; a tag can move between two pulls, and ranks of one group would run "
      "different engines. Pin name@sha256:<digest> in kubernetes.image.",
      "kubernetes: {image: repo/sglang:production-1.7.1}", "kubernetes: {image: repo/sglang@sha256:0f3c...}")
def image_digest(ctx: Context) -> Iterator[Hit]:
    target = ctx.profile.kubernetes
    if target is not None and "@sha256:" not in ctx.k8s_settings.image:
        yield Hit(("kubernetes", "image") if target.image else ("engine", "image"),
                  f"image {ctx.k8s_settings.image} is pinned by tag only: a tag can move between the pulls of two "
                  "nodes",
                  "docker buildx imagetools inspect <image> prints the digest")


@rule("SC506", "warning", "ranks tied to one node's data",
      "A rank that reads a node-local Engram copy can run only on that node, but LWS places ranks freely; the "
      "entrypoint stops a rank that lands on another node and the group is recreated.",
      "model: {engram: {local_dir: /srv/engram-local/dsv41}}   # copies per node",
      "copy every rank's rows to every node, or serve them from the shared checkpoint")
def ranks_tied_to_nodes(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    bound = bound_ranks(ctx.plan, ctx.profile)
    if bound:
        ranks = ", ".join(f"{r} ({p.node})" for r, p in bound.items())
        yield Hit(("model", "engram", "local_dir"), f"ranks {ranks} read Engram rows copied to one node; LWS may "
                  "place a rank on any node, and the entrypoint stops a rank that lands elsewhere",
                  "see the README under k8s/")


@rule("SC507", "error", "secrets the Kubernetes target cannot carry",
      "The API key reaches SGLang through a config file written at start on the node; the Kubernetes target has "
      "no equivalent yet. Variables in secrets.env come from a Secret named <name>-secrets.",
      "secrets: {api_key: {file: /etc/sglang/key}}", "secrets: {env: {HF_TOKEN: {env: HF_TOKEN}}}")
def unsupported_secrets(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is not None and ctx.profile.secrets.api_key is not None:
        yield Hit(("secrets", "api_key"), "secrets.api_key is not supported by the Kubernetes target yet",
                  "remove kubernetes, or secrets.api_key")


@rule("SC508", "warning", "docker options a pod cannot carry",
      "The pod's securityContext takes numeric user and group ids, the seccomp and AppArmor profiles "
      "(Unconfined) and allowPrivilegeEscalation; a user by name, another --security-opt, or --cpuset-cpus has no "
      "twin there and the Kubernetes target leaves it out.",
      "container: {user: sglang, cpuset_cpus: 0-9}", "container: {user: '1000:1000'}")
def docker_only_options(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.kubernetes is None:
        return

    box = ctx.profile.container
    if box.user is not None and numeric_user(box.user) is None:
        yield Hit(("container", "user"), f"container.user {box.user!r} names a user or group; a securityContext "
                  "takes numeric ids only (runAsUser, runAsGroup)",
                  "write the user's numeric ids (e.g. '1000:1000'), or remove container.user for the Kubernetes "
                  "target")
    if box.cpuset_cpus is not None:
        yield Hit(("container", "cpuset_cpus"), "container.cpuset_cpus has no pod equivalent (the kubelet's CPU "
                  "manager assigns CPUs)", "remove container.cpuset_cpus: the Kubernetes target leaves it out")
    for index, option in enumerate(box.security_opt):
        if option not in SECURITY_OPTS:
            yield Hit(("container", "security_opt", index), f"security_opt {option!r} has no securityContext twin "
                      f"(known: {', '.join(SECURITY_OPTS)})", "remove the entry: the Kubernetes target leaves it out")
