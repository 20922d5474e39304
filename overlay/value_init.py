"""The __init__ of value classes (value_class.py).

A class without default factories gets a compiled __init__, as fast as the one dataclasses writes: a body
that stores each argument in the instance's __dict__, compiled once per number of fields and shared by every
class with that many, its argument names and keys renamed per class (code.replace), the trailing defaults
given as the function's own. Compiling costs about 50 microseconds per field count, which a class made a
few times never earns back: a class starts with the generic `init`, and takes its compiled one at its
COMPILE_AFTER-th instantiation (its RENAME_AFTER-th when a class with as many fields has one), or at its
first wrong call, which the compiled one then refuses in dataclasses' own words. A class with factories
keeps the generic `init`, which calls them.

Standard library only, like the rest of the overlay package.
"""

from __future__ import annotations

import types
from typing import Any

# Names the compiled body uses itself; a class with a field of one of these names takes the generic init.
RESERVED = frozenset({"self", "__values"})
COMPILE_AFTER = 64
RENAME_AFTER = 8  # for a field count compiled already: renaming its body costs about 5 microseconds
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


def _compile_then_init(cls: type, self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    init_now = compiled_init(cls)
    cls.__init__ = init_now  # type: ignore[misc]
    init_now(self, *args, **kwargs)


def init(self: Any, *args: Any, **kwargs: Any) -> None:
    """The generic __init__: positional calls, the hot ones, cost two dict updates."""
    cls = type(self)
    layout = cls.__value_layout__
    if layout.compiled:
        layout.made += 1
        if layout.made >= COMPILE_AFTER or (layout.made >= RENAME_AFTER and len(layout.names) in _BODIES):
            return _compile_then_init(cls, self, args, kwargs)
    values = self.__dict__
    if not kwargs and len(args) < len(layout.tails) and (tail := layout.tails[len(args)]) is not None:
        values.update(zip(layout.names, args, strict=False))
        values.update(tail)
        return None
    values.update(zip(layout.names, args, strict=False))  # too many: _wrong says so
    values.update(kwargs)
    # No field given twice or past the last, none unknown: only defaults are left to fill, unless one is
    # missing (then _wrong says which; keywords leaving defaults out are most of the calls that reach here).
    if len(values) == len(args) + len(kwargs) and values.keys() <= layout.name_set and _filled(layout, values):
        return None
    wrong = _wrong(layout, args, kwargs, values)
    if wrong is None:
        _filled(layout, values)
        return None
    values.clear()
    if layout.compiled:  # the compiled __init__ refuses it in dataclasses' own words, as it will every later one
        return _compile_then_init(cls, self, args, kwargs)
    raise TypeError(f"{cls.__name__}() {wrong}")


def _wrong(layout: Any, args: tuple[Any, ...], kwargs: dict[str, Any], values: dict[str, Any]) -> str | None:
    """What is wrong with a call, or None when the fields it leaves out all have defaults."""
    if len(args) > len(layout.names):
        return f"takes {len(layout.names)} arguments, {len(args)} given"
    twice = kwargs.keys() & set(layout.names[:len(args)])
    if twice:
        return f"got {min(twice)!r} twice"
    unknown = kwargs.keys() - layout.name_set
    if unknown:
        return f"got an unexpected argument {min(unknown)!r}"
    missing = [name for name in layout.names if name not in values and name not in layout.defaults
               and name not in layout.factories]
    return f"missing the argument {missing[0]!r}" if missing else None


def _filled(layout: Any, values: dict[str, Any]) -> bool:
    """Every field ``values`` lacks filled from its default or factory; False at the first that has neither."""
    if len(values) == len(layout.names):
        return True
    for name in layout.names:
        if name not in values:
            if name in layout.defaults:
                values[name] = layout.defaults[name]
            elif name in layout.factories:
                values[name] = layout.factories[name]()
            else:
                return False
    return True
