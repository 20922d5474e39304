"""The CLI in a new interpreter answers as the in-process runner most tests use: every command, once.

The console script and `python -m spark_compile.cli` are what users run; a test of a command's output runs
its main() in the test process (support/cli_runner.py). Here each command runs both ways and the exit code,
stdout and stderr must be the same, so the in-process answers stand for the real ones.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REFERENCE_PROFILE, ROOT, run_cli, run_cli_process

RELEASES = ROOT / "spec" / "profiles" / "releases"
BROKEN = "tests/profiles/negative/ep-not-dividing.yaml"
COMMANDS: dict[str, tuple[int, tuple[str, ...]]] = {  # the exit code, the arguments (OUT: a fresh folder)
    "check": (0, ("check", str(REFERENCE_PROFILE))),
    "check-broken": (1, ("check", BROKEN)),
    "plan": (0, ("plan", str(REFERENCE_PROFILE), "--json")),
    "schema": (0, ("schema",)),
    "rules": (0, ("rules",)),
    "explain": (0, ("explain", "SC201")),
    "flags": (0, ("flags", "--json")),
    "compile": (0, (str(REFERENCE_PROFILE), "--out", "OUT")),
    "diff": (1, ("diff", str(RELEASES / "production-1.7.yaml"), str(RELEASES / "production-1.7.1.yaml"))),
    "history": (0, ("history", str(RELEASES))),
    "report": (0, ("report", str(REFERENCE_PROFILE))),
    "import": (1, ("import", str(ROOT / "tests" / "import" / "fixtures" / "docker" / "one-node-nvfp4.sh"),
                   "--hosts", "10.0.0.1")),
    "export": (0, ("export", str(REFERENCE_PROFILE), "--sparkrun")),
    "audit": (4, ("audit", str(REFERENCE_PROFILE), "--inspect", "OUT")),
    "catalog": (2, ("catalog", "nosuch")),
    "version": (0, ("--version",)),
    "usage": (2, ()),
}


def _answer(result: subprocess.CompletedProcess[str], out: Path) -> tuple[int, str, str]:
    return result.returncode, result.stdout.replace(str(out), "OUT"), result.stderr.replace(str(out), "OUT")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_process_answers_as_the_in_process_runner(tmp_path: Path, name: str) -> None:
    answers = []
    for runner in (run_cli_process, run_cli):
        out = tmp_path / "out"
        out.mkdir()
        answers.append(_answer(runner(*(str(out) if a == "OUT" else a for a in COMMANDS[name][1])), out))
        shutil.rmtree(out)
    assert answers[0] == answers[1]
    assert answers[0][0] == COMMANDS[name][0], answers[0]
