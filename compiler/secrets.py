"""Keep secret values out of everything printed: diffs, plans, reports."""

from __future__ import annotations

from spark_compile.spec.secret_patterns import SECRET_VALUE

REDACTED = "(redacted)"


def redact(text: str) -> str:
    """``text`` with every secret-shaped substring replaced."""
    return SECRET_VALUE.sub(REDACTED, text)
