"""The profile model read as a map of keys: whether a key exists, its default, whether a value fits it. The
importer's mapper asks here before it sets a typed key, so a key the model does not have (yet) falls back to the
raw escape hatch by itself; the loader asks which plain form of a YAML 1.1 number its key takes."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from spark_compile.common.findings import dotted
from spark_compile.spec.model import Profile

Path = tuple[str | int, ...]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg)) is not None), None)


def _is_mapping(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", None)
    return origin is dict or any(_is_mapping(arg) for arg in get_args(annotation))


@cache
def field(path: Path) -> FieldInfo | None:
    """The model's field at ``path`` (list indices and mapping keys are stepped over), or None."""
    model: type[BaseModel] | None = Profile
    info: FieldInfo | None = None
    for step in path:
        if isinstance(step, int) or (info is not None and _is_mapping(info.annotation) and model is None):
            continue
        if model is None or step not in model.model_fields:
            return None
        info = model.model_fields[step]
        model = _model_in(info.annotation)
    return info


def exists(path: Path) -> bool:
    """The profile model has this key."""
    return field(path) is not None


def default(path: Path) -> Any:
    """The key's default (PydanticUndefined when it is required or computed by a factory)."""
    info = field(path)
    return PydanticUndefined if info is None else info.default


def is_default(path: Path, value: object) -> bool:
    """``value`` is what the profile gets when the key is left out."""
    found = default(path)
    return found is not PydanticUndefined and found == value and type(found) is type(value)


def _value_type(info: FieldInfo, path: Path) -> Any:
    """The type a value at ``path`` must have: the field's own, or its mapping's value type for a key below it."""
    annotation: Any = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    if path[-1] not in _names(path) and _is_mapping(info.annotation):
        annotation = _mapping_value(info.annotation)
    return annotation


def _names(path: Path) -> set[str | int]:
    model: type[BaseModel] | None = Profile
    names: set[str | int] = set()
    for step in path:
        if model is None or isinstance(step, int):
            continue
        if step in model.model_fields:
            names.add(step)
            model = _model_in(model.model_fields[step].annotation)
        else:
            model = None
    return names


def _mapping_value(annotation: Any) -> Any:
    if getattr(annotation, "__origin__", None) is dict:
        return get_args(annotation)[1]
    return next(_mapping_value(arg) for arg in get_args(annotation) if _is_mapping(arg))


def problem(path: Path, value: object) -> str | None:
    """None when the profile model accepts ``value`` at ``path``, else its message."""
    info = field(path)
    if info is None:
        return f"the profile has no key {dotted(path)}"
    try:
        TypeAdapter(_value_type(info, path)).validate_python(value, strict=True)
    except ValidationError as exc:
        return "; ".join(str(e["msg"]) for e in exc.errors())
    return None
