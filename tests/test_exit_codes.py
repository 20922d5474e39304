"""The exit codes: spark-compile's one table (compiler/common/errors.py) as README.md and --help give it, the fleet
scripts' own codes as README.md lists them, and an internal error's traceback, in its log file or on stderr."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from spark_compile.commands import run
from spark_compile.commands.error_log import LOG_NAME, cache_dir
from spark_compile.common.errors import EXIT_CODES, EXIT_INTERNAL
from spark_compile.fleet import audit

from conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text()
STATIC = ROOT / "templates" / "fleet" / "static"
# preflight.sh is rendered per rank; the reference's rank 0 stands for every one (its header is the template's).
PREFLIGHT = ROOT / "generated" / "dsv41-4spark" / "0-spark-0" / "preflight.sh"
FLEET_README = ROOT / "generated" / "dsv41-4spark" / "fleet" / "README.md"


def _section(title: str) -> str:
    return README.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def _table(text: str, header: str) -> dict[str, str]:
    """The rows of the Markdown table under ``header``: first cell → second."""
    lines = text.split(header + "\n|---|---|\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return dict(line.removeprefix("| ").removesuffix(" |").split(" | ", 1) for line in lines)


def test_the_readme_table_is_the_tools_table() -> None:
    assert _table(_section("Exit codes"), "| code | meaning |") == \
        {str(code): meaning for code, meaning in EXIT_CODES}


def test_help_prints_the_table() -> None:
    assert run_cli("--help").stdout.endswith(
        "exit codes:\n"
        "  0    fine\n"
        "  1    findings (errors, or warnings with --strict), drift (of generated/, of\n"
        "       the catalogs, or of a fleet from `audit`), a diff that differs, or an\n"
        "       import that left something out\n"
        "  2    usage or I/O error: a bad command line, an unreadable file, an output\n"
        "       spark-compile will not replace, a closed or full standard output\n"
        "  3    internal error (a bug): one line naming the log file that holds the\n"
        "       traceback (--traceback prints it instead)\n"
        "  4    `audit`: a rank unreachable, not running or not captured\n"
        "  5    `import --trace`: the script was stopped in its sandbox (a write outside\n"
        "       its folder, a connection attempt, the time limit)\n"
        "  130  interrupted (Ctrl-C)\n")


def test_codes_are_distinct_and_usage_is_argparses() -> None:
    codes = [code for code, _ in EXIT_CODES]
    assert len(set(codes)) == len(codes) and dict(EXIT_CODES)[2].startswith("usage")


def _header(script: str) -> str:
    """A fleet script's comments (or docstring) before its first line of code, on one line."""
    text = (PREFLIGHT if script == "preflight.sh" else STATIC / script).read_text()
    lines = [line.lstrip("#").strip() for line in text.split("\nset -", 1)[0].splitlines()] \
        if script.endswith(".sh") else [line.strip() for line in text.split('\n"""', 2)[1].splitlines()]
    return " ".join(line for line in lines if line)


# Each README row: the scripts whose header says it, and the words that lead into it there.
FLEET_ROWS = {
    "`launch.sh start`": (("launch.sh", "Exit status (start): "),),
    "`launch.sh audit`, `audit.py`": (("launch.sh", "Exit "),),
    "`launch.sh window`": (("window.sh", "Exit status: "),),
    "`verify.sh`": (("verify.sh", "the exit status is "),),
    "`smoke.py`, `gate.py`": (("smoke.py", "the exit status is "), ("gate.py", "the exit status is ")),
    "`engram.py`": (("engram.py", "Exit status: "),),
    "`preflight.sh`": (("preflight.sh", "Exit status: "),),
}


def test_the_readme_lists_each_fleet_scripts_codes_as_its_header_says() -> None:
    rows = _table(_section("Exit codes"), "| script | exit status |")
    assert sorted(rows) == sorted(FLEET_ROWS)
    for row, sources in FLEET_ROWS.items():
        for script, lead in sources:
            assert lead + rows[row].rstrip(".") in _header(script), (row, script)


def test_the_generated_fleet_readme_holds_the_same_table() -> None:
    assert _table(FLEET_README.read_text(), "| script | exit status |") == \
        _table(_section("Exit codes"), "| script | exit status |")


def test_the_shipped_audit_exits_as_the_readme_says() -> None:
    row = _table(_section("Exit codes"), "| script | exit status |")["`launch.sh audit`, `audit.py`"]
    assert [int(code) for code in re.findall(r"\b\d+\b", row)] == \
        [audit.EXIT_MATCH, audit.EXIT_DRIFT, audit.EXIT_DOWN, audit.EXIT_USAGE]


@pytest.mark.parametrize(("script", "rows"), [("launch.sh", ("`launch.sh start`", "`launch.sh audit`, `audit.py`")),
                                              ("window.sh", ("`launch.sh window`",)),
                                              ("preflight.sh", ("`preflight.sh`",))])
