"""The checkpoint plan, part of the plan stage: which directory holds each checkpoint (the target's config.json,
shards and index, a separate draft's config.json), decided once for every reader; and the edge that reads the
config.json files a profile commits beside itself (model.config_json, the draft's)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_compile.common.errors import InputError
from spark_compile.spec.checkpoint import Checkpoint, checkpoint
from spark_compile.spec.engine_values import DRAFT_PATH, draft_model
from spark_compile.spec.model import Model, Profile
from spark_compile.stages.load import YamlPath, read_bytes
from spark_compile.stages.model_paths import host_dir
from spark_compile.stages.resolve import BlobReader, Resolved

MAX_CONFIG_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class NodeCheckpoint:
    """The target's checkpoint as one rank's node sees it; None throughout for a hub id."""

    repo: str | None  # the folder the node mounts at model.container_repo
    field: str  # the model field naming it: "repo", or "holder_repo" on Engram's holder
    directory: str | None  # the model directory in it (config.json, shards, index): its snapshot's in an HF cache


@dataclass(frozen=True, slots=True)
class ModelFiles:
    """Where the compiler reads one model (the target, or a separate draft) on this machine."""

    directory: str | None  # the model directory (its snapshot's in an HF cache); None for a hub id
    config_json: str | None  # a committed copy of its config.json, relative to the profile file naming it
    config_at: YamlPath  # where the profile names that copy (<model>.config_json)


@dataclass(frozen=True, slots=True)
class CheckpointPlan:
    """Each checkpoint's directory, decided once: the mounts and the fleet's data read ``nodes``; the budget, the
    rules and `check --engine` read ``target`` and ``draft``."""

    nodes: tuple[NodeCheckpoint, ...]  # in rank order
    target: ModelFiles
    draft: ModelFiles | None  # None without a separate draft model


def _node(model: Model, holds: bool) -> NodeCheckpoint:
    """Engram's holder may keep its own copy at holder_repo; every other node reads model.repo."""
    field = "holder_repo" if holds and model.holder_repo is not None else "repo"
    repo = model.holder_repo if field == "holder_repo" else model.repo
    return NodeCheckpoint(repo, field, host_dir(model, repo))


def checkpoint_plan(profile: Profile) -> CheckpointPlan:
    """The checkpoint plan of a profile (pure). This machine reads the target where Engram's holder does, else
    where every node does: at model.repo (holder_repo means nothing without Engram, SC428)."""
    model = profile.model
    holds = [model.engram is not None and node.holds_checkpoint for node in profile.fleet.nodes]
    nodes = tuple(_node(model, held) for held in holds)
    here = nodes[holds.index(True)] if True in holds else _node(model, False)
    config = None if model.config_json is None else str(model.config_json)
    target = ModelFiles(here.directory, config, ("model", "config_json"))
    draft = draft_model(profile)
    if draft is None:
        return CheckpointPlan(nodes, target, None)
    return CheckpointPlan(nodes, target, ModelFiles(host_dir(draft.source), draft.config_json,
                                                    (*DRAFT_PATH, "config_json")))


class ConfigError(ValueError):
    """A config.json that cannot be used; the message says why."""


def is_regular(path: Path) -> bool:
    """A regular file (a name too long or otherwise unusable is not one)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_object(path: Path, blob: BlobReader = read_bytes) -> dict[str, Any]:
    """A JSON object of at most MAX_CONFIG_BYTES in a regular file, opened without blocking (a FIFO or device a
    profile names never hangs the check); ``blob`` reads it from elsewhere (a git revision)."""
    try:
        raw = blob(path)  # at most MAX_CONFIG_BYTES + 1 bytes
        data = json.loads(raw) if len(raw) <= MAX_CONFIG_BYTES else None
    except (InputError, ValueError):
        raise ConfigError(f"{path} is not a readable JSON file") from None
    except RecursionError:  # nested deeper than the interpreter recurses: no checkpoint's config.json is
        raise ConfigError(f"{path} nests too deeply to be a model config.json") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object under {MAX_CONFIG_BYTES // 1024} KiB")
    return data


def read_config(path: Path, data: dict[str, Any] | None = None, blob: BlobReader = read_bytes) -> dict[str, Any]:
    """A model config.json: a JSON object (read_object, unless ``data`` is what it read) naming its
    architectures."""
    data = read_object(path, blob) if data is None else data
    if not isinstance(data.get("architectures"), list):
        raise ConfigError(f"{path} is not a model config.json (a JSON object with 'architectures', under "
                          f"{MAX_CONFIG_BYTES // 1024} KiB)")
    return data


def committed_path(resolved: Resolved, name: str, at: YamlPath) -> Path:
    """A file named relative to the profile file that names it."""
    return resolved.file_of(str(resolved.origin(at).spot.value.file)).parent / name


def config_file(resolved: Resolved, files: ModelFiles) -> Path | None:
    """The model's config.json: the committed copy if the profile names one, else the one in its directory
    (which may not be on this machine); None for a hub id with no committed copy."""
    if files.config_json is not None:
        return committed_path(resolved, files.config_json, files.config_at)
    return None if files.directory is None else Path(files.directory) / "config.json"


def committed_config(resolved: Resolved, plan: CheckpointPlan) -> dict[str, Any] | str | None:
    """The JSON object model.config_json names, or why it cannot be read (SC247 reports it); None when unset.
    The pipeline reads it once for the budget and the rules."""
    target = plan.target
    if target.config_json is None:
        return None
    try:
        return read_object(committed_path(resolved, target.config_json, target.config_at), resolved.blob)
    except ConfigError as why:
        return str(why)


def _committed_facts(resolved: Resolved, files: ModelFiles | None,
                     data: dict[str, Any] | None = None) -> tuple[Checkpoint | None, str]:
    if files is None or files.config_json is None:
        return None, ""
    try:
        path = committed_path(resolved, files.config_json, files.config_at)
        return checkpoint(read_config(path, data, resolved.blob), files.config_json), ""
    except ConfigError as why:
        return None, str(why)


def committed_checkpoint(resolved: Resolved, plan: CheckpointPlan,
                         data: dict[str, Any] | str | None = None) -> tuple[Checkpoint | None, str]:
    """The committed config.json's facts (from ``data`` when committed_config already read it, or its reason
    when it could not), or (None, why it cannot be read); (None, "") when none is named."""
    if plan.target.config_json is not None and isinstance(data, str):
        return None, data
    return _committed_facts(resolved, plan.target, None if isinstance(data, str) else data)


def committed_draft(resolved: Resolved, plan: CheckpointPlan) -> tuple[Checkpoint | None, str]:
    """The separate draft model's committed config.json facts, as committed_checkpoint does for the target."""
    facts, why = _committed_facts(resolved, plan.draft)
    return facts, f"the draft's {why}" if why else ""
