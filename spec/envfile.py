"""What an env-file value may hold so docker --env-file and systemd EnvironmentFile= agree."""

from __future__ import annotations

import re
from typing import Any

MAX_VALUE = 32_768
_PRINTABLE_ASCII = re.compile(r"[ -~]*")
# The common case in one match: printable ASCII without quotes, backslash, '$' or backtick, no edge spaces.
_SAFE = re.compile(r"(?:[!#%&(-\[\]-_a-~](?:[ !#%&(-\[\]-_a-~]*[!#%&(-\[\]-_a-~])?)?")


def env_value_problem(value: str) -> str | None:
    """Why ``value`` cannot be written to an env file with one meaning for docker and systemd, or None."""
    if len(value) > MAX_VALUE:
        return f"is longer than {MAX_VALUE} characters (docker refuses env-file lines over 64 KiB)"
    if _SAFE.fullmatch(value):
        return None
    if "\n" in value or "\r" in value:
        return "contains a line break, which ends the line in an env file"
    if value != value.strip():
        return "has leading or trailing spaces: systemd strips them, docker keeps them"
    if any(c in value for c in "\"'\\"):
        return "contains a quote or backslash: systemd unquotes and unescapes it, docker keeps it as written"
    if "$" in value or "`" in value:
        return "contains '$' or a backtick, which systemd may treat as a variable reference"
    if not _PRINTABLE_ASCII.fullmatch(value):
        return "contains a character outside printable ASCII"
    return None


def env_text(value: Any) -> str:
    """How a profile value is written into an env file."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)
