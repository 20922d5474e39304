"""SC42x: what any deployment must get right — fabric kinds, extra mounts, lists without repeats."""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.launch_plan import dotted
from spark_compile.rules import Context, Hit, Path, rule
from spark_compile.spec.record import Record

RDMA_KINDS = ("roce", "infiniband")
# Lists that are command lines, where a repeated word is meaningful, and lists another rule owns (SC211).
ARGV_LISTS = {("engine", "launcher"), ("engine", "args"), ("model", "aliases")}


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


def _overlaps(a: str, b: str) -> bool:
    a, b = a.rstrip("/") or "/", b.rstrip("/") or "/"
    return a == b or a.startswith(b + "/") or b.startswith(a + "/") or "/" in (a, b)


@rule("SC421", "error", "extra mounts are distinct and leave the plan's mounts alone",
      "Each container.mounts target must be unique, may not hide or sit inside a mount the plan makes (the model "
      "repo, the cache, the Engram copy, the secrets). (':' and ',', which docker's -v syntax splits on, are "
      "refused by the path grammar, SC111.)",
      "container: {mounts: [{source: /srv/cache, target: /root/.cache}]}",
      "container: {mounts: [{source: /srv/hf-cache, target: /hf-cache}]}")
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
        clash = next((m for m in planned.values() if _overlaps(m.target, mount.target)), None)
        if clash is not None:
            yield Hit((*at, "target"), f"target {mount.target} overlaps the plan's mount of {clash.target}",
                      "mount it somewhere else, e.g. under /mnt")


def _lists(node: object, path: Path) -> Iterator[tuple[Path, list[object]]]:
    if isinstance(node, Record):
        for name in node.FIELDS:
            yield from _lists(getattr(node, name), (*path, name))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _lists(value, (*path, key))
    elif isinstance(node, list) and path[:2] not in ARGV_LISTS:
        yield path, node
        for index, item in enumerate(node):
            yield from _lists(item, (*path, index))


@rule("SC422", "error", "no list repeats an entry",
      "A repeated entry in a list (an RDMA device, a capability, a device, a needle size) is a "
      "copy-and-paste slip: it means nothing twice, and some consumers refuse it.",
      "container: {cap_add: [IPC_LOCK, IPC_LOCK]}", "container: {cap_add: [IPC_LOCK]}")
def unique_entries(ctx: Context) -> Iterator[Hit]:
    for path, items in _lists(ctx.profile, ()):
        seen: dict[object, int] = {}
        for index, item in enumerate(items):
            if isinstance(item, Record | dict | list):
                continue
            if item in seen:
                yield Hit((*path, index), f"{dotted((*path, index))} {item!r} repeats "
                          f"{dotted((*path, seen[item]))}", "remove the repeated entry")
            seen.setdefault(item, index)


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
                  "unset", f"set engine.limits.{missing[0]}, or pin overlay.engram_max_ids", at_key=True)
