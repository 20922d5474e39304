"""Where a model (the target or a speculative draft) lives: its --model-path, its host directory, its
config.json. Part of the plan stage; the three forms are an HF cache (repo + snapshot), a plain directory
(repo alone) and a hub id resolved in the container's HF cache."""

from __future__ import annotations

from typing import Protocol

from spark_compile.spec.core_model import Profile

# SGLang (through huggingface_hub) resolves a hub id under HF_HOME, by default $HOME/.cache/huggingface.
HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"


class ModelSource(Protocol):
    """What model and engine.speculative.draft share."""

    @property
    def repo(self) -> str | None: ...

    @property
    def hub_id(self) -> str | None: ...

    @property
    def snapshot(self) -> str | None: ...

    @property
    def container_repo(self) -> str: ...


def in_snapshot(directory: str, source: ModelSource) -> str:
    """The model directory under ``directory`` (a repo mounted or on the host): the snapshot's, or itself."""
    return f"{directory}/snapshots/{source.snapshot}" if source.snapshot is not None else directory


def container_path(source: ModelSource) -> str:
    """What --model-path (or --speculative-draft-model-path) names inside the container."""
    if source.hub_id is not None:
        return source.hub_id
    return in_snapshot(source.container_repo, source)


def host_dir(source: ModelSource, repo: str | None = None) -> str | None:
    """The model directory on a node (``repo`` overrides source.repo, e.g. the holder's); None for a hub id."""
    repo = repo or source.repo
    return None if repo is None else in_snapshot(repo, source)


def holder_dir(profile: Profile) -> str | None:
    """The target's model directory on the node that holds the checkpoint (Engram's shards)."""
    return host_dir(profile.model, profile.model.holder_repo)


def served_id(profile: Profile) -> str:
    """The model id the API answers to: served_name, else the model path (SGLang's own default)."""
    return profile.model.served_name or container_path(profile.model)
