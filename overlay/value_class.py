"""Value classes: dataclass-shaped classes built without dataclasses' code generation.

`dataclasses.dataclass` compiles each class's methods from generated source, five or six `exec` calls per
class: about 0.3 ms a class on Python 3.11, and 18 ms of a cold `compile`, which makes some forty of them.
A value class's methods are instead shared by every one and read the class's field layout, so defining one
costs what defining a plain class does. Type checkers see a dataclass (PEP 681).

Standard library only, like the rest of the overlay package, whose records are value classes too: the
compiler and the serving container's start-up both make them.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

T = TypeVar("T")

if TYPE_CHECKING or sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # an older interpreter in a serving image: the marker only informs type checkers
    def dataclass_transform(**_: Any) -> Callable[[T], T]:
        return lambda decorated: decorated

_NO_DEFAULT: Any = object()


class FrozenFieldError(AttributeError):
    """Assignment to a field of a frozen value class instance."""


class Field:
    """What `field()` declares for one attribute; the class body keeps it until the decorator reads it."""

    __slots__ = ("compare", "default", "default_factory", "repr")

    def __init__(self, default: Any, default_factory: Callable[[], Any] | None, compare: bool, repr: bool) -> None:
        self.default, self.default_factory, self.compare, self.repr = default, default_factory, compare, repr


def field(*, default: Any = _NO_DEFAULT, default_factory: Callable[[], Any] | None = None,
          compare: bool = True, repr: bool = True) -> Any:
    """One field's options: its default or default factory, whether `==` and repr read it."""
    return Field(default, default_factory, compare, repr)


class _Layout:
    """A value class's fields, in declaration order (base classes' first), and what each one needs."""

    __slots__ = ("compared", "defaults", "factories", "name_set", "names", "shown", "tails")

    def __init__(self, fields: dict[str, Field]) -> None:
        self.names = tuple(fields)
        self.name_set = frozenset(fields)
        self.compared = tuple(name for name, spec in fields.items() if spec.compare)
        self.shown = tuple(name for name, spec in fields.items() if spec.repr)
        self.defaults = {name: spec.default for name, spec in fields.items() if spec.default is not _NO_DEFAULT}
        self.factories = {name: spec.default_factory for name, spec in fields.items()
                          if spec.default_factory is not None}
        # tails[k]: the defaults of the fields after the first k, for a call that gives those k positionally;
        # None where a field there has no default, or has a factory (a new value each time).
        self.tails = tuple(
            {name: self.defaults[name] for name in self.names[count:]}
            if all(name in self.defaults for name in self.names[count:]) else None
            for count in range(len(self.names) + 1))


def _declared(cls: type) -> dict[str, Field]:
    fields: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        fields.update(getattr(base, "__value_fields__", {}))
    for name, annotation in inspect.get_annotations(cls).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        value = cls.__dict__.get(name, _NO_DEFAULT)
        spec = value if isinstance(value, Field) else Field(value, None, True, True)
        if isinstance(spec.default, (list, dict, set)):
            raise TypeError(f"{cls.__name__}.{name}: a mutable default would be shared; use default_factory")
        if isinstance(value, Field):  # as in dataclasses, the class attribute becomes the default, if any
            if spec.default is _NO_DEFAULT:
                delattr(cls, name)
            else:
                setattr(cls, name, spec.default)
        fields[name] = spec
    return fields


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    # Positional calls, the hot ones, cost two dict updates; keywords, factories and mistakes go the longer way.
    layout: _Layout = type(self).__value_layout__
    if not kwargs and len(args) < len(layout.tails) and (tail := layout.tails[len(args)]) is not None:
        values = self.__dict__
        values.update(zip(layout.names, args, strict=False))
        values.update(tail)
        return
    values = self.__dict__
    values.update(zip(layout.names, args, strict=False))  # too many: _complete says so
    values.update(kwargs)
    if len(values) != len(args) + len(kwargs) or values.keys() != layout.name_set:
        _complete(self, layout, args, kwargs)


def _complete(self: Any, layout: _Layout, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    name = type(self).__name__
    if len(args) > len(layout.names):
        raise TypeError(f"{name}() takes {len(layout.names)} arguments, {len(args)} given")
    twice = kwargs.keys() & set(layout.names[:len(args)])
    if twice:
        raise TypeError(f"{name}() got {min(twice)!r} twice")
    unknown = kwargs.keys() - layout.name_set
    if unknown:
        raise TypeError(f"{name}() got an unexpected argument {min(unknown)!r}")
    values = self.__dict__
    for missing in [field for field in layout.names if field not in values]:
        if missing in layout.factories:
            values[missing] = layout.factories[missing]()
        elif missing in layout.defaults:
            values[missing] = layout.defaults[missing]
        else:
            raise TypeError(f"{name}() missing the argument {missing!r}")


def _compared(value: Any) -> tuple[Any, ...]:
    return tuple(value.__dict__[name] for name in type(value).__value_layout__.compared)


def _eq(self: Any, other: Any) -> Any:
    return _compared(self) == _compared(other) if type(other) is type(self) else NotImplemented


def _lt(self: Any, other: Any) -> Any:
    return _compared(self) < _compared(other) if type(other) is type(self) else NotImplemented


def _le(self: Any, other: Any) -> Any:
    return _compared(self) <= _compared(other) if type(other) is type(self) else NotImplemented


def _gt(self: Any, other: Any) -> Any:
    return _compared(self) > _compared(other) if type(other) is type(self) else NotImplemented


def _ge(self: Any, other: Any) -> Any:
    return _compared(self) >= _compared(other) if type(other) is type(self) else NotImplemented


def _hash(self: Any) -> int:
    return hash(_compared(self))


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={self.__dict__[name]!r}" for name in type(self).__value_layout__.shown)
    return f"{type(self).__qualname__}({shown})"


def _refuse_set(self: Any, name: str, value: Any) -> None:
    raise FrozenFieldError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")


def _refuse_delete(self: Any, name: str) -> None:
    raise FrozenFieldError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")


def _build(cls: type[T], frozen: bool, eq: bool, order: bool) -> type[T]:
    fields = _declared(cls)
    methods: dict[str, Any] = {"__init__": _init, "__repr__": _repr, "__value_fields__": fields,
                               "__value_layout__": _Layout(fields)}
    if eq:
        methods.update(__eq__=_eq, __hash__=_hash if frozen else None)
    if order:
        methods.update(__lt__=_lt, __le__=_le, __gt__=_gt, __ge__=_ge)
    if frozen:
        methods.update(__setattr__=_refuse_set, __delattr__=_refuse_delete)
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


@overload
def value_class(cls: type[T], /) -> type[T]: ...
@overload
def value_class(*, frozen: bool = True, eq: bool = True, order: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def value_class(cls: type[T] | None = None, /, *, frozen: bool = True, eq: bool = True,
                order: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """Make `cls` a value class: `__init__` from its annotated fields, frozen, `==` and hash by value."""
    if cls is not None:
        return _build(cls, frozen, eq, order)
    return lambda inner: _build(inner, frozen, eq, order)


def replace(obj: T, **changes: Any) -> T:
    """A new value like `obj` with `changes` made, through `__init__` (dataclasses.replace for value classes)."""
    layout: _Layout = type(obj).__value_layout__  # type: ignore[attr-defined]
    return type(obj)(**{**{name: getattr(obj, name) for name in layout.names}, **changes})


def field_names(cls: type[Any]) -> tuple[str, ...]:
    """The names of a value class's fields, in `__init__`'s order."""
    layout: _Layout = cls.__value_layout__
    return layout.names
