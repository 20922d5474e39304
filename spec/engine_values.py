"""The engine settings the SGLang rules and `check --engine` reason with, each read in one place.

Some are still raw engine.args values (kv-cache-dtype, page-size, quantization) and the draft model is a bare
container path; each accessor returns the value with the profile path that set it, so that moving a setting to
a typed field changes one function here and no rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spark_compile.spec.model import Profile


YamlPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Setting:
    """A value the profile wrote and where it wrote it."""

    value: str
    path: YamlPath


@dataclass(frozen=True)
class DraftModel:
    """A separate draft model: its path inside the container, and its committed config.json if the profile
    names one (relative to the profile file at ``config_path``)."""

    container_path: str
    path: YamlPath
    config_json: str | None
    config_path: YamlPath | None


def _arg(profile: Profile, name: str) -> Setting | None:
    value = profile.engine.args.get(name)
    return None if value is None or isinstance(value, (bool, list)) else Setting(str(value), ("engine", "args", name))


def kv_cache_dtype(profile: Profile) -> Setting | None:
    """--kv-cache-dtype as written."""
    return _arg(profile, "kv-cache-dtype")


def page_size(profile: Profile) -> Setting | None:
    """--page-size as written."""
    return _arg(profile, "page-size")


def quantization(profile: Profile) -> Setting | None:
    """--quantization as written (the target model's)."""
    return _arg(profile, "quantization")


def draft_model(profile: Profile) -> DraftModel | None:
    """The separate draft model, if the profile names one."""
    path = profile.engine.speculative.draft_model
    if path is None:
        return None
    return DraftModel(str(path), ("engine", "speculative", "draft_model"), None, None)