def test_every_code_a_fleet_script_exits_with_is_listed(script: str, rows: tuple[str, ...]) -> None:
    table = _table(_section("Exit codes"), "| script | exit status |")
    listed = {int(code) for row in rows for code in re.findall(r"(?:^|; |, )(\d+) ", table[row])}
    text = (PREFLIGHT if script == "preflight.sh" else STATIC / script).read_text()
    used = {int(code) for code in re.findall(r"\b(?:exit|return) (\d+)\b", text)}
    assert used - listed == set()


# -- an internal error ------------------------------------------------------------------------------------------
SECRET = "hf_" + "a1B2" * 9


@pytest.fixture
def crashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`spark-compile rules` fails with a bug whose message holds a token."""
    def broken() -> dict[str, object]:
        raise RuntimeError(f"boom with HF_TOKEN={SECRET}")

    monkeypatch.setattr(run, "load_all", broken)


def _home(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "cache")}


@pytest.mark.usefixtures("crashing")
def test_an_internal_error_writes_its_traceback_to_the_log_it_names(tmp_path: Path) -> None:
    result = run_cli("rules", cwd=tmp_path, env=_home(tmp_path))
    log = tmp_path / "cache" / "spark-compile" / LOG_NAME
    assert (result.returncode, result.stdout, result.stderr) == (
        EXIT_INTERNAL, "", "spark-compile: internal error: RuntimeError: boom with HF_TOKEN=(redacted) (please "
        f"report this, with the traceback in {log})\n")
    text = log.read_text()
    assert text.startswith("Traceback (most recent call last):\n")
    assert text.endswith("RuntimeError: boom with HF_TOKEN=(redacted)\n") and SECRET not in text
    assert 'in broken\n    raise RuntimeError(f"boom with HF_TOKEN=(redacted)")\n' in text  # its source line too
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing in the working directory


@pytest.mark.usefixtures("crashing")
def test_without_xdg_the_log_is_in_the_homes_cache(tmp_path: Path) -> None:
    result = run_cli("rules", cwd=tmp_path, env={"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": ""})
    log = tmp_path / "home" / ".cache" / "spark-compile" / LOG_NAME
    assert result.stderr.endswith(f"(please report this, with the traceback in {log})\n")
    assert log.read_text().endswith("RuntimeError: boom with HF_TOKEN=(redacted)\n")


@pytest.mark.usefixtures("crashing")
def test_traceback_prints_it_on_stderr_and_writes_no_log(tmp_path: Path) -> None:
    result = run_cli("--traceback", "rules", cwd=tmp_path, env=_home(tmp_path))
    assert result.returncode == EXIT_INTERNAL
    traceback, last = result.stderr.rstrip("\n").rsplit("\n", 1)
    assert traceback.startswith("Traceback (most recent call last):\n")
    assert traceback.endswith("RuntimeError: boom with HF_TOKEN=(redacted)")
    assert last == ("spark-compile: internal error: RuntimeError: boom with HF_TOKEN=(redacted) (please report this, "
                    "with the traceback above)")
    assert SECRET not in result.stderr and not (tmp_path / "cache").exists()


@pytest.mark.usefixtures("crashing")
def test_a_planted_symlink_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    directory = tmp_path / "cache" / "spark-compile"
    directory.mkdir(parents=True, mode=0o700)
    (directory / LOG_NAME).symlink_to(victim)
    result = run_cli("rules", cwd=tmp_path, env=_home(tmp_path))
    assert (result.returncode, result.stderr) == (
        EXIT_INTERNAL, "spark-compile: internal error: RuntimeError: boom with HF_TOKEN=(redacted) (please report "
        "this, with the traceback --traceback prints)\n")
    assert victim.read_text() == "keep me\n"


@pytest.mark.usefixtures("crashing")
@pytest.mark.parametrize("kind", ["shared directory", "fifo", "hard link"])
def test_a_log_place_others_can_reach_is_not_written(tmp_path: Path, kind: str) -> None:
    directory = tmp_path / "cache" / "spark-compile"
    directory.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    if kind == "shared directory":
        directory.chmod(0o777)
    elif kind == "fifo":
        os.mkfifo(directory / LOG_NAME)  # opened without blocking, and refused: not a regular file
    else:
        os.link(victim, directory / LOG_NAME)
    result = run_cli("rules", cwd=tmp_path, env=_home(tmp_path))
    assert result.stderr.endswith("(please report this, with the traceback --traceback prints)\n")
    assert victim.read_text() == "keep me\n"


@pytest.mark.usefixtures("crashing")
def test_a_second_error_replaces_the_log(tmp_path: Path) -> None:
    log = tmp_path / "cache" / "spark-compile" / LOG_NAME
    log.parent.mkdir(parents=True, mode=0o700)
    log.write_text("an older, longer traceback\n" * 100)
    log.chmod(0o644)
    run_cli("rules", cwd=tmp_path, env=_home(tmp_path))
    assert log.read_text().startswith("Traceback (most recent call last):\n")
    assert "older" not in log.read_text() and stat.S_IMODE(log.stat().st_mode) == 0o600


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The XDG spec: a relative XDG_CACHE_HOME is invalid and is ignored, so the log never lands in the cwd."""
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "spark-compile"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "spark-compile"
