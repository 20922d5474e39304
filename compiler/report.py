"""Reporters: findings as text for people, JSON for machines, or GitHub annotations for CI logs."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Literal

from spark_compile.findings import Finding
from spark_compile.quoting import github_data, github_property
from spark_compile.secrets import redact

Format = Literal["text", "json", "github", "summary"]
EXCERPT = 120  # characters of a source line shown around the column at fault
MAX_MESSAGE = 600  # a message quoting a huge value is cut: output stays proportional to the findings


def _bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit``; secrets are hidden first, since a cut token is no longer recognisable."""
    if len(text) <= limit:
        return text
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


def excerpt(line: str, column: int) -> tuple[str, int]:
    """At most EXCERPT characters of ``line`` around ``column``, and the column within the excerpt."""
    line = line.expandtabs(1)
    if len(line) <= EXCERPT:
        return line, column
    line = redact(line)
    start = max(0, min(column - 1 - EXCERPT // 2, len(line) - EXCERPT))
    head = "..." if start else ""
    tail = "..." if start + EXCERPT < len(line) else ""
    return head + line[start:start + EXCERPT] + tail, column - start + len(head)


def _text(finding: Finding) -> str:
    pos = finding.position
    lines = [f"{_bounded(pos.file, 300)}:{pos.line}:{pos.column}: {finding.rule} {finding.severity}: "
             f"{_bounded(finding.message)}"]
    if finding.source_line:
        shown, column = excerpt(finding.source_line, pos.column)
        gutter = f"{pos.line:>5} | "
        lines.append(gutter + shown)
        lines.append(" " * (len(gutter) - 2) + "| " + " " * max(column - 1, 0) + "^")
    if finding.hint:
        lines.append(f"  hint: {_bounded(finding.hint)}")
    if finding.via:
        lines.append(f"  inherited through: {' -> '.join(reversed(finding.via))}")
    return "\n".join(lines)


def _summary(findings: list[Finding], profiles: int) -> str:
    errors = sum(f.severity == "error" for f in findings)
    warnings = len(findings) - errors
    noun = "profile" if profiles == 1 else "profiles"
    return f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)} in {profiles} {noun}"


def _github(finding: Finding) -> str:
    pos = finding.position
    level = "error" if finding.severity == "error" else "warning"
    message = _bounded(finding.message) + (f" ({_bounded(finding.hint)})" if finding.hint else "")
    props = f"file={github_property(pos.file)},line={pos.line},col={pos.column},title={github_property(finding.rule)}"
    return f"::{level} {props}::{github_data(message)}"


def finding_json(finding: Finding) -> dict[str, object]:
    """One finding as a JSON object."""
    pos = finding.position
    return {
        "rule": finding.rule, "severity": finding.severity, "file": pos.file, "line": pos.line,
        "column": pos.column, "message": _bounded(finding.message), "hint": _bounded(finding.hint),
        "via": list(finding.via),
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
    if fmt == "summary":  # a hook beside spark-compile-check, which prints the findings themselves
        return _summary(items, profiles) + " (`spark-compile check` lists them)\n" if items else ""
    blocks = [_text(f) for f in items]
    return "".join(block + "\n" for block in blocks) + _summary(items, profiles) + "\n"
