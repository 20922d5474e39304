"""Stage 1: read a profile file into plain data that remembers where every key and value stood."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spark_compile.errors import InputError
from spark_compile.findings import Finding, Position

MAX_BYTES = 1 << 20  # a profile is a few KB; a megabyte is a mistake or an attack
MAX_NODES = 100_000  # YAML nodes visited, aliases counted each time: stops alias bombs
DELETE_TAG = "!delete"

YamlPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Delete:
    """A value tagged ``!delete``: removes an inherited key, or (in a keyed list) the named item."""

    target: str = ""

    def __repr__(self) -> str:
        return f"!delete {self.target}".rstrip()


@dataclass(frozen=True)
class Spot:
    """Where a value stood: its key (for mapping entries) and the value itself."""

    key: Position | None
    value: Position


@dataclass
class Document:
    """One profile file: its data, the position of every value, and its lines for quoting."""

    path: str
    text: str
    data: Any
    spots: dict[YamlPath, Spot] = field(default_factory=dict)

    def line(self, number: int) -> str:
        """The source line ``number`` (from 1), without its newline; empty when out of range."""
        lines = self.text.splitlines()
        return lines[number - 1] if 0 < number <= len(lines) else ""


class _ProfileLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """SafeLoader with YAML 1.2 booleans and no timestamps: `restart: no` stays the string 'no'."""


_ProfileLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_ProfileLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


class LoadError(Exception):
    """The file could not be turned into data; carries the finding that says why."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.message)
        self.finding = finding


def _pos(path: str, mark: Any) -> Position:
    return Position(path, mark.line + 1, mark.column + 1)


def _fail(rule: str, pos: Position, message: str, hint: str, text: str = "") -> LoadError:
    lines = text.splitlines()
    source = lines[pos.line - 1] if 0 < pos.line <= len(lines) else ""
    return LoadError(Finding(rule, "error", pos, message, hint, source))


class _Builder:
    """Walks a composed YAML node tree into Python data, recording positions."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.visits = 0
        self.constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: YamlPath, key: Position | None) -> Any:
        self.visits += 1
        if self.visits > MAX_NODES:
            raise _fail("SC108", _pos(self.doc.path, node.start_mark),
                        f"the document expands to more than {MAX_NODES} values (anchors and aliases)",
                        "write the values out, or share them through `extends:` instead of aliases",
                        self.doc.text)
        self.doc.spots[path] = Spot(key, _pos(self.doc.path, node.start_mark))
        if node.tag == DELETE_TAG:
            return Delete(str(node.value) if isinstance(node, yaml.ScalarNode) else "")
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, index), None) for index, item in enumerate(node.value)]
        if node.tag.startswith("!"):
            raise _fail("SC105", _pos(self.doc.path, node.start_mark), f"unknown YAML tag {node.tag}",
                        f"the only tag a profile takes is {DELETE_TAG} (to remove an inherited key)",
                        self.doc.text)
        return self.constructor.construct_object(node)

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> dict[str | int, Any]:
        result: dict[str | int, Any] = {}
        for key_node, value_node in node.value:
            key_pos = _pos(self.doc.path, key_node.start_mark)
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _fail("SC105", key_pos, "YAML merge keys (<<) are not supported in profiles",
                            "share common settings with `extends:` instead", self.doc.text)
            if not isinstance(key_node, yaml.ScalarNode):
                raise _fail("SC105", key_pos, "a mapping key must be a plain scalar",
                            "write the key as a plain word", self.doc.text)
            constructed = self.constructor.construct_object(key_node)
            # Integer keys (Engram layer ids) stay integers; every other key is read as text.
            keep = isinstance(constructed, int) and not isinstance(constructed, bool)
            key = constructed if keep else str(constructed)
            if key in result:
                first = self.doc.spots[(*path, key)].key
                where = f" (first at line {first.line})" if first else ""
                raise _fail("SC104", key_pos, f"duplicate key {key!r}{where}",
                            "a key may appear once per mapping; delete one of them", self.doc.text)
            result[key] = self.build(value_node, (*path, key), key_pos)
        return result


def parse_text(text: str, path: str) -> Document:
    """Parse profile text into a Document; raises LoadError with a positioned finding."""
    doc = Document(path, text, None)
    try:
        node = yaml.compose(text, Loader=_ProfileLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if mark is not None and mark.line >= len(text.splitlines()) and exc.context_mark is not None:
            mark = exc.context_mark  # the problem is the end of the file; point at what was left open
        pos = _pos(path, mark) if mark else Position(path, 1, 1)
        problem = exc.problem or exc.context or "not valid YAML"
        raise _fail("SC105", pos, f"YAML syntax error: {problem}",
                    "check indentation, quotes and colons on this line", text) from None
    except yaml.YAMLError as exc:
        raise _fail("SC105", Position(path, 1, 1), f"YAML error: {exc}", "fix the YAML syntax", text) from None
    if node is None or not isinstance(node, yaml.MappingNode):
        pos = _pos(path, node.start_mark) if node is not None else Position(path, 1, 1)
        raise _fail("SC106", pos, "a profile must be a YAML mapping at the top level",
                    "start the file with `name: <profile-name>`", text)
    doc.data = _Builder(doc).build(node, (), None)
    return doc


def decode(raw: bytes, path: str) -> str:
    """The file's text; refuses oversized and non-UTF-8 files with a positioned finding."""
    if len(raw) > MAX_BYTES:
        raise _fail("SC108", Position(path, 1, 1), f"the file is {len(raw)} bytes; profiles are limited to "
                    f"{MAX_BYTES} bytes", "split the profile or remove what does not belong in it")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _fail("SC107", Position(path, line, column),
                    f"the file is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                    "save the file as UTF-8") from None
    return text.removeprefix("\ufeff")


def read_bytes(path: Path) -> bytes:
    """The file's bytes; an unreadable file is an InputError (exit 2)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a profile file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None


def load_file(path: Path, display: str | None = None) -> Document:
    """Read and parse one profile file."""
    name = display or str(path)
    return parse_text(decode(read_bytes(path), name), name)
