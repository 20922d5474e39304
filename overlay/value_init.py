"""The __init__ of value classes (value_class.py).

A class without default factories gets a compiled __init__, as fast as the one dataclasses writes: a body
that stores each argument in the instance's __dict__, compiled once per number of fields and shared by every
class with that many, its argument names and keys renamed per class (code.replace), the trailing defaults
given as the function's own. It is made on the class's first instantiation, so a class never instantiated
costs nothing. A class with factories takes the generic `init`, which calls them.

Standard library only, like the rest of the overlay package.
"""

from __future__ import annotations

import types
from typing import Any

# Names the compiled body uses itself; a class with a field of one of these names takes the generic init.
RESERVED = frozenset({"self", "__values"})
_BODIES: dict[int, types.CodeType] = {}  # one compiled body per number of fields


def _body(count: int) -> types.CodeType:
    if count not in _BODIES:
        # The source holds only numbered placeholders: nothing of any class reaches exec.
        params = "".join(f", _{index}" for index in range(count))
        stores = "".join(f"\n    __values['_{index}'] = _{index}" for index in range(count))
        namespace: dict[str, Any] = {}
        exec(f"def __init__(self{params}):\n    __values = self.__dict__{stores}\n", namespace)
        _BODIES[count] = namespace["__init__"].__code__
    return _BODIES[count]


def compiled_init(cls: type) -> types.FunctionType:
    """The class's own __init__: the shared body for its number of fields, renamed to its fields."""
    layout = cls.__value_layout__  # type: ignore[attr-defined]
    names = {f"_{index}": name for index, name in enumerate(layout.names)}
    body = _body(len(names))
    qualname = f"{cls.__qualname__}.__init__"
    code = body.replace(co_varnames=tuple(names.get(name, name) for name in body.co_varnames),
                        co_consts=tuple(names.get(c, c) if isinstance(c, str) else c for c in body.co_consts))
    defaults = tuple(layout.defaults[name] for name in layout.names[layout.first_default:])
    init = types.FunctionType(code, {}, "__init__", defaults or None)
    init.__qualname__, init.__module__ = qualname, cls.__module__
    return init


def first_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """A compiled class's first instantiation: its __init__ is made, put in place, and called."""
    cls = type(self)
    cls.__init__ = compiled_init(cls)
    cls.__init__(self, *args, **kwargs)


def init(self: Any, *args: Any, **kwargs: Any) -> None:
    # Positional calls, the hot ones, cost two dict updates; keywords, factories and mistakes go the longer way.
    layout = type(self).__value_layout__
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


def _complete(self: Any, layout: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
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


