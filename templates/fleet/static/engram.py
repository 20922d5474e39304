#!/usr/bin/env python3
"""Engram rows on the nodes: counts from the checkpoint, node-local copies, their check. Standard library only.

    engram.py rows SNAPSHOT [--tp N]               row counts from SNAPSHOT/config.json, each rank's L:lo:hi
    engram.py copy SNAPSHOT DEST --rows L:lo:hi,...  free space first (rows x 264 B + 1 GiB), then a sparse copy
                                                   of each shard holding Engram rows (header verbatim, the rows
                                                   at their own offsets), engram-local.json, then verify
    engram.py verify SNAPSHOT DEST [--samples N]   the copy's headers, first, last and N random rows (default
                                                   2000) of every tensor against the checkpoint

A static file of spark-compile (the fleet folder). Exit status: 0 ok, 1 a check failed, 2 I/O error, 64 usage.
Tensors: layers.L.engram.embed.weight [N, 256] (1 byte each) and .scale [N, 8], 264 bytes per row.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import struct
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

# Beside this file in the fleet folder: engram_rows.py is spark-compile's own module (the plan's rows come from
# it too), fleet_io.py the scripts' one reading of numbers and files.
from engram_rows import ROW_BYTES, copy_bytes, format_rows, parse_rows, rank_rows
from engram_rows import table_sizes as config_tables
from fleet_io import read_text, whole

MANIFEST = "engram-local.json"
INDEX = "model.safetensors.index.json"
SLACK = 1 << 30  # the copy needs its rows plus this much room left
CHUNK_ROWS = 1 << 16
EXIT_USAGE = 64  # the fleet scripts' usage status (launch.sh, install.py)


class CheckFailedError(Exception):
    """A check failed (exit 1)."""


class Parser(argparse.ArgumentParser):
    """argparse, with the fleet scripts' usage status."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class Tensor:
    """One Engram tensor in its shard: where its rows start and how long a row is."""

    name: str
    shard: Path
    start: int  # absolute offset of row 0 in the shard
    rows: int
    row_bytes: int


def table_sizes(snapshot: Path) -> dict[int, int]:
    """{layer: rows} from SNAPSHOT/config.json."""
    try:
        return config_tables(json.loads(read_text(snapshot / "config.json")))
    except ValueError as err:
        raise CheckFailedError(str(err)) from None


def partition(sizes: dict[int, int], tp: int) -> list[str]:
    """Each rank's share of every table, as --rows takes it."""
    return [format_rows(rank_rows(sizes, rank, tp)) for rank in range(tp)]


