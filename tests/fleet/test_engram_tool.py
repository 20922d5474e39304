"""fleet/engram.py (the committed fleet_scripts/ copy: the drift check holds it current) against a small
checkpoint made here: row counts from config.json, a node-local copy (sparse, rows at their own offsets)
that verifies, a corrupted copy caught, too little free space caught."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

TOOL = ROOT / "generated" / "fleet_scripts" / "engram.py"  # beside engram_rows.py, as installed
SIZES = {1: 1000, 14: 1003}
SHARD = "model-00002-of-00002.safetensors"


def safetensors(path: Path, tensors: dict[str, tuple[list[int], bytes]]) -> None:
    """A safetensors file: 8-byte header length, JSON header, then the tensors' bytes in order."""
    meta: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name, (shape, data) in tensors.items():
        meta[name] = {"dtype": "U8", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    head = json.dumps(meta).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


@pytest.fixture
def snapshot(tmp_path: Path) -> Path:
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "config.json").write_text(json.dumps({"text_config": {
        "engram_layer_ids": list(SIZES), "engram_num_embeddings": list(SIZES.values())}}))
    rng = random.Random(7)
    tensors = {"model.norm.weight": ([16], rng.randbytes(16))}
    for layer, rows in SIZES.items():
        tensors[f"model.layers.{layer}.engram.embed.weight"] = ([rows, 256], rng.randbytes(rows * 256))
        tensors[f"model.layers.{layer}.engram.embed.scale"] = ([rows, 8], rng.randbytes(rows * 8))
    safetensors(snap / SHARD, tensors)
    weight_map = dict.fromkeys(tensors, SHARD)
    (snap / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return snap


def engram(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True,
                          check=False)


def test_rows_come_from_config_json(snapshot: Path) -> None:
    result = engram("rows", snapshot, "--tp", "4")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "tables: {1: 1000, 14: 1003}",
        "rank 0: 1:0:250,14:0:250", "rank 1: 1:250:500,14:250:501",
        "rank 2: 1:500:750,14:501:752", "rank 3: 1:750:1000,14:752:1003",
    ]


def test_copy_is_sparse_verifies_and_a_corrupted_row_is_caught(snapshot: Path, tmp_path: Path) -> None:
    dest = tmp_path / "local"
    result = engram("copy", snapshot, dest, "--rows", "1:250:500,14:250:501", "--slack", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verify-ok" in result.stdout
    copy, source = dest / SHARD, snapshot / SHARD
    assert copy.stat().st_size == source.stat().st_size
    manifest = json.loads((dest / "engram-local.json").read_text())
    assert manifest["layers"] == {"1": [250, 500], "14": [250, 501]} and manifest["quant"] == "fp8"
    data = copy.read_bytes()
    assert data[:8] == source.read_bytes()[:8]
    # A row outside the range stays a hole (zeros); one inside equals the checkpoint's.
    (length,) = struct.unpack("<Q", data[:8])
    head = json.loads(data[8:8 + length])
    start = 8 + length + head["model.layers.14.engram.embed.weight"]["data_offsets"][0]
    assert data[start + 10 * 256:start + 11 * 256] == bytes(256)
    assert data[start + 300 * 256:start + 301 * 256] == source.read_bytes()[start + 300 * 256:start + 301 * 256]
    with copy.open("r+b") as handle:  # the last row of layer 14's weight, flipped
        handle.seek(start + 500 * 256)
        handle.write(bytes(256))
    bad = engram("verify", snapshot, dest)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAILED: model.layers.14.engram.embed.weight row 500 differs" in bad.stderr


def test_too_little_free_space_is_caught_before_any_byte_is_written(snapshot: Path, tmp_path: Path) -> None:
    dest = tmp_path / "local"
    result = engram("copy", snapshot, dest, "--rows", "1:0:250,14:0:250", "--slack", str(1 << 62))
    assert result.returncode == 1
    assert f"the copy needs {500 * 264 + (1 << 62)} (rows x 264 B + {1 << 62})" in result.stderr
    assert list(dest.iterdir()) == []


def test_rows_outside_the_table_are_refused(snapshot: Path, tmp_path: Path) -> None:
    result = engram("copy", snapshot, tmp_path / "local", "--rows", "1:0:1001")
    assert result.returncode == 1
    assert "rows 1:0:1001 are not inside the table of 1000 rows" in result.stderr


def test_a_usage_error_exits_64_as_every_fleet_script_does(tmp_path: Path) -> None:
    result = engram("copy", tmp_path)
    assert (result.returncode, result.stdout) == (64, "")
    assert result.stderr.endswith("engram.py copy: error: the following arguments are required: dest, --rows\n")
    missing = engram("rows", tmp_path / "absent")
    assert (missing.returncode, missing.stderr) == (
        2, f"error: FileNotFoundError: [Errno 2] No such file or directory: '{tmp_path / 'absent' / 'config.json'}'\n")
