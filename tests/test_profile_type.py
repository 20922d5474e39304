"""The profile the pipeline hands every command is the type the code declares: spec/model.py's classes, with
pydantic's methods, on every shipped profile (the reference, the releases, the examples)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from spark_compile.pipeline import planned, run
from spark_compile.spec.container_model import Container, Kubernetes
from spark_compile.spec.engine_model import Engine, Limits
from spark_compile.spec.model import Fleet, Node, Operations, Profile
from spark_compile.spec.operations_model import Window
from spark_compile.spec.overlay_section import OverlaySection

from conftest import ROOT

SHIPPED = sorted((ROOT / "spec" / "profiles").rglob("*.yaml"))


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    """The model classes an annotation names (``Node``, ``list[Node]``, ``Kubernetes | None``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _models(arg)


Models = tuple[type[BaseModel], ...]


def _sections(value: Any, path: str, declared: Models) -> Iterator[tuple[str, Any, Models]]:
    """Every section of ``value`` with its path and the classes its field declares, depth first."""
    if isinstance(value, list | dict):
        for key, item in (value.items() if isinstance(value, dict) else enumerate(value)):
            yield from _sections(item, f"{path}[{key!r}]", declared)
    elif isinstance(value, BaseModel) or (declared and value is not None):
        yield path, value, declared
        for name, field in getattr(type(value), "model_fields", {}).items():
            yield from _sections(getattr(value, name), f"{path}.{name}", tuple(_models(field.annotation)))


def test_the_shipped_profiles_are_found() -> None:
    names = {path.relative_to(ROOT / "spec" / "profiles").parts[0] for path in SHIPPED}
    assert names == {"dsv41-4spark.yaml", "examples", "releases"}
    assert len(SHIPPED) >= 15


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "spec" / "profiles")))
def test_every_section_is_its_declared_class(path: Path) -> None:
    profile = planned(run(path)).profile
    assert type(profile) is Profile
    assert type(profile.fleet) is Fleet and type(profile.engine) is Engine
    assert all(type(node) is Node for node in profile.fleet.nodes)
    # Sections the file leaves out are the model's own defaults, built by the model.
    assert type(profile.container) is Container and type(profile.overlay) is OverlaySection
    assert type(profile.operations) is Operations and type(profile.operations.window) is Window
    assert profile.kubernetes is None or type(profile.kubernetes) is Kubernetes
    seen = 0
    for where, section, declared in _sections(profile, "profile", (Profile,)):
        assert type(section) in declared, f"{where}: {type(section).__name__}, declared {declared}"
        seen += 1
    assert seen >= 20


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT / "spec" / "profiles")))
def test_pydantic_methods_work_on_the_validated_profile(path: Path) -> None:
    profile = planned(run(path)).profile
    data = profile.model_dump()
    assert data["name"] == profile.name and data["fleet"]["nodes"][0]["name"] == profile.fleet.nodes[0].name
    assert Profile.model_validate(data) == profile
    assert {"name", "fleet", "engine", "model"} <= profile.model_fields_set
    assert profile.engine.model_copy() == profile.engine


def test_a_property_added_to_a_section_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """A @property on a section's class (what mypy accepts on the declared type) works on the pipeline's
    profile, which a stand-in record class would not have."""

    def limited(limits: Limits) -> bool:
        return limits.max_running_requests is not None

    monkeypatch.setattr(Limits, "limited", property(limited), raising=False)
    limits = planned(run(ROOT / "spec" / "profiles" / "dsv41-4spark.yaml")).profile.engine.limits
    assert limits.limited is True  # type: ignore[attr-defined]
    assert Limits().limited is False  # type: ignore[attr-defined]
