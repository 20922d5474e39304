"""A catalog file as lookups read it: its top-level fields parsed, and each entry kept as its own JSON text
until it is looked up. This split form is kept in the user cache (spec/user_cache.py).

A compile reads two catalogs: 1,700 entries in 380 KB of JSON. Parsing them whole cost 3 ms of each cold
run, and a run looks up a few dozen entries. The cache key names the file by its stamp (user_cache.stamp),
as a bytecode cache does: hashing the contents cost another 0.7 ms a run. The split form is marshal data, so
the key also names the interpreter that wrote it. A missing, damaged or foreign cache
file only means the JSON is parsed again: the entries are the same either way.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass
from typing import Any

from spark_compile.spec import user_cache

PREFIX = "catalog-"
KEEP = 16  # split catalogs kept: a few catalogs of a few installs, the oldest dropped first
FORMAT = 1  # of the split form; part of the key, so a new form is never read as an old one


@dataclass(frozen=True, slots=True, eq=False)
class StoredCatalog:
    """A catalog's JSON with its entry list split out: ``keys`` maps each name an entry is looked up by
    (a flag's every option string, a variable's name) to the entry in ``texts``: its JSON text as the cache
    keeps it, or the object itself in a run that parsed the catalog whole."""

    head: dict[str, Any]
    keys: dict[str, int]
    texts: tuple[str | dict[str, Any], ...]

    def entry(self, index: int) -> dict[str, Any]:
        """The entry at ``index``, parsed."""
        item = self.texts[index]
        parsed: dict[str, Any] = json.loads(item) if isinstance(item, str) else item
        return parsed


def read_catalog(path: str, entries: str, key: str) -> StoredCatalog:
    """The catalog at ``path``: its list ``entries`` split out, each entry looked up by its field ``key``
    (a name, or a list of names)."""
    name = _cache_name(path, entries, key)
    directory = user_cache.cache_dir()
    stored = _from_cache(user_cache.load(directory, name))
    if stored is None:
        with open(path, "rb") as file:
            stored = _split(json.loads(file.read()), entries, key)
        if directory:  # the texts are written only for the cache: without one, a run does not pay for them
            texts = tuple(json.dumps(item, ensure_ascii=False) for item in stored.texts)
            user_cache.dump(directory, name, (stored.head, stored.keys, texts), prefix=PREFIX, keep=KEEP)
    return stored


def _cache_name(path: str, entries: str, key: str) -> str:
    source = f"{FORMAT} {sys.implementation.cache_tag} {entries} {key} {user_cache.stamp(path)}"
    return PREFIX + hashlib.sha256(source.encode("utf-8", "surrogateescape")).hexdigest()


def _split(document: dict[str, Any], entries: str, key: str) -> StoredCatalog:
    head = {name: value for name, value in document.items() if name != entries}
    keys: dict[str, int] = {}
    for index, entry in enumerate(document[entries]):
        names = entry[key]
        for one in [names] if isinstance(names, str) else names:
            keys[one] = index  # a name listed twice is its last entry's, as in a dict built in order
    return StoredCatalog(head, keys, tuple(document[entries]))


def _from_cache(kept: object) -> StoredCatalog | None:
    """The split form a cache file holds, or None for none, or data this code did not write."""
    if not (isinstance(kept, tuple) and len(kept) == 3):
        return None
    head, keys, texts = kept
    if not (isinstance(head, dict) and isinstance(keys, dict) and isinstance(texts, tuple)):
        return None
    return StoredCatalog(head, keys, texts)
