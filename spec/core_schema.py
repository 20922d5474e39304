"""The pydantic model's core schema as JSON text and back, so that the check path can build its validator
without pydantic's model machinery (README, Speed).

``freeze`` runs where the model is imported: it writes the schema with each model class as its name, each
check as the name of a function of spec/checks.py and each section default as ``{}`` validated. ``thaw``
reads that text back with no code of its own: a name resolves only to a function defined in spec/checks.py,
and each model becomes a read-only record class (spec/record.py) with the model's field names.
"""

from __future__ import annotations

import json
import types
from typing import Any

from spark_compile.spec import checks
from spark_compile.spec.record import Record

# JSON Schema hints and serializers: validation never reads them.
DROPPED = ("metadata", "serialization", "default_factory_takes_data")
_FUNCTION, _TUPLE = "$check", "$tuple"


class SchemaFormatError(ValueError):
    """Text that is not a frozen profile schema: a name outside spec/checks.py, a malformed node."""


class Thawed:
    """A core schema ready for pydantic-core, and each section's own schema by model name."""

    # A plain class: a dataclass costs a millisecond of start-up on every `check`.
    __slots__ = ("config", "schema", "sections")

    def __init__(self, schema: dict[str, Any], config: dict[str, Any], sections: dict[str, dict[str, Any]]):
        self.schema, self.config, self.sections = schema, config, sections


def freeze(schema: dict[str, Any], config: dict[str, Any]) -> str:
    """The core schema ``schema`` of a model whose config is ``config`` as deterministic JSON text."""
    return json.dumps({"config": _plain(config, "config"), "schema": _node(schema)},
                      separators=(",", ":"), allow_nan=False)


def _node(node: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED:
            continue
        if key == "cls" and node.get("type") == "model":
            out[key] = value.__name__
        elif key == "default_factory":
            if not hasattr(value, "__pydantic_core_schema__"):
                raise TypeError(f"default_factory={value!r}: only a section's own model can be a default")
            # A section's default is its model built from nothing: the same, validated from {}.
            out["default"], out["validate_default"] = {}, True
        elif key == "default":
            out[key] = _plain(value, "default")
        else:
            out[key] = _value(value, key)
    return out


def _value(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return _node(value)
    if isinstance(value, list):
        return [_value(item, key) for item in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_value(item, key) for item in value]}
    if callable(value):
        return {_FUNCTION: _check_name(value)}
    return _plain(value, key)


def _plain(value: Any, key: str) -> Any:
    """Data (a default, a literal, a bound): JSON values only, tuples tagged, no key that reads as a tag."""
    if isinstance(value, dict):
        if any(not isinstance(k, str) or k.startswith("$") or k == "type" for k in value):
            raise TypeError(f"cannot freeze {value!r} (under {key!r}): keys must be plain strings")
        return {k: _plain(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(item, key) for item in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_plain(item, key) for item in value]}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    raise TypeError(f"cannot freeze {value!r} (under {key!r})")


def _check_name(function: Any) -> str:
    module, name = getattr(function, "__module__", ""), getattr(function, "__qualname__", "")
    if module != checks.__name__ or not _public(name) or getattr(checks, name, None) is not function:
        raise TypeError(f"{module}.{name}: a check the model uses must be a function of {checks.__name__}")
    return str(name)


def thaw(text: str) -> Thawed:
    """The schema of ``freeze``'s text, with record classes and the named checks in place."""
    records: dict[str, type[Record]] = {}
    sections: dict[str, dict[str, Any]] = {}

    def hook(node: dict[str, Any]) -> Any:
        if _FUNCTION in node:
            return _check(node)
        if _TUPLE in node:
            return tuple(node[_TUPLE])
        kind = node.get("type")
        if kind == "model":
            node["cls"] = _record(records, node)
            sections[node["cls"].__name__] = node
        elif kind == "function-after" and isinstance(node.get("schema"), dict) and (
                node["schema"].get("type") == "model"):
            sections[node["schema"]["cls"].__name__] = node  # the model with its model-level check
        return node

    try:
        data = json.loads(text, object_hook=hook)
        return Thawed(dict(data["schema"]), dict(data["config"]), sections)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SchemaFormatError(f"not a frozen profile schema: {exc}") from None


def _check(node: dict[str, Any]) -> Any:
    name = node[_FUNCTION]
    function = getattr(checks, name, None) if _public(name) else None
    if len(node) != 1 or not isinstance(function, types.FunctionType) or function.__module__ != checks.__name__:
        raise SchemaFormatError(f"{name!r} is not a check of {checks.__name__}")
    return function


def _public(name: object) -> bool:
    """A public name of spec/checks.py: its helpers (``_err``, ``_shown``) are not checks."""
    return isinstance(name, str) and name.isidentifier() and not name.startswith("_")


def _record(records: dict[str, type[Record]], node: dict[str, Any]) -> type[Record]:
    name, fields = node["cls"], tuple(node["schema"]["fields"])
    if not isinstance(name, str) or not name.isidentifier():
        raise SchemaFormatError(f"{name!r} is not a model name")
    cls = records.setdefault(name, type(name, (Record,), {"FIELDS": fields, "__module__": __name__}))
    if fields != cls.FIELDS:
        raise SchemaFormatError(f"model {name} appears twice with different fields")
    return cls
