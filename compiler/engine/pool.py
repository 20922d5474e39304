"""`check --engine`'s KV pool comparison: SGLang's own DSV4 pool configurator next to the static model."""

from __future__ import annotations

from typing import Any

from spark_compile.capacity.weights import GIB
from spark_compile.pipeline import Planned


def available_bytes(validated: Planned, rank: int) -> int | None:
    """The bytes the capacity stage predicts SGLang will size rank ``rank``'s KV pools from, when the static
    model sized them (DeepSeek-V4/V4.1); None otherwise (the probe then runs no configurator)."""
    capacity = validated.capacity
    if capacity is None or rank >= len(capacity.ranks):
        return None
    budget = capacity.ranks[rank]
    available = budget.terms["available"].gib if "available" in budget.terms else None
    if budget.kv is None or budget.kv.bytes_per_full_token is None or available is None or available <= 0:
        return None
    if "DSV4PoolConfigurator" not in budget.kv.note:  # the probe runs SGLang's DSV4 configurator only
        return None
    return int(available * GIB)


def pool_notes(validated: Planned, ranks: list[dict[str, Any]]) -> list[str]:
    """One line per rank the probe sized: SGLang's bytes_per_full_token and full_token, the static model's,
    and how far apart the two full_token figures are."""
    capacity, name = validated.capacity, validated.profile.name
    lines = []
    for entry in ranks:
        pool = entry.get("pool")
        if not isinstance(pool, dict) or capacity is None:
            continue
        rank = int(entry["rank"])
        if pool.get("outcome") != "ok":
            lines.append(f"check --engine: {name} rank {rank}: SGLang's pool configurator did not run here: "
                         f"{pool.get('error', pool.get('outcome'))}")
            continue
        kv = capacity.ranks[rank].kv
        if kv is None or kv.full_token is None or kv.bytes_per_full_token is None:
            continue
        theirs = int(pool["full_token"])
        apart = abs(kv.full_token - theirs) / theirs * 100 if theirs else 0.0
        lines.append(f"check --engine: {name} rank {rank}: SGLang's DSV4PoolConfigurator: bytes_per_full_token="
                     f"{float(pool['bytes_per_full_token']):.2f} full_token={theirs}; the static model: "
                     f"bytes_per_full_token={kv.bytes_per_full_token:.2f} full_token={kv.full_token} "
                     f"({apart:.2f}% apart)")
    return lines
