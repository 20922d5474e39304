"""The NCCL presets of the profile's nccl section: data the plan and the rules share."""

from __future__ import annotations

Pairs = tuple[tuple[str, str], ...]

# Fabric settings every preset shares: RoCE v2 over IPv4 on the fabric's HCAs, no P2P/SHM shortcuts
# (one GPU per container), cuMem off (the b12x runtime registers plain allocations). NCCL_DEBUG=WARN as
# the peer launcher sets it (the deployment document's command omits it): silent in normal operation, and
# a postmortem of a hung or failed collective needs NCCL's own warnings in the journal.
NCCL_FABRIC_TAIL = (
    ("NCCL_CROSS_NIC", "1"), ("NCCL_IB_MERGE_NICS", "0"), ("NCCL_IB_SUBNET_AWARE_ROUTING", "1"),
    ("NCCL_CUMEM_ENABLE", "0"), ("NCCL_P2P_DISABLE", "1"), ("NCCL_SHM_DISABLE", "1"), ("NCCL_DEBUG", "WARN"),
)
NCCL_PRESETS: dict[str, Pairs] = {
    # Production since 1.1: small buffers, no LL128, 8 channels.
    "trim": (("NCCL_BUFFSIZE", "1048576"), ("NCCL_LL128_BUFFSIZE", "262144"), ("NCCL_PROTO", "^LL128"),
             ("NCCL_MAX_NCHANNELS", "8")),
    # The launcher's fallback when NCCL_TRIM=0.
    "default": (("NCCL_MIN_NCHANNELS", "4"), ("NCCL_MAX_NCHANNELS", "4"), ("NCCL_ALGO", "Ring")),
}