def header(shard: Path) -> tuple[int, dict[str, Any]]:
    """The safetensors header's length (with its 8-byte prefix) and its JSON."""
    with shard.open("rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        return 8 + length, json.loads(handle.read(length))


def tensors(snapshot: Path, layers: list[int]) -> list[Tensor]:
    """The weight and scale tensors of each layer, found through the checkpoint's index."""
    weight_map: dict[str, str] = json.loads(read_text(snapshot / INDEX))["weight_map"]
    found = []
    for layer in layers:
        for kind in ("weight", "scale"):
            suffix = f"layers.{layer}.engram.embed.{kind}"
            name = next((n for n in weight_map if n == suffix or n.endswith("." + suffix)), None)
            if name is None:
                raise CheckFailedError(f"{INDEX} has no tensor {suffix}")
            shard = snapshot / weight_map[name]
            size, meta = header(shard)
            begin, end = meta[name]["data_offsets"]
            rows = int(meta[name]["shape"][0])
            found.append(Tensor(name, shard, size + begin, rows, (end - begin) // rows))
    if sum(t.row_bytes for t in found) != ROW_BYTES * len(layers):
        raise CheckFailedError(f"the Engram tensors are not {ROW_BYTES} bytes per row")
    return found


def check_space(dest: Path, rows: dict[int, tuple[int, int]], slack: int) -> None:
    need = copy_bytes(rows, slack)
    free = shutil.disk_usage(dest).free
    if free < need:
        raise CheckFailedError(f"{dest} has {free} bytes free; the copy needs {need} (rows x {ROW_BYTES} B + {slack})")
    print(f"space-ok: {free} bytes free, the copy needs {need}")


def copy(snapshot: Path, dest: Path, rows: dict[int, tuple[int, int]], slack: int) -> None:
    sizes = table_sizes(snapshot)
    for layer, (lo, hi) in rows.items():
        if layer not in sizes or not 0 <= lo <= hi <= sizes[layer]:
            raise CheckFailedError(f"rows {layer}:{lo}:{hi} are not inside the table of {sizes.get(layer, 0)} rows")
    dest.mkdir(parents=True, exist_ok=True)
    check_space(dest, rows, slack)
    for tensor in tensors(snapshot, sorted(rows)):
        target = dest / tensor.shard.name
        if not target.exists():
            size, _ = header(tensor.shard)
            with tensor.shard.open("rb") as src, target.open("wb") as out:
                out.write(src.read(size))
                out.truncate(tensor.shard.stat().st_size)  # sparse: only the header and the rows take room
        lo, hi = rows[int(tensor.name.split("layers.")[1].split(".")[0])]
        with tensor.shard.open("rb") as src, target.open("r+b") as out:
            for first in range(lo, hi, CHUNK_ROWS):
                count = min(CHUNK_ROWS, hi - first)
                src.seek(tensor.start + first * tensor.row_bytes)
                out.seek(tensor.start + first * tensor.row_bytes)
                out.write(src.read(count * tensor.row_bytes))
    manifest = {"source": str(snapshot), "layers": {str(k): list(v) for k, v in sorted(rows.items())},
                "quant": "fp8", "note": "made by spark-compile's engram.py; rows at their checkpoint offsets"}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"copied {sum(hi - lo for lo, hi in rows.values())} rows per tensor into {dest}")


def verify(snapshot: Path, dest: Path, samples: int) -> None:
    rows = {int(k): (int(v[0]), int(v[1])) for k, v in json.loads(read_text(dest / MANIFEST))["layers"].items()}
    bad = []
    for tensor in tensors(snapshot, sorted(rows)):
        copy_path = dest / tensor.shard.name
        size, _ = header(tensor.shard)
        with tensor.shard.open("rb") as src, copy_path.open("rb") as out:
            if src.read(size) != out.read(size):
                bad.append(f"{copy_path.name}: header differs")
            lo, hi = rows[int(tensor.name.split("layers.")[1].split(".")[0])]
            if hi <= lo:
                continue
            picks = sorted({lo, hi - 1, *random.Random(f"{tensor.name}:{lo}:{hi}").choices(range(lo, hi), k=samples)})
            for row in picks:
                src.seek(tensor.start + row * tensor.row_bytes)
                out.seek(tensor.start + row * tensor.row_bytes)
                if src.read(tensor.row_bytes) != out.read(tensor.row_bytes):
                    bad.append(f"{tensor.name} row {row} differs")
        print(f"{tensor.name}: rows {lo}..{hi - 1}: {len(picks)} rows compared")
    if bad:
        raise CheckFailedError("; ".join(bad[:10]) + (f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""))
    print(f"verify-ok: {dest} matches {snapshot}")


def main(argv: list[str] | None = None) -> int:
    parser = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    rows_cmd = sub.add_parser("rows", help="row counts from config.json and each rank's rows")
    rows_cmd.add_argument("snapshot", type=Path)
    rows_cmd.add_argument("--tp", type=whole(1, 4096), default=4)
    copy_cmd = sub.add_parser("copy", help="make and verify a node-local copy")
    copy_cmd.add_argument("snapshot", type=Path)
    copy_cmd.add_argument("dest", type=Path)
    copy_cmd.add_argument("--rows", required=True, help="L:lo:hi,... (engram.py rows prints them)")
    copy_cmd.add_argument("--slack", type=whole(0, (1 << 63) - 1), default=SLACK,
                          help="bytes to leave free beyond the rows")
    copy_cmd.add_argument("--samples", type=whole(0, 1 << 30), default=2000)
    verify_cmd = sub.add_parser("verify", help="check a node-local copy against the checkpoint")
    verify_cmd.add_argument("snapshot", type=Path)
    verify_cmd.add_argument("dest", type=Path)
    verify_cmd.add_argument("--samples", type=whole(0, 1 << 30), default=2000)
    args = parser.parse_args(argv)
    try:
        if args.command == "rows":
            sizes = table_sizes(args.snapshot)
            print("tables: {" + ", ".join(f"{layer}: {n}" for layer, n in sorted(sizes.items())) + "}")
            for rank, text in enumerate(partition(sizes, args.tp)):
                print(f"rank {rank}: {text}")
        elif args.command == "copy":
            copy(args.snapshot, args.dest, parse_rows(args.rows), args.slack)
            verify(args.snapshot, args.dest, args.samples)
        else:
            verify(args.snapshot, args.dest, args.samples)
    except CheckFailedError as err:
        print(f"FAILED: {err}", file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as err:
        print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
