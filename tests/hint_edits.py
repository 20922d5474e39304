"""Hints read as edits, and applied as an operator would: a child profile that extends the negative one and
writes only the edit (set a key, remove it with !delete, rename it). Used by test_hints.py.

The hint grammar read here is the one the rules write: `set K: V`, `set K to V`, `add K: V`, `remove K`,
`drop the override`, `use V`, `write V`, `did you mean 'V'?`, `move it to K: V`, several joined by " and ",
alternatives by ", or " (the first concrete one is applied).

A file that does not load cannot be extended: its hint is applied to the file's own text at the finding
(`text_edit`: `write V`, `remove the tag`, `delete the character`, `delete one of them`, `save the file as UTF-8`)."""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conftest import ROOT

Path_ = tuple[str | int, ...]

_ANY = r"[^\s,;()]+"
_KEY = r"[A-Za-z_][\w.\-\[\]]*"
_VERBS = {"set", "add", "remove", "drop", "use", "write", "move", "raise", "lower"}


@dataclass(frozen=True)
class Edit:
    """One change to the profile: set ``value`` at ``path`` (``value`` None: remove the key)."""

    path: Path_
    value: Any = None
    remove: bool = False


class Profile:
    """The negative profile's merged data and origins, and the finding's path in it."""

    def __init__(self, path: Path) -> None:
        from spark_compile.stages.resolve import resolve

        self.resolved = resolve(path.relative_to(ROOT))

    def path_at(self, finding: Any) -> Path_ | None:
        """The most specific path written at the finding's position."""
        pos = finding.position
        found = [p for p, o in self.resolved.origins.items() if pos in (o.spot.value, o.spot.key)]
        return max(found, key=len) if found else None

    def value(self, path: Path_) -> Any:
        data = self.resolved.data
        for part in path:
            data = data[part]
        return data

    def has(self, path: Path_) -> bool:
        try:
            self.value(path)
        except (KeyError, IndexError, TypeError):
            return False
        return True

    def key(self, text: str, at: Path_) -> Path_:
        """A key a hint names: dotted from the top, or one word relative to the finding's path (itself, a
        sibling, a child), or the one written key of that name, else a new sibling (a child of a section)."""
        from spark_compile.spec.model import Profile as Model

        if text == "it":
            return at
        if text.split(".", maxsplit=1)[0] in Model.model_fields:
            return _dotted(text)
        for candidate in (at if at and at[-1] == text else None, (*at[:-1], text), (*at, text)):
            if candidate is not None and self.has(candidate):
                return candidate
        written = [p for p in self.resolved.origins if p and p[-1] == text]
        if len(written) == 1:
            return written[0]
        # A finding on a section (its key was deleted, so it is placed there) names a key inside it.
        return (*at, text) if isinstance(self.value(at), dict) else (*at[:-1], text)


def _dotted(text: str) -> Path_:
    parts: list[str | int] = []
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", text):
        parts.append(int(part[1:-1]) if part.startswith("[") else part)
    return tuple(parts)


class VagueError(Exception):
    """The hint's value is a description or a placeholder (``<nic>``), not a value to write."""


def _scalar(text: str) -> Any:
    if re.search(r"[<>\[\]{}]", text):
        raise VagueError(text)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise VagueError(text) from None


def _rename_or_value(profile: Profile, at: Path_, word: str) -> list[Edit]:
    """`did you mean 'X'?` / `write X`: the key at ``at`` renamed when X is a key's spelling, else its value."""
    value = profile.value(at)
    similar = difflib.SequenceMatcher
    shown = value if isinstance(value, str) else ""
    if isinstance(_scalar(word), str) and similar(None, str(at[-1]), word).ratio() > similar(None, shown,
                                                                                            word).ratio():
        return [Edit(at, remove=True), Edit((*at[:-1], word), value)]
    return [Edit(at, _scalar(word))]


def _moved(profile: Profile, at: Path_, key: str, value: Any) -> list[Edit]:
    return [Edit(profile.key(key, at), value), Edit(at, remove=True)]


def _written(profile: Profile, at: Path_, word: str) -> list[Edit] | None:
    if word in ("a", "an", "the", "it", "one", "another", "numeric", "lower-case"):
        return None  # a description of the value, not a value to write
    return [Edit(at, _scalar(word))] if word[0] == "'" else _rename_or_value(profile, at, word)


