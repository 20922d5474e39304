"""Edge: read the checkpoint's config.json a profile commits beside itself (model.config_json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from spark_compile.common.errors import InputError
from spark_compile.spec.checkpoint import Checkpoint, checkpoint
from spark_compile.spec.engine_values import draft_model
from spark_compile.spec.model import Profile
from spark_compile.stages.load import read_bytes
from spark_compile.stages.resolve import Resolved

MAX_CONFIG_BYTES = 1 << 20


class ConfigError(ValueError):
    """A config.json that cannot be used; the message says why."""


def is_regular(path: Path) -> bool:
    """A regular file (a name too long or otherwise unusable is not one)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object of at most MAX_CONFIG_BYTES in a regular file, opened without blocking (a FIFO or device a
    profile names never hangs the check)."""
    try:
        raw = read_bytes(path)  # at most MAX_CONFIG_BYTES + 1 bytes
        data = json.loads(raw) if len(raw) <= MAX_CONFIG_BYTES else None
    except (InputError, ValueError):
        raise ConfigError(f"{path} is not a readable JSON file") from None
    except RecursionError:  # nested deeper than the interpreter recurses: no checkpoint's config.json is
        raise ConfigError(f"{path} nests too deeply to be a model config.json") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object under {MAX_CONFIG_BYTES // 1024} KiB")
    return data


def read_config(path: Path, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A model config.json: a JSON object (read_object, unless ``data`` is what it read) naming its
    architectures."""
    data = read_object(path) if data is None else data
    if not isinstance(data.get("architectures"), list):
        raise ConfigError(f"{path} is not a model config.json (a JSON object with 'architectures', under "
                          f"{MAX_CONFIG_BYTES // 1024} KiB)")
    return data


def committed_path(resolved: Resolved, name: str, at: tuple[str | int, ...]) -> Path:
    """A file named relative to the profile file that names it."""
    return Path(str(resolved.origin(at).spot.value.file)).parent / name


def committed_config(resolved: Resolved, profile: Profile) -> dict[str, Any] | str | None:
    """The JSON object model.config_json names, or why it cannot be read (SC247 reports it); None when unset.
    The pipeline reads it once for the budget and the rules."""
    if profile.model.config_json is None:
        return None
    try:
        return read_object(committed_path(resolved, str(profile.model.config_json), ("model", "config_json")))
    except ConfigError as why:
        return str(why)


def committed_checkpoint(resolved: Resolved, profile: Profile,
                         data: dict[str, Any] | str | None = None) -> tuple[Checkpoint | None, str]:
    """The committed config.json's facts (from ``data`` when committed_config already read it, or its reason
    when it could not), or (None, why it cannot be read); (None, "") when none is named."""
    if profile.model.config_json is None:
        return None, ""
    if isinstance(data, str):
        return None, data
    path = committed_path(resolved, str(profile.model.config_json), ("model", "config_json"))
    try:
        return checkpoint(read_config(path, data), str(profile.model.config_json)), ""
    except ConfigError as why:
        return None, str(why)


def committed_draft(resolved: Resolved, profile: Profile) -> tuple[Checkpoint | None, str]:
    """The separate draft model's committed config.json facts, as committed_checkpoint does for the target."""
    draft = draft_model(profile)
    if draft is None or draft.config_json is None or draft.config_path is None:
        return None, ""
    path = committed_path(resolved, draft.config_json, draft.config_path)
    try:
        return checkpoint(read_config(path), draft.config_json), ""
    except ConfigError as why:
        return None, f"the draft's {why}"
