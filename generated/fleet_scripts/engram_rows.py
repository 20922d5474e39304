"""The Engram row arithmetic, once: each rank's share of every table, the bytes a row takes, the `L:lo:hi` text.

Standard library only and no spark_compile import: the compiler's plan and rules import it, and it ships as
fleet_scripts/engram_rows.py, which the fleet's engram.py imports from beside itself on the nodes. (The
serving container parses the same text with its own overlay: tests/fleet/test_engram_rows.py holds the two
equal.)
"""

from __future__ import annotations

from collections.abc import Mapping

# Each row: the F8_E4M3 weight [N, 256] and its F8_E8M0 scale [N, 8], one byte an element.
ROW_BYTES = 264


def rank_rows(tables: Mapping[int, int], rank: int, ranks: int) -> dict[int, tuple[int, int]]:
    """Rank ``rank``'s contiguous rows of every table of N rows: lo = N*r // R, hi = N*(r+1) // R."""
    return {layer: (n * rank // ranks, n * (rank + 1) // ranks) for layer, n in sorted(tables.items())}


def format_rows(rows: Mapping[int, tuple[int, int]]) -> str:
    """The ``L:lo:hi,...`` text of a row map, layers in ascending order."""
    return ",".join(f"{layer}:{lo}:{hi}" for layer, (lo, hi) in sorted(rows.items()))


def parse_rows(text: str) -> dict[int, tuple[int, int]]:
    """``L:lo:hi,...`` as {layer: (lo, hi)}; ValueError names a part that is not three whole numbers."""
    rows = {}
    for part in text.split(","):
        fields = part.split(":")
        if len(fields) != 3 or not all(field.isdigit() and field.isascii() for field in fields):
            raise ValueError(f"{part!r} is not a row range: expected L:lo:hi with whole numbers, e.g. 1:0:96001542")
        layer, lo, hi = (int(field) for field in fields)
        rows[layer] = (lo, hi)
    return rows


def format_tables(tables: Mapping[int, int]) -> str:
    """The ``L:N,...`` text of every table's row count, layers in ascending order (preflight compares it)."""
    return ",".join(f"{layer}:{rows}" for layer, rows in sorted(tables.items()))


def table_sizes(config: Mapping[str, object]) -> dict[int, int]:
    """{layer: rows} from a checkpoint's config.json (its text_config when it has one)."""
    text = config.get("text_config", config)
    if not isinstance(text, Mapping):
        raise ValueError("config.json's text_config is not an object")
    layers, sizes = text.get("engram_layer_ids"), text.get("engram_num_embeddings")
    if not isinstance(layers, list) or not isinstance(sizes, list):
        raise ValueError("config.json has no engram_layer_ids and engram_num_embeddings lists")
    if len(layers) != len(sizes):
        raise ValueError(f"config.json lists {len(layers)} Engram layers but {len(sizes)} table sizes")
    return {int(layer): int(size) for layer, size in zip(layers, sizes, strict=True)}


def copy_bytes(rows: Mapping[int, tuple[int, int]], slack: int) -> int:
    """The free space a node-local copy of ``rows`` needs: its rows, plus ``slack`` left over."""
    return sum(hi - lo for lo, hi in rows.values()) * ROW_BYTES + slack
