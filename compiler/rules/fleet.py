"""SC4xx: the fleet and its hardware — nodes, fabric, memory, GPU architecture, Engram partition."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from spark_compile.capacity.budget import size_gib
from spark_compile.common.engram_rows import ROW_BYTES
from spark_compile.common.findings import dotted
from spark_compile.rules.registry import PLAN_ENGRAM_VARIABLES, Context, Hit, env_settings, gid_hint, nccl_values, rule
from spark_compile.stages.engine_options import api_bind


def _duplicates(ctx: Context, field: str, what: str) -> Iterator[Hit]:
    nodes = ctx.profile.fleet.nodes
    # Nodes are named by name, as everywhere else; only a repeated name needs the index to tell them apart.
    label = (lambda i: dotted(("fleet", "nodes", i))) if field == "name" else (lambda i: nodes[i].name)
    seen: dict[str, int] = {}
    for index, node in enumerate(nodes):
        value = getattr(node, field)
        if value in seen:
            yield Hit(("fleet", "nodes", index, field),
                      f"{what} {value!r} of {label(index)} is already used by {label(seen[value])}",
                      f"every node needs its own {what}")
        else:
            seen[value] = index


@rule("SC401", "error", "TP ranks must fill the fleet's GPUs",
      "One rank runs on each GPU: engine.parallel.tp times pp (pipeline stages, 1 unless set) must equal the "
      "number of nodes times the hardware's GPUs per node, and SGLang requires tp x pp divisible by the node count.",
      "# 4 GB10 nodes (1 GPU each)\nengine: {parallel: {tp: 8}}", "engine: {parallel: {tp: 4}}")
def tp_fills_fleet(ctx: Context) -> Iterator[Hit]:
    hw = ctx.hardware
    gpus = len(ctx.profile.fleet.nodes) * hw.gpus_per_node
    tp = ctx.profile.engine.parallel.tp or 1  # unset: SGLang's default
    pp = ctx.profile.engine.parallel.pp or 1
    if tp * pp != gpus:
        got, want = (f"tp {tp} x pp {pp}", f"tp x pp {gpus}") if pp > 1 else (f"tp {tp}", f"tp {gpus}")
        per_stage = f" / pp {pp}" if pp > 1 else ""
        fix = (f"set engine.parallel.tp: {gpus // pp} (nodes x GPUs per node{per_stage})" if gpus % pp == 0
               else "set tp x pp to nodes x GPUs per node")
        yield Hit(("engine", "parallel", "tp"),
                  f"{got} does not fit {len(ctx.profile.fleet.nodes)} node(s) x {hw.gpus_per_node} GPU(s) of "
                  f"{hw.name}: expected {want}", f"{fix}, or change the node list")


@rule("SC402", "error", "node names unique", "Node names name generated folders and log lines; two nodes "
      "cannot share one.", "nodes: [{name: spark-0, ...}, {name: spark-0, ...}]",
      "nodes: [{name: spark-0, ...}, {name: spark-1, ...}]")
def unique_names(ctx: Context) -> Iterator[Hit]:
    yield from _duplicates(ctx, "name", "name")


@rule("SC403", "error", "fabric IPs unique", "Each rank binds its own fabric address (HOST_IP).",
      "nodes: [{fabric_ip: 192.0.2.11, ...}, {fabric_ip: 192.0.2.11, ...}]",
      "nodes: [{fabric_ip: 192.0.2.11, ...}, {fabric_ip: 192.0.2.12, ...}]")
def unique_ips(ctx: Context) -> Iterator[Hit]:
    yield from _duplicates(ctx, "fabric_ip", "fabric IP")


@rule("SC404", "error", "ssh targets unique", "Two ranks on one ssh target would be started on one machine.",
      "nodes: [{ssh: spark@192.0.2.11, ...}, {ssh: spark@192.0.2.11, ...}]",
      "nodes: [{ssh: spark@192.0.2.11, ...}, {ssh: spark@192.0.2.12, ...}]")
def unique_ssh(ctx: Context) -> Iterator[Hit]:
    yield from _duplicates(ctx, "ssh", "ssh target")


@rule("SC405", "error", "fabric IP inside the fabric subnet",
      "NCCL_IB_ADDR_RANGE and the GID probe only find addresses inside fleet.fabric.subnet; the network and "
      "broadcast addresses are not host addresses.",
      "fabric: {subnet: 192.0.2.0/24}\nnodes: [{fabric_ip: 198.51.100.11, ...}]",
      "fabric: {subnet: 192.0.2.0/24}\nnodes: [{fabric_ip: 192.0.2.11, ...}]")
def ip_in_subnet(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.fleet.fabric is None:
        return
    net = ipaddress.IPv4Network(ctx.profile.fleet.fabric.subnet)
    for index, node in enumerate(ctx.profile.fleet.nodes):
        ip = ipaddress.IPv4Address(node.fabric_ip)
        if ip not in net:
            yield Hit(("fleet", "nodes", index, "fabric_ip"),
                      f"fabric IP {ip} of {node.name} is outside the fabric subnet {net}",
                      "fix the address or fleet.fabric.subnet")
        elif net.prefixlen < 31 and ip in (net.network_address, net.broadcast_address):
            yield Hit(("fleet", "nodes", index, "fabric_ip"),
                      f"fabric IP {ip} of {node.name} is the {'network' if ip == net.network_address else 'broadcast'}"
                      f" address of {net}", "use a host address of the subnet")


@rule("SC406", "error", "exactly one node holds the checkpoint where Engram needs a holder",
      "With Engram tables, one node reads its rows straight from the checkpoint's shards (holds_checkpoint: "
      "true); every other node reads a node-local copy, so a second holder would read the same rows twice. "
      "Without Engram there is no holder: every node reads its own copy at model.repo (SC428).",
      "nodes: [{name: spark-0, holds_checkpoint: true}, {name: spark-1, holds_checkpoint: true}]",
      "nodes: [{name: spark-0}, {name: spark-1, holds_checkpoint: true}]")
def one_holder(ctx: Context) -> Iterator[Hit]:
    if ctx.profile.model.engram is None:
        return
    holders = [i for i, node in enumerate(ctx.profile.fleet.nodes) if node.holds_checkpoint]
    for index in holders[1:]:
        yield Hit(("fleet", "nodes", index, "holds_checkpoint"),
                  f"{ctx.profile.fleet.nodes[index].name} is a second checkpoint holder "
                  f"(first: {ctx.profile.fleet.nodes[holders[0]].name})",
                  f"remove {ctx.profile.fleet.nodes[index].name}'s holds_checkpoint (mark only one node)")
    if not holders:
        yield Hit(("fleet", "nodes"), "model.engram is set but no node holds the checkpoint",
                  "set holds_checkpoint: true on the node that has the checkpoint on local disk")


@rule("SC407", "error", "Engram rows tile every table",
      "Each rank owns one contiguous row range of each Engram table; at boot the ranks exchange ranges and "
      "every rank raises unless they tile [0, N) exactly. A table with fewer rows than ranks leaves a rank "
      "empty.", "engram: {tables: {1: 3}}   # 4 ranks", "engram: {tables: {1: 384006168}}")
def engram_tiles(ctx: Context) -> Iterator[Hit]:
    engram = ctx.profile.model.engram
    if engram is None:
        return
    for layer, rows in engram.tables.items():
        ranges = sorted((lo, hi) for r in ctx.plan.ranks if r.engram for lay, lo, hi in r.engram.rows if lay == layer)
        edge, problems = 0, []
        for lo, hi in ranges:
            if lo != edge:
                problems.append(f"{'gap' if lo > edge else 'overlap'} at row {min(lo, edge)}")
            if hi <= lo:
                problems.append(f"an empty range at row {lo}")
            edge = max(edge, hi)
        if edge != rows:
            problems.append(f"the ranges end at {edge}, the table at {rows}")
        if problems:
            yield Hit(("model", "engram", "tables", layer),
                      f"Engram layer {layer} ({rows} rows) is not tiled by {len(ranges)} ranks: {'; '.join(problems)}",
                      "each table needs at least one row per rank")


@rule("SC408", "error", "one Engram source per rank",
      "A rank reads its rows from exactly one place: the holder from the snapshot's shards with "
      "SPARK_ENGRAM_ROWS, every other rank from its node-local copy (whose manifest names the rows).",
      "engine: {env: {SPARK_ENGRAM_ROWS: '1:0:10'}}", "(leave SPARK_ENGRAM_* to the plan)")
def one_engram_source(ctx: Context) -> Iterator[Hit]:
    by_hand = [(path, name) for path, name, _ in env_settings(ctx) if name in PLAN_ENGRAM_VARIABLES]
    for path, name in by_hand:
        yield Hit(path, f"{name} is derived per rank by the plan and cannot be set",
                  "remove it: the plan derives it for each rank from model.engram (the holder marked with "
                  "holds_checkpoint reads the shards)", at_key=True)
    engram = None if by_hand else ctx.profile.model.engram
    for rank in ctx.plan.ranks:
        if engram is None:
            break
        from_shards = "SPARK_ENGRAM_ROWS" in rank.env
        from_copy = any(m.target == engram.container_dir for m in rank.mounts)
        if from_shards == from_copy:
            where = "both shards and a local copy" if from_shards else "nowhere"
            yield Hit(("fleet", "nodes", rank.rank), f"rank {rank.rank} ({rank.node}) reads Engram rows from {where}",
                      "one holder reads the shards, the others a local copy")


@rule("SC409", "error", "container memory limit below the node's memory",
      "On unified-memory nodes (GB10: 128 GB) host memory is the GPU's pool: a container limit at or above "
      "it lets the host run out before the container does.", "container: {memory: 128g}   # GB10",
      "container: {memory: 112g}")
def memory_fits(ctx: Context) -> Iterator[Hit]:
    hw = ctx.hardware
    box = ctx.profile.container
    if box.memory and size_gib(box.memory) >= hw.memory_gb:
        yield Hit(("container", "memory"),
                  f"memory limit {box.memory} is not below {hw.name}'s {hw.memory_gb} GB",
                  f"set container.memory: {hw.memory_gb * 7 // 8}g (an eighth left to the host; keep "
                  "container.memory_swap at or above it)")


def _quarter(size: str) -> str:
    """A quarter of a docker size, in whole GiB (at least 1g): an shm size that leaves the limit room."""
    return f"{max(1, int(size_gib(size) // 4))}g"


@rule("SC410", "error", "shm and swap within the memory limit",
      "Pages of /dev/shm are charged to the container's memory cgroup, so --shm-size counts inside --memory "
      "and may not exceed it; --memory-swap below --memory is refused by docker, and needs --memory.",
      "container: {memory: 112g, shm_size: 128g}", "container: {memory: 112g, shm_size: 32g}")
def shm_within_memory(ctx: Context) -> Iterator[Hit]:
    box = ctx.profile.container
    if box.memory and box.shm_size and size_gib(box.shm_size) > size_gib(box.memory):
        yield Hit(("container", "shm_size"), f"shm size {box.shm_size} exceeds the memory limit {box.memory}",
                  f"set container.shm_size: {_quarter(box.memory)} (shared memory is charged to the container's "
                  "limit: a quarter of it leaves the rest for the engine's host-side memory)")
    if box.memory_swap and not box.memory:
        yield Hit(("container", "memory_swap"), "memory_swap is set without memory",
                  "docker needs --memory with --memory-swap")
    elif box.memory_swap and box.memory and size_gib(box.memory_swap) < size_gib(box.memory):
        yield Hit(("container", "memory_swap"),
                  f"memory_swap {box.memory_swap} is below memory {box.memory}",
                  f"set container.memory_swap: {box.memory} (docker refuses less than memory)")


@rule("SC411", "error", "stock Engram host table would not fit",
      "Stock SGLang pins every Engram table in host memory (N x 264 bytes; 203 GB for DeepSeek-V4.1) — the "
      "wall the first boots hit. Where that exceeds the node's memory the overlay must serve the rows and "
      "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE must be 0.",
      "engine: {env: {SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: '1'}}",
      "engine: {env: {SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: '0'}}")
def engram_host_table(ctx: Context) -> Iterator[Hit]:
    engram = ctx.profile.model.engram
    if engram is None:
        return
    hw = ctx.hardware
    table_gb = sum(engram.tables.values()) * ROW_BYTES / 1e9
    if table_gb < hw.memory_gb:
        return
    value = str(ctx.profile.engine.env.get("SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE", ""))
    if value != "0":
        yield Hit(("engine", "env", "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE") if value else ("engine", "env"),
                  f"the Engram tables take {table_gb:.0f} GB, more than {hw.name}'s {hw.memory_gb} GB, and "
                  f"SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE is {value or 'unset'}",
                  "set SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE: '0' so the overlay serves the rows")


@rule("SC412", "warning", "hardware's recommended environment",
      "Some hardware runs best with a variable at a known value, a practice and not a refusal: the engine starts "
      "either way. On GB10 production runs PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False, because expandable "
      "segments map memory in pieces the unified-memory driver pins late, and the KV pool sized at start can then "
      "fail to allocate minutes into a boot; sparkrun's GB10 default and some cookbooks run True.",
      "engine: {env: {PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True}}",
      "engine: {env: {PYTORCH_CUDA_ALLOC_CONF: expandable_segments:False}}")
def hardware_env(ctx: Context) -> Iterator[Hit]:
    hardware = ctx.hardware
    for name, value in hardware.env_recommended:
        have = ctx.profile.engine.env.get(name)
        if have is None or str(have) != value:
            yield Hit(("engine", "env", name) if have is not None else ("engine", "env"),
                      f"{hardware.name} runs best with {name}={value} ({hardware.env_reason}), got "
                      f"{'nothing' if have is None else repr(str(have))}", f"set engine.env.{name}: {value}")


_ARCH_ENV = r"[A-Z0-9_]*ARCH_LIST"  # TORCH_CUDA_ARCH_LIST, FLASHINFER_CUDA_ARCH_LIST and the like


@rule("SC413", "error", "arch lists cover the node's SM",
      "An architecture list that names 12.0 but not GB10's 12.1 skips GB10 (the bring-up bug where a "
      "(12, 0)-only gate skipped (12, 1)). Accepted: the exact SM (12.1, 12.1a), its family (12.0f, 12.1f) or "
      "PTX that JITs to it (12.0+PTX).", "engine: {env: {TORCH_CUDA_ARCH_LIST: '12.0'}}",
      "engine: {env: {TORCH_CUDA_ARCH_LIST: '12.0f'}}")
def arch_lists(ctx: Context) -> Iterator[Hit]:
    major, minor = ctx.hardware.sm
    for path, name, value in env_settings(ctx):
        if re.fullmatch(_ARCH_ENV, name) and not _covers(str(value), major, minor):
            joined = f"{value}{';' if ';' in str(value) else ' '}{major}.{minor}".strip(" ;")
            yield Hit(path,
                      f"{name}={value} does not cover SM {major}.{minor} of {ctx.profile.hardware}",
                      f"write '{joined}' (the SM added; or the family {major}.0f)")


def _covers(value: str, major: int, minor: int) -> bool:
    for entry in re.split(r"[;,\s]+", value.strip()):
        match = re.match(r"^(\d+)\.(\d+)([af]?)(\+PTX)?$", entry)
        if not match:
            continue
        e_major, e_minor, suffix, ptx = int(match[1]), int(match[2]), match[3], match[4]
        if (e_major, e_minor) == (major, minor) or (e_major == major and (suffix == "f" or ptx) and e_minor <= minor):
            return True
    return False


@rule("SC414", "error", "Engram needs one GPU per container",
      "The overlay partitions Engram rows per container (SPARK_ENGRAM_ROWS is one range per node); a node with "
      "several GPUs would run several TP ranks on one range.", "hardware: dgx-h100\nmodel: {engram: {...}}",
      "hardware: dgx-spark-gb10\nmodel: {engram: {...}}")
def engram_one_gpu(ctx: Context) -> Iterator[Hit]:
    hw = ctx.hardware
    if ctx.profile.model.engram is not None and hw.gpus_per_node != 1:
        yield Hit(("hardware",), f"{hw.name} has {hw.gpus_per_node} GPUs per node; the Engram overlay "
                  "needs one", "use one GPU per container, or a model without Engram tables")


@rule("SC417", "error", "GID index only from the fleet",
      "NCCL_IB_GID_INDEX and B12X_ROCE_GID_INDEX must be the same index, never empty; they come from "
      "fleet.fabric.gid_index (probe or a number), never from a hand-set variable. With nccl.preset none the "
      "NCCL variables are the profile's own: a hand-pinned NCCL_IB_GID_INDEX is then NCCL's index, as long as it "
      "is a number and agrees with the fleet's pinned one and with the overlay's b12x runtime.",
      "nccl: {extra: {NCCL_IB_GID_INDEX: ''}}", "fleet: {fabric: {gid_index: probe}}")
def gid_from_fleet(ctx: Context) -> Iterator[Hit]:
    for value, path in nccl_values(ctx, "B12X_ROCE_GID_INDEX"):
        yield Hit(path, f"B12X_ROCE_GID_INDEX is set by hand ({value!r}); it must equal the other GID variable and "
                  "come from the fleet", gid_hint(ctx, path, value), at_key=True)
    for value, path in nccl_values(ctx, "NCCL_IB_GID_INDEX"):
        if ctx.profile.nccl.preset != "none" or not value.isdigit():
            yield Hit(path, f"NCCL_IB_GID_INDEX is set by hand ({value!r}); it must equal the other GID variable "
                      "and come from the fleet", gid_hint(ctx, path, value), at_key=True)
        else:
            yield from _hand_gid_conflicts(ctx, int(value), path)


def _hand_gid_conflicts(ctx: Context, value: int, path: tuple[str | int, ...]) -> Iterator[Hit]:
    """nccl.preset none: a hand-pinned NCCL GID against each node's pinned index and the overlay's probed one."""
    ranks = ctx.plan.ranks if path[:2] != ("fleet", "nodes") else [ctx.plan.ranks[int(path[2])]]
    for rank in ranks:
        if rank.gid_index is not None and rank.gid_index != value:
            yield Hit(path, f"NCCL_IB_GID_INDEX={value} by hand, but {rank.node}'s GID index is {rank.gid_index} "
                      "(the fleet's)", f"make them equal: fleet.fabric.gid_index {value}, or NCCL_IB_GID_INDEX "
                      f"{rank.gid_index}", at_key=True)
            return
        if "B12X_ROCE_GID_INDEX" in rank.runtime_env:
            yield Hit(path, f"NCCL_IB_GID_INDEX={value} by hand, but the overlay's b12x runtime probes its GID index "
                      f"on {rank.node} at start and may use another", f"pin fleet.fabric.gid_index: {value} (both "
                      "then use it) and drop NCCL_IB_GID_INDEX", at_key=True)
            return


@rule("SC424", "warning", "the API reachable where its checks run",
      "launch.sh's /health wait, verify.sh, smoke.py and the watchdog call the API at engine.host on the head. "
      "A loopback host is reachable on the head alone: the checks then run there over ssh, and no client on "
      "the network reaches the API. Any other specific address must be the head's own, reachable from where "
      "launch.sh runs; 0.0.0.0 is called at the head's fabric IP.",
      "engine: {host: 127.0.0.1}", "engine: {host: 0.0.0.0}")
def api_reachable(ctx: Context) -> Iterator[Hit]:
    host = ipaddress.IPv4Address(api_bind(ctx.profile))
    nodes = ctx.profile.fleet.nodes
    if host.is_unspecified or str(host) == nodes[0].fabric_ip:
        return
    if host.is_loopback:
        yield Hit(("engine", "host"),
                  f"the API listens on {host} of {nodes[0].name} only: health waits, verify.sh, smoke.py and the "
                  "watchdog run on the head over ssh, and no client elsewhere reaches it",
                  f"set engine.host: 0.0.0.0 (or {nodes[0].fabric_ip}) unless the API is meant for the head alone")
        return
    owner = next((node.name for node in nodes[1:] if node.fabric_ip == str(host)), None)
    where = f"the fabric IP of {owner}, not of the head" if owner else f"not the head's fabric IP {nodes[0].fabric_ip}"
    yield Hit(("engine", "host"),
              f"the API binds {host}, {where}: the checks and the watchdog call {host}, which the head must own "
              "and where launch.sh runs must reach", f"set engine.host: 0.0.0.0 (or {nodes[0].fabric_ip})")


@rule("SC425", "error", "the previous stack is another unit",
      "operations.previous_stack.unit is stopped at cutover and started by rollback: naming this release's own "
      "unit (or its watchdog's) would stop what start just checked and restart it on rollback.",
      "operations: {previous_stack: {unit: sglang-dsv41-4spark.service}}",
      "operations: {previous_stack: {unit: vllm-dsv4.service}}")
def previous_stack_is_another_unit(ctx: Context) -> Iterator[Hit]:
    previous = ctx.profile.operations.previous_stack
    if previous is None or previous.unit is None:
        return
    own, watchdog = ctx.plan.unit_name, ctx.plan.fleet.watchdog_unit
    if previous.unit in (own, f"{watchdog}.service", f"{watchdog}.timer"):
        yield Hit(("operations", "previous_stack", "unit"),
                  f"the previous stack's unit {previous.unit} is this release's own",
                  "name the unit of the stack this release replaces (e.g. the vLLM recipe's)")
