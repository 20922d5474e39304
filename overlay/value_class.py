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
import operator
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

from . import value_init

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

    __slots__ = (
        "compared",
        "compiled",
        "defaults",
        "factories",
        "first_default",
        "key",
        "made",
        "name_set",
        "names",
        "shown",
        "tails",
    )

    def __init__(self, fields: dict[str, Field]) -> None:
        self.names = tuple(fields)
        self.name_set = frozenset(fields)
        self.compared = tuple(name for name, spec in fields.items() if spec.compare)
        self.key = _tuple_getter(self.compared)
        self.shown = tuple(name for name, spec in fields.items() if spec.repr)
        self.defaults = {name: spec.default for name, spec in fields.items() if spec.default is not _NO_DEFAULT}
        self.factories = {name: spec.default_factory for name, spec in fields.items()
                          if spec.default_factory is not None}
        # tails[k]: the defaults of the fields after the first k, for a call that gives those k positionally;
        # None where a field there has no plain default (none, or a factory: a new value each time).
        plain = [name in self.defaults for name in self.names]
        self.first_default = len(plain) - plain[::-1].index(False) if False in plain else 0
        self.tails = tuple(None if count < self.first_default else
                           {name: self.defaults[name] for name in self.names[count:]}
                           for count in range(len(self.names) + 1))
        # Without factories, and with names a compiled body can take, __init__ is compiled (value_init.py).
        self.compiled = not self.factories and not self.name_set & value_init.RESERVED
        self.made = 0  # instances made through the generic __init__ (value_init.COMPILE_AFTER)
        after_default = False  # as dataclasses, which a call could not fill otherwise
        for name in self.names:
            has_default = name in self.defaults or name in self.factories
            if after_default and not has_default:
                raise TypeError(f"non-default argument {name!r} follows default argument")
            after_default = after_default or has_default


def _tuple_getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields ``names`` of a value as one tuple, read in C where it can be: ==, ordering and hash are
    on hot paths (attrgetter gives a tuple only for two names or more)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda value: (one(value),)
    return lambda value: ()


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


def _compared(value: Any) -> tuple[Any, ...]:
    return type(value).__value_layout__.key(value)  # type: ignore[no-any-return]


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
    layout = _Layout(fields)
    methods: dict[str, Any] = {"__init__": value_init.init,
                               "__repr__": _repr, "__value_fields__": fields, "__value_layout__": layout}
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

