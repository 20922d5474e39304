"""Stage 1: read a profile file into plain data that remembers where every key and value stood."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from spark_compile.common.errors import InputError
from spark_compile.common.findings import Finding, Position
from spark_compile.stages import model_keys

MAX_BYTES = 1 << 20  # a profile is a few KB; a megabyte is a mistake or an attack
MAX_NODES = 100_000  # YAML nodes visited, aliases counted each time: stops alias bombs
DELETE_TAG = "!delete"
REPLACE_TAG = "!replace"
MAX_DIGITS = 100  # no value of a profile needs more; Python refuses int() past 4,300 digits
_CORE = "tag:yaml.org,2002:"
SCALAR_TAGS = {_CORE + kind for kind in ("str", "int", "float", "null", "bool")}
COLLECTION_TAGS = {_CORE + "map", _CORE + "seq"}
# YAML 1.2 numbers: what a reader of the profile expects `port: 017` or `8_210` to mean is not what
# YAML 1.1 (octal, digit separators, base 60) makes of it, so those forms are refused, not converted.
_INT_12 = re.compile(r"[-+]?(?:0|[1-9][0-9]*)|0x[0-9a-fA-F]+")
_FLOAT_12 = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                       r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")
_DECIMAL = re.compile(r"[-+]?[0-9]+(?:\.[0-9]*)?")  # 017 and 8_210 (without '_') read as decimal digits
# Characters YAML reads as line breaks but grep, git diff and editors show inside a line (a lone CR, not
# the CR of a CRLF: a terminal shows the rest of the line over its start, hiding what YAML reads as a key).
_HIDDEN_BREAK = re.compile(r"[\x85\u2028\u2029]|\r(?!\n)")
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")  # searched in every text value

YamlPath = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Delete:
    """A value tagged ``!delete``: removes an inherited key, or (in a keyed list) the named item."""

    target: str = ""

    def __repr__(self) -> str:
        return f"!delete {self.target}".rstrip()


class Replace(dict):  # type: ignore[type-arg]
    """A mapping tagged ``!replace``: it replaces the inherited mapping (in a keyed list, the item of its name,
    at that item's place) whole, instead of being merged over it."""


@dataclass(frozen=True, slots=True)
class Spot:
    """Where a value stood: its key (for mapping entries) and the value itself."""

    key: Position | None
    value: Position


@dataclass  # no slots: cached_property keeps its value in the instance's __dict__
class Document:
    """One profile file: its data, the position of every value, and its lines for quoting."""

    path: str
    text: str
    data: Any
    spots: dict[YamlPath, Spot] = field(default_factory=dict)
    edits: int = 0  # values tagged !delete or !replace: a profile that extends nothing may have none

    @cached_property
    def lines(self) -> list[str]:
        """The file's lines, split once (a file with thousands of findings must not be split for each)."""
        return self.text.split("\n")

    def line(self, number: int) -> str:
        """The source line ``number`` (from 1), without its newline; empty when out of range."""
        return self.lines[number - 1].rstrip("\r") if 0 < number <= len(self.lines) else ""


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
    start = 0
    for _ in range(pos.line - 1):
        start = text.find("\n", start) + 1
        if start == 0:
            return LoadError(Finding(rule, "error", pos, message, hint, ""))
    end = text.find("\n", start)
    source = text[start: end if end >= 0 else len(text)].rstrip("\r")
    return LoadError(Finding(rule, "error", pos, message, hint, source))


class _Builder:
    """Walks a composed YAML node tree into Python data, recording positions."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.visits = 0
        self.open: set[int] = set()  # collections being built: an alias to one of them is a cycle
        self.constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: YamlPath, key: Position | None) -> Any:
        self.visits += 1
        if self.visits > MAX_NODES:
            raise self._error("SC108", node, f"the document expands to more than {MAX_NODES} values (anchors "
                              "and aliases)", "write the values out, or share them through `extends:` instead "
                              "of aliases")
        self.doc.spots[path] = Spot(key, _pos(self.doc.path, node.start_mark))
        if node.tag == DELETE_TAG:
            self.doc.edits += 1
            return Delete(self.scalar(node) if isinstance(node, yaml.ScalarNode) else "")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, path)
        if node.tag == REPLACE_TAG and isinstance(node, yaml.MappingNode):
            self.doc.edits += 1
            self.open.add(id(node))
            try:
                return Replace(self._mapping(node, path))
            finally:
                self.open.discard(id(node))
        if node.tag not in COLLECTION_TAGS:
            raise self._tag_error(node)
        if id(node) in self.open:
            raise self._error("SC108", node, "an alias refers to the value that contains it (a cycle)",
                              "write the value out instead of aliasing its own parent")
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.build(item, (*path, index), None) for index, item in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def _error(self, rule: str, node: yaml.Node, message: str, hint: str) -> LoadError:
        return _fail(rule, _pos(self.doc.path, node.start_mark), message, hint, self.doc.text)

    def _tag_error(self, node: yaml.Node) -> LoadError:
        shown = node.tag.replace(_CORE, "!!")
        return self._error("SC105", node, f"unknown YAML tag {shown[:60]}",
                           f"remove the tag; a profile takes only {DELETE_TAG} (to remove an inherited key or, "
                           f"in a keyed list, the item of a name) and {REPLACE_TAG} (on a mapping, to replace the "
                           "inherited one whole)")

    def scalar(self, node: yaml.Node, path: YamlPath | None = None) -> Any:
        """A plain value (at ``path``; None for a key): text, a YAML 1.2 number, true/false or null; anything
        else is a finding."""
        if node.tag not in SCALAR_TAGS and node.tag != DELETE_TAG:
            raise self._tag_error(node)
        text = str(node.value)
        if node.tag == DELETE_TAG or node.tag == _CORE + "str":
            return self._text(node, text)
        if node.tag in (_CORE + "int", _CORE + "float"):
            self._number(node, text, path)
        try:
            return self.constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise self._error("SC105", node, f"cannot read {text[:40]!r}: {str(exc).splitlines()[0][:120]}",
                              "write a plain number, true/false, or quote the value as text") from None

    def _text(self, node: yaml.Node, text: str) -> str:
        bad = _CONTROL_CHARS.search(text)
        if bad:
            raise self._error("SC113", node, f"the value holds the control character U+{ord(bad.group()):04X}, "
                              "which no consumer of a profile value takes", "remove it")
        return text

    def _number(self, node: yaml.Node, text: str, path: YamlPath | None) -> None:
        digits = sum(c.isdigit() for c in text)
        if digits > MAX_DIGITS:
            raise self._error("SC109", node, f"a number of {digits} digits; profile numbers have at most "
                              f"{MAX_DIGITS}", "write the intended value")
        pattern = _INT_12 if node.tag == _CORE + "int" else _FLOAT_12
        if not pattern.fullmatch(text):
            raise self._error("SC114", node, f"{text[:40]} is a YAML 1.1 number form (leading 0 = octal, "
                              "'_' separators, ':' base 60, 0b binary) whose value surprises readers",
                              self._plain_form(node, text, path))

    def _plain_form(self, node: yaml.Node, text: str, path: YamlPath | None) -> str:
        """The SC114 hint: the form the key at ``path`` takes (a number in plain decimal, or quoted text)."""
        read = self.constructor.construct_object(node)  # what YAML 1.1 reads: 017 is 15
        digits = text.replace("_", "")
        plain = (int(digits, 10) if node.tag == _CORE + "int" else float(digits)) if _DECIMAL.fullmatch(digits) \
            else read
        also = f" (YAML 1.1 reads {text[:40]} as {read}: write that if it was meant)" if plain != read else ""
        number = path is not None and model_keys.problem(path, plain) is None
        quoted = path is not None and model_keys.problem(path, text) is None
        if quoted and not number:
            return f"write '{text[:40]}': quoted, as the key takes text"
        written = f"write {plain}{also}, in plain decimal digits (no leading 0, '_', ':' or 0b)"
        return written + ("" if number and not quoted else f", or '{text[:40]}' quoted if text is meant")

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> dict[str | int, Any]:
        result: dict[str | int, Any] = {}
        for key_node, value_node in node.value:
            key_pos = _pos(self.doc.path, key_node.start_mark)
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _fail("SC105", key_pos, "YAML merge keys (<<) are not supported in profiles",
                            "share common settings with `extends:` instead", self.doc.text)
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == DELETE_TAG:
                raise _fail("SC105", key_pos, "a mapping key must be a plain scalar",
                            "write the key as a plain word", self.doc.text)
            constructed = self.scalar(key_node)
            # Integer keys (Engram layer ids) stay integers; every other key is read as text.
            keep = isinstance(constructed, int) and not isinstance(constructed, bool)
            key = constructed if keep else ("null" if constructed is None else str(constructed))
            if key in result:
                first = self.doc.spots[(*path, key)].key
                where = f" (first at line {first.line})" if first else ""
                raise _fail("SC104", key_pos, f"duplicate key {key!r}{where}",
                            "a key may appear once per mapping; delete one of them", self.doc.text)
            result[key] = self.build(value_node, (*path, key), key_pos)
        return result


def position_at(path: str, text: str, index: int) -> Position:
    """The line and column of character ``index``, counted as the YAML parser counts them once the hidden
    breaks are refused: only LF ends a line (CRLF is one break)."""
    line = text.count("\n", 0, index) + 1
    return Position(path, line, index - (text.rfind("\n", 0, index) + 1) + 1)


def _refuse_hidden_breaks(text: str, path: str) -> None:
    found = _HIDDEN_BREAK.search(text)
    if found is not None:
        at, char = found.start(), found.group()[0]
        what = "a carriage return without a line feed" if char == "\r" else "a line or paragraph separator"
        raise _fail("SC113", position_at(path, text, at), f"U+{ord(char):04X} ({what}): "
                    "YAML reads it as a line break, but editors, terminals, grep and git diff show one line",
                    "delete the character; write a real line break if one is meant", text)


def parse_text(text: str, path: str) -> Document:
    """Parse profile text into a Document; raises LoadError with a positioned finding."""
    _refuse_hidden_breaks(text, path)
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
    except yaml.reader.ReaderError as exc:  # a character YAML refuses anywhere (ESC, other C0 and C1 codes)
        raise _fail("SC113", position_at(path, text, exc.position), f"the file holds the control character "
                    f"U+{exc.character:04X}, which YAML does not allow", "delete it (write it as an escape "
                    "inside a double-quoted string if a value needs it)", text) from None
    except yaml.YAMLError as exc:
        raise _fail("SC105", Position(path, 1, 1), f"YAML error: {exc}", "fix the YAML syntax", text) from None
    if node is None or not isinstance(node, yaml.MappingNode):
        pos = _pos(path, node.start_mark) if node is not None else Position(path, 1, 1)
        raise _fail("SC106", pos, "a profile must be a YAML mapping at the top level",
                    "start the file with `name: <profile-name>`", text)
    doc.data = _Builder(doc).build(node, (), None)
    return doc


def oversized(path: str) -> LoadError:
    """The finding on a file over MAX_BYTES (raised by whoever measured it, before reading it)."""
    return _fail("SC108", Position(path, 1, 1), f"the file is over {MAX_BYTES} bytes; profiles are limited "
                 f"to {MAX_BYTES} bytes", "split the profile or remove what does not belong in it")


def decode(raw: bytes, path: str) -> str:
    """The file's text; refuses oversized and non-UTF-8 files, and hidden line breaks, with a finding."""
    if len(raw) > MAX_BYTES:
        raise oversized(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _fail("SC107", Position(path, line, column),
                    f"the file is not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})",
                    "save the file as UTF-8") from None
    text = text.removeprefix("\ufeff")
    return text


def read_bytes(path: Path) -> bytes:
    """At most MAX_BYTES + 1 bytes of a regular file, opened without blocking (a FIFO never hangs us);
    anything else is an InputError (exit 2)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a profile file") from None
    except OSError as exc:
        reason = "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror
        raise InputError(f"{path}: cannot read: {reason}") from None
    except ValueError:
        raise InputError(f"{path!r}: not a usable file name") from None
    try:
        status = os.fstat(fd)
        if stat.S_ISDIR(status.st_mode):
            raise InputError(f"{path}: is a directory, expected a profile file")
        if not stat.S_ISREG(status.st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, device or socket); a profile is a file")
        # First what fstat counts and a byte more, then (a file that grows) 64 KiB at a time: asking for the
        # whole limit allocated a megabyte read buffer for each profile.
        chunks, size = [], 0
        chunk = os.read(fd, min(status.st_size, MAX_BYTES) + 1)
        while chunk:
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_BYTES:
                break
            chunk = os.read(fd, min(1 << 16, MAX_BYTES + 1 - size))
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)


def load_file(path: Path, display: str | None = None) -> Document:
    """Read and parse one profile file."""
    name = display or str(path)
    return parse_text(decode(read_bytes(path), name), name)