Build = Callable[[Profile, Path_, "re.Match[str]"], "list[Edit] | None"]
_VALUE = rf"('[^']*'|{_ANY})"
_REMOVE_AT = r"(?:remove|drop) (?:it|the override|the pin|the key|the repeated entry|the entry|the setting)\b"
_REMOVE_KEY = rf"(?:remove|drop) (?:the node's |[\w-]+'s )?(?!the\b)({_KEY})(?: from ({_KEY}))?(?:$|[\s:,])"
_USE = (r"(?:use|write) (?:a value (?:of|that is) )?(?:at least |at most |another [\w ]+, e\.g\. |one of )?"
        rf"{_VALUE}(?:$|[\s,;]|(?<=')[:])")
# The hint forms the rules write, each with the edits it asks for (first match wins).
GRAMMAR: list[tuple[str, Build]] = [
    (rf"did you mean '({_ANY})'\?$", lambda p, at, m: _rename_or_value(p, at, m[1])),
    (r"remove the '(.)'$", lambda p, at, m: [Edit(at, str(p.value(at)).replace(m[1], ""))]),
    (r"write it as a list: (\[[^]]*\])$", lambda p, at, m: [Edit(at, yaml.safe_load(m[1]))]),
    (r"use --([a-z0-9-]+)=(\S+)$",  # a flag SGLang reads instead
     lambda p, at, m: [Edit(at, remove=True), Edit((*at[:-1], m[1]), _scalar(m[2]))]),
    (rf"set ({_KEY}) \(e\.g\. ({_ANY})\)", lambda p, at, m: [Edit(p.key(m[1], at), _scalar(m[2]))]),
    (rf"(?:set|add|use|write) ({_KEY}): {_VALUE}( instead)?",
     lambda p, at, m: [Edit(p.key(m[1], at), _scalar(m[2])), *([Edit(at, remove=True)] if m[3] else [])]),
    (rf"(?:set|raise|lower) ({_KEY}) to (?:at least |at most )?({_ANY})",
     lambda p, at, m: [Edit(p.key(m[1], at), _scalar(m[2]))]),
    (rf"set ({_KEY}) instead$", lambda p, at, m: _moved(p, at, m[1], p.value(at))),
    (rf"move it to ({_KEY})(?:: ('[^']*'|{{[^}}]*}}|{_ANY}))?",
     lambda p, at, m: _moved(p, at, m[1], yaml.safe_load(m[2].replace("<", "").replace(">", "")) if m[2]
                             else p.value(at))),
    (rf"drop the override and set ({_KEY})", lambda p, at, m: _moved(p, at, m[1], p.value(at))),
    (_REMOVE_AT, lambda p, at, m: [Edit(at, remove=True)]),
    (_REMOVE_KEY, lambda p, at, m: [Edit(p.key(f"{m[2]}.{m[1]}" if m[2] else m[1], at), remove=True)]),
    (_USE, lambda p, at, m: _written(p, at, m[1])),
]


def _joined(profile: Profile, at: Path_, text: str) -> list[Edit] | None:
    """``set a: 1 and b: 2``: every part's edits (a part without a verb takes the first part's)."""
    first, *more = text.split(" and ")
    verb = first.split(" ", 1)[0]
    parts = [_one(profile, at, part if part.split(" ", 1)[0] in _VERBS else f"{verb} {part}")
             for part in (first, *more)]
    return [edit for part in parts if part is not None for edit in part] if None not in parts else None


def _one(profile: Profile, at: Path_, text: str) -> list[Edit] | None:
    """The edits of one alternative of a hint, or None when it is not concrete."""
    text = text.strip()
    if " and " in text and not text.startswith("drop the override and"):
        return _joined(profile, at, text)
    for pattern, build in GRAMMAR:
        if found := re.match(pattern, text):
            return build(profile, at, found)
    return None


def suggestion(profile: Profile, finding: Any) -> list[Edit] | None:
    """The edits a finding's hint asks for (its first concrete alternative), or None."""
    at = profile.path_at(finding)
    if at is None:
        return None
    for alternative in re.split(r", or |; or | or (?=set |remove |drop |use |write )", finding.hint):
        try:
            edits = _one(profile, at, alternative)
        except VagueError:
            continue
        if edits is not None:
            return edits
    return None


class _Delete:
    """``!delete`` in the child profile."""


def _dumper() -> type[yaml.SafeDumper]:
    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(_Delete, lambda dumper, _: dumper.represent_scalar("!delete", ""))
    return Dumper


