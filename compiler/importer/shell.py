"""Shell text split into commands of words the way POSIX sh quotes them, without executing or expanding anything.

Quotes, backslashes, backslash-newline continuations and comments are handled; `$...` and backquotes are kept
as written and marked, so the mapper can report a word whose value only the shell would know.
"""

from __future__ import annotations

from dataclasses import dataclass

from spark_compile.common.errors import InputError
from spark_compile.importer.source import Origin, Word

OPERATORS = ("&&", "||", ";;", ";", "&", "|", "\n", "(", ")")
_BREAK = " \t\n;&|()"
_DQ_ESCAPES = '$`"\\\n'


@dataclass(slots=True)
class _Scan:
    text: str
    file: str
    pos: int = 0
    line: int = 1

    def peek(self, ahead: int = 0) -> str:
        index = self.pos + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        char = self.text[self.pos]
        self.pos += 1
        self.line += char == "\n"
        return char


@dataclass(frozen=True, slots=True)
class ShellWord(Word):
    """A word, and whether its text holds an unexpanded `$` or backquote outside single quotes."""

    expands: bool = False


def _single(scan: _Scan, start: int) -> str:
    out = []
    while scan.peek() != "'":
        if not scan.peek():
            raise InputError(f"{scan.file}:{start}: a single quote opened here is never closed")
        out.append(scan.take())
    scan.take()
    return "".join(out)


def _double(scan: _Scan, start: int) -> tuple[str, bool]:
    out, expands = [], False
    while scan.peek() != '"':
        char = scan.peek()
        if not char:
            raise InputError(f"{scan.file}:{start}: a double quote opened here is never closed")
        scan.take()
        if char == "\\" and scan.peek() and scan.peek() in _DQ_ESCAPES:
            escaped = scan.take()
            if escaped != "\n":  # backslash-newline inside double quotes joins the lines
                out.append(escaped)
            continue
        expands = expands or char in "$`"
        out.append(char)
    scan.take()
    return "".join(out), expands


def _expansion(scan: _Scan, opener: str) -> str:
    """The rest of a `$(...)`, `${...}` or backquoted expansion, kept as written (it is never run)."""
    closer = {"(": ")", "{": "}", "`": "`"}[opener]
    out, depth, start = [], 1, scan.line
    while depth:
        if not scan.peek():
            raise InputError(f"{scan.file}:{start}: an expansion opened here with {opener!r} is never closed")
        char = scan.take()
        out.append(char)
        if char == closer:
            depth -= 1
        elif char == opener and opener != "`":
            depth += 1
    return "".join(out)


def _word(scan: _Scan) -> ShellWord:
    start, out, expands = scan.line, [], False
    while scan.peek() and scan.peek() not in _BREAK:
        char = scan.take()
        if char == "$" and scan.peek() in ("(", "{"):
            opener = scan.take()
            out.append("$" + opener + _expansion(scan, opener))
            expands = True
        elif char == "`":
            out.append("`" + _expansion(scan, "`"))
            expands = True
        elif char == "'":
            out.append(_single(scan, scan.line))
        elif char == '"':
            text, dollar = _double(scan, scan.line)
            out.append(text)
            expands = expands or dollar
        elif char == "\\":
            if scan.peek() == "\n":
                scan.take()  # a continuation inside a word joins it with the next line
            elif scan.peek():
                out.append(scan.take())
        else:
            expands = expands or char in "$`"
            out.append(char)
    return ShellWord("".join(out), Origin(scan.file, start), expands)


def commands(text: str, file: str) -> list[list[ShellWord]]:
    """Every simple command in ``text`` (split at newlines and operators), each a list of words."""
    scan = _Scan(text, file)
    found: list[list[ShellWord]] = []
    current: list[ShellWord] = []
    while scan.peek():
        char = scan.peek()
        if char in " \t\r":
            scan.take()
        elif char == "\\" and scan.peek(1) == "\n":
            scan.take()
            scan.take()
        elif char == "#":
            while scan.peek() and scan.peek() != "\n":
                scan.take()
        elif char in _BREAK:
            operator = next(op for op in OPERATORS if text.startswith(op, scan.pos))
            for _ in operator:
                scan.take()
            if current:
                found.append(current)
            current = []
        else:
            current.append(_word(scan))
    if current:
        found.append(current)
    return found
