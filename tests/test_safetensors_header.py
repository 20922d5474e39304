"""The safetensors header reader on checkpoints these tests write: several shards and dtypes, and a shard
whose data region cannot be read, to show that the reader never reads tensor data."""

from __future__ import annotations

import json
import os
import signal
import struct
from pathlib import Path
from typing import Any

import pytest

from spark_compile.capacity.safetensors_header import HeaderError, Tensor, checkpoint_tensors, read_header
from spark_compile.capacity.weights import split_tensors

ITEM = {"BF16": 2, "F8_E4M3": 1, "F8_E8M0": 1, "F32": 4, "I8": 1, "U8": 1}


def write_shard(path: Path, tensors: dict[str, tuple[str, list[int]]], data: bytes | None = None) -> int:
    """A safetensors file with these tensors (name -> dtype, shape); returns its data length. ``data``
    replaces the data region (to make it shorter than the header says, or unreadable)."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    at = 0
    for name, (dtype, shape) in tensors.items():
        size = ITEM[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + size]}
        at += size
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + (bytes(at) if data is None else data))
    return at


def checkpoint(root: Path) -> Path:
    """Three shards in the DeepSeek-V4 naming: embedding and attention, experts, the draft and an Engram table."""
    write_shard(root / "model-00001-of-00003.safetensors", {
        "embed.weight": ("BF16", [64, 16]),
        "layers.0.attn.wq_a.weight": ("F8_E4M3", [8, 16]), "layers.0.attn.wq_a.scale": ("F8_E8M0", [1, 1]),
        "layers.0.attn.wq_b.weight": ("F8_E4M3", [32, 8]), "layers.0.attn_norm.weight": ("BF16", [16]),
        "layers.0.attn.attn_sink": ("F32", [4]),
    })
    write_shard(root / "model-00002-of-00003.safetensors", {
        f"layers.0.ffn.experts.{e}.w1.weight": ("I8", [16, 8]) for e in range(4)
    } | {"layers.0.ffn.shared_experts.w1.weight": ("F8_E4M3", [16, 16]), "layers.0.ffn.gate.weight": ("BF16", [4, 16])})
    write_shard(root / "model-00003-of-00003.safetensors", {
        "mtp.0.ffn.experts.0.w1.weight": ("I8", [16, 8]), "mtp.0.attn.wkv.weight": ("F8_E4M3", [8, 16]),
        "layers.1.engram.embed.weight": ("F8_E4M3", [100, 8]), "layers.1.engram.embed.scale": ("F8_E8M0", [100, 1]),
        "head.weight": ("F8_E4M3", [64, 16]),
    })
    return root


def test_every_shard_and_dtype_is_read(tmp_path: Path) -> None:
    tensors = checkpoint_tensors(checkpoint(tmp_path))
    assert len(tensors) == 6 + 6 + 5
    assert tensors[0] == Tensor("embed.weight", "BF16", (64, 16), 2048)
    by_name = {t.name: t for t in tensors}
    assert by_name["layers.0.attn.attn_sink"] == Tensor("layers.0.attn.attn_sink", "F32", (4,), 16)
    assert by_name["layers.1.engram.embed.scale"].nbytes == 100
    assert {t.dtype for t in tensors} == {"BF16", "F8_E4M3", "F8_E8M0", "F32", "I8"}
    assert "__metadata__" not in by_name


def test_split_follows_sglang_sharding(tmp_path: Path) -> None:
    split = split_tensors(checkpoint_tensors(checkpoint(tmp_path)), tp=4)
    # Sharded / 4: embed 2048, wq_b 256, attn_sink 16, 4 experts x 128, shared 256, head 1024.
    # Replicated: wq_a 128 + its scale 1, attn_norm 32, the router 128.
    assert split.target == (2048 + 256 + 16 + 512 + 256 + 1024) / 4 + 128 + 1 + 32 + 128
    assert split.draft == 128 / 4 + 128  # a draft expert, the draft's replicated latent KV head
    assert split.engram_tables == 800 + 100


def test_no_tensor_data_is_read(tmp_path: Path) -> None:
    # Each shard's header claims gigabytes of data and the file ends right after the header: the headers
    # alone answer (a FIFO shard, which a read of its data region would block on, is refused: see below).
    write_shard(tmp_path / "a.safetensors", {"big.weight": ("BF16", [1 << 31])}, data=b"")
    write_shard(tmp_path / "b.safetensors", {"x.weight": ("F32", [1 << 20])}, data=b"")
    tensors = checkpoint_tensors(tmp_path)
    assert [(t.name, t.nbytes) for t in tensors] == [("big.weight", 1 << 32), ("x.weight", 4 << 20)]


@pytest.mark.parametrize(("content", "message"), [
    (b"\x01\x02", "shorter than a safetensors header length (8 bytes)"),
    (struct.pack("<Q", 100) + b"{}", "the file ends inside its 100-byte header"),
    (struct.pack("<Q", 1 << 40), "header length 1099511627776 exceeds 67108864 bytes"),
    (struct.pack("<Q", 4) + b"nope", "the header is not JSON"),
    (struct.pack("<Q", 2) + b"[]", "the header is not a JSON object"),
])
def test_a_broken_header_is_named(tmp_path: Path, content: bytes, message: str) -> None:
    shard = tmp_path / "bad.safetensors"
    shard.write_bytes(content)
    with pytest.raises(HeaderError) as caught:
        read_header(shard)
    assert str(caught.value) == f"{shard}: {message}"


def test_an_unknown_dtype_is_named(tmp_path: Path) -> None:
    raw = b'{"w": {"dtype": "Q7", "shape": [1], "data_offsets": [0, 1]}}'
    shard = tmp_path / "bad.safetensors"
    shard.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(HeaderError) as caught:
        read_header(shard)
    assert str(caught.value) == f"{shard}: tensor 'w' has unknown dtype 'Q7'"


def test_a_directory_without_shards_is_named(tmp_path: Path) -> None:
    with pytest.raises(HeaderError) as caught:
        checkpoint_tensors(tmp_path)
    assert str(caught.value) == f"{tmp_path}: no *.safetensors shards"


def test_a_fifo_shard_is_named_not_waited_on(tmp_path: Path) -> None:
    shard = tmp_path / "model-00001-of-00001.safetensors"
    os.mkfifo(shard)

    def blocked(signum: int, frame: object) -> None:
        raise AssertionError("read_header blocked on a FIFO that no writer opens")

    previous = signal.signal(signal.SIGALRM, blocked)  # a guard, so that a broken reader fails, not hangs
    signal.alarm(30)
    try:
        with pytest.raises(HeaderError) as caught:
            read_header(shard)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert str(caught.value) == f"{shard}: not a regular file (a FIFO, a device or a folder)"


def test_a_deeply_nested_header_is_a_finding_of_its_shard(tmp_path: Path) -> None:
    raw = b"[" * 100_000 + b"]" * 100_000
    shard = tmp_path / "deep.safetensors"
    shard.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(HeaderError) as caught:
        read_header(shard)
    assert str(caught.value) == f"{shard}: the header nests too deeply to be a safetensors header"
