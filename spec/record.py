"""The base of the generated core model's sections (spec/core_model.py): plain read-only records.

pydantic-core's model validator fills a record's ``__dict__`` directly; afterwards it behaves like the frozen
pydantic section it mirrors (attribute access, equality by value, no assignment), without pydantic's classes.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn


class Record:
    """A validated profile section; its fields are listed in FIELDS, in the model's order."""

    # pydantic-core sets these three beside __dict__; slots keep them out of it, as BaseModel's do.
    __slots__ = ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__")
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is read-only: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash((type(self), repr(self)))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({fields})"


def as_data(value: Any) -> Any:
    """Records as plain dicts, recursively (what pydantic's ``model_dump()`` gives for the mirrored model)."""
    if isinstance(value, Record):
        return {name: as_data(getattr(value, name)) for name in value.FIELDS}
    if isinstance(value, list):
        return [as_data(item) for item in value]
    if isinstance(value, dict):
        return {key: as_data(item) for key, item in value.items()}
    return value
