"""The container environment by concern: engine, NCCL/gloo, overlay. Part of the plan stage."""

from __future__ import annotations

import ipaddress
from typing import Any

from spark_compile.overlay.registry import FLAGS
from spark_compile.overlay.values import format_rows
from spark_compile.spec.envfile import env_text
from spark_compile.spec.hardware import FAMILIES, HARDWARE
from spark_compile.spec.model import Fabric, Profile
from spark_compile.spec.nccl_presets import NCCL_NODE_TAIL, NCCL_PRESETS, NCCL_RDMA_TAIL, NCCL_SINGLE_GPU_TAIL
from spark_compile.spec.overlay_types import flag_value
from spark_compile.stages.launch_plan import EngramPlan, EnvVar, ProfilePath

Variables = tuple[EnvVar, ...]


def _merge(base: list[EnvVar], extra: dict[str, tuple[Any, ProfilePath]]) -> Variables:
    """``base`` with ``extra`` applied: an existing name keeps its place, new names follow."""
    merged = {var.name: var for var in base}
    merged.update((name, EnvVar(name, env_text(value), source)) for name, (value, source) in extra.items())
    return tuple(merged.values())


def _from_section(values: dict[str, Any], concern: str, *section: str | int) -> dict[str, tuple[Any, ProfilePath]]:
    return {name: (value, (*section, name)) for name, value in values.items() if _concern(name) == concern}


def _node_env(profile: Profile, rank: int, concern: str) -> dict[str, tuple[Any, ProfilePath]]:
    """The rank's node's own variables of one concern (fleet.nodes[].env), over the fleet-wide ones."""
    return _from_section(profile.fleet.nodes[rank].env, concern, "fleet", "nodes", rank, "env")


def engine_env(profile: Profile, rank: int) -> Variables:
    """engine.env: SGLANG_*, PYTORCH_*, CUDA_*, HOST_IP and any other non-NCCL, non-overlay name."""
    own = {**_from_section(profile.engine.env, "engine", "engine", "env"), **_node_env(profile, rank, "engine")}
    variables = [EnvVar(name, env_text(value), source) for name, (value, source) in own.items()]
    family = FAMILIES.get(profile.model.architecture)
    effort = profile.engine.chat.reasoning_effort
    if family and family.reasoning_effort_env and effort is not None:
        variables.append(EnvVar(family.reasoning_effort_env, str(effort), ("engine", "chat", "reasoning_effort")))
    if "HOST_IP" not in own:
        variables.append(EnvVar("HOST_IP", profile.fleet.nodes[rank].fabric_ip, ("fleet", "nodes", rank, "fabric_ip")))
    return tuple({var.name: var for var in variables}.values())


def node_fabric(profile: Profile, fabric: Fabric, rank: int) -> tuple[tuple[str, ProfilePath],
                                                                       tuple[list[str], ProfilePath]]:
    """The rank's fabric interface and RDMA devices, each with the key that set it (the node's own, else the
    fleet's ``fabric``)."""
    node, at = profile.fleet.nodes[rank], ("fleet", "nodes", rank)
    interface = (node.interface, (*at, "interface")) if node.interface else (fabric.interface,
                                                                              ("fleet", "fabric", "interface"))
    devices = (node.rdma_devices, (*at, "rdma_devices")) if node.rdma_devices is not None else \
        (fabric.rdma_devices, ("fleet", "fabric", "rdma_devices"))
    return interface, devices


def _fabric_env(profile: Profile, gid_index: int | None, rank: int) -> list[EnvVar]:
    """The transport: RoCE v2 over IPv4, native InfiniBand, or TCP sockets; bootstrap on the fabric interface."""
    fabric, at = profile.fleet.fabric, ("fleet", "fabric")
    if fabric is None:
        return []
    kind = (*at, "kind")
    interface, (devices, devices_at) = node_fabric(profile, fabric, rank)
    if fabric.kind == "tcp":
        base = [EnvVar("NCCL_NET", "Socket", kind), EnvVar("NCCL_IB_DISABLE", "1", kind)]
    else:
        base = [EnvVar("NCCL_NET", "IB", kind), EnvVar("NCCL_IB_DISABLE", "0", kind),
                EnvVar("NCCL_IB_HCA", ",".join(devices), devices_at)]
    bootstrap = (fabric.bootstrap_interface, (*at, "bootstrap_interface")) if fabric.bootstrap_interface else \
        interface
    base += [EnvVar("NCCL_SOCKET_IFNAME", *bootstrap), EnvVar("GLOO_SOCKET_IFNAME", *bootstrap)]
    if fabric.kind == "roce":
        prefix = ipaddress.IPv4Network(fabric.subnet).prefixlen
        base += [EnvVar("NCCL_IB_ROCE_VERSION_NUM", "2", kind),
                 EnvVar("NCCL_IB_ADDR_FAMILY", "AF_INET", (*at, "subnet")),
                 EnvVar("NCCL_IB_ADDR_RANGE", fabric.subnet, (*at, "subnet")),
                 EnvVar("NCCL_IB_SUBNET_PREFIX_LEN", str(prefix), (*at, "subnet"))]
        if gid_index is not None:
            base.append(EnvVar("NCCL_IB_GID_INDEX", str(gid_index), (*at, "gid_index")))
    return base


