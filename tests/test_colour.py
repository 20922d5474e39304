"""Colour on a terminal (compiler/common/colour.py): findings and verdicts coloured on a pty, never with NO_COLOR,
TERM=dumb, in a pipe or in CI annotations, and a value's own escape characters never reach the terminal raw."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from spark_compile.common.colour import CYAN, GREEN, RED, RESET, YELLOW

from conftest import ROOT, run_cli_process

NEGATIVE = "tests/profiles/negative/abbreviated-flag.yaml"  # one error of its own, the reference's tag warning
SINGLE = "spec/profiles/examples/single-node.yaml"  # the tag warning alone
PLAIN = (
    f"{NEGATIVE}:3:10: SC303 error: --enable-mixed abbreviates --enable-mixed-chunk\n"
    "    3 |   args: {enable-mixed: true}\n"
    "      |          ^\n"
    "  hint: write enable-mixed-chunk\n"
)
SUMMARY = "1 error, 2 warnings in 1 profile\n"  # the reference's SC312 and SC442, inherited


def _on_a_pty(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT) -> tuple[int, str]:
    """`spark-compile ARGS` with stdout and stderr on a pseudo-terminal: its exit code and what the terminal got
    (the terminal's CR LF read back as LF)."""
    main, child = pty.openpty()
    full_env = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "CI")}
    full_env.update({"TERM": "xterm", **(env or {})})
    with subprocess.Popen([sys.executable, "-m", "spark_compile.cli", *args], cwd=cwd, env=full_env,
                          stdin=subprocess.DEVNULL, stdout=child, stderr=child) as process:
        os.close(child)
        chunks = []
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        code = process.wait()
    os.close(main)
    return code, b"".join(chunks).decode().replace("\r\n", "\n")


def _warning_of(profile: str) -> str:
    """The reference's warnings as `check` prints them for ``profile`` (no colour)."""
    return run_cli_process("check", profile).stdout.removesuffix(SUMMARY)


def test_a_terminal_gets_each_severity_hint_and_the_verdict_in_colour() -> None:
    code, shown = _on_a_pty("check", NEGATIVE)
    inherited = _warning_of(NEGATIVE).replace(PLAIN, "")
    coloured = (PLAIN.replace(" SC303 error:", f" SC303 {RED}error{RESET}:")
                .replace("  hint:", f"{CYAN}  hint:{RESET}"))
    warning = (inherited.replace(" SC312 warning:", f" SC312 {YELLOW}warning{RESET}:")
               .replace(" SC442 warning:", f" SC442 {YELLOW}warning{RESET}:")
               .replace("  hint:", f"{CYAN}  hint:{RESET}"))
    assert (code, shown) == (1, warning + coloured + f"{RED}1 error, 2 warnings in 1 profile{RESET}\n")


def test_a_clean_verdict_is_green_and_warnings_only_yellow(tmp_path: Path) -> None:
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text((ROOT / SINGLE).read_text().replace("lmsysorg/sglang:v0.5.23",
                                                          "lmsysorg/sglang:v0.5.23@sha256:" + "a" * 64))
    (tmp_path / "qwen3-30b-a3b.config.json").write_bytes((ROOT / SINGLE).with_name("qwen3-30b-a3b.config.json")
                                                          .read_bytes())
    assert _on_a_pty("check", str(pinned), cwd=tmp_path) == (0, f"{GREEN}0 errors, 0 warnings in 1 profile{RESET}\n")
    code, shown = _on_a_pty("check", SINGLE)
    assert (code, shown.splitlines()[-1]) == (0, f"{YELLOW}0 errors, 1 warning in 1 profile{RESET}")


def test_an_error_line_is_red() -> None:
    assert _on_a_pty("check", "nosuch.yaml") == (2, f"{RED}spark-compile: error: nosuch.yaml: no such file{RESET}\n")


def test_the_drift_verdict_is_red(tmp_path: Path) -> None:
    for name in ("single-node.yaml", "qwen3-30b-a3b.config.json"):
        (tmp_path / name).write_bytes((ROOT / SINGLE).with_name(name).read_bytes())
    assert _on_a_pty("single-node.yaml", cwd=tmp_path)[0] == 0
    with (tmp_path / "generated" / "qwen3-1spark" / "plan.json").open("a") as plan:
        plan.write("x\n")
    code, shown = _on_a_pty("check", "--generated", "single-node.yaml", cwd=tmp_path)
    assert (code, shown.splitlines()[-2:]) == (1, [
        "generated/qwen3-1spark/plan.json: differs from what single-node.yaml produces",
        f"{RED}drift: 1 file stale; run `spark-compile` on single-node.yaml and commit the result{RESET}"])


@pytest.mark.parametrize("env", [{"NO_COLOR": "1"}, {"TERM": "dumb"}], ids=["NO_COLOR", "TERM=dumb"])
def test_no_color_and_a_dumb_terminal_get_the_plain_text(env: dict[str, str]) -> None:
    assert _on_a_pty("check", NEGATIVE, env=env) == (1, _warning_of(NEGATIVE) + SUMMARY)


def test_an_empty_no_color_is_unset() -> None:  # no-color.org: only a non-empty value turns colour off
    assert RED in _on_a_pty("check", NEGATIVE, env={"NO_COLOR": ""})[1]


def test_a_pipe_gets_no_colour() -> None:
    result = run_cli_process("check", NEGATIVE, env={"TERM": "xterm"})
    assert (result.returncode, result.stdout) == (1, _warning_of(NEGATIVE) + SUMMARY)
    assert "\x1b" not in result.stdout + result.stderr


@pytest.mark.parametrize("fmt", ["github", "json"])
def test_annotations_and_json_get_no_colour_even_on_a_terminal(fmt: str) -> None:
    code, shown = _on_a_pty("check", NEGATIVE, "--format", fmt)
    assert (code, shown) == (1, run_cli_process("check", NEGATIVE, "--format", fmt).stdout)
    assert "\x1b" not in shown


def test_a_raw_escape_in_a_profile_reaches_the_terminal_as_text(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: x\n# a \x1b[2J comment\n")
    assert _on_a_pty("check", "p.yaml", cwd=tmp_path) == (1, (
        f"p.yaml:2:5: SC113 {RED}error{RESET}: the file holds the control character U+001B, which YAML does not "
        "allow\n"
        "    2 | # a \\x1b[2J comment\n"
        "      |     ^\n"
        f"{CYAN}  hint:{RESET} delete it (write it as an escape inside a double-quoted string if a value needs it)\n"
        f"{RED}1 error, 0 warnings in 1 profile{RESET}\n"))
