"""The capacity stage's inputs from disk: the checkpoint's config.json and, when the snapshot is on this
machine, its safetensors headers (never tensor data), both where the plan's checkpoint plan says. Every failure
becomes a sentence in the source note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_compile.capacity.kv_predict import CapacityInputs
from spark_compile.capacity.safetensors_header import HeaderError, checkpoint_tensors
from spark_compile.capacity.weights import split_tensors
from spark_compile.spec.model import Profile
from spark_compile.stages.checkpoint import CheckpointPlan, ConfigError, config_file, is_regular, read_object
from spark_compile.stages.load import read_bytes
from spark_compile.stages.resolve import BlobReader, Resolved


def _read_config(path: Path, blob: BlobReader = read_bytes) -> dict[str, Any] | str:
    try:
        return read_object(path, blob)
    except ConfigError as why:
        return str(why)


def _config(resolved: Resolved, checkpoint: CheckpointPlan,
            committed: dict[str, Any] | str | None) -> tuple[dict[str, Any] | None, str]:
    """config.json's object and where it came from, or None and why there is none."""
    target = checkpoint.target
    path = config_file(resolved, target)
    if target.config_json is not None and path is not None:
        read = committed if committed is not None else _read_config(path, resolved.blob)
        return (None, read) if isinstance(read, str) else (read, f"model.config_json ({path.name})")
    if path is None or not is_regular(path):
        return None, "no config.json: model.config_json is unset and the model directory is not on this machine"
    read = _read_config(path)
    return (None, read) if isinstance(read, str) else (read, path.as_posix())


INDEX_MAX_BYTES = 64 << 20  # a real index is kilobytes to a few megabytes (one entry per tensor)


def index_file(config_path: Path) -> Path:
    """The index committed beside a config.json: ``X.safetensors.index.json`` beside ``X.config.json``, or
    ``model.safetensors.index.json`` beside ``config.json``."""
    name = config_path.name
    stem = name[: -len(".config.json")] if name.endswith(".config.json") else "model"
    return config_path.with_name(f"{stem}.safetensors.index.json")


def _index_total(path: Path | None) -> tuple[int | None, str]:
    """metadata.total_size of the index beside config.json, or None and why (a missing file is no error)."""
    if path is None:
        return None, ""
    index = index_file(path)
    if not is_regular(index) or index.stat().st_size > INDEX_MAX_BYTES:
        return None, ""
    try:
        meta = read_object(index).get("metadata")
    except ConfigError:
        return None, ""
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, int) and not isinstance(total, bool) and total > 0:
        return total, index.name
    return None, ""


def _draft_config(resolved: Resolved, checkpoint: CheckpointPlan) -> dict[str, Any] | None:
    if checkpoint.draft is None:
        return None
    path = config_file(resolved, checkpoint.draft)
    read = None if path is None or not is_regular(path) else _read_config(path)
    return read if isinstance(read, dict) else None


def capacity_inputs(resolved: Resolved, profile: Profile, checkpoint: CheckpointPlan,
                    committed: dict[str, Any] | str | None = None) -> CapacityInputs:
    """config.json (model.config_json, else the model directory's) and the model directory's per-rank weight
    bytes; ``committed`` is model.config_json's object (or why it cannot be read) when the caller has read it."""
    config, source = _config(resolved, checkpoint, committed)
    directory = checkpoint.target.directory
    snapshot = None if directory is None else Path(directory)
    split, split_source = None, ("a hub id names the model" if snapshot is None
                                 else f"{snapshot.as_posix()} is not on this machine")
    if snapshot is not None and snapshot.is_dir() and any(snapshot.glob("*.safetensors")):
        try:
            split, split_source = split_tensors(checkpoint_tensors(snapshot), profile.engine.parallel.tp or 1), \
                snapshot.as_posix()
        except HeaderError as exc:
            split_source = str(exc)
    total, index_source = _index_total(config_file(resolved, checkpoint.target))
    return CapacityInputs(config, source, split, split_source, total, index_source,
                          _draft_config(resolved, checkpoint))
