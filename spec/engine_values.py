"""The engine settings the SGLang rules and `check --engine` reason with, each read in one place.

Each accessor returns the typed field's value with the profile path that sets it, so that a rule names the line
and a change of field changes one function here and no rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_compile.spec.engine_model import Draft
from spark_compile.spec.model import Profile
from spark_compile.spec.sglang_facts import DRAFT_MTP_ARCHITECTURES, MTP_DRAFT_ARCHITECTURES, STEP_ALGORITHMS

YamlPath = tuple[str | int, ...]
DRAFT_PATH: YamlPath = ("engine", "speculative", "draft")


@dataclass(frozen=True, slots=True)
class Setting:
    """A value the profile wrote and where it wrote it."""

    value: str
    path: YamlPath


@dataclass(frozen=True, slots=True)
class DraftModel:
    """A separate draft model (engine.speculative.draft) and its committed config.json if the profile names one
    (relative to the profile file at ``config_path``)."""

    source: Draft
    path: YamlPath
    config_json: str | None
    config_path: YamlPath | None


def _setting(value: object, path: YamlPath) -> Setting | None:
    return None if value is None else Setting(str(value), path)


def kv_cache_dtype(profile: Profile) -> Setting | None:
    """--kv-cache-dtype as written (engine.kv_cache_dtype)."""
    return _setting(profile.engine.kv_cache_dtype, ("engine", "kv_cache_dtype"))


def page_size(profile: Profile) -> Setting | None:
    """--page-size as written (engine.page_size)."""
    return _setting(profile.engine.page_size, ("engine", "page_size"))


def quantization(profile: Profile) -> Setting | None:
    """--quantization as written (model.quantization, the target model's)."""
    return _setting(profile.model.quantization, ("model", "quantization"))


def own_mtp_draft(architecture: str, algorithm: str) -> bool:
    """SGLang drafts with the target's own MTP layers for this architecture (no draft model): EAGLE or NEXTN, or
    any algorithm of _handle_eagle_family where it makes the target the draft and the draft worker loads only
    the checkpoint's MTP layers (ModelConfig._config_draft_model)."""
    if algorithm in ("EAGLE", "NEXTN"):
        return architecture in (*MTP_DRAFT_ARCHITECTURES, *DRAFT_MTP_ARCHITECTURES)
    return algorithm in STEP_ALGORITHMS and architecture in MTP_DRAFT_ARCHITECTURES \
        and architecture in DRAFT_MTP_ARCHITECTURES


def draft_quantization(profile: Profile) -> Setting | None:
    """--speculative-draft-model-quantization as written (engine.speculative.draft.quantization)."""
    draft = profile.engine.speculative.draft
    return None if draft is None else _setting(draft.quantization, (*DRAFT_PATH, "quantization"))


def draft_model(profile: Profile) -> DraftModel | None:
    """The separate draft model, if the profile names one."""
    draft = profile.engine.speculative.draft
    if draft is None:
        return None
    config = draft.config_json
    return DraftModel(draft, DRAFT_PATH, None if config is None else str(config),
                      None if config is None else (*DRAFT_PATH, "config_json"))
