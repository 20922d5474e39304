"""The check path's validator (spec/core_validator.py) is the pydantic model, only faster: on every shipped and
test profile, every section's defaults and every one-value mutation of three profiles, both give the same
profile or the same errors. The cache it keeps is tested in tests/test_user_cache.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import ValidationError

from spark_compile.spec import core_validator
from spark_compile.spec.model import Profile as ProfileModel
from spark_compile.spec.record import Record, as_data
from spark_compile.stages.load import LoadError
from spark_compile.stages.resolve import resolve

from conftest import REFERENCE_PROFILE, ROOT

PROFILES = sorted([*(ROOT / "spec" / "profiles").rglob("*.yaml"),
                   *(ROOT / "tests" / "profiles" / "positive").glob("*.yaml"),
                   *(ROOT / "tests" / "profiles" / "negative").glob("*.yaml"),
                   *(ROOT / "tests" / "k8s" / "profiles").rglob("*.yaml")])
# Mutated one value at a time: the reference, one with every Kubernetes section, one over TCP with one GPU a node.
MUTATED = [REFERENCE_PROFILE, ROOT / "tests" / "k8s" / "profiles" / "dsv41-k8s.yaml",
           ROOT / "spec" / "profiles" / "examples" / "two-node-tcp.yaml"]
# Values that each field refuses or accepts in some way: wrong types, bounds, empties, strings of numbers.
HOSTILE: tuple[Any, ...] = (None, "x", "", "8210", "A b", "/x/../y", "192.0.2.300", "10.0.0.1/8", "-", -1, 0, 1.5,
                            True, [], ["a"], {}, {"k": 1})


def _bounds(node: Any) -> set[int]:
    """Every numeric bound of the pydantic model's core schema, with its neighbours."""
    found: set[int] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("ge", "gt", "le", "lt", "min_length", "max_length") and isinstance(value, int | float):
                found |= {int(value) - 1, int(value), int(value) + 1}
            elif key != "metadata":
                found |= _bounds(value)
    elif isinstance(node, list | tuple):
        for item in node:
            found |= _bounds(item)
    return found


def _records() -> dict[str, type[Record]]:
    """The validator's record class of each section, by model name."""
    sections = core_validator._thawed().sections
    return {name: (node["schema"] if node["type"] == "function-after" else node)["cls"]
            for name, node in sorted(sections.items())}


def _tree(value: Any) -> Any:
    """Class names, field names in order, and values: what a reader of either profile can observe."""
    if isinstance(value, BaseModel):
        return type(value).__name__, [(name, _tree(getattr(value, name))) for name in type(value).model_fields]
    if isinstance(value, Record):
        return type(value).__name__, [(name, _tree(getattr(value, name))) for name in value.FIELDS]
    if isinstance(value, list):
        return [_tree(item) for item in value]
    if isinstance(value, dict):
        return [(key, _tree(item)) for key, item in value.items()]
    return type(value).__name__, value


