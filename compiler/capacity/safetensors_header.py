"""Tensor names, dtypes and shapes of a safetensors checkpoint, read from each shard's header alone.

A shard starts with an 8-byte little-endian header length and that many bytes of JSON naming every tensor's
dtype, shape and data offsets; the tensor data follows. Only those two reads are made, each bounded, so a
multi-gigabyte shard costs two small reads and its data is never touched.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

# A header larger than this is refused: real ones are kilobytes to a few megabytes (one entry per tensor).
MAX_HEADER_BYTES = 64 << 20
# Bytes per element of every safetensors dtype (the format's own list); sub-byte types count in halves.
DTYPE_BYTES: dict[str, float] = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "F4": 0.5, "F6_E2M3": 0.75,
    "F6_E3M2": 0.75, "I16": 2, "U16": 2, "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8,
    "F64": 8, "C64": 8,
}


class HeaderError(ValueError):
    """A shard whose header cannot be read or is not a safetensors header; the message names the file."""


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor as its shard's header describes it."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    nbytes: int  # the length of its data region (end - start offset), which is what it occupies


def _entry(path: Path, name: str, entry: object) -> Tensor:
    if not isinstance(entry, dict):
        raise HeaderError(f"{path}: tensor {name!r} is not an object in the header")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        raise HeaderError(f"{path}: tensor {name!r} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise HeaderError(f"{path}: tensor {name!r} has no valid shape")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise HeaderError(f"{path}: tensor {name!r} has no valid data_offsets")
    return Tensor(name, str(dtype), tuple(shape), offsets[1] - offsets[0])


def read_header(path: Path) -> list[Tensor]:
    """Every tensor of one shard (its ``__metadata__`` entry skipped), from the header only."""
    try:
        # Without blocking (a FIFO shard would hang check) and only a regular file.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise HeaderError(f"{path}: not a regular file (a FIFO, a device or a folder)")
            head = handle.read(8)
            if len(head) != 8:
                raise HeaderError(f"{path}: shorter than a safetensors header length (8 bytes)")
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES:
                raise HeaderError(f"{path}: header length {length} exceeds {MAX_HEADER_BYTES} bytes")
            raw = handle.read(length)
    except OSError as exc:
        raise HeaderError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) != length:
        raise HeaderError(f"{path}: the file ends inside its {length}-byte header")
    try:
        data = json.loads(raw)
    except ValueError:
        raise HeaderError(f"{path}: the header is not JSON") from None
    except RecursionError:  # a finding of this shard, not an error that hides every other finding
        raise HeaderError(f"{path}: the header nests too deeply to be a safetensors header") from None
    if not isinstance(data, dict):
        raise HeaderError(f"{path}: the header is not a JSON object")
    return [_entry(path, name, entry) for name, entry in sorted(data.items()) if name != "__metadata__"]


def checkpoint_tensors(directory: Path) -> list[Tensor]:
    """Every tensor of every ``*.safetensors`` shard in a snapshot directory, in shard then name order."""
    shards = sorted(directory.glob("*.safetensors"))
    if not shards:
        raise HeaderError(f"{directory}: no *.safetensors shards")
    return [tensor for shard in shards for tensor in read_header(shard)]
