"""The container environment by concern: engine, NCCL/gloo, overlay. Part of the plan stage."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from .overlay.registry import FLAGS
from .overlay.values import format_rows
from .spec.envfile import env_text
from .spec.hardware import FAMILIES
from .spec.model import Profile
from .spec.nccl_presets import NCCL_FABRIC_TAIL, NCCL_PRESETS

if TYPE_CHECKING:
    from .plan import EngramPlan

Pairs = tuple[tuple[str, str], ...]

def _merge(base: list[tuple[str, str]], extra: dict[str, Any]) -> Pairs:
    """``base`` with ``extra`` applied: an existing name keeps its place, new names follow."""
    merged = dict(base)
    merged.update((name, env_text(value)) for name, value in extra.items())
    return tuple(merged.items())


def engine_env(profile: Profile, host_ip: str) -> Pairs:
    """engine.env: SGLANG_*, PYTORCH_*, CUDA_*, HOST_IP and any other non-NCCL, non-overlay name."""
    pairs = [(name, env_text(value)) for name, value in profile.engine.env.items() if _concern(name) == "engine"]
    family = FAMILIES.get(profile.model.architecture)
    effort = profile.engine.chat.reasoning_effort
    if family and family.reasoning_effort_env and effort is not None:
        pairs.append((family.reasoning_effort_env, str(effort)))
    pairs.append(("HOST_IP", host_ip))
    return tuple(dict(pairs).items())


def nccl_env(profile: Profile, gid_index: int | None) -> Pairs:
    """nccl.env: the fabric, the preset, then nccl.extra."""
    fabric = profile.fleet.fabric
    prefix = ipaddress.IPv4Network(fabric.subnet).prefixlen
    base = [
        ("NCCL_NET", "IB"), ("NCCL_IB_DISABLE", "0"), ("NCCL_IB_HCA", ",".join(fabric.rdma_devices)),
        ("NCCL_SOCKET_IFNAME", fabric.interface), ("GLOO_SOCKET_IFNAME", fabric.interface),
        ("NCCL_IB_ROCE_VERSION_NUM", "2"), ("NCCL_IB_ADDR_FAMILY", "AF_INET"),
        ("NCCL_IB_ADDR_RANGE", fabric.subnet), ("NCCL_IB_SUBNET_PREFIX_LEN", str(prefix)),
    ]
    if gid_index is not None:
        base.append(("NCCL_IB_GID_INDEX", str(gid_index)))
    base += [*NCCL_FABRIC_TAIL, *NCCL_PRESETS[profile.nccl.preset]]
    extra = {**{n: v for n, v in profile.engine.env.items() if _concern(n) == "nccl"}, **profile.nccl.extra}
    return _merge(base, extra)


def overlay_env(profile: Profile, engram: EngramPlan | None, max_ids: int, gid_index: int | None) -> Pairs:
    """overlay.env: SPARK_* (master switch and rows first, then registry order) and B12X_*."""
    if engram is None:
        return ()
    overlay = profile.overlay
    pairs: list[tuple[str, str]] = [("SPARK_ENGRAM_DIR", engram.directory)]
    if engram.source == "shards":
        pairs.append(("SPARK_ENGRAM_ROWS", format_rows({layer: (lo, hi) for layer, lo, hi in engram.rows})))
    for flag in FLAGS:
        if flag.name == "SPARK_ENGRAM_MAX_IDS":
            pairs.append((flag.name, str(max_ids)))
        elif flag.name == "SPARK_SERVED_ALIASES":
            if profile.model.aliases:
                pairs.append((flag.name, ",".join(profile.model.aliases)))
        elif flag.source != "plan" and getattr(overlay, flag.key) is not None:
            pairs.append((flag.name, env_text(getattr(overlay, flag.key))))
    if overlay.roce_ar or overlay.mxfp8_backend == "b12x":  # type: ignore[attr-defined]
        pairs.append(("B12X_ROCE_HCA", ",".join(profile.fleet.fabric.rdma_devices)))
        if gid_index is not None:
            pairs.append(("B12X_ROCE_GID_INDEX", str(gid_index)))
        spin = overlay.b12x_roce_spin_limit  # type: ignore[attr-defined]
        if spin is not None:
            pairs.append(("B12X_ROCE_SPIN_LIMIT", str(spin)))
    extra = {n: v for n, v in profile.engine.env.items() if _concern(n) == "overlay"}
    return _merge(pairs, extra)


def _concern(name: str) -> str:
    if name.startswith(("NCCL_", "GLOO_")):
        return "nccl"
    if name.startswith(("SPARK_", "B12X_")):
        return "overlay"
    return "engine"
