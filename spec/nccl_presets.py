"""The NCCL presets of the profile's nccl section: data the plan and the rules share."""

from __future__ import annotations

from typing import Final

Pairs = tuple[tuple[str, str], ...]

# Settings every preset shares on an RDMA fabric (RoCE or InfiniBand): traffic may cross NICs, NICs are not
# merged, routing follows the subnets.
NCCL_RDMA_TAIL: Pairs = (
    ("NCCL_CROSS_NIC", "1"), ("NCCL_IB_MERGE_NICS", "0"), ("NCCL_IB_SUBNET_AWARE_ROUTING", "1"),
)
# On every fabric: cuMem off (the b12x runtime registers plain allocations).
NCCL_NODE_TAIL: Pairs = (("NCCL_CUMEM_ENABLE", "0"),)
# nccl.debug's default, WARN as the peer launcher sets it (the deployment document's command omits it): silent
# in normal operation, and a postmortem of a hung or failed collective needs NCCL's own warnings in the journal.
NCCL_DEBUG_DEFAULT: Final = "WARN"
# One GPU per container (GB10): no P2P or SHM shortcut exists, and NCCL's probes for them only cost time.
NCCL_SINGLE_GPU_TAIL: Pairs = (("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"))
# What the RoCE reference fleet runs with (the overlay rules compare nccl.extra against it).
NCCL_FABRIC_TAIL: Pairs = (*NCCL_RDMA_TAIL, *NCCL_NODE_TAIL, ("NCCL_DEBUG", NCCL_DEBUG_DEFAULT), *NCCL_SINGLE_GPU_TAIL)
NCCL_PRESETS: dict[str, Pairs] = {
    # Production since 1.1: small buffers, no LL128, 8 channels.
    "trim": (("NCCL_BUFFSIZE", "1048576"), ("NCCL_LL128_BUFFSIZE", "262144"), ("NCCL_PROTO", "^LL128"),
             ("NCCL_MAX_NCHANNELS", "8")),
    # The launcher's fallback when NCCL_TRIM=0.
    "default": (("NCCL_MIN_NCHANNELS", "4"), ("NCCL_MAX_NCHANNELS", "4"), ("NCCL_ALGO", "Ring")),
}
