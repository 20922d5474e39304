"""The one redaction step every printed output passes through (reports, plans, diffs, errors).

Two kinds of text are hidden: anything with a known token's shape, and the value given to a name that
says it holds a secret (``HF_TOKEN: x``, ``HF_TOKEN=x``, ``--api-key x``, ``"HF_TOKEN": "x"``, and the
``got 'x'`` of a message about such a key). JSON output is redacted value by value before it is serialised
(redacted_json), so the text step never rewrites inside a JSON string."""

from __future__ import annotations

import json
import re

from spark_compile.spec.secret_patterns import hide_tokens, masked, redact_text, secret_name, secret_spans, token_spans

REDACTED = "(redacted)"
def redact(text: str) -> str:
    """``text`` with every secret-shaped substring, and every value given to a secret's name, replaced."""
    return redact_text(text, REDACTED)


class Redacted(str):
    """Text whose values were redacted one by one before it was serialised (a JSON document): the output
    stream passes it on untouched, since rewriting serialised text could break its syntax."""


# NAME=value and --flag=value inside a value (an argv word, a command line): only '=' assigns here, so a
# path such as /etc/passwd:/etc/passwd:ro stays whole.
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_.-])(--?)?([A-Za-z_][A-Za-z0-9_.-]*)=([^\s'\",;]+)")


def _line_spans(line: str, prose: bool) -> list[tuple[int, int]]:
    """The spans of ``line`` to hide, all found in the value as written (as redact_text does for prose)."""
    assigned = [match.span(3) for match in _ASSIGNMENT.finditer(line) if secret_name(match.group(2))]
    return (secret_spans(line) if prose else token_spans(line)) + assigned


def _redact_string(value: str, prose: bool) -> str:
    return "\n".join(masked(line, _line_spans(line, prose), REDACTED) for line in value.split("\n"))


def redact_value(value: object, name: str = "", *, prose: bool = False) -> object:
    """``value`` (JSON data) with every secret-shaped string, every value of a secret-named key, and every
    word after a secret-named flag in a list replaced; with ``prose`` (messages, not profile values) each
    string also passes the text redaction."""
    if isinstance(value, dict):
        # A key is shown too (an env variable's name in a plan): a token-shaped key is hidden like a value.
        return {hide_tokens(key, REDACTED) if isinstance(key, str) else key: redact_value(item, str(key), prose=prose)
                for key, item in value.items()}
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
