"""Stage 2: apply `extends:` chains, merging child over parent while keeping every value's origin."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_compile.findings import Finding, Position
from spark_compile.load import Delete, Document, LoadError, Spot, YamlPath, load_file

MAX_DEPTH = 16
# Lists merged item by item, matched on a key field, instead of replaced whole.
KEYED_LISTS: dict[YamlPath, str] = {("fleet", "nodes"): "name"}

DocumentReader = Callable[[Path, str], Document]


@dataclass(frozen=True)
class Origin:
    """Where a resolved value was written, and the child profiles it was inherited through."""

    spot: Spot
    via: tuple[str, ...] = ()


@dataclass
class Resolved:
    """One merged profile: data, the origin of every value, and the documents it came from."""

    path: str
    data: Any
    origins: dict[YamlPath, Origin] = field(default_factory=dict)
    documents: dict[str, Document] = field(default_factory=dict)
    chain: tuple[str, ...] = ()

    def origin(self, path: YamlPath) -> Origin:
        """The origin of ``path`` or of its nearest ancestor that has one."""
        while path not in self.origins and path:
            path = path[:-1]
        return self.origins[path]

    def source_line(self, pos: Position) -> str:
        """The text of the line a position points at."""
        doc = self.documents.get(pos.file)
        return doc.line(pos.line) if doc else ""


def _subtree(origins: dict[YamlPath, Origin], prefix: YamlPath, new_prefix: YamlPath) -> dict[YamlPath, Origin]:
    size = len(prefix)
    return {new_prefix + path[size:]: origin for path, origin in origins.items() if path[:size] == prefix}


class _Merger:
    """Merges a child document over its resolved parent."""

    def __init__(self, parent: Resolved, child: Document) -> None:
        self.parent = parent
        self.child = {path: Origin(spot) for path, spot in child.spots.items()}
        self.out: dict[YamlPath, Origin] = {}
        self.via = child.path

    def inherit(self, ppath: YamlPath, opath: YamlPath) -> None:
        for path, origin in _subtree(self.parent.origins, ppath, opath).items():
            self.out[path] = Origin(origin.spot, (*origin.via, self.via))

    def take(self, cpath: YamlPath, opath: YamlPath) -> None:
        self.out.update(_subtree(self.child, cpath, opath))

    def merge(self, base: Any, over: Any, ppath: YamlPath, cpath: YamlPath, opath: YamlPath) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return self._mapping(base, over, ppath, cpath, opath)
        keyed = KEYED_LISTS.get(tuple(p for p in opath if isinstance(p, str)))
        if keyed and isinstance(base, list) and isinstance(over, list):
            return self._keyed_list(base, over, keyed, ppath, cpath, opath)
        self.take(cpath, opath)
        return over

    def _mapping(self, base: dict[str, Any], over: dict[str, Any], ppath: YamlPath, cpath: YamlPath,
                 opath: YamlPath) -> dict[str, Any]:
        self.out[opath] = self.child[cpath]
        result: dict[str, Any] = {}
        for key, value in base.items():
            if key not in over:
                result[key] = value
                self.inherit((*ppath, key), (*opath, key))
            elif not isinstance(over[key], Delete):
                result[key] = self.merge(value, over[key], (*ppath, key), (*cpath, key), (*opath, key))
        for key, value in over.items():
            if key not in base and not isinstance(value, Delete):
                result[key] = value
                self.take((*cpath, key), (*opath, key))
        return result

    def _keyed_list(self, base: list[Any], over: list[Any], key: str, ppath: YamlPath, cpath: YamlPath,
                    opath: YamlPath) -> list[Any]:
        self.out[opath] = self.child[cpath]
        deleted = {item.target for item in over if isinstance(item, Delete)}
        updates: dict[Any, tuple[int, Any]] = {}
        repeats: list[tuple[int, Any]] = []  # a name given twice stays twice, for the validator to report
        for i, item in enumerate(over):
            if not isinstance(item, dict):
                continue
            if item.get(key) in updates:
                repeats.append((i, item))
            else:
                updates[item.get(key)] = (i, item)
        result: list[Any] = []
        for index, item in enumerate(base):
            name = item.get(key) if isinstance(item, dict) else None
            if name in deleted:
                continue
            target = (*opath, len(result))
            if name in updates:
                cindex, update = updates.pop(name)
                result.append(self.merge(item, update, (*ppath, index), (*cpath, cindex), target))
            else:
                result.append(item)
                self.inherit((*ppath, index), target)
        for cindex, update in sorted([*updates.values(), *repeats], key=lambda pair: pair[0]):
            self.take((*cpath, cindex), (*opath, len(result)))
            result.append(update)
        return result


def _read(path: Path, display: str) -> Document:
    return load_file(path, display)


def resolve(path: Path, display: str | None = None, reader: DocumentReader = _read,
            exists: Callable[[Path], bool] = Path.is_file) -> Resolved:
    """Load ``path`` and every profile it extends, merged; raises LoadError on a broken chain.
    ``reader`` and ``exists`` read another source than the working tree (a git revision)."""
    return _resolve(path, display or str(path), reader, exists, ())


def _chain_error(doc: Document, message: str, hint: str) -> LoadError:
    spot = doc.spots.get(("extends",))
    pos = spot.value if spot else Position(doc.path, 1, 1)
    return LoadError(Finding("SC112", "error", pos, message, hint, doc.line(pos.line)))


def _resolve(path: Path, display: str, reader: DocumentReader, exists: Callable[[Path], bool],
             seen: tuple[str, ...]) -> Resolved:
    doc = reader(path, display)
    parent_ref = doc.data.get("extends")
    own = Resolved(display, doc.data, {p: Origin(s) for p, s in doc.spots.items()}, {display: doc}, (display,))
    if parent_ref is None:
        return own
    if not isinstance(parent_ref, str) or not parent_ref or parent_ref.startswith("/"):
        raise _chain_error(doc, f"extends must be a relative path to a parent profile, got {parent_ref!r}",
                           "write the parent's path relative to this file, e.g. extends: base.yaml")
    parent_path = path.parent / parent_ref
    parent_display = os.path.normpath(Path(display).parent / parent_ref)
    key = str(parent_path.resolve())
    if key in seen or str(path.resolve()) == key:
        raise _chain_error(doc, f"extends cycle: {parent_ref} leads back to a profile already in the chain",
                           "remove the extends: line that closes the loop")
    if len(seen) >= MAX_DEPTH:
        raise _chain_error(doc, f"extends chain deeper than {MAX_DEPTH} profiles", "flatten the chain")
    if not exists(parent_path):
        raise _chain_error(doc, f"extends names {parent_ref}, which does not exist (looked for {parent_display})",
                           "fix the path; it is relative to the file that extends it")
    parent = _resolve(parent_path, parent_display, reader, exists, (*seen, str(path.resolve())))
    merger = _Merger(parent, doc)
    data = merger.merge(parent.data, doc.data, (), (), ())
    data.pop("extends", None)
    return Resolved(display, data, merger.out, {**parent.documents, display: doc}, (display, *parent.chain))