def _outcome(validate: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", validate(data)
    except ValidationError as exc:
        return "errors", (str(exc), repr(exc.errors(include_url=False)))


def assert_same(data: Any, what: str) -> str:
    """Both validators on ``data``: the same profile, or the same errors; returns which."""
    model_kind, model_result = _outcome(ProfileModel.model_validate, data)
    core_kind, core_result = _outcome(core_validator.validate_profile, data)
    assert model_kind == core_kind, f"{what}: the model says {model_kind}, the core validator {core_kind}"
    if model_kind == "ok":
        assert _tree(core_result) == _tree(model_result), what
        assert as_data(core_result) == model_result.model_dump(), what
    else:
        assert core_result == model_result, what
    return model_kind


def test_every_section_mirrors_its_model() -> None:
    """Same classes, same fields in the same order."""
    seen: dict[str, type[BaseModel]] = {}

    def collect(model: type[BaseModel]) -> None:
        seen[model.__name__] = model
        for info in model.model_fields.values():
            for arg in _flatten(info.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ not in seen:
                    collect(arg)

    collect(ProfileModel)
    records = _records()
    assert sorted(records) == sorted(seen)
    for name, model in seen.items():
        assert tuple(model.model_fields) == records[name].FIELDS, name
        assert records[name].__name__ == name


def test_section_defaults_are_the_models() -> None:
    """defaults(Section) is the model's Section(): the same values, or the same errors."""
    import spark_compile.spec.container_model as containers
    import spark_compile.spec.engine_model as engines
    import spark_compile.spec.model as models
    import spark_compile.spec.operations_model as operations

    classes = {**vars(operations), **vars(engines), **vars(containers), **vars(models)}
    kinds = []
    for name in _records():
        core_kind, core_result = _outcome(core_validator.section_defaults, name)
        model_kind, model_result = _outcome(lambda model: model(), classes[name])
        assert core_kind == model_kind, name
        assert (_tree(core_result) == _tree(model_result)) if core_kind == "ok" else (core_result == model_result)
        kinds.append(core_kind)
    assert kinds.count("ok") >= 10 and kinds.count("errors") >= 5, kinds
    assert _tree(core_validator.section_defaults("Kubernetes")) == _tree(containers.Kubernetes())


def _flatten(annotation: Any) -> Iterator[Any]:
    yield annotation
    for arg in getattr(annotation, "__args__", ()):
        yield from _flatten(arg)


def test_every_profile_file_validates_alike() -> None:
    """Shipped, positive and negative profiles: the same result through both validators."""
    kinds: dict[str, int] = {"ok": 0, "errors": 0, "unreadable": 0}
    for path in PROFILES:
        try:
            data = resolve(path).data
        except LoadError:
            kinds["unreadable"] += 1  # refused before the schema: neither validator sees it
            continue
        kinds[assert_same(data, str(path.relative_to(ROOT)))] += 1
    # Both outcomes really ran, on most of the files (a few negatives fail in the loader).
    assert kinds["ok"] >= 10 and kinds["errors"] >= 10, kinds
    assert kinds["ok"] + kinds["errors"] > 0.8 * len(PROFILES), kinds


def _paths(data: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key and index path of ``data``, containers included."""
    yield path
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, (*path, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, (*path, index))


def _with(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(data, list):
        return [_with(item, rest, value) if index == head else item for index, item in enumerate(data)]
    return {**data, head: _with(data.get(head), rest, value)}


def _without(data: dict[str, Any], path: tuple[Any, ...]) -> Any:
    if len(path) == 1:
        return {key: value for key, value in data.items() if key != path[0]}
    return _with(data, path[:-1], _without(_get(data, path[:-1]), path[-1:]))


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return dict(yaml.safe_load(REFERENCE_PROFILE.read_text(encoding="utf-8")))


@pytest.mark.parametrize("profile", MUTATED, ids=lambda p: p.stem)
def test_every_one_value_mutation_validates_alike(profile: Path) -> None:
    """Each value of the profile replaced by each hostile value and by each bound of the model and its
    neighbours, each key removed, an unknown key added to each mapping: the same profile or the same errors."""
    reference = resolve(profile).data
    assert assert_same(reference, profile.name) == "ok"
    kinds = {"ok": 0, "errors": 0}
    numbers = sorted(_bounds(ProfileModel.__pydantic_core_schema__))
    assert {0, 1, 255, 256, 65535, 65536} <= set(numbers)
    for path in list(_paths(reference))[1:]:
        near = [] if isinstance(_get(reference, path), dict | list) else numbers
        for value in [*HOSTILE, *near]:
            kinds[assert_same(_with(reference, path, value), f"{path} = {value!r}")] += 1
        if isinstance(path[-1], str):
            kinds[assert_same(_without(reference, path), f"{path} removed")] += 1
        if isinstance(_get(reference, path), dict):
            kinds[assert_same(_with(reference, (*path, "bogus_key"), 1), f"{path}.bogus_key")] += 1
    assert kinds["ok"] > 100 and kinds["errors"] > 1000, kinds


@pytest.mark.parametrize("section", ["container", "overlay", "secrets", "operations", "nccl", "deploy"])
def test_sections_left_out_take_the_models_defaults(reference: dict[str, Any], section: str) -> None:
    data = {key: value for key, value in reference.items() if key != section}
    assert assert_same(data, f"{section} left out") == "ok"


def test_records_are_read_only(reference: dict[str, Any]) -> None:
    profile = core_validator.validate_profile(reference)
    with pytest.raises(AttributeError, match="read-only"):
        profile.name = "other"  # type: ignore[misc]
    assert profile == core_validator.validate_profile(reference)
    assert hash(profile.fleet.nodes[0]) == hash(core_validator.validate_profile(reference).fleet.nodes[0])
    assert tuple(vars(profile)) == tuple(ProfileModel.model_fields)
