"""Hostile values and the machinery to put one into any string field of a profile and run the CLI.

A child profile extends a base (the reference profile, which has every section) and sets one field; the
CLI runs in-process (``main``), so thousands of inputs stay within a CI budget. Consumers (bash, docker,
systemd) are run by the tests on what the compiler accepted.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from spark_compile.common.errors import EXIT_CODES, EXIT_INTERNAL, EXIT_INTERRUPTED

from conftest import REFERENCE_PROFILE, ROOT

POSITIVE = ROOT / "tests" / "profiles" / "positive" / "llama-2node-h100.yaml"

# Each one broke, or could break, some consumer: shell expansion, quote breaking, systemd specifiers and
# variables, here-document ends, env-file lines, flags smuggled into argv, YAML forms, hidden breaks,
# control characters, secrets, GitHub workflow commands, Markdown/HTML, sizes.
CORPUS: tuple[str, ...] = (
    "$(touch /tmp/spark-compile-pwned)", "`touch /tmp/spark-compile-pwned`", "${HOME}", "$HOME", "a$b",
    '"', "'", "\\", 'a"b', "a'b", "a\\nb", "%n", "%%", "/opt/sc%n", "100%", "a;b", "a|b", "a&b", "a>b", "a<b",
    "a\nDRYRUN\nb", "a\nSGLANG_EVIL=1", "a\rb", "a\tb", "a\x00b", "a\x1b[31mb", "a\u2028b", "a\u2029b",
    "a\x85b", " lead", "trail ", "a b", "--port", "-x", "--api-key=hunter2", "a:b", "a,b", "#c", "*", "?",
    "~", "..", "../../../../etc/passwd", "/etc/passwd", "/proc/self/environ", "é", "\ufeffa", "\u202ea",
    "hf_" + "a" * 34, "ghp_" + "b" * 36, "github_pat_" + "c" * 30, "sk_live_" + "d" * 24,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk", "AIza" + "e" * 35, "::error::x", "%0A",
    "<script>alert(1)</script>", "# heading", "|x|", "[x](y)", "null", "true", "017", "1:2", "8_210",
    "{a: 1}", "[a]", "!delete", "&a", "*a", "x" * 70_000, "x" * 300, "-", "", "0", "-1",
    # Issue 25: patterns that backtrack or overflow, bidi and C1 controls, a lone CR, a Bearer token.
    "(a+)+$", "a{4294967296}", "\u2066a\u2069", "a\x9bb", "Bearer abcdef0123456789xyz",
)


def path_variants(value: str) -> list[str]:
    """A hostile value as a path field sees it: absolute, and with the value as one component."""
    return [value, "/" + value, "/opt/" + value + "/x"]


@dataclass
class Outcome:
    """One CLI run: exit code, stdout, stderr."""

    code: int
    out: str
    err: str


def run_main(*argv: str) -> Outcome:
    """``spark-compile ARGV`` in this process (the same main() as the installed program)."""
    from spark_compile.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return Outcome(code, out.getvalue(), err.getvalue())


def peak_rss_mib(argv: list[str], cwd: Path) -> tuple[Outcome, float]:
    """``spark-compile ARGV`` in a child process, and the child's peak resident memory in MiB."""
    # VmHWM, not ru_maxrss: Linux carries the forking process's peak into the child's ru_maxrss across exec, so
    # a large test worker would be counted; VmHWM belongs to the child's own address space.
    code = ("import re, sys; from spark_compile.cli import main; rc = main(sys.argv[1:]); "
            "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()); "
            "print(int(hwm.group(1)) // 1024, file=sys.stderr); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=cwd, capture_output=True, text=True, check=False)
    err, _, peak = proc.stderr.rstrip("\n").rpartition("\n")
    return Outcome(proc.returncode, proc.stdout, err + "\n" if err else ""), float(peak)


def assert_handled(outcome: Outcome) -> None:
    """No internal error: an exit code of the table other than 3 (internal) and 130, and no traceback."""
    assert outcome.code in {code for code, _ in EXIT_CODES} - {EXIT_INTERNAL, EXIT_INTERRUPTED}, \
        (outcome.code, outcome.err[-2000:])
    assert "Traceback" not in outcome.err + outcome.out
    assert "internal error" not in outcome.err


def dump(data: dict[str, Any]) -> str:
    """Profile text for ``data`` (PyYAML escapes what YAML cannot hold raw)."""
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1 << 20)


def setting(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A nested mapping that sets ``value`` at ``path`` ("[]" = the first item of a list, "*" = a key)."""
    node: Any = value
    for part in reversed(path):
        node = [node] if part == "[]" else {part: node}
    return node  # type: ignore[no-any-return]


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    """A temporary directory beside nothing of ours; extends leads into the project (the cwd's repo)."""
    with tempfile.TemporaryDirectory(prefix="adversarial-") as tmp:
        yield Path(tmp)


def child_profile(tmp: Path, body: dict[str, Any], base: Path = REFERENCE_PROFILE, *,
                  relocate: bool = True) -> Path:
    """A profile extending ``base`` with ``body``; install and runtime dirs and the docker client (the
    shim tests put there) moved under ``tmp``."""
    data: dict[str, Any] = {"extends": os.path.relpath(base, tmp)}
    if relocate:
        data["deploy"] = {"install_dir": f"{tmp}/etc", "runtime_dir": f"{tmp}/run", "docker": f"{tmp}/bin/docker"}
    for key, value in body.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = tmp / "child.yaml"
    path.write_text(dump(data))
    return path


def plan_of(out: Path, name: str) -> dict[str, Any]:
    """The compiled plan.json of profile ``name`` under ``out``."""
    return json.loads((out / name / "plan.json").read_text())  # type: ignore[no-any-return]


Setter = Callable[[str], dict[str, Any]]
