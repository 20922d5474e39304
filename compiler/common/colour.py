"""Colour on a terminal: each finding's severity, its hint and each verdict line, only on a stream that is a
terminal (never a file, a pipe or CI), with NO_COLOR unset or empty and TERM not `dumb` (https://no-color.org).

It colours text the terminal-safe escaping has already passed (quoting.terminal_text), so a value's own
escape characters arrive as `\\x1b` text and the only escape sequences printed are the ones below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

RESET = "\x1b[0m"
RED = "\x1b[1;31m"
YELLOW = "\x1b[33m"
GREEN = "\x1b[32m"
CYAN = "\x1b[36m"
SEVERITY = {"error": RED, "warning": YELLOW}

# A finding's first line (report.py's `FILE:LINE:COL: RULE SEVERITY: message`): the severity word is coloured.
_FINDING = re.compile(r"^(.+?:\d+:\d+: SC\d+ )(error|warning)(: )", re.MULTILINE)
_HINT = re.compile(r"^(  hint:)", re.MULTILINE)
# The check's counts line: red with errors, yellow with warnings only, green when clean.
_SUMMARY = re.compile(r"^(\d+) errors?, (\d+) warnings? in \d+ profiles?.*$", re.MULTILINE)
# Lines that fail the command: an error, and the drift verdict of `check --generated`.
_ERROR_LINE = re.compile(r"^(?:spark-compile: (?:error|internal error|interrupted)\b|drift: ).*$", re.MULTILINE)
_MATCH_LINE = re.compile(r"^fleet matches .*$", re.MULTILINE)


class Terminal(Protocol):
    """What colour asks of a stream: whether it is a terminal."""

    def isatty(self) -> bool: ...


def wants_colour(stream: Terminal, environ: Mapping[str, str]) -> bool:
    """Whether text written to ``stream`` is coloured: a terminal, NO_COLOR unset or empty, TERM not dumb."""
    if environ.get("NO_COLOR", "") or environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):  # a closed or detached stream is no terminal
        return False


def _paint(colour: str, text: str) -> str:
    return f"{colour}{text}{RESET}"


def _summary(match: re.Match[str]) -> str:
    errors, warnings = int(match.group(1)), int(match.group(2))
    return _paint(RED if errors else YELLOW if warnings else GREEN, match.group(0))


def colourise(text: str) -> str:
    """``text`` (already terminal-safe) with its findings' severities, hints and verdict lines coloured."""
    text = _FINDING.sub(lambda m: m.group(1) + _paint(SEVERITY[m.group(2)], m.group(2)) + m.group(3), text)
    text = _HINT.sub(lambda m: _paint(CYAN, m.group(1)), text)
    text = _SUMMARY.sub(_summary, text)
    text = _ERROR_LINE.sub(lambda m: _paint(RED, m.group(0)), text)
    return _MATCH_LINE.sub(lambda m: _paint(GREEN, m.group(0)), text)
