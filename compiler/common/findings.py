"""Findings: what validation returns, with the exact source position of the value at fault."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """A place in a profile file; line and column count from 1."""

    file: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: rule id, severity, where, what, and how to fix it."""

    rule: str
    severity: Severity
    position: Position
    message: str
    hint: str = ""
    source_line: str = field(default="", compare=False)
    via: tuple[str, ...] = ()  # child profiles through which an inherited value arrived

    def sort_key(self) -> tuple[str, int, int, str, str]:
        """Order by file, line, column, then rule id."""
        pos = self.position
        return (pos.file, pos.line, pos.column, self.rule, self.message)


def has_errors(findings: list[Finding], *, strict: bool = False) -> bool:
    """True when the findings should fail a check (warnings only count under strict)."""
    return any(f.severity == "error" or strict for f in findings)


def dotted(path: tuple[str | int, ...]) -> str:
    """``fleet.nodes[0].name`` for a profile path: the one way a path is printed (findings, plans, reports)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"
