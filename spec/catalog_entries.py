"""How a catalog's JSON objects become its entries: checked against the fields, made on first lookup, quoted
in messages."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, TypeVar

from spark_compile.spec.catalog_store import StoredCatalog

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
E = TypeVar("E")


def or_list(items: Sequence[object]) -> str:
    """``a, b or c``: the choices a message names."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def as_tuple(items: Sequence[Any] | None) -> tuple[Any, ...] | None:
    """A JSON list as the tuple an entry holds (None stays None)."""
    return None if items is None else tuple(items)


def close_matches(word: str, candidates: Sequence[str]) -> list[str]:
    """The candidates ``word`` is most likely a misspelling of (the same word in another case first)."""
    other_case = [c for c in candidates if c.casefold() == word.casefold() and c != word]
    close = difflib.get_close_matches(word, candidates, n=3, cutoff=0.75)  # 0.6 pairs NCCL_NET, NCCL_MNNVL
    return other_case + [c for c in close if c not in other_case]


def make_entry(cls: type[T], data: Mapping[str, Any], **converted: Any) -> T:
    """A catalog entry from its JSON object, whose keys are the entry's fields; `converted` replaces the
    values JSON cannot spell (tuples)."""
    names = {item.name for item in fields(cls)}
    if data.keys() != names:
        raise ValueError(f"a {cls.__name__} entry of the catalog has the keys {sorted(data)}; "
                         f"its fields are {sorted(names)}")
    return cls(**{**data, **converted})


class LazyEntries(Mapping[str, E]):
    """A catalog's entries by key, each made from its JSON text on first lookup: a run looks up a few dozen
    of the catalogs' 1,700 entries, and parsing and making them all cost 5 ms of every run. Keys that share
    one entry (a flag's several options) share what is made of it."""

    def __init__(self, stored: StoredCatalog, make: Callable[[Mapping[str, Any]], E]) -> None:
        self._keys, self._stored, self._make, self._made = stored.keys, stored, make, dict[int, E]()

    def __getitem__(self, key: str) -> E:
        index = self._keys[key]
        made = self._made.get(index)
        if made is None:
            made = self._made[index] = self._make(self._stored.entry(index))
        return made

    def get(self, key: str, default: Any = None) -> Any:
        # Mapping's own get goes through a KeyError for every name a catalog does not list: a lookup per
        # variable per rank.
        return self[key] if key in self._keys else default

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)
