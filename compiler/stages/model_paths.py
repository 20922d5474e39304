"""Where a model (the target or a speculative draft) lives: its --model-path, its host directory, the id the
API serves. Part of the plan stage; the three forms are an HF cache (repo + snapshot), a plain directory
(repo alone) and a hub id resolved in the container's HF cache."""

from __future__ import annotations

from typing import Protocol

from spark_compile.spec.model import Profile


class ModelSource(Protocol):
    """What model and engine.speculative.draft share."""

    @property
    def repo(self) -> str | None: ...

    @property
    def hub_id(self) -> str | None: ...

    @property
    def gguf(self) -> str | None: ...

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
        return source.hub_id if source.gguf is None else f"{source.hub_id}:{source.gguf}"
    return in_snapshot(source.container_repo, source)


def host_dir(source: ModelSource, repo: str | None = None) -> str | None:
    """The model directory on a node (``repo`` overrides source.repo, e.g. the holder's); None for a hub id."""
    repo = repo or source.repo
    return None if repo is None else in_snapshot(repo, source)


def served_id(profile: Profile) -> str:
    """The model id the API answers to: served_name, else the model path (SGLang's own default)."""
    return profile.model.served_name or container_path(profile.model)
