"""Quoting by construction: one function per consumer of a generated value.

Each function returns text its consumer reads back as exactly ``value``, or raises UnquotableError when
the consumer has no way to carry it (the model's grammars should have refused such a value already).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from spark_compile.common.errors import UnquotableError
from spark_compile.common.secrets import redact
from spark_compile.spec.envfile import env_value_problem

_BASH_SAFE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
# Control characters: C0, DEL and NEL, and the line and paragraph separators (U+2028, U+2029).
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")
_C0 = re.compile(r"[\x00-\x1f\x7f]")  # what bash and here-documents treat specially (\n ends a line)
_C0_CHARS = frozenset(map(chr, [*range(0x20), 0x7F]))
_CONTROL_CHARS = _C0_CHARS | {"\x85", "\u2028", "\u2029"}
_SYSTEMD_REFUSED = re.compile(r"[\x00-\x1f\x7f\"'\\]")  # "Executable name contains special characters"
_SYSTEMD_SAFE = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
_C_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", "'": "\\'", '"': '\\"'}
_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]|~])")
_MARKDOWN_LINE_START = re.compile(r"^(\s*[0-9]*)([#>+=.)-])")


def _refuse(value: str, consumer: str, why: str) -> UnquotableError:
    shown = redact(value)
    return UnquotableError(f"{shown[:80]!r}{'...' if len(shown) > 80 else ''} cannot be written for {consumer}: {why}")


def _has_control(value: str) -> bool:
    return _CONTROL.search(value) is not None


def _c_escape(value: str, quote: str, control: frozenset[str] = _CONTROL_CHARS) -> str:
    out = []
    for char in value:
        if char in _C_ESCAPES and (char != "'" or quote == "'") and (char != '"' or quote == '"'):
            out.append(_C_ESCAPES[char])
        elif char in control:
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def bash_word(value: str) -> str:
    """One bash word that expands to exactly ``value``, always on one line: $'...' when it has a control
    character (a raw newline inside quotes could end a here-document), '...' otherwise."""
    if "\0" in value:
        raise _refuse(value, "bash", "a NUL byte cannot be part of an argument")
    if value and _BASH_SAFE.fullmatch(value):
        return value
    if _C0.search(value):
        return "$'" + _c_escape(value, "'", _C0_CHARS) + "'"
    return "'" + value.replace("'", "'\"'\"'") + "'"


def bash_words(words: list[str] | tuple[str, ...]) -> str:
    """Words quoted for bash and joined by spaces."""
    return " ".join(bash_word(word) for word in words)


# What a YAML reader (sparkrun's PyYAML) takes for a line break besides \n and \r: inside the recipe's `command: |`
# block they would end the line, and bash's $'\u....' depends on the node's locale, so no quoting carries them.
_YAML_BREAKS = re.compile("[\x85\u2028\u2029]")


def sparkrun_word(value: str) -> str:
    """One word of a sparkrun recipe's command template (a YAML block of shell that sparkrun hands to bash):
    bash_word's quoting, on one line. It equals ``value`` only for a word of no braces that bash reads as
    itself: the only kind sparkrun may paste raw through a placeholder (its render_template does not quote)."""
    if _YAML_BREAKS.search(value):
        raise _refuse(value, "a sparkrun recipe's command", "YAML reads NEL, U+2028 and U+2029 as line breaks")
    return bash_word(value)


def heredoc_line(value: str) -> str:
    """Text inside a quoted here-document: control characters shown escaped, so no value can start a line
    (and so none can end the document early)."""
    return _c_escape(value, "") if _has_control(value) else value


def _systemd_quoted(value: str, dollars: bool) -> str:
    if "\0" in value:
        raise _refuse(value, "systemd", "a NUL byte cannot be part of an argument")
    text = value.replace("%", "%%")
    if dollars:
        text = text.replace("$", "$$")
    if text and _SYSTEMD_SAFE.fullmatch(text.replace("%%", "").replace("$$", "")):
        return text
    return '"' + _c_escape(text, '"') + '"'


def systemd_exec_path(value: str) -> str:
    """The program of an Exec*= line: '%' doubled (specifiers), '$' left alone (systemd does not expand
    variables in the program path), quoted with C escapes when needed."""
    if not value.startswith("/"):
        raise _refuse(value, "systemd", "the program of an Exec line must be an absolute path")
    if _SYSTEMD_REFUSED.search(value):
        raise _refuse(value, "systemd", "systemd refuses a program path with quotes, backslashes or control "
                      "characters, however quoted")
    return _systemd_quoted(value, dollars=False)


def systemd_exec_arg(value: str) -> str:
    """One argument of an Exec*= line: '%' and '$' doubled, quoted with C escapes when needed."""
    return _systemd_quoted(value, dollars=True)


def systemd_command(argv: list[str] | tuple[str, ...]) -> str:
    """A whole Exec*= command line: the program as systemd_exec_path, each argument as systemd_exec_arg."""
    if not argv:
        raise _refuse("", "systemd", "an Exec line needs a program")
    return " ".join([systemd_exec_path(argv[0]), *(systemd_exec_arg(arg) for arg in argv[1:])])


def systemd_path_setting(value: str) -> str:
    """A path setting such as EnvironmentFile=: the rest of the line, specifiers expanded, never unquoted."""
    if not value.startswith("/") or _has_control(value) or value != value.strip():
        raise _refuse(value, "a systemd path setting", "it must be an absolute path without control characters "
                      "or edge spaces")
    return value.replace("%", "%%")


def systemd_text(value: str) -> str:
    """Free text of a unit setting such as Description=: one line, '%' doubled."""
    if _has_control(value):
        raise _refuse(value, "a systemd setting", "it must be one line without control characters")
    return value.replace("%", "%%")


def env_file_value(value: str) -> str:
    """A value of an env file read by both docker --env-file and systemd EnvironmentFile=."""
    problem = env_value_problem(value)
    if problem is not None:
        raise _refuse(value, "an env file", problem)
    return value


def env_file(pairs: Iterable[tuple[str, str]]) -> str:
    """The NAME=value lines of an env file, for every target (docker and systemd on a node, the Kubernetes
    entrypoint); a value one of them would read differently is refused."""
    return "".join(f"{name}={env_file_value(value)}\n" for name, value in pairs)


# C0 (but line breaks and tabs), DEL, C1 (NEL among them), the Unicode line and paragraph separators, and the
# bidirectional controls (they reorder what a viewer shows: the Trojan Source attack).
_UNSAFE_CLASS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[{_UNSAFE_CLASS}]")
_UNSAFE_LINE = re.compile(f"[\n\t{_UNSAFE_CLASS}]")  # and line breaks and tabs, for one-line texts


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(match.group(), f"\\x{code:02x}" if code < 0x100
                                                     else f"\\u{code:04x}")


def terminal_text(value: str, *, one_line: bool = False) -> str:
    """``value`` safe to show in a terminal, a CI log, an HTML page or Markdown: every control and bidi
    character written as a visible escape (with ``one_line``, line breaks and tabs too)."""
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_escape_char, value)


def markdown_text(value: str) -> str:
    """Free text in Markdown: HTML escaped, Markdown punctuation backslash-escaped, control characters
    other than line breaks refused."""
    if _has_control(value.replace("\n", "").replace("\t", "")):
        raise _refuse(value, "Markdown", "it holds control characters")
    lines = (_MARKDOWN_INLINE.sub(r"\\\1", html.escape(terminal_text(line), quote=False)) for line in value.split("\n"))
    return "\n".join(_MARKDOWN_LINE_START.sub(r"\1\\\2", line) for line in lines)


def markdown_code(value: str) -> str:
    """An inline code span holding ``value``: a backtick fence longer than any run of backticks in it."""
    if _has_control(value):
        raise _refuse(value, "a Markdown code span", "it holds control characters")
    value = terminal_text(value)  # bidi controls would reorder the text around the span
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    # CommonMark strips one space from each end of a span that has a space at both and is not all spaces.
    edge_spaces = value.startswith(" ") and value.endswith(" ") and value.strip(" ") != ""
    pad = " " if value.startswith("`") or value.endswith("`") or edge_spaces else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def github_data(value: str) -> str:
    """The message of a GitHub workflow command (after '::')."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(value: str) -> str:
    """A property value of a GitHub workflow command (file=, title=): ':' and ',' end it unless escaped."""
    return github_data(value).replace(":", "%3A").replace(",", "%2C")
