"""Stage 2: apply `extends:` chains, merging child over parent while keeping every value's origin."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_compile.common.errors import InputError
from spark_compile.common.findings import Finding, Position
from spark_compile.common.secrets import redact
from spark_compile.stages.load import Delete, Document, LoadError, Replace, Spot, YamlPath, load_file, read_bytes

MAX_DEPTH = 16
PROFILE_SUFFIXES = (".yaml", ".yml")
# Lists merged item by item, matched on a key field, instead of replaced whole: a child's item updates the
# inherited item of its key, `!delete KEY` removes it, `!replace {...}` replaces it at its place.
KEYED_LISTS: dict[YamlPath, str] = {("fleet", "nodes"): "name", ("container", "mounts"): "target",
                                    ("operations", "window", "checks"): "name"}

DocumentReader = Callable[[Path, str], Document]
BlobReader = Callable[[Path], bytes]  # another file a profile names (its committed config.json), as read_bytes


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a resolved value was written, and the child profiles it was inherited through."""

    spot: Spot
    via: tuple[str, ...] = ()


@dataclass(slots=True)
class Resolved:
    """One merged profile: data, the origin of every value, and the documents it came from."""

    path: str
    data: Any
    origins: dict[YamlPath, Origin] = field(default_factory=dict)
    documents: dict[str, Document] = field(default_factory=dict)
    chain: tuple[str, ...] = ()
    # Each document's path as its reader opened it (a git revision's display is not a path), and the reader
    # of the files the profile names: both sides of a diff read every file from one source.
    paths: dict[str, Path] = field(default_factory=dict)
    blob: BlobReader = read_bytes

    def file_of(self, display: str) -> Path:
        """The path a document shown as ``display`` was read from."""
        return self.paths.get(display, Path(display))

    def origin(self, path: YamlPath) -> Origin:
        """The origin of ``path`` or of its nearest ancestor that has one."""
        while path not in self.origins and path:
            path = path[:-1]
        return self.origins[path]

    def source_line(self, pos: Position) -> str:
        """The text of the line a position points at."""
        doc = self.documents.get(pos.file)
        return doc.line(pos.line) if doc else ""


class _Subtrees:
    """The origins under each path, indexed once (a merge asks for thousands of subtrees: scanning every
    origin for each was quadratic in the profile's size)."""

    def __init__(self, origins: dict[YamlPath, Origin]) -> None:
        self.origins = origins
        self.under: dict[YamlPath, list[YamlPath]] = {}
        for path in origins:
            for size in range(len(path) + 1):
                self.under.setdefault(path[:size], []).append(path)

    def moved(self, prefix: YamlPath, new_prefix: YamlPath) -> dict[YamlPath, Origin]:
        """Every origin at or under ``prefix``, re-rooted at ``new_prefix``."""
        size = len(prefix)
        return {new_prefix + path[size:]: self.origins[path] for path in self.under.get(prefix, ())}


