"""The one redaction step every printed output passes through (reports, plans, diffs, errors).

Two kinds of text are hidden: anything with a known token's shape, and the value given to a name that
says it holds a secret (``HF_TOKEN: x``, ``HF_TOKEN=x``, ``--api-key x``, ``"HF_TOKEN": "x"``, and the
``got 'x'`` of a message about such a key)."""

from __future__ import annotations

import re

from spark_compile.spec.secret_patterns import SECRET_NAME, SECRET_VALUE, secret_name

REDACTED = "(redacted)"
_NAME = re.compile(r"[A-Za-z0-9_.-]*(?:" + SECRET_NAME.pattern + r")[A-Za-z0-9_-]*", re.IGNORECASE)
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
        assigned = pattern.match(line, last) if pattern else None
        if assigned and not secret_name(assigned.group(2).strip("-")) and not _REFERENCE.fullmatch(assigned.group(2)):
            out.append(assigned.group(1) + REDACTED)
            last = assigned.end()
        got = _GOT.search(line, last)
        if got:
            out.append(line[last:got.start()] + got.group(1) + REDACTED)
            last = got.end()
    return "".join(out) + line[last:]


def redact(text: str) -> str:
    """``text`` with every secret-shaped substring, and every value given to a secret's name, replaced."""
    text = SECRET_VALUE.sub(REDACTED, text)
    if not SECRET_NAME.search(text):
        return text
    return "\n".join(_redact_line(line) if SECRET_NAME.search(line) else line for line in text.split("\n"))
