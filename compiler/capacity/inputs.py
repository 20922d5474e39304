"""The capacity stage's inputs from disk: the checkpoint's config.json and, when the snapshot is on this
machine, its safetensors headers (never tensor data). Every failure becomes a sentence in the source note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_compile.capacity.budget import CapacityInputs
from spark_compile.capacity.safetensors_header import HeaderError, checkpoint_tensors
from spark_compile.capacity.weights import split_tensors
from spark_compile.spec.model import Profile
from spark_compile.stages.checkpoint import ConfigError, committed_path, is_regular, read_object
from spark_compile.stages.resolve import Resolved


def _snapshot(profile: Profile) -> Path | None:
    """The model directory on this machine's terms: the HF cache snapshot, or the plain directory; None for
    a hub id (nothing local to read)."""
    model = profile.model
    repo = model.holder_repo or model.repo
    if repo is None:
        return None
    return Path(str(repo)) / "snapshots" / str(model.snapshot) if model.snapshot else Path(str(repo))


def _config_path(resolved: Resolved, profile: Profile) -> Path | None:
    if profile.model.config_json is not None:
        return committed_path(resolved, str(profile.model.config_json), ("model", "config_json"))
    snapshot = _snapshot(profile)
    local = snapshot / "config.json" if snapshot is not None else None
    return local if local is not None and is_regular(local) else None


def _read_config(path: Path) -> dict[str, Any] | str:
    try:
        return read_object(path)
    except ConfigError as why:
        return str(why)


def capacity_inputs(resolved: Resolved, profile: Profile,
                    committed: dict[str, Any] | str | None = None) -> CapacityInputs:
    """config.json (model.config_json, else the snapshot's) and the snapshot's per-rank weight bytes;
    ``committed`` is model.config_json's object (or why it cannot be read) when the caller has read it."""
    path = _config_path(resolved, profile)
    config: dict[str, Any] | None = None
    if path is None:
        source = "no config.json: model.config_json is unset and the model directory is not on this machine"
    else:
        given = committed if profile.model.config_json is not None else None
        read = given if given is not None else _read_config(path)
        named = f"model.config_json ({path.name})" if profile.model.config_json is not None else path.as_posix()
        config, source = (None, read) if isinstance(read, str) else (read, named)
    snapshot = _snapshot(profile)
    split, split_source = None, ("a hub id names the model" if snapshot is None
                                 else f"{snapshot.as_posix()} is not on this machine")
    if snapshot is not None and snapshot.is_dir() and any(snapshot.glob("*.safetensors")):
        try:
            split, split_source = split_tensors(checkpoint_tensors(snapshot), profile.engine.parallel.tp or 1), \
                snapshot.as_posix()
        except HeaderError as exc:
            split_source = str(exc)
    return CapacityInputs(config, source, split, split_source)