class _Merger:
    """Merges a child document over its resolved parent."""

    def __init__(self, parent: Resolved, child: Document) -> None:
        self.parent = parent
        self.doc = child
        self.child = {path: Origin(spot) for path, spot in child.spots.items()}
        self.out: dict[YamlPath, Origin] = {}
        self.via = child.path
        self._parent_index = _Subtrees(parent.origins)
        self._child_index = _Subtrees(self.child)

    def inherit(self, ppath: YamlPath, opath: YamlPath) -> None:
        for path, origin in self._parent_index.moved(ppath, opath).items():
            self.out[path] = Origin(origin.spot, (*origin.via, self.via))

    def take(self, cpath: YamlPath, opath: YamlPath) -> None:
        self.out.update(self._child_index.moved(cpath, opath))

    def merge(self, base: Any, over: Any, ppath: YamlPath, cpath: YamlPath, opath: YamlPath) -> Any:
        if isinstance(over, Replace):
            self.take(cpath, opath)
            return plain(over)
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
            if key in base:
                continue
            if isinstance(value, Delete):
                raise self._nothing_to_delete((*cpath, key), f"!delete of {key!r}: no profile it extends sets it")
            if isinstance(value, Replace):
                raise self._nothing_to_delete((*cpath, key), f"!replace of {key!r}: no profile it extends sets it",
                                              "remove the !replace tag (a new key needs none)")
            result[key] = value
            self.take((*cpath, key), (*opath, key))
        return result

    def _nothing_to_delete(self, cpath: YamlPath, message: str,
                           hint: str = "remove the !delete line, or fix the name") -> LoadError:
        pos = self.child[cpath].spot.value
        return LoadError(Finding("SC112", "error", pos, message, hint, self.doc.line(pos.line)))

    def _keyed_list(self, base: list[Any], over: list[Any], key: str, ppath: YamlPath, cpath: YamlPath,
                    opath: YamlPath) -> list[Any]:
        self.out[opath] = self.child[cpath]
        deleted = {item.target for item in over if isinstance(item, Delete)}
        names = {_name_of(item, key) for item in base}
        for i, item in enumerate(over):
            if isinstance(item, Delete) and item.target not in names:
                raise self._nothing_to_delete((*cpath, i), f"!delete {item.target}: no inherited item has "
                                              f"{key} {item.target!r}")
            if isinstance(item, Replace) and _name_of(item, key) not in names:
                raise self._nothing_to_delete((*cpath, i), f"!replace: no inherited item has {key} "
                                              f"{_name_of(item, key)!r}", f"remove the !replace tag to add the "
                                              f"item, or fix its {key}")
        updates: dict[Any, tuple[int, Any]] = {}
        repeats: list[tuple[int, Any]] = []  # a name given twice stays twice, for the validator to report
        for i, item in enumerate(over):
            if isinstance(item, Delete):
                continue
            name = _name_of(item, key)  # None for a scalar or a list: kept, so the validator reports it
            if name in updates or name is None:
                repeats.append((i, item))
            else:
                updates[name] = (i, item)
        result: list[Any] = []
        for index, item in enumerate(base):
            name = _name_of(item, key)
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


def plain(value: Any) -> Any:
    """``value`` with every !replace mapping made a plain dict (what the validator reads)."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def _name_of(item: Any, key: str) -> str | None:
    """The item's matching name when it is text (a list or mapping as a name matches nothing)."""
    name = item.get(key) if isinstance(item, dict) else None
    return name if isinstance(name, str) else None


def _read(path: Path, display: str) -> Document:
    return load_file(path, display)


