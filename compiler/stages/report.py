"""Reporters: findings as text for people, JSON for machines, or GitHub annotations for CI logs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from spark_compile.common.findings import Finding
from spark_compile.common.quoting import github_data, github_property, terminal_text
from spark_compile.common.secrets import redact, redacted_json

Format = Literal["text", "json", "github", "summary"]
EXCERPT = 120  # characters of a source line shown around the column at fault
MAX_MESSAGE = 600  # a message quoting a huge value is cut: output stays proportional to the findings


def _bounded(text: str, limit: int = MAX_MESSAGE) -> str:
    """``text`` cut to ``limit``; secrets are hidden first, since a cut token is no longer recognisable."""
    if len(text) <= limit:
        return text
    text = redact(text)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more characters)"


_MARGIN = 256  # beyond the longest secret token: one overlapping the excerpt lies whole in the window


def excerpt(line: str, column: int) -> tuple[str, int]:
    """At most EXCERPT characters of ``line`` around ``column``, secrets hidden, control and bidi characters
    shown as escapes, and the caret's column within the excerpt. Only a window around the column is read
    (a long line with thousands of findings must not be scanned whole for each)."""
    at = max(column - 1, 0)
    low = max(0, at - EXCERPT - _MARGIN)
    window = line[low:at + EXCERPT + _MARGIN]
    before, after = window[:at - low], window[at - low:]
    if len(line) > EXCERPT:
        before, after = redact(before), redact(after)
    before = terminal_text(before.expandtabs(1))
    after = terminal_text(after.expandtabs(1))
    if low == 0 and len(line) <= EXCERPT and len(before) + len(after) <= EXCERPT:
        return before + after, len(before) + 1
    head = "..." if low or len(before) > EXCERPT // 2 else ""
    before = before[-(EXCERPT // 2):] if len(before) > EXCERPT // 2 else before
    shown = before + after[:EXCERPT - len(before)]
    tail = "..." if len(after) > EXCERPT - len(before) or at + EXCERPT + _MARGIN < len(line) else ""
    return head + shown + tail, len(head) + len(before) + 1


def _line(text: str) -> str:
    """One line of a finding: a line break in a key or a path it quotes is shown as an escape, so no profile
    can print what reads as a finding (or a clean summary) of its own."""
    return terminal_text(text, one_line=True)


def _text(finding: Finding) -> str:
    pos = finding.position
    lines = [_line(f"{_bounded(pos.file, 300)}:{pos.line}:{pos.column}: {finding.rule} {finding.severity}: "
                   f"{_bounded(finding.message)}")]
    if finding.source_line:
        shown, column = excerpt(finding.source_line, pos.column)
        gutter = f"{pos.line:>5} | "
        lines.append(gutter + shown)
        lines.append(" " * (len(gutter) - 2) + "| " + " " * max(column - 1, 0) + "^")
    if finding.hint:
        lines.append(_line(f"  hint: {_bounded(finding.hint)}"))
    if finding.via:
        lines.append(_line(f"  inherited through: {' -> '.join(reversed(finding.via))}"))
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
        return redacted_json(body, prose=True, indent=2, sort_keys=True)
    if fmt == "github":
        return "".join(_github(f) + "\n" for f in items)
    if fmt == "summary":  # a hook beside spark-compile-check, which prints the findings themselves
        return _summary(items, profiles) + " (`spark-compile check` lists them)\n" if items else ""
    blocks = [_text(f) for f in items]
    return "".join(block + "\n" for block in blocks) + _summary(items, profiles) + "\n"
