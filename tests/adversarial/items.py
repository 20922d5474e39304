"""Helpers of the issue-18 regression tests: run `check` on profile text and read its findings."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from hostile import Outcome, assert_handled, run_main

from conftest import REFERENCE_PROFILE
from support.tools import require_tool

FINDING = re.compile(r"^(?P<file>.*):(?P<line>\d+):(?P<col>\d+): (?P<rule>SC\d+) (?:error|warning): (?P<msg>.*)$",
                     re.MULTILINE)


def findings(outcome: Outcome) -> list[tuple[int, int, str, str]]:
    """(line, column, rule, message) of every finding in a text report."""
    return [(int(m["line"]), int(m["col"]), m["rule"], m["msg"]) for m in FINDING.finditer(outcome.out)]


def check_text(tmp: Path, text: str, *extra: str) -> Outcome:
    """`check` on a profile file holding ``text`` (extends lines relative to tmp)."""
    path = tmp / "p.yaml"
    path.write_text(text)
    outcome = run_main("check", *extra, str(path))
    assert_handled(outcome)
    return outcome


def extends_reference(tmp: Path) -> str:
    """An `extends:` line naming the reference profile from a file in ``tmp``."""
    return f"extends: {os.path.relpath(REFERENCE_PROFILE, tmp)}\n"


def bash_word_reads_back(value: str) -> str:
    """What the real bash makes of ``value`` quoted by quoting.bash_word."""
    from spark_compile.common.quoting import bash_word

    proc = subprocess.run([require_tool("bash"), "-c", f"printf '%s' {bash_word(value)}"], capture_output=True,
                          check=True)
    return proc.stdout.decode()
