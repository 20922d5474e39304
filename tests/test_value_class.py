"""spec/value_class.py behaves as the dataclasses it replaces: each case is run on a value class and on the
same class made by `dataclasses.dataclass`, and the two must agree (repr, ==, hash, order, errors' kinds)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from spark_compile.overlay.value_class import FrozenFieldError, field, replace, value_class


def _field_names(cls: type[Any]) -> tuple[str, ...]:
    """A value class's fields in ``__init__``'s order, as its layout records them."""
    names: tuple[str, ...] = cls.__value_layout__.names
    return names


def _point(make_field: Callable[..., Any]) -> type[Any]:
    class Point:
        kind: ClassVar[str] = "point"
        x: int
        y: int = 0
        tags: list[str] = make_field(default_factory=list)
        note: str = make_field(default="", compare=False)

    return Point


def _both(options: dict[str, Any]) -> tuple[type[Any], type[Any]]:
    """The same class body made a value class and a dataclass with the same options."""
    theirs = dataclasses.dataclass(frozen=options.get("frozen", True), eq=options.get("eq", True),
                                   order=options.get("order", False))(_point(dataclasses.field))
    return value_class(**options)(_point(field)), theirs


def _hash_of(value: object) -> int | str:
    try:
        return hash(value)
    except TypeError as exc:
        return str(exc)


@pytest.mark.parametrize("options", [{}, {"order": True}, {"frozen": False}, {"eq": False}])
def test_agrees_with_dataclasses(options: dict[str, Any]) -> None:
    ours, theirs = _both(options)
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}), ((1, 2), {}), ((1, 2, ()), {}), ((), {"x": 1, "y": 2}), ((3,), {"tags": ["a"], "note": "n"})]
    for args, kwargs in cases:
        a, b = ours(*args, **kwargs), theirs(*args, **kwargs)
        assert repr(a) == repr(b)
        assert (a == ours(*args, **kwargs)) == (b == theirs(*args, **kwargs))
        assert (a == ours(*args, **{**kwargs, "note": "other"})) == (b == theirs(*args, **{**kwargs, "note": "other"}))
        assert (type(a).__hash__ is None) == (type(b).__hash__ is None)
        if type(a).__hash__ is not None and options.get("eq", True):
            assert _hash_of(a) == _hash_of(b)  # the same tuple is hashed, or the same list refuses
    assert _field_names(ours) == tuple(f.name for f in dataclasses.fields(theirs))
    assert ours.kind == "point" and "kind" not in _field_names(ours)


def test_order_agrees_with_dataclasses() -> None:
    ours, theirs = _both({"order": True})
    pairs = [(1, 2), (2, 1), (1, 1)]
    for left, right in pairs:
        for op in ("__lt__", "__le__", "__gt__", "__ge__"):
            assert getattr(ours(left), op)(ours(right)) == getattr(theirs(left), op)(theirs(right))
    assert sorted([ours(3), ours(1, 5), ours(1, 2)]) == [ours(1, 2), ours(1, 5), ours(3)]


def test_default_factory_gives_each_instance_its_own() -> None:
    ours, _ = _both({})
    first, second = ours(1), ours(1)
    first.tags.append("a")
    assert second.tags == []


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((), {}, "Point() missing the argument 'x'"),
    ((1, 2, [], "", 5), {}, "Point() takes 4 arguments, 5 given"),
    ((1,), {"x": 2}, "Point() got 'x' twice"),
    ((1,), {"z": 2}, "Point() got an unexpected argument 'z'"),
])
def test_wrong_calls_are_type_errors(args: tuple[Any, ...], kwargs: dict[str, Any], message: str) -> None:
    ours, theirs = _both({})
    with pytest.raises(TypeError) as caught:
        ours(*args, **kwargs)
    assert str(caught.value) == message
    with pytest.raises(TypeError):
        theirs(*args, **kwargs)


def _plain(made_by: Callable[[type[Any]], type[Any]]) -> type[Any]:
    class Plain:  # no factory: the compiled __init__
        x: int
        y: int = 0
        name: str = "n"

    return made_by(Plain)


@pytest.mark.parametrize(("args", "kwargs"), [
    ((), {}), ((1, 2, "a", 4), {}), ((1,), {"x": 2}), ((1,), {"z": 2}), ((), {"y": 1}),
])
def test_a_compiled_init_refuses_as_the_dataclass_one(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    ours, theirs = _plain(value_class), _plain(dataclasses.dataclass(frozen=True))
    with pytest.raises(TypeError) as mine:
        ours(*args, **kwargs)
    with pytest.raises(TypeError) as dataclass:
        theirs(*args, **kwargs)
    assert str(mine.value) == str(dataclass.value)


def test_the_generic_and_the_compiled_init_make_what_dataclasses_make() -> None:
    from spark_compile.overlay import value_init

    ours, theirs = _plain(value_class), _plain(dataclasses.dataclass(frozen=True))
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((1,), {}), ((1, 2), {}), ((1,), {"name": "m"}), ((), {"name": "m", "x": 3})]
    for phase in ("generic", "compiled"):
        for args, kwargs in calls:
            assert vars(ours(*args, **kwargs)) == dataclasses.asdict(theirs(*args, **kwargs)), phase
        assert (ours.__init__ is value_init.init) == (phase == "generic")
        for index in range(value_init.COMPILE_AFTER):
            ours(index)
    assert ours.__init__.__qualname__ == theirs.__init__.__qualname__


def test_a_class_takes_its_compiled_init_after_many_calls_or_one_wrong_call() -> None:
    from spark_compile.overlay import value_init

    many, once = _plain(value_class), _plain(value_class)
    made = [many(index, index) for index in range(value_init.COMPILE_AFTER + 1)]
    assert many.__init__ is not value_init.init and "x" in many.__init__.__code__.co_varnames
    assert [vars(value) for value in made] == [{"x": i, "y": i, "name": "n"} for i in range(len(made))]
    once(x=1)
    assert once.__init__ is value_init.init
    with pytest.raises(TypeError, match="unexpected keyword argument 'z'"):
        once(1, z=2)
    assert once.__init__ is not value_init.init


def test_a_required_field_after_a_default_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'y' follows default argument"):
        @value_class
        class Bad:
            x: int = 0
            y: int  # type: ignore[misc]  # the mistake under test


def test_frozen_refuses_assignment_and_deletion() -> None:
    ours, _ = _both({})
    point = ours(1)
    with pytest.raises(FrozenFieldError, match="cannot assign to field 'x' of a frozen Point"):
        point.x = 2
    with pytest.raises(FrozenFieldError, match="cannot delete field 'x' of a frozen Point"):
        del point.x
    assert isinstance(FrozenFieldError(), AttributeError)  # what getattr/hasattr callers and dataclasses raise
    mutable, _ = _both({"frozen": False})
    moved = mutable(1)
    moved.x = 2
    assert moved.x == 2


def test_replace_builds_through_init() -> None:
    @value_class
    class Box:
        size: int

        @functools.cached_property
        def double(self) -> int:
            return self.size * 2

    box = Box(2)
    assert box.double == 4
    bigger = replace(box, size=5)
    assert (bigger.size, bigger.double, box.size) == (5, 10, 2)  # the cached 4 did not travel
    with pytest.raises(TypeError, match="unexpected keyword argument 'width'"):
        replace(box, width=1)


def test_subclass_fields_follow_the_base_fields() -> None:
    @value_class
    class Word:
        text: str

    @value_class
    class Marked(Word):
        marked: bool = False

    assert _field_names(Marked) == ("text", "marked")
    assert Marked("a") == Marked("a", False) and Marked("a") != Word("a")
    assert repr(Marked("a", True)).endswith(".<locals>.Marked(text='a', marked=True)")


def test_a_mutable_default_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Bad\.items: a mutable default would be shared; use default_factory"):
        @value_class
        class Bad:
            items: list[int] = []  # noqa: RUF012 - the mistake under test


def test_field_without_default_is_required_and_hidden_from_repr() -> None:
    @value_class
    class Catalog:
        name: str
        index: dict[str, int] = field(repr=False)

    assert repr(Catalog("c", {"a": 1})) == (
        "test_field_without_default_is_required_and_hidden_from_repr.<locals>.Catalog(name='c')")
    assert not hasattr(Catalog, "index")  # the field() marker does not stay behind as a class attribute
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'index'"):
        Catalog("c")  # type: ignore[call-arg]
