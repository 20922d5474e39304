"""SC42x: what any deployment must get right — fabric kinds, extra mounts, lists without repeats."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from spark_compile.common.findings import dotted
from spark_compile.rules.capacity import PINS
from spark_compile.rules.registry import Context, Hit, Path, rule
from spark_compile.stages.launch_plan import Mount
from spark_compile.stages.plan import RDMA_DEVICE, rdma_access

RDMA_KINDS = ("roce", "infiniband")
# Lists that are command lines, where a repeated word is meaningful, and lists another rule owns (SC211).
ARGV_LISTS = {("engine", "launcher"), ("engine", "args"), ("model", "aliases")}
# Per-rank memory pins (SC446): one value per rank, equal on alike ranks.
ARGV_LISTS |= {("model", name) for name in PINS}


@rule("SC418", "error", "the fabric kind and its RDMA devices agree",
      "RoCE and InfiniBand carry NCCL over RDMA devices (NCCL_IB_HCA), so they need at least one; a tcp fabric "
      "uses NCCL's socket transport and has none.",
      "fleet: {fabric: {kind: roce, interface: enp1s0f0np0, subnet: 192.0.2.0/24}}",
      "fleet: {fabric: {kind: roce, interface: enp1s0f0np0, subnet: 192.0.2.0/24, rdma_devices: [rocep1s0f0]}}")
def fabric_devices(ctx: Context) -> Iterator[Hit]:
    fabric, nodes = ctx.profile.fleet.fabric, len(ctx.profile.fleet.nodes)
    if fabric is None:
        if nodes > 1:
            yield Hit(("fleet",), f"a fleet of {nodes} nodes needs fleet.fabric",
                      "add fabric: {kind: tcp, interface: <nic>, subnet: <cidr>} under fleet (or roce/infiniband "
                      "with rdma_devices)", at_key=True)
        return
    if fabric.kind in RDMA_KINDS and not fabric.rdma_devices:
        yield Hit(("fleet", "fabric"), f"the {fabric.kind} fabric needs rdma_devices",
                  "add rdma_devices: [<device>] under fleet.fabric (as `ls /sys/class/infiniband` prints them), "
                  "or set kind: tcp", at_key=True)
    if fabric.kind == "tcp" and fabric.rdma_devices:
        yield Hit(("fleet", "fabric", "rdma_devices"), "a tcp fabric uses no RDMA devices",
                  "remove rdma_devices, or set fleet.fabric.kind: roce (or infiniband)", at_key=True)


@rule("SC419", "error", "a GID index only on RoCE",
      "The GID index selects a RoCE v2 address on the HCA; InfiniBand and tcp fabrics have none to select.",
      "fleet: {fabric: {kind: tcp, gid_index: 3}}", "fleet: {fabric: {kind: tcp}}")
def gid_only_on_roce(ctx: Context) -> Iterator[Hit]:
    fabric = ctx.profile.fleet.fabric
    kind = fabric.kind if fabric else "absent"
    if kind == "roce":
        return
    if ctx.present(("fleet", "fabric", "gid_index")):
        yield Hit(("fleet", "fabric", "gid_index"), f"gid_index is set but the fabric is {kind}",
                  "remove gid_index (it applies to kind: roce only)", at_key=True)
    for index, node in enumerate(ctx.profile.fleet.nodes):
        if node.gid_index is not None:
            yield Hit(("fleet", "nodes", index, "gid_index"),
                      f"{node.name} sets gid_index but the fabric is {kind}", "remove the node's gid_index",
                      at_key=True)


@rule("SC420", "error", "the overlay's RoCE runtime needs a RoCE fabric",
      "SPARK_ROCE_AR/AG and the b12x MXFP8 route drive the b12x RoCE runtime over the fabric's HCAs "
      "(B12X_ROCE_HCA); on an InfiniBand or tcp fabric it has no RoCE device to open.",
      "fleet: {fabric: {kind: tcp}}\noverlay: {roce_ar: true}", "fleet: {fabric: {kind: tcp}}\noverlay: {}")
def roce_runtime_fabric(ctx: Context) -> Iterator[Hit]:
    fabric, overlay = ctx.profile.fleet.fabric, ctx.profile.overlay
    kind = fabric.kind if fabric else "absent"
    if kind == "roce":
        return
    for key, on in (("roce_ar", overlay.roce_ar), ("roce_ag", overlay.roce_ag),
                    ("mxfp8_backend", overlay.mxfp8_backend == "b12x")):
        if on:
            yield Hit(("overlay", key), f"overlay.{key} needs the b12x RoCE runtime, but the fabric is {kind}",
                      f"remove overlay.{key}, or run on a roce fabric", at_key=True)


def _inside(path: str, parent: str) -> bool:
    return parent == "/" or path.startswith(parent.rstrip("/") + "/")


def _clash(planned: Mount, target: str) -> str | None:
    """Why an extra mount at ``target`` breaks the plan's mount, or None: docker nests a mount inside a writable
    one (an HF cache under /root/.cache) but cannot make its mount point inside a read-only one."""
    if target == planned.target:
        return f"is the plan's mount of {planned.target}"
    if _inside(planned.target, target):
        return f"would hide the plan's mount of {planned.target}"
    if _inside(target, planned.target) and planned.read_only:
        return f"lies inside the plan's read-only mount of {planned.target}"
    return None


@rule("SC421", "error", "extra mounts are distinct and leave the plan's mounts alone",
      "Each container.mounts target must be unique and may not be or hide a mount the plan makes (the model repo, "
      "the cache, the Engram copy, the secrets), nor sit inside a read-only one, where docker cannot make its "
      "mount point. Inside the writable cache (/root/.cache/huggingface, an existing HF cache) docker nests it. "
      "(':' and ',', which docker's -v syntax splits on, are refused by the path grammar, SC111.)",
      "container: {mounts: [{source: /srv/cache, target: /root/.cache}]}",
      "container: {mounts: [{source: /srv/hf-cache, target: /root/.cache/huggingface}]}")
def extra_mounts(ctx: Context) -> Iterator[Hit]:
    extra = ctx.profile.container.mounts
    planned = {m.target: m for rank in ctx.plan.ranks for m in rank.mounts if m.origin[:2] != ("container", "mounts")}
    seen: dict[str, int] = {}
    for index, mount in enumerate(extra):
        at: Path = ("container", "mounts", index)
        if mount.target in seen:
            yield Hit((*at, "target"), f"target {mount.target} is already mounted by "
                      f"container.mounts[{seen[mount.target]}]", "give each mount its own target")
        seen.setdefault(mount.target, index)
        why = next((reason for m in planned.values() if (reason := _clash(m, mount.target))), None)
        if why is not None:
            yield Hit((*at, "target"), f"target {mount.target} {why}", "mount it somewhere else, e.g. under "
                      "/mnt (or inside the writable /root/.cache)")


@rule("SC422", "error", "no list repeats an entry",
      "A repeated entry in a list (an RDMA device, a capability, a device, a needle size) is a "
      "copy-and-paste slip: it means nothing twice, and some consumers refuse it.",
      "container: {cap_add: [IPC_LOCK, IPC_LOCK]}", "container: {cap_add: [IPC_LOCK]}")
def unique_entries(ctx: Context) -> Iterator[Hit]:
    for path, items, _ in ctx.written:
        if not isinstance(items, list) or path[:2] in ARGV_LISTS:
            continue
        seen: dict[object, int] = {}
        for index, item in enumerate(items):
            if isinstance(item, BaseModel | dict | list):
                continue
            if item in seen:
                yield Hit((*path, index), f"{dotted((*path, index))} {item!r} repeats "
                          f"{dotted((*path, seen[item]))}", "remove the repeated entry")
            seen.setdefault(item, index)


# The limits production runs with (the releases' 1.2 onwards), a starting point for a profile that has none.
_PRODUCTION_LIMITS = {"chunked_prefill_size": 2048, "max_running_requests": 16}


@rule("SC423", "warning", "Engram's id batch needs the limits it derives from",
      "SPARK_ENGRAM_MAX_IDS is derived from chunked_prefill_size and max_running_requests; with either left to "
      "SGLang the plan cannot derive it and the hook's default (262144) applies.",
      "model: {engram: {...}}\nengine: {limits: {}}",
      "engine: {limits: {chunked_prefill_size: 2048, max_running_requests: 16}}")
def engram_limits(ctx: Context) -> Iterator[Hit]:
    limits = ctx.profile.engine.limits
    if ctx.profile.model.engram is None or ctx.profile.overlay.engram_max_ids is not None:
        return
    missing = [name for name in ("chunked_prefill_size", "max_running_requests") if getattr(limits, name) is None]
    if missing:
        yield Hit(("engine", "limits"), f"Engram's id batch cannot be derived: {' and '.join(missing)} "
                  "unset", " and ".join(f"set engine.limits.{name}: {_PRODUCTION_LIMITS[name]}" for name in missing)
                  + " (as production runs), or pin overlay.engram_max_ids", at_key=True)


def _reaches_devices(ctx: Context) -> bool:
    box = ctx.profile.container
    return box.privileged or rdma_access(ctx.profile) or any(
        _inside(device.split(":")[0], RDMA_DEVICE) or device.split(":")[0] == RDMA_DEVICE for device in box.devices)


@rule("SC426", "error", "an RDMA fabric's container reaches the RDMA devices",
      "On roce and infiniband fabrics NCCL opens the HCAs through /dev/infiniband; a container without it (no "
      "rdma_access, no such device, not privileged) fails at the first collective, minutes into a boot. The plan "
      "gives the devices, IPC_LOCK and unlimited memlock by construction unless container.rdma_access is false.",
      "fleet: {fabric: {kind: roce, ...}}\ncontainer: {rdma_access: false}",
      "fleet: {fabric: {kind: roce, ...}}\ncontainer: {}")
def rdma_devices_reachable(ctx: Context) -> Iterator[Hit]:
    fabric = ctx.profile.fleet.fabric
    if fabric is None or fabric.kind not in RDMA_KINDS or _reaches_devices(ctx):
        return
    yield Hit(("container", "rdma_access"), f"the {fabric.kind} fabric's HCAs are unreachable: the container "
              f"gets no {RDMA_DEVICE} (rdma_access is false, no such device, not privileged)",
              "remove rdma_access: false (or add /dev/infiniband to container.devices)", at_key=True)


@rule("SC428", "warning", "a checkpoint holder only with Engram",
      "holds_checkpoint and holder_repo mean something only to Engram, whose holder reads its rows from the "
      "shards. Without model.engram every node reads its own copy at model.repo, and both are ignored.",
      "model: {repo: /srv/m}   # no engram\nfleet: {nodes: [{name: a, holds_checkpoint: true, ...}]}",
      "model: {repo: /srv/m}\nfleet: {nodes: [{name: a, ...}]}")
def holder_without_engram(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.model.engram is not None:
        return
    for index, node in enumerate(ctx.profile.fleet.nodes):
        if node.holds_checkpoint:
            yield Hit(("fleet", "nodes", index, "holds_checkpoint"), f"{node.name} holds_checkpoint without "
                      "model.engram: every node reads its own copy at model.repo", "remove holds_checkpoint",
                      at_key=True)
    if ctx.profile.model.holder_repo is not None:
        yield Hit(("model", "holder_repo"), "holder_repo without model.engram: every node mounts model.repo",
                  "remove holder_repo", at_key=True)


@rule("SC429", "error", "Engram reads its rows from a checkpoint directory",
      "The Engram holder reads its rows from the checkpoint's shards, and the other nodes' copies are made from "
      "them (fleet/engram.py): both need the checkpoint as a directory (model.repo). A hub id is resolved by "
      "SGLang inside the container, where neither can reach it.",
      "model: {hub_id: deepseek-ai/DeepSeek-V4.1-Flash, engram: {...}}",
      "model: {repo: /mnt/dsv41, snapshot: <hash>, engram: {...}}")
def engram_needs_a_directory(ctx: Context) -> Iterator[Hit]:
    model = ctx.profile.model
    if model.engram is not None and model.hub_id is not None:
        yield Hit(("model", "hub_id"), "model.engram needs the checkpoint as a directory, but the model "
                  "is the hub id " + model.hub_id, "download it and set model.repo (and snapshot) instead of hub_id",
                  at_key=True)