def _git_work_tree(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        if (directory / ".git").exists():
            return directory
    return None


def extends_roots(path: Path, root: Path | None = None) -> tuple[str, ...]:
    """Where `extends:` may lead: the git work tree holding ``path`` (else its directory), the work tree
    of the current directory, and ``root`` when the user names one."""
    start = Path(os.path.abspath(path)).parent
    roots = [_git_work_tree(start) or start, _git_work_tree(Path.cwd()), root]
    return tuple(sorted({_real(r) for r in roots if r is not None}))


def resolve(path: Path, display: str | None = None, reader: DocumentReader | None = None,
            exists: Callable[[Path], bool] | None = None, root: Path | None = None,
            blob: BlobReader | None = None) -> Resolved:
    """Load ``path`` and every profile it extends, merged; raises LoadError on a broken chain.
    ``reader``, ``exists`` and ``blob`` read another source than the working tree (a git revision); ``extends``
    stays inside :func:`extends_roots`."""
    resolved = _resolve(path, display or str(path), reader or _read, exists or Path.is_file, (),
                        extends_roots(path, root))
    if blob is not None:
        resolved.blob = blob
    return resolved


def _real(path: Path) -> str:
    """The absolute path with symlinks resolved; a loop or an unusable name is an InputError."""
    try:
        return os.path.realpath(path, strict=False)
    except (OSError, ValueError, RuntimeError) as exc:
        raise InputError(f"{path}: cannot resolve: {exc}") from None


def _chain_error(doc: Document, message: str, hint: str) -> LoadError:
    spot = doc.spots.get(("extends",))
    pos = spot.value if spot else Position(doc.path, 1, 1)
    return LoadError(Finding("SC112", "error", pos, message, hint, doc.line(pos.line)))


def _cut(text: str) -> str:
    """At most 100 characters of a value for a message; secrets hidden before the cut."""
    return redact(text)[:100]


def _parent_path(doc: Document, path: Path, parent_ref: object, roots: tuple[str, ...]) -> Path:
    """The parent's path, checked: relative, a .yaml file, inside the root, resolvable."""
    if not isinstance(parent_ref, str) or not parent_ref or parent_ref.startswith("/"):
        shown = parent_ref if not isinstance(parent_ref, (dict, list)) else type(parent_ref).__name__
        raise _chain_error(doc, f"extends must be a relative path to a parent profile, got {shown!r}"[:200],
                           "write the parent's path relative to this file, e.g. extends: base.yaml")
    if not parent_ref.endswith(PROFILE_SUFFIXES):
        raise _chain_error(doc, f"extends names {_cut(parent_ref)!r}, which is not a profile (.yaml or .yml)",
                           "extends names a parent profile file ending in .yaml or .yml")
    parent_path = path.parent / parent_ref
    try:
        real = _real(parent_path)
    except InputError:
        raise _chain_error(doc, f"extends names {_cut(parent_ref)}, which cannot be resolved (a symlink loop?)",
                           "fix the path or the symlinks on it") from None
    if not any(os.path.commonpath([real, root]) == root for root in roots):
        raise _chain_error(doc, f"extends names {_cut(parent_ref)}, which lies outside the repository "
                           f"({', '.join(roots)})", "a parent profile must be in the same repository (or pass "
                           "--root to name another root)")
    return parent_path


def _refuse_orphan_deletes(doc: Document, data: Any, path: YamlPath) -> None:
    """A profile that extends nothing has nothing to delete or replace: a !delete or !replace in it is a
    mistake."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        if isinstance(value, Delete | Replace):
            tag = "!delete" if isinstance(value, Delete) else "!replace"
            pos = doc.spots[(*path, key)].value
            raise LoadError(Finding("SC112", "error", pos, f"{tag} in a profile that extends nothing: there is "
                                    f"nothing to {tag[1:]}", f"remove the {tag} tag", doc.line(pos.line)))
        _refuse_orphan_deletes(doc, value, (*path, key))


def _resolve(path: Path, display: str, reader: DocumentReader, exists: Callable[[Path], bool],
             seen: tuple[str, ...], roots: tuple[str, ...]) -> Resolved:
    doc = reader(path, display)
    parent_ref = doc.data.get("extends")
    own = Resolved(display, doc.data, {p: Origin(s) for p, s in doc.spots.items()}, {display: doc}, (display,),
                   {display: path})
    if parent_ref is None:
        if doc.edits:  # the loader counted them: a profile without any is not walked again
            _refuse_orphan_deletes(doc, doc.data, ())
        return own
    parent_path = _parent_path(doc, path, parent_ref, roots)
    parent_display = os.path.normpath(Path(display).parent / str(parent_ref))
    key = _real(parent_path)
    if key in seen or _real(path) == key:
        raise _chain_error(doc, f"extends cycle: {parent_ref} leads back to a profile already in the chain",
                           "remove the extends: line that closes the loop")
    if len(seen) >= MAX_DEPTH:
        raise _chain_error(doc, f"extends chain deeper than {MAX_DEPTH} profiles", "flatten the chain")
    if not exists(parent_path):
        broken_link = os.path.islink(parent_path)
        what = "a symlink that leads nowhere (a loop or a missing target)" if broken_link else "does not exist"
        raise _chain_error(doc, f"extends names {_cut(parent_ref)}, which {'is ' * broken_link}{what} (looked for "
                           f"{_cut(parent_display)})", "fix the path; it is relative to the file that extends it")
    parent = _resolve(parent_path, parent_display, reader, exists, (*seen, _real(path)), roots)
    merger = _Merger(parent, doc)
    data = plain(merger.merge(parent.data, doc.data, (), (), ()))
    data.pop("extends", None)
    return Resolved(display, data, merger.out, {**parent.documents, display: doc}, (display, *parent.chain),
                    {**parent.paths, display: path})
