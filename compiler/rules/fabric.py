"""SC415-SC416: hand-set NCCL/gloo variables against the fabric each rank's node is on (its own interface and RDMA
devices when fleet.nodes[] names them, else the fleet's)."""

from __future__ import annotations

from collections.abc import Iterator

from spark_compile.common.findings import dotted
from spark_compile.rules.registry import Context, Hit, Path, nccl_values, rule
from spark_compile.spec.model import Fabric
from spark_compile.stages.envsets import node_fabric


def _ranks(ctx: Context, name: str, path: Path) -> list[int]:
    """The ranks a hand-set value reaches: its node's, or (fleet-wide) every node that does not set its own."""
    if path[:2] == ("fleet", "nodes"):
        return [int(path[2])]
    nodes = ctx.profile.fleet.nodes
    return [rank for rank, node in enumerate(nodes) if name not in node.env] or list(range(len(nodes)))


def _devices(ctx: Context, fabric: Fabric | None, rank: int) -> tuple[list[str], str]:
    if fabric is None:
        return [], "the fleet's"
    (devices, at) = node_fabric(ctx.profile, fabric, rank)[1]
    return devices, "the fleet's" if at[0:2] == ("fleet", "fabric") else f"{dotted(at[:3])}'s"


@rule("SC415", "error", "NCCL_IB_HCA within the fleet's RDMA devices",
      "NCCL matches HCA names as prefixes and ignores ones it cannot find; an HCA outside the node's RDMA devices "
      "(fleet.nodes[].rdma_devices, else fleet.fabric.rdma_devices) silently moves traffic off the fabric.",
      "nccl: {extra: {NCCL_IB_HCA: mlx5_0}}", "fleet: {fabric: {rdma_devices: [rocep1s0f0, roceP2p1s0f0]}}")
def hca_subset(ctx: Context) -> Iterator[Hit]:
    fabric = ctx.profile.fleet.fabric
    for value, path in nccl_values(ctx, "NCCL_IB_HCA"):
        names = [entry.split(":")[0] for entry in value.lstrip("^=").split(",") if entry]
        for rank in _ranks(ctx, "NCCL_IB_HCA", path):
            devices, whose = _devices(ctx, fabric, rank)
            unknown = [n for n in names if n not in devices]
            if not unknown and not value.startswith("^"):
                continue
            yield Hit(path, f"NCCL_IB_HCA={value} names {', '.join(unknown) or 'an exclude list'} outside "
                      f"{whose} RDMA devices {', '.join(devices) or '(none)'}",
                      "drop the override: the plan sets NCCL_IB_HCA from fleet.fabric.rdma_devices")
            break


@rule("SC416", "error", "socket interfaces are the bootstrap interface",
      "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME must both name the bootstrap interface, "
      "fleet.fabric.bootstrap_interface (else the node's fabric interface: fleet.nodes[].interface, else "
      "fleet.fabric.interface): NCCL and gloo on two different networks bootstrap apart and torch.distributed "
      "init hangs. To bootstrap on the management NIC while data moves over the RDMA devices, set "
      "bootstrap_interface.",
      "nccl: {extra: {GLOO_SOCKET_IFNAME: eth0}}",
      "fleet: {fabric: {interface: enp1s0f0np0, bootstrap_interface: eth0}}")
def socket_ifname(ctx: Context) -> Iterator[Hit]:
    fabric = ctx.profile.fleet.fabric
    if fabric is None:
        return
    for name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        for value, path in nccl_values(ctx, name):
            for rank in _ranks(ctx, name, path):
                interface, at = (fabric.bootstrap_interface, ("fleet", "fabric", "bootstrap_interface")) \
                    if fabric.bootstrap_interface else node_fabric(ctx.profile, fabric, rank)[0]
                if value.lstrip("=") == interface:
                    continue
                yield Hit(path, f"{name}={value} is not the bootstrap interface {interface} ({dotted(at)})",
                          "drop the override and set fleet.fabric.bootstrap_interface: the plan writes both from it")
                break
