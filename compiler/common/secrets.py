"""The one redaction step every printed output passes through (reports, plans, diffs, errors).

Two kinds of text are hidden: anything with a known token's shape, and the value given to a name that
says it holds a secret (``HF_TOKEN: x``, ``HF_TOKEN=x``, ``--api-key x``, ``"HF_TOKEN": "x"``, and the
``got 'x'`` of a message about such a key). JSON output is redacted value by value before it is serialised
(redacted_json), so the text step never rewrites inside a JSON string."""

from __future__ import annotations

import json
import re

from spark_compile.spec.secret_patterns import SECRET_NAME, hide_tokens, secret_name

REDACTED = "(redacted)"
# A name holding a secret's word, matched from where the name starts (no name character before it): a search
# that tried again at every character of a long word took time in the square of its length.
_NAME = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z0-9_.-]*(?:" + SECRET_NAME + r")[A-Za-z0-9_-]*", re.IGNORECASE)
_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
# A value: quoted, a flow list or mapping closed on the same line, or a plain word (never the `{` or `[`
# that opens a block: `"api_key": {` in a JSON document is structure, not a value).
_VALUE = r"(" + _QUOTED + r"|\[[^\]\n]*\]|\{[^}\n]*\}|[\w./+~@-][^\s,}\]]*)"
_ASSIGNED = re.compile(r"(\"?\s*[:=]\s*)" + _VALUE)  # HF_TOKEN: x, HF_TOKEN=x, "HF_TOKEN": "x"
_FLAG_VALUE = re.compile(r"(['\"]?(?:,\s*|=|\s+))" + _VALUE)  # --api-key x, --api-key=x, '--api-key', 'x'
_EQUALS = re.compile(r"(=)" + _VALUE)
# A secret reference (`HF_TOKEN: {file: /etc/hf}`) says where the value lives on the node, never the value.
_REFERENCE = re.compile(r"\{\s*(?:file|env)\s*:\s*[^{}:,\s]+\s*\}")
_GOT = re.compile(r"(\bgot\s+)(" + _QUOTED + r"|[^\s,)]+)")


def _redact_line(line: str) -> str:
    out, last = [], 0
    for match in _NAME.finditer(line):
        name = match.group()
        if match.start() < last or not secret_name(name.rsplit(".", 1)[-1].strip("-")):
            continue
        out.append(line[last:match.end()])
        last = match.end()
        # A dotted path (engine.env.HF_TOKEN: expected ...) is a message about the key, not an assignment.
        pattern = _FLAG_VALUE if name.rsplit(".", 1)[-1].startswith("-") else _EQUALS if "." in name else _ASSIGNED
        assigned = pattern.match(line, last)
        value = assigned.group(2) if assigned else ""
        if assigned and not secret_name(value.strip("-")) and not _REFERENCE.fullmatch(value):
            out.append(assigned.group(1) + REDACTED)
            last = assigned.end()
        got = _GOT.search(line, last)
        if got:
            out.append(line[last:got.start()] + got.group(1) + REDACTED)
            last = got.end()
    return "".join(out) + line[last:]


def redact(text: str) -> str:
    """``text`` with every secret-shaped substring, and every value given to a secret's name, replaced."""
    return "\n".join(_redact_line(line) for line in hide_tokens(text, REDACTED).split("\n"))


class Redacted(str):
    """Text whose values were redacted one by one before it was serialised (a JSON document): the output
    stream passes it on untouched, since rewriting serialised text could break its syntax."""


# NAME=value and --flag=value inside a value (an argv word, a command line): only '=' assigns here, so a
# path such as /etc/passwd:/etc/passwd:ro stays whole.
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.-])(--?)?([A-Za-z_][A-Za-z0-9_.-]*)=([^\s'\",;]+)")


def _assigned(match: re.Match[str]) -> str:
    return f"{match.group(1) or ''}{match.group(2)}={REDACTED}" if secret_name(match.group(2)) else match.group()


def _redact_string(value: str, prose: bool) -> str:
    value = redact(value) if prose else hide_tokens(value, REDACTED)
    return _ASSIGNMENT.sub(_assigned, value)


def redact_value(value: object, name: str = "", *, prose: bool = False) -> object:
    """``value`` (JSON data) with every secret-shaped string, every value of a secret-named key, and every
    word after a secret-named flag in a list replaced; with ``prose`` (messages, not profile values) each
    string also passes the text redaction."""
    if isinstance(value, dict):
        return {key: redact_value(item, str(key), prose=prose) for key, item in value.items()}
    if isinstance(value, list | tuple):
        out: list[object] = []
        for index, item in enumerate(value):
            flag = value[index - 1] if index else None
            after_flag = isinstance(flag, str) and flag.startswith("-") and "=" not in flag and secret_name(flag)
            out.append(REDACTED if after_flag and isinstance(item, str) else redact_value(item, prose=prose))
        return out
    if isinstance(value, str):
        return REDACTED if value and secret_name(name) else _redact_string(value, prose)
    return value


def redacted_json(value: object, *, prose: bool = False, **dumps: object) -> Redacted:
    """``value`` as JSON text, redacted value by value first (never as text afterwards)."""
    return Redacted(json.dumps(redact_value(value, prose=prose), **dumps) + "\n")  # type: ignore[arg-type]