def nccl_env(profile: Profile, gid_index: int | None, rank: int) -> Variables:
    """nccl.env: the fabric's transport, the shared tails, the preset, then nccl.extra and the node's own; with
    preset none only the latter (NCCL and gloo find interfaces, HCAs and GID themselves)."""
    extra = {**_from_section(profile.engine.env, "nccl", "engine", "env"),
             **{name: (value, ("nccl", "extra", name)) for name, value in profile.nccl.extra.items()},
             **_node_env(profile, rank, "nccl")}
    if profile.nccl.preset == "none":
        return _merge([], extra)
    base = _fabric_env(profile, gid_index, rank)
    fabric = profile.fleet.fabric
    rdma = fabric is not None and fabric.kind != "tcp"
    base += [EnvVar(name, value, ("fleet", "fabric", "kind")) for name, value in (NCCL_RDMA_TAIL if rdma else ())]
    base += [EnvVar(name, value, ("nccl",)) for name, value in NCCL_NODE_TAIL]
    if profile.nccl.debug != "off":
        base.append(EnvVar("NCCL_DEBUG", profile.nccl.debug, ("nccl", "debug")))
    hardware = HARDWARE.get(profile.hardware)
    if hardware is not None and hardware.gpus_per_node == 1:
        base += [EnvVar(name, value, ("hardware",)) for name, value in NCCL_SINGLE_GPU_TAIL]
    base += [EnvVar(name, value, ("nccl", "preset")) for name, value in NCCL_PRESETS[profile.nccl.preset]]
    return _merge(base, extra)


def overlay_flags(profile: Profile, max_ids: int | None) -> Variables:
    """The SPARK_* flags the profile sets, in registry order: the same on every rank, so made once per plan."""
    overlay = profile.overlay
    variables = []
    for flag in FLAGS:
        if flag.name == "SPARK_ENGRAM_MAX_IDS":
            if max_ids is None:
                continue
            source = ("overlay", flag.key) if flag_value(overlay, flag.key) is not None else ("engine", "limits")
            variables.append(EnvVar(flag.name, str(max_ids), source))
        elif flag.name == "SPARK_SERVED_ALIASES":
            if profile.model.aliases:
                variables.append(EnvVar(flag.name, ",".join(profile.model.aliases), ("model", "aliases")))
        elif flag.source != "plan" and flag_value(overlay, flag.key) is not None:
            variables.append(EnvVar(flag.name, env_text(flag_value(overlay, flag.key)), ("overlay", flag.key)))
    return tuple(variables)


def overlay_env(profile: Profile, engram: EngramPlan | None, flags: Variables, gid_index: int | None,
                rank: int) -> Variables:
    """overlay.env: SPARK_* (master switch and rows first, then the ``flags`` of overlay_flags) and B12X_*;
    without Engram only the overlay names engine.env and the node's env write (they reach the container all the
    same)."""
    written = {**_from_section(profile.engine.env, "overlay", "engine", "env"), **_node_env(profile, rank, "overlay")}
    if engram is None:
        return _merge([], written)
    overlay = profile.overlay
    variables = [EnvVar("SPARK_ENGRAM_DIR", engram.directory, ("model", "engram"))]
    if engram.source == "shards":
        rows = format_rows({layer: (lo, hi) for layer, lo, hi in engram.rows})
        variables.append(EnvVar("SPARK_ENGRAM_ROWS", rows, ("model", "engram", "tables")))
    variables += flags
    if overlay.roce_ar or overlay.mxfp8_backend == "b12x":
        # Written because of roce_ar (or b12x), but its value is the fabric's device list: credited there.
        devices = node_fabric(profile, profile.fleet.fabric, rank)[1][0] if profile.fleet.fabric else []
        source = ("fleet", "fabric", "rdma_devices") if profile.fleet.fabric else \
            ("overlay", "roce_ar" if overlay.roce_ar else "mxfp8_backend")
        variables.append(EnvVar("B12X_ROCE_HCA", ",".join(devices), source))
        if gid_index is not None:
            variables.append(EnvVar("B12X_ROCE_GID_INDEX", str(gid_index), ("fleet", "fabric", "gid_index")))
        spin = overlay.b12x_roce_spin_limit
        if spin is not None:
            variables.append(EnvVar("B12X_ROCE_SPIN_LIMIT", str(spin), ("overlay", "b12x_roce_spin_limit")))
    return _merge(variables, written)


def _concern(name: str) -> str:
    if name.startswith(("NCCL_", "GLOO_")):
        return "nccl"
    if name.startswith(("SPARK_", "B12X_")):
        return "overlay"
    return "engine"
