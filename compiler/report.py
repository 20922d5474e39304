"""Reporters: findings as text for people, JSON for machines, or GitHub annotations for CI logs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from spark_compile.findings import Finding

Format = Literal["text", "json", "github"]


def _text(finding: Finding) -> str:
    pos = finding.position
    lines = [f"{pos.file}:{pos.line}:{pos.column}: {finding.rule} {finding.severity}: {finding.message}"]
    if finding.source_line:
        gutter = f"{pos.line:>5} | "
        lines.append(gutter + finding.source_line)
        lines.append(" " * (len(gutter) - 2) + "| " + " " * (pos.column - 1) + "^")
    if finding.hint:
        lines.append(f"  hint: {finding.hint}")
    if finding.via:
        lines.append(f"  inherited through: {' -> '.join(reversed(finding.via))}")
    return "\n".join(lines)


def _summary(findings: list[Finding], profiles: int) -> str:
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    noun = "profile" if profiles == 1 else "profiles"
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} in {profiles} {noun}"


def _escape_annotation(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _github(finding: Finding) -> str:
    pos = finding.position
    level = "error" if finding.severity == "error" else "warning"
    message = finding.message + (f" ({finding.hint})" if finding.hint else "")
    props = f"file={pos.file},line={pos.line},col={pos.column},title={finding.rule}"
    return f"::{level} {props}::{_escape_annotation(message)}"


def finding_json(finding: Finding) -> dict[str, object]:
    """One finding as a JSON object."""
    pos = finding.position
    return {
        "rule": finding.rule, "severity": finding.severity, "file": pos.file, "line": pos.line,
        "column": pos.column, "message": finding.message, "hint": finding.hint, "via": list(finding.via),
    }


def render(findings: Iterable[Finding], fmt: Format, profiles: int) -> str:
    """The report of ``findings`` over ``profiles`` checked profiles."""
    items = list(findings)
    if fmt == "json":
        errors = sum(f.severity == "error" for f in items)
        body = {"profiles": profiles, "errors": errors, "warnings": len(items) - errors,
                "findings": [finding_json(f) for f in items]}
        return json.dumps(body, indent=2, sort_keys=True) + "\n"
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in items)
    blocks = [_text(f) for f in items]
    return "".join(block + "\n" for block in blocks) + _summary(items, profiles) + "\n"