def _apply_in_list(items: list[Any], rest: Path_, edit: Edit) -> None:
    """An edit inside a list the child writes whole (a list not merged by key)."""
    target: Any = items
    for part in rest[:-1]:
        target = target[part]
    if edit.remove:
        del target[rest[-1]]
    else:
        target[rest[-1]] = edit.value


def _keyed_item(items: list[dict[str | int, Any]], field: str, merged: dict[str, Any]) -> dict[str | int, Any]:
    """The child's item of a keyed list (fleet.nodes by name) that updates ``merged``, added when missing."""
    item = next((i for i in items if i[field] == merged[field]), None)
    if item is None:
        item = {field: merged[field]}
        items.append(item)
    return item


def _place(child: dict[str | int, Any], profile: Profile, edit: Edit) -> None:
    """Write one edit into the child profile's data (over what the child already holds)."""
    from spark_compile.stages.resolve import KEYED_LISTS

    node: dict[str | int, Any] = child
    merged: Any = profile.resolved.data
    path = edit.path
    for index, part in enumerate(path[:-1]):
        if isinstance(part, int):
            continue  # a list's item: entered with its list
        after = path[index + 1]
        if isinstance(after, int):
            field = KEYED_LISTS.get(path[:index + 1])
            if field is None:  # a list the child replaces whole
                _apply_in_list(node.setdefault(part, copy.deepcopy(merged[part])), path[index + 1:], edit)
                return
            node, merged = _keyed_item(node.setdefault(part, []), field, merged[part][after]), merged[part][after]
            continue
        node = node.setdefault(part, {})
        merged = merged.get(part, {}) if isinstance(merged, dict) else {}
    node[path[-1]] = _Delete() if edit.remove else edit.value


def child_text(path: Path, profile: Profile, edits: list[Edit]) -> str:
    """A profile that extends the negative one and writes only the edits."""
    child: dict[str | int, Any] = {"extends": path.name}
    for edit in edits:
        _place(child, profile, edit)
    return yaml.dump(child, Dumper=_dumper(), sort_keys=False, allow_unicode=True)


def checked(path: Path, text: str) -> list[Any]:
    """The findings of the child profile ``text``, read as if it stood beside ``path``."""
    from spark_compile.pipeline import validate
    from spark_compile.stages.load import LoadError, load_file, parse_text
    from spark_compile.stages.resolve import resolve

    child = path.with_name(path.stem + ".hinted.yaml").relative_to(ROOT)

    def reader(source: Path, display: str) -> Any:
        return parse_text(text, display) if source == child else load_file(source, display)

    try:
        return list(validate(resolve(child, reader=reader)).findings)
    except LoadError as failed:
        return [failed.finding]



# The loader's hints, each an edit of the finding's line (None: the line deleted).
TextEdit = Callable[[str, int, "re.Match[str]"], "str | None"]
TEXT_GRAMMAR: list[tuple[str, TextEdit]] = [
    (r"write ('[^']*'|[-+]?[0-9][0-9.]*)(?:$|[\s,:])",  # the scalar at the finding replaced by the value
     lambda line, col, m: line[:col] + re.sub(r"^[^\s,}\]#]+", lambda _: m[1], line[col:], count=1)),
    (r"remove the tag\b", lambda line, col, m: line[:col] + re.sub(r"^!\S*\s*", "", line[col:], count=1)),
    (r"delete the character\b", lambda line, col, m: line[:col] + line[col + 1:]),
    (r".*\bdelete one of them$", lambda line, col, m: None),  # the repeated key's line
]


def text_edit(path: Path, finding: Any) -> str | None:
    """The text of ``path`` (a file that does not load) with the hint of ``finding`` applied at its position,
    or None when the hint is no edit of the text."""
    data = path.read_bytes()
    if re.match(r"save the file as UTF-8$", finding.hint):
        return data.decode("latin-1")  # an editor's re-save: every byte is a character in latin-1
    lines = data.decode("utf-8").split("\n")  # line feeds only: a lone CR is a character of its line
    at, col = finding.position.line - 1, finding.position.column - 1
    for pattern, build in TEXT_GRAMMAR:
        if found := re.match(pattern, finding.hint):
            new = build(lines[at], col, found)
            return "\n".join([*lines[:at], *([] if new is None else [new]), *lines[at + 1:]])
    return None
